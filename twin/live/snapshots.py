"""Engine snapshots: the live engine written in the snapshot format
(:mod:`scheduler.snapshot`, versioned and upgraded there), so a restart resumes it.

Writing one holds the GIL for seconds (about 1.7 s for dev-small, 5 s for hyperscale-100k on the
reference machine), which would freeze an embedded web server for that long: in-process it
stalled every WebSocket and page for 4 s at 500 clients. Where ``os.fork`` exists, a child
process writes its copy-on-write view of the engine instead, at low priority, while the
parent's engine keeps stepping.  Reading is :func:`scheduler.snapshot.loads`.

The child never outlives the engine process: on Linux it asks the kernel to kill it when
its parent goes (``prctl(PR_SET_PDEATHSIG, SIGKILL)``; a killed server left 1.2 GB children
writing for minutes before).  It ignores SIGINT and SIGTERM (a Ctrl-C or a stop sent to the
whole process group, as systemd does): the parent, which stops gracefully on them, ends it
(:func:`child_end`) when its final snapshot supersedes it.  The final snapshot of a stop is
not forked (:class:`twin.live.snapshotting.Snapshotter`).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
import tempfile
from pathlib import Path

from scheduler.snapshot import dumps

TEMP_PREFIX = "clustertwin-snapshot-"
"""Temporary snapshot files are named ``TEMP_PREFIX<pid of the engine process>-<random>``."""

CHILD_NICE = 10
"""How much lower a snapshot's child runs than the server."""

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl():
    """libc's ``prctl`` (Linux), looked up in the parent: a forked child of a threaded process
    should not load libraries."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


class SnapshotChildKilled(RuntimeError):
    """The snapshot's child was killed by ``signal`` before it wrote the snapshot."""

    def __init__(self, signum: int):
        super().__init__(f"the snapshot process was killed ({signal.Signals(signum).name})")
        self.signal = signum


def snapshot_leftovers_remove(directory: str | None = None) -> list[str]:
    """Delete temporary snapshot files whose engine process is gone (killed mid-snapshot);
    returns their names.  Files of a live process (another instance) are left alone."""
    removed = []
    for path in Path(directory or tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*-*"):
        pid = path.name[len(TEMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            path.unlink()
            removed.append(path.name)
        except FileNotFoundError:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _dumps_forked(engine, path: str) -> tuple[int, float]:
    """Fork; the child writes ``dumps(engine)`` to ``path`` and exits.

    Call it in the engine's thread between steps, so the child sees one consistent instant.
    That thread must outlive the child (it does: the engine's worker thread ends with the
    driver, after its last snapshot): ``PR_SET_PDEATHSIG`` fires when the forking thread ends.
    """
    t_sim = float(engine.now)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: no logging, no database, no event loop; only the file
        code = 1
        try:
            _child_detach(parent)
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            # let go of the inherited sockets (listening, clients): a connection the server
            # drops must not stay open in this child until it exits
            os.closerange(3, fd)
            os.closerange(fd + 1, 1 << 16)
            with open(fd, "wb") as out:
                out.write(dumps(engine))
            code = 0
        finally:
            os._exit(code)
    return pid, t_sim


def _child_detach(parent: int) -> None:
    """In the child: die with the parent, leave stopping to it, yield to the server."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)
    os.nice(CHILD_NICE)


def child_end(pid: int) -> None:
    """End a snapshot child now (its snapshot is not wanted); whoever waits on it reaps it."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # already gone
        pass


async def engine_blob(engine, *, in_engine, in_child: bool,
                      started=None) -> tuple[bytes, float]:
    """``(snapshot bytes, simulated time)`` of ``engine``.

    ``in_engine(fn, *args)`` runs ``fn`` in the engine's own thread (the driver's); with
    ``in_child`` the writing happens in a forked child, whose process id is passed to
    ``started(pid)`` (and ``started(None)`` once it is reaped).  Raises
    :class:`SnapshotChildKilled` when the child was killed (:func:`child_end`, a signal from
    outside).
    """
    if not in_child:
        return await in_engine(dumps, engine), float(engine.now)
    fd, path = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-")
    os.close(fd)
    try:
        pid, t_sim = await in_engine(_dumps_forked, engine, path)
        if started is not None:
            started(pid)
        _, status = await asyncio.to_thread(os.waitpid, pid, 0)
        if started is not None:
            started(None)  # reaped: the id is no longer its
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            raise SnapshotChildKilled(-code)
        if code != 0:
            raise RuntimeError(f"the snapshot process failed (exit status {code})")
        return await asyncio.to_thread(Path(path).read_bytes), t_sim
    finally:
        os.unlink(path)
