"""One error for every source that cannot be read, and the ways a source is read.

A source is read either by running a command (``sinfo --json``...) or by an HTTP GET
(``slurmrestd``, Prometheus), and its JSON decoded with orjson.  Each turns every failure into
a :class:`SourceError` whose message is one line: the source, then what went wrong (not
found, no answer within the timeout, a non-zero exit with the last line of stderr, an HTTP
status, unreachable, not JSON).  The parsers add unexpected shapes (with the JSON path) in the
same form.
"""

from __future__ import annotations

import functools
import gc
import gzip
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import orjson


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


def run_command(args: list[str], *, conf: Path | None = None, timeout: float,
                source: str = "slurm") -> str:
    """Stdout of ``args``; ``SLURM_CONF`` set to ``conf`` when given.

    Raises :class:`SourceError` when the program is missing, does not finish within
    ``timeout`` seconds, cannot be started, or exits non-zero (the message then carries the
    last line of stderr, or of stdout when stderr is empty: Slurm's clients print several
    ``error:`` lines and the last one says why).
    """
    env = {**os.environ, **({"SLURM_CONF": str(conf)} if conf else {})}
    cmd = " ".join(args)
    try:
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    except FileNotFoundError:
        raise SourceError(source, f"{args[0]} not found: is Slurm's client installed and on "
                                  "PATH?") from None
    except subprocess.TimeoutExpired:
        raise SourceError(source, f"`{cmd}` did not answer within {timeout:g} s (is "
                                  "slurmctld up?)") from None
    except OSError as exc:
        raise SourceError(source, f"cannot run `{cmd}`: {exc.strerror}") from None
    if proc.returncode:
        why = _last_line(proc.stderr) or _last_line(proc.stdout) or "no message"
        raise SourceError(source, f"`{cmd}` exited {proc.returncode}: {why}")
    return proc.stdout


def http_get(url: str, *, headers: dict[str, str], timeout: float, source: str) -> bytes:
    """The body of a GET of ``url``; :class:`SourceError` for anything but a 2xx answer.

    A non-2xx answer's message carries the status and the start of the body (Prometheus and
    slurmrestd explain themselves there); a refused connection, an unknown host or no answer
    within ``timeout`` seconds say so.  A gzip-encoded body (asked for with
    ``Accept-Encoding: gzip``) is decompressed.
    """
    request = urllib.request.Request(url, headers=headers)
    url = url.split("?", 1)[0]                      # a PromQL query makes a long line
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read()
            if answer.headers.get("Content-Encoding", "").lower() == "gzip":
                try:
                    body = gzip.decompress(body)
                except (OSError, EOFError) as exc:
                    raise SourceError(source, f"GET {url}: a broken gzip body ({exc})") \
                        from None
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
def json_load(raw: bytes | str, *, source: str, what: str) -> object:
    """``raw`` parsed by orjson; :class:`SourceError` naming ``what`` when it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        start = raw[:40].decode("utf-8", "replace") if isinstance(raw, bytes) else raw[:40]
        raise SourceError(source, f"{what} did not give JSON ({exc}; it starts "
                                  f"{start!r})") from None
