"""When the live driver snapshots its engine, and what it keeps of the snapshot.

Every ``snapshot_interval_s`` of wall time (and on stop) the engine is stored
(:func:`twin.live.snapshots.engine_blob`, in a forked child where ``os.fork`` exists, so the
engine keeps stepping meanwhile) with the last logged command it holds, read in the engine's
thread at the same instant. Never while a command applied since the last step has not yet
survived one. The stored blob becomes the command log's restore point.

On stop the final snapshot supersedes a periodic one still being written: that child is ended
(:meth:`Snapshotter.abandon`) rather than waited for.  The final one is written in the engine's
own thread, not in a child: the stop waits for it and the server only refuses commands
meanwhile, so a child would add nothing but its start and its copy-on-write faults (about a
sixth of the CPU at noc-4k) and would run at low priority.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from channels.db import database_sync_to_async

from twin.live import services
from twin.live.snapshots import SnapshotChildKilled, child_end, engine_blob

logger = logging.getLogger("twin.live.driver")


class Snapshotter:
    """Periodic snapshots of one live engine.

    Parameters
    ----------
    host : twin.live.engine_host.EngineHost
    log : twin.live.driver_log.CommandLog
        Says what is proven and where the log stands; takes each snapshot as its restore
        point.
    clock : callable
        Wall clock in seconds (the pacing's).
    interval_s : float
    in_child : bool or None
        Serialise in a forked child (default: where ``os.fork`` exists).
    """

    def __init__(self, *, host, log, clock, interval_s: float, in_child: bool | None = None):
        self.host, self.log, self.clock = host, log, clock
        self.interval_s = interval_s
        self.in_child = hasattr(os, "fork") if in_child is None else in_child
        self._last: float | None = None
        self._task: asyncio.Task | None = None
        self._child: int | None = None  # the periodic snapshot's child, while it writes
        self._abandoned = False

    def begin(self, *, now: bool = False) -> None:
        """The next periodic snapshot is one interval from now (``now``: at the first
        chance)."""
        self._last = -float("inf") if now else self.clock()

    def soon(self) -> None:
        """Take one at the next chance (the run changed under it)."""
        self._last = -float("inf")

    def maybe_start(self) -> None:
        """Start one in the background when due and none is running."""
        if (self.clock() - self._last >= self.interval_s
                and (self._task is None or self._task.done())):
            self._last = self.clock()
            self._task = asyncio.create_task(self.take_safely())

    async def wait(self) -> None:
        """Until the background snapshot (if any) is done."""
        if self._task is not None:
            await asyncio.wait([self._task])

    def abandon(self) -> None:
        """Give up the background snapshot being written (a newer one supersedes it): its
        child is ended now; :meth:`wait` then returns at once."""
        if self._task is None or self._task.done():
            return
        self._abandoned = True
        if self._child is not None:
            child_end(self._child)

    def _started(self, pid: int | None) -> None:
        self._child = pid
        if pid is not None and self._abandoned:
            child_end(pid)

    async def take(self, *, final: bool = False) -> int | None:
        """Store the engine as it is now; returns the snapshot id (``None``: not taken,
        because commands applied since the last step have not yet survived one).
        ``final``: a stop waits for it (written in the engine's thread)."""
        if self.log.unproven:
            return None
        host, at = self.host, {}

        async def in_engine_marked(fn, *args):
            def run():  # the log position, read in the engine's thread at the same instant
                at["log_seq"] = self.log.log_seq
                return fn(*args)
            return await host.call(run)

        blob, t_sim = await engine_blob(host.engine, in_engine=in_engine_marked,
                                        in_child=self.in_child and not final,
                                        started=self._started)
        self.log.restore_point(blob, at["log_seq"])
        self._last = self.clock()
        return await database_sync_to_async(services.engine_snapshot_save)(
            data=blob, t_sim=t_sim, preset=host.preset, seed=host.seed,
            inventory=host.inventory, log_seq=at["log_seq"])

    async def take_safely(self, *, final: bool = False) -> int | None:
        try:
            return await self.take(final=final)
        except SnapshotChildKilled as exc:
            if self._abandoned and exc.signal == signal.SIGKILL:  # child_end's
                logger.info("live engine: the periodic snapshot gave way to the final one")
            else:  # killed from outside (out of memory, an operator): one line, no traceback
                logger.error("live engine: snapshot not taken: %s", exc)
        except Exception:
            logger.exception("live engine: snapshot failed")
        finally:
            if not final:
                self._child, self._abandoned = None, False
        self._last = self.clock()
        return None

