"""The live engine's driver: steps the core against the wall clock, applies commands, publishes.

One :class:`EngineDriver` runs one :class:`scheduler.engine.Engine` live. It is a thin
composition of parts with one job each:

* :class:`~twin.live.engine_host.EngineHost`: the engine, its one worker thread (all engine
  work runs there, so the event loop that serves WebSockets stays responsive) and what it runs;
* :class:`~twin.live.pacing.Pacer`: the clock (speed, pause, frame interval, lag);
* :class:`~twin.live.driver_commands.Commands` and :class:`~twin.live.driver_log.CommandLog`:
  commands received and applied, durably logged, replayed and taken back;
* :class:`~twin.live.publishing.Publisher`: frames, history and health;
* :class:`~twin.live.snapshotting.Snapshotter`: periodic snapshots;
* :class:`~twin.live.driver_inventory.InventoryFollower`: re-plans on inventory edits;
* a mirror's poller (:class:`twin.mirror.poller.MirrorPoller`, given by the caller:
  :func:`twin.mirror.poller.live_driver`) when the twin follows a real cluster.

It runs embedded (:mod:`twin.live.embedded`: a task of the serving process, started by
``manage.py serve``) or alone (``manage.py run_engine``). A crash inside a step is logged,
shown as ``health=error`` and healed by restoring the last snapshot (or rebuilding the
scenario): it never reaches the web server.
"""

from __future__ import annotations

import asyncio
import logging
import time

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from scheduler.live import live_frame, live_placement
from scheduler.snapshot import loads as engine_loads
from twin import app_setting
from twin.live import selectors as live_selectors
from twin.live import services
from twin.live.driver_commands import Commands
from twin.live.driver_inventory import InventoryFollower, cluster_preset, inventory_read
from twin.live.driver_log import CommandLog
from twin.live.engine_commands import Command
from twin.live.engine_host import EngineHost, failure_profile_read
from twin.live.pacing import Pacer
from twin.live.publishing import Publisher
from twin.live.snapshots import snapshot_leftovers_remove
from twin.live.snapshotting import Snapshotter

logger = logging.getLogger(__name__)


class EngineStartError(RuntimeError):
    """The engine cannot start as configured (the message says why and what to set)."""


def _mirroring() -> bool:
    return app_setting("SOURCE") == "mirror"


