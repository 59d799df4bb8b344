"""Engine snapshots: the live engine pickled and zlib-compressed, so a restart resumes it.

Pickling holds the GIL for seconds (about 1.7 s for dev-small, 5 s for hyperscale-100k on the
reference machine), which would freeze an embedded web server for that long: in-process it
stalled every WebSocket and page for 4 s at 500 clients. Where ``os.fork`` exists, a child
process pickles its copy-on-write view of the engine instead, at low priority, while the
parent's engine keeps stepping.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import tempfile
import zlib
from pathlib import Path


def engine_pickle(engine) -> bytes:
    return zlib.compress(pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL), 1)


def engine_unpickle(data: bytes):
    # Snapshots are written by this application's own engine process, never uploaded.
    return pickle.loads(zlib.decompress(bytes(data)))


def _pickle_forked(engine, path: str) -> tuple[int, float]:
    """Fork; the child writes ``engine_pickle(engine)`` to ``path`` and exits.

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
            with open(path, "wb") as out:
                out.write(engine_pickle(engine))
            code = 0
        finally:
            os._exit(code)
    return pid, t_sim


async def engine_blob(engine, *, in_engine, in_child: bool) -> tuple[bytes, float]:
    """``(compressed pickle, simulated time)`` of ``engine``.

    ``in_engine(fn, *args)`` runs ``fn`` in the engine's own thread (the driver's); with
    ``in_child`` the pickling happens in a forked child.
    """
    if not in_child:
        return await in_engine(engine_pickle, engine), float(engine.now)
    fd, path = tempfile.mkstemp(prefix="clustertwin-snapshot-")
    os.close(fd)
    try:
        pid, t_sim = await in_engine(_pickle_forked, engine, path)
        _, status = await asyncio.to_thread(os.waitpid, pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"the snapshot process failed (wait status {status})")
        return await asyncio.to_thread(Path(path).read_bytes), t_sim
    finally:
        os.unlink(path)
