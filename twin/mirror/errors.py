"""One error for every source that cannot be read, and the ways a source is read.

A source is read either by running a command (``sinfo --json``...) or by an HTTP GET
(``slurmrestd``, Prometheus), and its JSON decoded with orjson.  Each turns every failure into
a :class:`SourceError` whose message is one line: the source, then what went wrong (not
found, no answer within the timeout, a non-zero exit with the last line of stderr, an HTTP
status, unreachable, an answer over the cap (``MAX_BYTES``, read in chunks and dropped as soon
as it passes), not JSON).  The parsers add unexpected shapes (with the JSON path) in the
same form.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import selectors
import signal
import subprocess
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import orjson

MAX_BYTES = 256 * 2**20
"""The default cap on one source's answer, in bytes (``CLUSTERTWIN_MIRROR_MAX_BYTES``)."""
MAX_BYTES_SETTING = "CLUSTERTWIN_MIRROR_MAX_BYTES"


class SourceError(Exception):
    """A source could not be read.  ``str()`` is one line: ``"<source>: <problem>"``.

    ``source`` names the source (``"slurm"``, ``"slurmrestd http://h:6820"``,
    ``"prometheus http://h:9090"``); ``problem`` says what went wrong, without the source.
    """

    def __init__(self, source: str, problem: str):
        self.source = source
        self.problem = " ".join(problem.split())        # one line, whatever came in
        super().__init__(f"{source}: {self.problem}")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _mb(max_bytes: int) -> str:
    return f"{max_bytes / 2**20:g} MB"


class TooLarge(SourceError):
    """A source answered more than its cap: an error even where a failure to answer would
    only be noted (accounting, reservations), since nothing of it was read."""


def _too_big(source: str, what: str, max_bytes: int) -> TooLarge:
    return TooLarge(source, f"{what} answered more than {_mb(max_bytes)} "
                            f"({MAX_BYTES_SETTING})")


def run_command(args: list[str], *, conf: Path | None = None, timeout: float,
                source: str = "slurm", max_bytes: int = MAX_BYTES,
                text: bool = True) -> str | bytearray:
    """Stdout of ``args`` (a ``str``, or the raw bytes with ``text=False``); ``SLURM_CONF``
    set to ``conf`` when given.

    Stdout is read as it comes: once it passes ``max_bytes`` the program (and its process
    group) is killed and nothing is returned, so a runaway answer never sits in memory.
    Raises :class:`SourceError` when the program is missing, does not finish within
    ``timeout`` seconds, cannot be started, answers more than ``max_bytes``, or exits non-zero
    (the message then carries the last line of stderr, or of stdout when stderr is empty:
    Slurm's clients print several ``error:`` lines and the last one says why).
    """
    env = {**os.environ, **({"SLURM_CONF": str(conf)} if conf else {})}
    cmd = " ".join(args)
    try:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
    except FileNotFoundError:
        raise SourceError(source, f"{args[0]} not found: is Slurm's client installed and on "
                                  "PATH?") from None
    except OSError as exc:
        raise SourceError(source, f"cannot run `{cmd}`: {exc.strerror}") from None
    try:
        out, err = _read_capped(proc, time.monotonic() + timeout, max_bytes)
    except TimeoutError:
        raise SourceError(source, f"`{cmd}` did not answer within {timeout:g} s (is "
                                  "slurmctld up?)") from None
    except _Overflow:
        raise _too_big(source, f"`{cmd}`", max_bytes) from None
    finally:
        _end(proc)
    if proc.returncode:
        why = _last_line(err.decode("utf-8", "replace")) or \
            _last_line(out[-_STDERR_KEPT:].decode("utf-8", "replace")) or "no message"
        raise SourceError(source, f"`{cmd}` exited {proc.returncode}: {why}")
    return out.decode("utf-8", "replace") if text else out


_CHUNK = 1 << 16  # a pipe's capacity: each read allocates what it returns, no slack
_STDERR_KEPT = 64 << 10


class _Overflow(Exception):
    """An answer passed its cap."""


