"""What the live driver shows: frames (stored and broadcast), the engine's history, health.

Every step's frame gets the driver's own fields (speed, paused, health, lag, the source and,
for a mirror, each source's status), is written to the single ``LiveState`` row (whose write
also evaluates the alert rules) and published once to every dashboard
(:func:`twin.live.broadcast.frame_publish`). The engine's new log lines are kept in the
database (``EngineEvent``) under the run's log key; on a database error they wait for the next
step.
"""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async

from scheduler.physics.entity_figures import EntitySample, entity_sample
from twin import app_setting
from twin.live import broadcast, entity_history, history, services

logger = logging.getLogger("twin.live.driver")


class Publisher:
    """Frames, history and health of one live engine.

    Parameters
    ----------
    host : twin.live.engine_host.EngineHost
    pacer : twin.live.pacing.Pacer
        Read for the speed, pause and lag the frames carry.
    layer : channel layer
    mirror : twin.mirror.poller.MirrorPoller or None
        A mirror's sources, whose status every frame carries.
    """

    def __init__(self, *, host, pacer, layer, mirror=None):
        self.host, self.pacer, self.layer, self.mirror = host, pacer, layer, mirror
        self.seq = 0
        self.health = "starting"
        self.last_error = ""
        self.placement: dict | None = None  # the last step's live_placement
        self.events_saved = 0  # engine log lines kept in the database so far
        self.entities: EntitySample | None = None  # taken by the last step, not yet kept
        self.entities_last = float("-inf")  # simulated time of the newest one kept
        self._flushing = asyncio.Lock()  # a command's flush and a step's never interleave

    def failed(self, exc: BaseException) -> None:
        """The engine failed: the next frames say so (until a good step)."""
        self.health = "error"
        self.last_error = f"{type(exc).__name__}: {exc}"

    async def publish(self, frame: dict) -> dict:
        """Store and broadcast ``frame`` with the driver's fields; returns what was sent."""
        self.seq += 1
        pacer = self.pacer
        frame = {**frame, "speed": pacer.speed, "paused": pacer.paused, "health": self.health,
                 "lag_ticks": pacer.lag_ticks,
                 "source": "mirror" if self.mirror is not None else "simulate",
                 "sources": self.mirror.sources_status() if self.mirror is not None else None}
        engine = self.host.engine
        t = float(engine.now) if engine is not None else 0.0
        try:
            await database_sync_to_async(services.live_state_write)(
                seq=self.seq, t_sim=t, frame=frame, health=self.health,
                last_error=self.last_error, speed=pacer.speed, paused=pacer.paused,
                inventory=self.host.log_key, placement=self.placement)
            await broadcast.frame_publish(frame, self.seq, t, layer=self.layer)
        except Exception:
            logger.exception("live engine: could not write or publish frame %d", self.seq)
        await self._entities_keep()
        return frame

    def entities_take(self, engine) -> None:
        """In the engine's thread, after a step: take the per-entity figures
        (:func:`~scheduler.physics.entity_figures.entity_sample`) when a sample is due, as
        far as this process knows (``HISTORY_STEP_S`` since the newest one kept, or the
        clock went back); :meth:`publish` keeps them."""
        since = engine.now - self.entities_last
        if since >= app_setting("HISTORY_STEP_S") or since < 0:
            self.entities = entity_sample(engine)

    async def _entities_keep(self) -> None:
        sample, self.entities = self.entities, None
        if sample is None:
            return
        run = self.host.log_key
        try:
            await database_sync_to_async(entity_history.record)(run=run, sample=sample)
            self.entities_last = entity_history.newest_kept(run)
        except Exception:
            logger.exception("live engine: could not keep the entities' figures at t=%.0f s",
                             sample.t)

    async def events_resume(self) -> None:
        """Count the engine's log lines already kept (after a start, restore or rebuild), and
        keep the history of a fresh engine's warm-up."""
        samples, self.host.warm_history = self.host.warm_history, []
        if samples:
            await database_sync_to_async(history.backfill)(run=self.host.log_key,
                                                           samples=samples)
            # a fresh engine: the entities' figures of the future it replaces go too
            await database_sync_to_async(entity_history.forget_after)(run=self.host.log_key,
                                                                      t=samples[0][0])
        self.entities_last = float("-inf")
        self.events_saved = await database_sync_to_async(services.engine_events_resume)(
            inventory=self.host.log_key, have=self.host.engine.kernel.logged)

    async def events_flush(self) -> None:
        """Keep the engine's new log lines; on a database error they wait for the next step.
        Called after each step, and by a command before it is marked applied (so no page shows
        a command applied without the events it logged)."""
        async with self._flushing:
            kernel = self.host.engine.kernel
            start, new = await self.host.call(kernel.events_since, self.events_saved)
            if not new:
                return
            try:
                await database_sync_to_async(services.engine_events_store)(
                    inventory=self.host.log_key, first_seq=start, events=new)
                self.events_saved = start + len(new)
            except Exception:
                logger.exception("live engine: could not keep %d event(s); will retry",
                                 len(new))
