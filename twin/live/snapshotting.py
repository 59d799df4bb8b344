"""When the live driver snapshots its engine, and what it keeps of the snapshot.

Every ``snapshot_interval_s`` of wall time (and on stop) the engine is stored
(:func:`twin.live.snapshots.engine_blob`, in a forked child where ``os.fork`` exists, so the
engine keeps stepping meanwhile) with the last logged command it holds, read in the engine's
thread at the same instant. Never while a command applied since the last step has not yet
survived one. The stored blob becomes the command log's restore point.
"""

from __future__ import annotations

import asyncio
import logging
import os

from channels.db import database_sync_to_async

from twin.live import services
from twin.live.snapshots import engine_blob

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

    def begin(self) -> None:
        """The next periodic snapshot is one interval from now."""
        self._last = self.clock()

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

    async def take(self) -> int | None:
        """Store the engine as it is now; returns the snapshot id (``None``: not taken,
        because commands applied since the last step have not yet survived one)."""
        if self.log.unproven:
            return None
        host, at = self.host, {}

        async def in_engine_marked(fn, *args):
            def run():  # the log position, read in the engine's thread at the same instant
                at["log_seq"] = self.log.log_seq
                return fn(*args)
            return await host.call(run)

        blob, t_sim = await engine_blob(host.engine, in_engine=in_engine_marked,
                                        in_child=self.in_child)
        self.log.restore_point(blob, at["log_seq"])
        self._last = self.clock()
        return await database_sync_to_async(services.engine_snapshot_save)(
            data=blob, t_sim=t_sim, preset=host.preset, seed=host.seed,
            inventory=host.inventory, log_seq=at["log_seq"])

    async def take_safely(self) -> int | None:
        try:
            return await self.take()
        except Exception:
            logger.exception("live engine: snapshot failed")
            self._last = self.clock()
            return None