def _read_capped(proc: subprocess.Popen, deadline: float,
                 max_bytes: int) -> tuple[bytearray, bytes]:
    """(stdout, the last 64 kB of stderr) of ``proc``, read until both close and it exits.

    Stdout is kept as a list of chunks and joined once at the end: a growing buffer would be
    copied on reallocation, so an answer over the cap could briefly take twice the cap."""
    chunks: list[bytes] = []
    size = 0
    err = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        while sel.get_map():
            ready = sel.select(deadline - time.monotonic())
            if not ready:
                raise TimeoutError
            for key, _ in ready:
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if key.data == "out":
                    size += len(chunk)
                    if size > max_bytes:
                        chunks.clear()
                        raise _Overflow
                    chunks.append(chunk)
                else:
                    err += chunk
                    if len(err) > 2 * _STDERR_KEPT:
                        del err[:-_STDERR_KEPT]
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise TimeoutError from None
    out = bytearray().join(chunks)
    chunks.clear()
    return out, bytes(err[-_STDERR_KEPT:])


def _end(proc: subprocess.Popen) -> None:
    """Kill what is left of ``proc``'s process group, reap it, close its pipes."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def http_get(url: str, *, headers: dict[str, str], timeout: float, source: str,
             max_bytes: int = MAX_BYTES) -> bytes | bytearray:
    """The body of a GET of ``url``; :class:`SourceError` for anything but a 2xx answer.

    A non-2xx answer's message carries the status and the start of the body (Prometheus and
    slurmrestd explain themselves there); a refused connection, an unknown host or no answer
    within ``timeout`` seconds say so.  A gzip-encoded body (asked for with
    ``Accept-Encoding: gzip``) is decompressed.  The body is read in chunks and the read
    stops, with a :class:`SourceError`, once it (or its decompressed form) passes
    ``max_bytes``.
    """
    request = urllib.request.Request(url, headers=headers)
    url = url.split("?", 1)[0]                      # a PromQL query makes a long line
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = bytearray()
            while chunk := answer.read(_CHUNK):
                body += chunk
                if len(body) > max_bytes:
                    raise _too_big(source, f"GET {url}", max_bytes)
            if answer.headers.get("Content-Encoding", "").lower() == "gzip":
                body = _gunzip(body, max_bytes, source=source, url=url)
            return body
    except urllib.error.HTTPError as exc:
        body = exc.read(2000).decode("utf-8", "replace")
        raise SourceError(source, f"GET {url} answered HTTP {exc.code}"
                                  f"{': ' + _http_why(body) if body.strip() else ''}") from None
    except TimeoutError:
        raise SourceError(source, f"GET {url} did not answer within {timeout:g} s") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise SourceError(source, f"GET {url} did not answer within {timeout:g} s") \
                from None
        why = getattr(reason, "strerror", None) or str(reason)
        raise SourceError(source, f"GET {url}: unreachable ({why})") from None
    except OSError as exc:
        raise SourceError(source, f"GET {url}: {exc.strerror or exc}") from None


def _gunzip(body: bytearray, max_bytes: int, *, source: str, url: str) -> bytearray:
    """``body`` decompressed, at most ``max_bytes`` of it (a small gzip can unpack to GBs)."""
    unzip, out, view = zlib.decompressobj(wbits=31), bytearray(), memoryview(body)
    try:
        for start in range(0, len(body), _CHUNK):
            pending = view[start:start + _CHUNK]
            while pending:
                out += unzip.decompress(pending, max_bytes + 1 - len(out))
                if len(out) > max_bytes:
                    raise _too_big(source, f"GET {url}", max_bytes)
                pending = unzip.unconsumed_tail
        if not unzip.eof:
            raise zlib.error("the body ends before the gzip stream does")
    except zlib.error as exc:
        raise SourceError(source, f"GET {url}: a broken gzip body ({exc})") from None
    return out


def _http_why(body: str) -> str:
    """The ``error`` of a JSON error answer (Prometheus, slurmrestd), else its first line."""
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return first[:200]
    if isinstance(doc, dict):
        if isinstance(doc.get("error"), str):
            return doc["error"][:200]
        errors = doc.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            err = errors[0]
            return str(err.get("description") or err.get("error") or err)[:200]
    return first[:200]


def gc_paused(fn):
    """``fn`` with the cyclic garbage collector paused while it runs.

    Decoding a 100k-GPU answer allocates millions of dicts and lists, none of them garbage
    yet; the collections they trigger took 3/4 of the decoding time (85 MB of Prometheus
    answer: 1.8 s with them, 0.5 s without) and half of a parse run right after it.
    """
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()
    return paused


@gc_paused
def json_load(raw: bytes | bytearray | str, *, source: str, what: str) -> object:
    """``raw`` parsed by orjson; :class:`SourceError` naming ``what`` when it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        start = raw[:40] if isinstance(raw, str) else bytes(raw[:40]).decode("utf-8", "replace")
        raise SourceError(source, f"{what} did not give JSON ({exc}; it starts "
                                  f"{start!r})") from None