class EngineDriver:
    """Paces one engine live. ``await start()``, then ``await run()`` (or ``step_once()``).

    Parameters
    ----------
    preset, seed, speed : optional
        Override the cluster's preset, ``CLUSTERTWIN["SEED"]`` and the speed-up (simulated s
        per wall s; default: the last one set, else ``CLUSTERTWIN["SPEEDUP"]``).
    frame_interval_s, snapshot_interval_s : float, optional
        Wall seconds between frames and between snapshots (default: the settings).
    clock : callable
        Wall clock in seconds (monotonic); tests inject a fake one.
    wall : callable
        Epoch seconds (a mirror's engine clock follows it).
    snapshot_in_child : bool, optional
        Serialise snapshots in a forked child (default where ``os.fork`` exists; see
        :mod:`twin.live.snapshots`).
    layer : channel layer, optional
        Default: the configured one.
    mirror : callable, optional
        ``mirror(host=, clock=, wall=)`` makes the mirror's poller; required with
        ``CLUSTERTWIN_SOURCE=mirror`` (:func:`twin.mirror.poller.live_driver` passes it).
    """

    def __init__(self, *, preset: str | None = None, seed: int | None = None,
                 speed: float | None = None, frame_interval_s: float | None = None,
                 snapshot_interval_s: float | None = None, clock=time.monotonic, layer=None,
                 snapshot_in_child: bool | None = None, wall=time.time, mirror=None):
        self.layer = layer or get_channel_layer()
        self.host = EngineHost(preset=preset,
                               seed=app_setting("SEED") if seed is None else int(seed))
        self.pacer = Pacer(frame_interval_s=frame_interval_s or app_setting("FRAME_INTERVAL_S"),
                           clock=clock)
        self.pacer.speed = speed
        self.mirror = None if mirror is None else mirror(host=self.host, clock=clock, wall=wall)
        if self.mirror is not None:
            self.host.fresh = self.mirror.engine_build
        self.publisher = Publisher(host=self.host, pacer=self.pacer, layer=self.layer,
                                   mirror=self.mirror)
        self.log = CommandLog(host=self.host, publisher=self.publisher)
        self.commands = Commands(layer=self.layer, pacer=self.pacer, log=self.log,
                                 mirror=self.mirror)
        self.snapshots = Snapshotter(
            host=self.host, log=self.log, clock=clock, in_child=snapshot_in_child,
            interval_s=snapshot_interval_s or app_setting("SNAPSHOT_INTERVAL_S"))
        self.inventory_follower = InventoryFollower(host=self.host, clock=clock,
                                                    on_new_run=self._new_run)
        self.steps = 0
        self._stop = asyncio.Event()
        self._starting_beat: asyncio.Task | None = None
        self._built_afresh = False

    # ----------------------------------------------------------------- what tests and
    # commands read
    @property
    def engine(self):
        return self.host.engine

    @property
    def preset(self) -> str | None:
        return self.host.preset

    @property
    def seed(self) -> int:
        return self.host.seed

    @property
    def label(self) -> str:
        """What the logs call the run: the cluster's name (a mirror's, an inventory's), else
        the preset's."""
        host = self.host
        if host.plan is None:
            return str(host.preset)
        mirror = self.mirror is not None and _mirroring()
        return f"{'mirror of ' if mirror else ''}cluster {host.plan.name}"

    @property
    def inventory(self) -> str:
        return self.host.inventory

    @property
    def log_key(self) -> str:
        return self.host.log_key

    @property
    def clock(self):
        return self.pacer.clock

    @property
    def frame_interval_s(self) -> float:
        return self.pacer.frame_interval_s

    @property
    def speed(self) -> float | None:
        return self.pacer.speed

    @property
    def paused(self) -> bool:
        return self.pacer.paused

    @property
    def lag_ticks(self) -> int:
        return self.pacer.lag_ticks

    @property
    def seq(self) -> int:
        return self.publisher.seq

    @property
    def health(self) -> str:
        return self.publisher.health

    @property
    def replan_summary(self) -> dict | None:
        return self.inventory_follower.replan_summary

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Build (or resume) the engine and listen for commands."""
        host, pacer = self.host, self.pacer
        state = await database_sync_to_async(live_selectors.live_state_get)()
        if state is not None:
            self.publisher.seq = state.seq
            pacer.paused = state.paused
            if pacer.speed is None:
                pacer.speed = state.speed
        if pacer.speed is None:
            pacer.speed = app_setting("SPEEDUP")
        if host.preset is None:
            host.preset = await database_sync_to_async(cluster_preset)()
        problem = await database_sync_to_async(live_selectors.cluster_choice_problem)()
        if problem:  # never guess which cluster is the twin: say so where everyone looks
            await self._refuse_start(problem)
        await database_sync_to_async(services.live_state_health_set)(health="starting")
        # loading a large snapshot outlasts the heartbeat: say "starting", not "down"
        self._starting_beat = asyncio.create_task(self._starting_heartbeat())
        try:
            await self._start_engine(state)
        finally:
            await self._starting_beat_stop()

    async def _start_engine(self, state) -> None:
        host, pacer = self.host, self.pacer
        left = snapshot_leftovers_remove()
        if left:
            logger.warning("live engine: removed %d snapshot file(s) a killed engine left: %s",
                           len(left), ", ".join(left))
        host.inv = await database_sync_to_async(inventory_read)()
        host.failure_profile = await database_sync_to_async(failure_profile_read)(host.inv)
        if _mirroring():
            if self.mirror is None:
                await self._refuse_start("CLUSTERTWIN_SOURCE=mirror: start the twin with "
                                         "`manage.py serve` or `manage.py run_engine`")
            if problem := self.mirror.start_problem():
                await self._refuse_start(problem)
        snap = await database_sync_to_async(live_selectors.engine_snapshot_latest)(
            preset=host.preset, seed=host.seed)
        after = await self._resume(snap)
        same_run = state is not None and state.inventory == host.log_key
        if after == 0 and not same_run:
            after = None  # built afresh for a run nobody was shown
        if after is None:  # a new run: nothing logged so far is its to replay
            self.log.log_seq = await self.log.last_row()
        else:
            # a crash lost what happened after the snapshot (or the whole run, if there was
            # none): replay the log and catch up with the last frame shown, so no applied drill
            # is lost and simulated time never goes back on screen
            await self.log.abandoned_refuse()
            await self.log.replay(after=after, until=state.t_sim if same_run else 0.0)
        self.log.good_t = host.engine.now
        await self.publisher.events_resume()
        pacer.begin()
        # built afresh, the first snapshot is taken at once: a crash then resumes, not rebuilds
        self.snapshots.begin(now=self._built_afresh)
        # drills posted while no engine ran are applied now, never left pending
        await self.commands.listen()
        if self.mirror is not None and _mirroring():
            logger.info("live engine: %s at t=%.0f s, on the wall clock", self.label,
                        host.engine.now)
        else:
            logger.info("live engine: %s (seed %d) at t=%.0f s, speed x%g%s", self.label,
                        host.seed, host.engine.now, pacer.speed,
                        ", paused" if pacer.paused else "")

    async def _refuse_start(self, problem: str) -> None:
        await self._starting_beat_stop()
        await database_sync_to_async(services.live_state_health_set)(
            health="error", last_error=problem)
        raise EngineStartError(problem)

    async def _starting_heartbeat(self) -> None:
        """While the engine starts, say so every quarter of the heartbeat (pages read a live
        state older than ``HEARTBEAT_S`` as ``down``; loading a snapshot can hold the
        interpreter for seconds between two beats)."""
        every = app_setting("HEARTBEAT_S") / 4
        while True:
            await asyncio.sleep(every)
            try:
                await database_sync_to_async(services.live_state_health_set)(health="starting")
            except Exception:
                logger.exception("live engine: could not say it is starting")

    async def _starting_beat_stop(self) -> None:
        beat, self._starting_beat = self._starting_beat, None
        if beat is not None:
            beat.cancel()
            await asyncio.wait([beat])

    async def _resume(self, snap) -> int | None:
        """Set the engine from the newest snapshot (re-planned if the inventory changed
        since), or afresh; returns the log row to replay after (``None``: a new run)."""
        host = self.host
        engine = None
        if snap is not None:
            try:
                engine = await host.call(engine_loads, bytes(snap.data))
            except Exception:
                logger.exception("live engine: the stored snapshot cannot be loaded")
        mirroring = self.mirror is not None
        if engine is not None and mirroring != (engine.mirror is not None):
            logger.warning("live engine: the stored snapshot (t=%.0f s) was %s; the twin now "
                           "%s: building the engine afresh", snap.t_sim,
                           "simulated" if mirroring else "a mirror",
                           "mirrors a real cluster" if mirroring else "simulates")
            engine = None
        keys = engine.keys if engine is not None else None
        if keys and host.inv is not None and keys.get("cluster") != host.inv.cluster_id:
            logger.warning("live engine: the stored snapshot (t=%.0f s) ran another cluster "
                           "(id %s, this is %s): building the engine afresh", snap.t_sim,
                           keys.get("cluster"), host.inv.cluster_id)
            engine = None
        if engine is None:
            host.engine = await host.call(host.load_or_build, None)
            self._built_afresh = True
            return 0  # replay the whole run's log, if it is the run that was shown
        self.log.log_seq = snap.log_seq
        if snap.inventory != host.inventory:
            # the inventory changed while the engine was down: carry the run over onto it
            logger.warning("live engine: the stored snapshot (t=%.0f s) ran inventory %s, the "
                           "database holds %s", snap.t_sim, snap.inventory or "(none)",
                           host.inventory or "(none)")
            host.engine = await host.call(self.inventory_follower.onto_inventory, engine)
            return snap.log_seq
        host.engine = engine
        self.log.restore_point(bytes(snap.data), snap.log_seq)
        if host.inv is not None:
            engine.keys = host.inv.keys
        return snap.log_seq

    async def _new_run(self, *, rebuilt: bool) -> None:
        """The inventory follower moved the engine onto another plan."""
        if rebuilt:
            await self.publisher.events_resume()
        self.log.restore_point(None)  # the old run's snapshot is of the old inventory
        self.snapshots.soon()

    def request_stop(self) -> None:
        """Ask :meth:`run` to finish its step, snapshot and return (signal handlers call it)."""
        self._stop.set()

    async def run(self) -> None:
        """Step every frame interval until :meth:`request_stop`; then snapshot and stop."""
        self.pacer.ticks_from_now()
        try:
            while not self._stop.is_set():
                try:
                    await self.step_once()
                except Exception:  # step_once heals the engine itself; this is a last guard
                    logger.exception("live engine: step failed")
                # in the background: the engine keeps stepping while a child serialises
                self.snapshots.maybe_start()
                await self.pacer.sleep_until_next(self._stop)
        finally:
            await self.close()

    async def close(self, *, snapshot: bool = True) -> None:
        """Final snapshot (unless told not to), ``health=stopped``, leave the command group.

        What was accepted and not yet applied (received, or a drill still pending in the
        database) is applied first, by one more step that also proves it (a snapshot never
        holds an unproven command); a periodic snapshot still being written is given up for
        the final one, which a stop waits for."""
        await self.commands.close()
        self.snapshots.abandon()
        await self.snapshots.wait()
        host, took = self.host, ""
        if host.engine is not None:
            if snapshot:
                try:
                    await self.commands.pending_read()
                except Exception:
                    logger.exception("live engine: could not read the pending drills")
                if self.commands.inbox or self.log.unproven:
                    try:
                        await self.step_once()
                    except Exception:
                        logger.exception("live engine: the last step failed")
                began = time.monotonic()
                await self.snapshots.take_safely(final=True)
                took = f" (final snapshot in {time.monotonic() - began:.1f} s)"
            self.publisher.health = "stopped"
            try:
                await self.publisher.publish(await host.call(live_frame, host.engine))
            except Exception:
                logger.exception("live engine: the last frame failed")
        host.shutdown()
        logger.info("live engine stopped at t=%.0f s%s", host.engine.now if host.engine else 0,
                    took)

    # ----------------------------------------------------------------- one step
    async def step_once(self) -> dict:
        """One iteration: apply commands, advance by speed x wall time, write and publish."""
        elapsed = self.pacer.elapsed()
        try:
            await self.inventory_follower.follow()
        except Exception:
            logger.exception("live engine: could not follow the inventory; will retry")
        await self.commands.apply_all()
        if self.mirror is not None:
            await self.mirror.follow()
            advance = self.mirror.advance_s()
        else:
            advance = self.pacer.advance_s(elapsed)
        try:
            frame = await self.host.call(self._advance, advance)
            self.publisher.health = "ok"
            self.log.proven()
        except Exception as exc:
            frame = await self.log.recover(exc)
        self.steps += 1
        await self.publisher.events_flush()
        return await self.publisher.publish(frame)

    def _advance(self, advance: float) -> dict:
        """In the engine's thread: run on by ``advance`` simulated seconds; the frame."""
        engine = self.host.engine
        engine.run_until(engine.now + advance)
        self.publisher.placement = live_placement(engine)
        self.publisher.entities_take(engine)
        return live_frame(engine)

    async def snapshot(self) -> int | None:
        """Store the engine as it is now; returns the snapshot id (``None``: not taken,
        because commands applied since the last step have not yet survived one)."""
        return await self.snapshots.take()

    async def command_apply(self, cmd: Command) -> None:
        """Apply one parsed command now (between steps)."""
        await self.commands.apply(cmd)
