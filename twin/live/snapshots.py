"""Engine snapshots: the live engine written in the snapshot format
(:mod:`scheduler.snapshot`, versioned and upgraded there), so a restart resumes it.

Writing one holds the GIL for seconds (about 1.7 s for dev-small, 5 s for hyperscale-100k on the
reference machine), which would freeze an embedded web server for that long: in-process it
stalled every WebSocket and page for 4 s at 500 clients. Where ``os.fork`` exists, a child
process writes its copy-on-write view of the engine instead, at low priority, while the
parent's engine keeps stepping.  Reading is :func:`scheduler.snapshot.loads`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from pathlib import Path

from scheduler.snapshot import dumps

TEMP_PREFIX = "clustertwin-snapshot-"
"""Temporary snapshot files are named ``TEMP_PREFIX<pid of the engine process>-<random>``."""


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
    """
    t_sim = float(engine.now)
    pid = os.fork()
    if pid == 0:  # the child: no logging, no database, no event loop; only the file
        code = 1
        try:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            os.nice(10)  # the web server and the engine come first
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


async def engine_blob(engine, *, in_engine, in_child: bool) -> tuple[bytes, float]:
    """``(snapshot bytes, simulated time)`` of ``engine``.

    ``in_engine(fn, *args)`` runs ``fn`` in the engine's own thread (the driver's); with
    ``in_child`` the writing happens in a forked child.
    """
    if not in_child:
        return await in_engine(dumps, engine), float(engine.now)
    fd, path = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-")
    os.close(fd)
    try:
        pid, t_sim = await in_engine(_dumps_forked, engine, path)
        _, status = await asyncio.to_thread(os.waitpid, pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"the snapshot process failed (wait status {status})")
        return await asyncio.to_thread(Path(path).read_bytes), t_sim
    finally:
        os.unlink(path)
