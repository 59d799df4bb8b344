"""The live engine's driver: steps the core against the wall clock, applies commands, publishes.

One :class:`EngineDriver` owns one :class:`scheduler.engine.Engine`. Every ``FRAME_INTERVAL_S``
of wall time it advances the engine by ``speed`` times the wall seconds that really passed (so a
slow step does not slow the twin down: the next one covers more simulated time), builds the
live frame, writes it to the single ``LiveState`` row and publishes it to every dashboard.
Engine work (stepping, frames, pickling) runs in one worker thread, so the event loop that
serves WebSockets stays responsive; database writes go through ``database_sync_to_async``.

It runs embedded (a background task of the daphne process, started by the first dashboard
connection through :func:`driver_ensure_started`) or alone (``manage.py run_engine``).
A crash inside a step is logged, shown as ``health=error`` and healed by restoring the last
snapshot (or rebuilding the scenario): it never reaches the web server.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from scheduler.control.replan import replan
from scheduler.live import live_frame, live_placement
from scheduler.presets import PRESETS
from scheduler.simulate import Scenario
from twin import broadcast, selectors, services
from twin import models as m
from twin.conf import app_setting
from twin.engine_commands import (
    INVENTORY_COMMANDS,
    Command,
    CommandError,
    command_parse,
    json_safe,
)
from twin.replanning import Inventory, inventory_revision
from twin.snapshots import engine_blob, engine_unpickle

logger = logging.getLogger(__name__)

SCENARIO_DAYS = 366
"""The live scenario's horizon, days of simulated time."""

MAX_CATCH_UP_S = 60.0
"""Most wall seconds one step makes up for (after a suspended machine, not a slow step)."""


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
    snapshot_in_child : bool, optional
        Pickle snapshots in a forked child (default where ``os.fork`` exists; see
        :mod:`twin.snapshots`).
    layer : channel layer, optional
        Default: the configured one.
    """

    def __init__(self, *, preset: str | None = None, seed: int | None = None,
                 speed: float | None = None, frame_interval_s: float | None = None,
                 snapshot_interval_s: float | None = None, clock=time.monotonic, layer=None,
                 snapshot_in_child: bool | None = None):
        self.preset = preset
        self.seed = app_setting("SEED") if seed is None else int(seed)
        self.speed = speed
        self.frame_interval_s = frame_interval_s or app_setting("FRAME_INTERVAL_S")
        self.snapshot_interval_s = snapshot_interval_s or app_setting("SNAPSHOT_INTERVAL_S")
        self.clock = clock
        self.layer = layer or get_channel_layer()
        self.snapshot_in_child = (hasattr(os, "fork") if snapshot_in_child is None
                                  else snapshot_in_child)
        self.engine = None
        self.inv: Inventory | None = None  # what runs (None: no cluster, the preset runs)
        self._last_poll_wall: float | None = None  # when the inventory's revision was read
        self.replan_summary: dict | None = None  # what the last re-plan moved
        self._events_saved = 0  # engine log lines kept in the database so far
        self._placement: dict | None = None  # the last step's live_placement
        self.seq = 0
        self.paused = False
        self.health = "starting"
        self.last_error = ""
        self.lag_ticks = 0
        self.steps = 0
        self._snapshot_blob: bytes | None = None
        self._inbox: collections.deque = collections.deque()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="twin-engine")
        self._channel: str | None = None
        self._receiver: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._last_wall: float | None = None
        self._last_snapshot_wall: float | None = None
        self._snapshot_task: asyncio.Task | None = None

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Build (or resume) the engine and listen for commands."""
        state = await database_sync_to_async(selectors.live_state_get)()
        if state is not None:
            self.seq = state.seq
            self.paused = state.paused
            if self.speed is None:
                self.speed = state.speed
        if self.speed is None:
            self.speed = app_setting("SPEEDUP")
        if self.preset is None:
            self.preset = await database_sync_to_async(_cluster_preset)()
        await database_sync_to_async(services.live_state_health_set)(health="starting")
        self.inv = await database_sync_to_async(_inventory_read)()
        snap = await database_sync_to_async(selectors.engine_snapshot_latest)(
            preset=self.preset, seed=self.seed)
        stale = snap is not None and snap.inventory != self.inventory
        self.engine = await self._in_engine(self._load_or_build,
                                            None if snap is None else bytes(snap.data))
        keys = getattr(self.engine, "keys", None)
        if (snap is not None and self.inv is not None and keys
                and keys.get("cluster") != self.inv.cluster_id):
            logger.warning("live engine: the stored snapshot (t=%.0f s) ran another cluster "
                           "(id %s, this is %s): building the engine afresh", snap.t_sim,
                           keys.get("cluster"), self.inv.cluster_id)
            self.engine = await self._in_engine(self._load_or_build, None)
        elif stale:
            # the inventory changed while the engine was down: carry the run over if it is
            # this cluster's, else start afresh; either way, say so
            logger.warning("live engine: the stored snapshot (t=%.0f s) ran inventory %s, the "
                           "database holds %s", snap.t_sim, snap.inventory or "(none)",
                           self.inventory or "(none)")
            self.engine = await self._in_engine(self._onto_inventory, self.engine)
        elif snap is not None and self.engine is not None:
            self._snapshot_blob = bytes(snap.data)
            if self.inv is not None:
                self.engine.keys = self.inv.keys
        self._events_saved = await database_sync_to_async(services.engine_events_resume)(
            inventory=self.log_key, have=self.engine.kernel.logged)
        self._channel = await self.layer.new_channel()
        await self.layer.group_add(broadcast.ENGINE_GROUP, self._channel)
        self._receiver = asyncio.create_task(self._receive_loop())
        self._last_wall = self._last_snapshot_wall = self.clock()
        logger.info("live engine: %s (seed %d) at t=%.0f s, speed x%g%s", self.preset,
                    self.seed, self.engine.now, self.speed, ", paused" if self.paused else "")

    def _load_or_build(self, data: bytes | None):
        if data is not None:
            try:
                return engine_unpickle(data)
            except Exception:
                logger.exception("live engine: the stored snapshot cannot be loaded; rebuilding")
        engine, _ = Scenario(preset=self.preset, days=SCENARIO_DAYS, seed=self.seed,
                             failures=True, physics=True).engine(plan=self.plan)
        engine.lineage = self.inventory or None
        self._statuses_apply(engine)
        return engine

    def _statuses_apply(self, engine) -> None:
        """Give an engine new to this inventory (fresh or re-planned) its operator statuses."""
        if self.inv is None:
            return
        engine.keys = self.inv.keys
        for command, params in self.inv.statuses:
            try:
                engine.command(command, **params)
            except ValueError as exc:
                logger.warning("live engine: inventory status %s %s not applied: %s", command,
                               params, exc)

    def _onto_inventory(self, engine):
        """``engine`` (another inventory's) re-planned onto this one when it ran this cluster,
        else a fresh engine."""
        node_map = None if self.inv is None else self.inv.node_map(engine.keys)
        if node_map is None:
            logger.warning("live engine: the snapshot ran another cluster (or none): "
                           "building the engine afresh")
            return self._load_or_build(None)
        try:
            new, self.replan_summary = replan(engine, self.plan, node_map)
        except ValueError as exc:
            logger.warning("live engine: the snapshot cannot be re-planned (%s): building "
                           "the engine afresh", exc)
            return self._load_or_build(None)
        self._statuses_apply(new)
        logger.info("live engine: re-planned onto inventory %s at t=%.0f s: %s",
                    self.inventory, new.now, self.replan_summary)
        return new

    def request_stop(self) -> None:
        """Ask :meth:`run` to finish its step, snapshot and return (signal handlers call it)."""
        self._stop.set()

    async def run(self) -> None:
        """Step every frame interval until :meth:`request_stop`; then snapshot and stop."""
        interval = self.frame_interval_s
        next_tick = self.clock()
        try:
            while not self._stop.is_set():
                try:
                    await self.step_once()
                except Exception:  # step_once heals the engine itself; this is a last guard
                    logger.exception("live engine: step failed")
                if (self.clock() - self._last_snapshot_wall >= self.snapshot_interval_s
                        and (self._snapshot_task is None or self._snapshot_task.done())):
                    # in the background: the engine keeps stepping while a child pickles
                    self._last_snapshot_wall = self.clock()
                    self._snapshot_task = asyncio.create_task(self._snapshot_safely())
                next_tick += interval
                now = self.clock()
                if now > next_tick:  # the step overran: skip the ticks it missed
                    missed = int((now - next_tick) // interval) + 1
                    self.lag_ticks += missed
                    next_tick += missed * interval
                try:
                    await asyncio.wait_for(self._stop.wait(), timeout=max(0.0, next_tick - now))
                except TimeoutError:
                    pass
        finally:
            await self.close()

    async def close(self, *, snapshot: bool = True) -> None:
        """Final snapshot (unless told not to), ``health=stopped``, leave the command group."""
        if self._receiver is not None:
            self._receiver.cancel()
            self._receiver = None
        if self._channel is not None:
            try:
                await self.layer.group_discard(broadcast.ENGINE_GROUP, self._channel)
            except Exception:
                logger.exception("live engine: could not leave the command group")
            self._channel = None
        if self._snapshot_task is not None:
            await asyncio.wait([self._snapshot_task])
        if self.engine is not None:
            if snapshot:
                await self._snapshot_safely()
            self.health = "stopped"
            try:
                await self._publish(await self._in_engine(live_frame, self.engine))
            except Exception:
                logger.exception("live engine: the last frame failed")
        self._executor.shutdown(wait=False)
        logger.info("live engine stopped at t=%.0f s", self.engine.now if self.engine else 0)

    # ----------------------------------------------------------------- one step
    async def step_once(self) -> dict:
        """One iteration: apply commands, advance by speed x wall time, write and publish."""
        now = self.clock()
        elapsed = min(max(now - self._last_wall, 0.0), MAX_CATCH_UP_S)
        self._last_wall = now
        try:
            await self._inventory_follow()
        except Exception:
            logger.exception("live engine: could not follow the inventory; will retry")
        await self._commands_apply()
        advance = 0.0 if self.paused else self.speed * elapsed
        try:
            frame = await self._in_engine(self._advance, advance)
            self.health = "ok"
        except Exception as exc:
            frame = await self._engine_failed(exc)
        self.steps += 1
        await self._events_flush()
        return await self._publish(frame)

    @property
    def plan(self):
        """The inventory's ClusterPlan (None: no cluster, the preset runs)."""
        return None if self.inv is None else self.inv.plan

    @property
    def inventory(self) -> str:
        """The inventory's fingerprint, stored with every snapshot ('' for the preset)."""
        return "" if self.inv is None else self.inv.fingerprint

    @property
    def log_key(self) -> str:
        """What the stored event log is kept under: the run's lineage (the inventory it
        started on; re-plans keep it), else the inventory, else the preset run."""
        lineage = getattr(self.engine, "lineage", None)
        return lineage or self.inventory or f"preset:{self.preset}:{self.seed}"

    async def _inventory_follow(self) -> None:
        """Every ``INVENTORY_POLL_S``: if the inventory's revision moved and its plan differs
        from the one running, re-plan the engine now (between two steps: a safe point)."""
        now = self.clock()
        if self.inv is None or (self._last_poll_wall is not None and now - self._last_poll_wall
                                < app_setting("INVENTORY_POLL_S")):
            return
        self._last_poll_wall = now
        revision = await database_sync_to_async(inventory_revision)(
            cluster_id=self.inv.cluster_id)
        if revision is None or revision == self.inv.revision:
            return
        fresh = await database_sync_to_async(_inventory_read)(self.inv.cluster_id)
        if fresh is None:
            return
        if fresh.fingerprint == self.inv.fingerprint:  # nothing the engine sees moved
            self.inv = fresh
            self.engine.keys = fresh.keys
            return
        old_keys = self.engine.keys
        self.inv = fresh
        node_map = fresh.node_map(old_keys)
        try:
            if node_map is None:
                raise ValueError("the engine's nodes are not this cluster's")
            self.engine, self.replan_summary = await self._in_engine(
                replan, self.engine, fresh.plan, node_map)
            await self._in_engine(self._statuses_apply, self.engine)
            logger.info("live engine: inventory revision %d, re-planned at t=%.0f s: %s",
                        revision, self.engine.now, self.replan_summary)
        except Exception:
            logger.exception("live engine: re-plan failed; rebuilding from the inventory")
            self.engine = await self._in_engine(self._load_or_build, None)
            self._events_saved = await database_sync_to_async(services.engine_events_resume)(
                inventory=self.log_key, have=self.engine.kernel.logged)
        self._snapshot_blob = None  # the old run's snapshot is of the old inventory
        self._last_snapshot_wall = -float("inf")  # snapshot the new one soon

    async def _events_flush(self) -> None:
        """Keep the engine's new log lines; on a database error they wait for the next step."""
        start, new = await self._in_engine(self.engine.kernel.events_since, self._events_saved)
        if not new:
            return
        try:
            await database_sync_to_async(services.engine_events_store)(
                inventory=self.log_key, first_seq=start, events=new)
            self._events_saved = start + len(new)
        except Exception:
            logger.exception("live engine: could not keep %d event(s); will retry", len(new))

    def _advance(self, advance: float) -> dict:
        engine = self.engine
        engine.run_until(engine.now + advance)
        self._placement = live_placement(engine)
        return live_frame(engine)

    async def _publish(self, frame: dict) -> dict:
        self.seq += 1
        frame = {**frame, "speed": self.speed, "paused": self.paused, "health": self.health,
                 "lag_ticks": self.lag_ticks}
        t = float(self.engine.now) if self.engine is not None else 0.0
        try:
            await database_sync_to_async(services.live_state_write)(
                seq=self.seq, t_sim=t, frame=frame, health=self.health,
                last_error=self.last_error, speed=self.speed, paused=self.paused,
                inventory=self.log_key, placement=self._placement)
            await broadcast.frame_publish(frame, self.seq, t, layer=self.layer)
        except Exception:
            logger.exception("live engine: could not write or publish frame %d", self.seq)
        return frame

    async def _engine_failed(self, exc: BaseException) -> dict:
        """Log, report ``health=error`` and carry on from the last snapshot (or afresh)."""
        logger.exception("live engine step failed at t=%s; restoring the last snapshot",
                         getattr(self.engine, "now", None), exc_info=exc)
        self.health = "error"
        self.last_error = f"{type(exc).__name__}: {exc}"
        try:
            self.engine = await self._in_engine(self._load_or_build, self._snapshot_blob)
            self._events_saved = await database_sync_to_async(services.engine_events_resume)(
                inventory=self.log_key, have=self.engine.kernel.logged)
            return await self._in_engine(live_frame, self.engine)
        except Exception:
            logger.exception("live engine: restoring failed too")
            return {"t": getattr(self.engine, "now", 0.0)}

    # ----------------------------------------------------------------- snapshots
    async def snapshot(self) -> int:
        """Store the engine as it is now; returns the snapshot id."""
        blob, t_sim = await engine_blob(self.engine, in_engine=self._in_engine,
                                        in_child=self.snapshot_in_child)
        self._snapshot_blob = blob
        self._last_snapshot_wall = self.clock()
        return await database_sync_to_async(services.engine_snapshot_save)(
            data=blob, t_sim=t_sim, preset=self.preset, seed=self.seed,
            inventory=self.inventory)

    async def _snapshot_safely(self) -> int | None:
        try:
            return await self.snapshot()
        except Exception:
            logger.exception("live engine: snapshot failed")
            self._last_snapshot_wall = self.clock()
            return None

    # ----------------------------------------------------------------- commands
    async def _receive_loop(self) -> None:
        while True:
            try:
                self._inbox.append(await self.layer.receive(self._channel))
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("live engine: receiving commands failed; retrying")
                await asyncio.sleep(1.0)

    async def _commands_apply(self) -> None:
        while self._inbox:
            message = self._inbox.popleft()
            try:
                await self.command_apply(command_parse(message))
            except CommandError as exc:
                logger.warning("live engine: command refused: %s (%r)", exc, message)
            except Exception:
                logger.exception("live engine: command failed: %r", message)

    async def command_apply(self, cmd: Command) -> None:
        """Apply one parsed command now (between steps)."""
        if cmd.name == "speed":
            self.speed = cmd.params["factor"]
            logger.info("live engine: speed x%g", self.speed)
        elif cmd.name in ("pause", "resume"):
            self.paused = cmd.name == "pause"
        elif cmd.name in INVENTORY_COMMANDS:
            try:
                await self._in_engine(self.engine.command, cmd.name, **cmd.params)
            except ValueError as exc:
                logger.warning("live engine: %s refused: %s", cmd.name, exc)
        elif cmd.name == "drill":
            await self._drill(cmd)

    async def _drill(self, cmd: Command) -> None:
        if not await database_sync_to_async(services.drill_claim)(drill_id=cmd.drill_id):
            logger.warning("live engine: drill %s is not pending; ignored", cmd.drill_id)
            return
        applied, outcome = True, {}
        try:
            outcome = json_safe(await self._in_engine(self.engine.command, "drill",
                                                      **cmd.params))
        except ValueError as exc:
            applied, outcome = False, {"error": str(exc)}
        except Exception as exc:
            applied, outcome = False, {"error": f"the engine failed: {exc}"}
            await self._engine_failed(exc)
        await database_sync_to_async(services.drill_outcome_record)(
            drill_id=cmd.drill_id, applied=applied, outcome=outcome,
            t_sim=float(self.engine.now))

    async def _in_engine(self, fn, *args, **kwargs):
        """Run ``fn`` in the engine's own thread (one at a time: the engine is not shared)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))


def _inventory_read(cluster_id: int | None = None) -> Inventory | None:
    """The selected cluster (or ``cluster_id``) read through the one adapter; ``None`` when
    the database holds no cluster or it cannot run (logged), so the preset (or the running
    plan) stays."""
    if cluster_id is None:
        cluster = selectors.cluster_current()
    else:
        cluster = m.Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        logger.warning("live engine: no cluster in the inventory; running the preset %s",
                       app_setting("DEFAULT_PRESET"))
        return None
    try:
        return Inventory(cluster)
    except ValueError as exc:
        logger.error("live engine: the inventory of %s cannot run (%s)", cluster.name, exc)
        return None


def _cluster_preset() -> str:
    cluster = selectors.cluster_current()
    preset = cluster.preset if cluster is not None else ""
    if preset in PRESETS:
        return preset
    if preset:
        logger.warning("cluster preset %r has no scenario; the live engine runs %s", preset,
                       app_setting("DEFAULT_PRESET"))
    return app_setting("DEFAULT_PRESET")


# ----------------------------------------------------------------- embedded mode
_embedded: dict = {"task": None, "driver": None}


def driver_ensure_started() -> bool:
    """Start the embedded driver once per process (ENGINE_MODE=embedded); True if it runs.

    Callable from async code (the WebSocket consumer) and from sync views served by daphne
    (``sync_to_async`` threads know the server's event loop). Elsewhere (tests, a shell, a
    separate or ``off`` engine mode) it starts nothing.
    """
    if app_setting("ENGINE_MODE") != "embedded":
        return False
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        from asgiref.sync import SyncToAsync
        local = SyncToAsync.threadlocal
        loop = getattr(local, "main_event_loop", None)
        if (loop is None or not loop.is_running()
                or getattr(local, "main_event_loop_pid", None) != os.getpid()):
            return False
        loop.call_soon_threadsafe(_embedded_start, loop)
        return True
    _embedded_start(loop)
    return True


def embedded_driver() -> EngineDriver | None:
    """The embedded driver of this process, if one runs (for /metrics)."""
    task = _embedded["task"]
    return _embedded["driver"] if task is not None and not task.done() else None


def _embedded_start(loop) -> None:
    task = _embedded["task"]
    if task is not None and not task.done() and task.get_loop() is loop:
        return
    driver = EngineDriver()
    _embedded["driver"] = driver
    # a fresh context: the driver outlives the connection that happened to start it
    _embedded["task"] = loop.create_task(_embedded_run(driver), name="twin-engine",
                                         context=contextvars.Context())


async def _embedded_run(driver: EngineDriver) -> None:
    try:
        await driver.start()
    except Exception:
        logger.exception("live engine (embedded) could not start; the next dashboard "
                         "connection tries again")
        return
    _shutdown_hook_install(driver)
    await driver.run()


def _shutdown_hook_install(driver: EngineDriver) -> None:
    """Under daphne, snapshot before the reactor shuts down (SIGTERM, SIGINT)."""
    try:
        from twisted.internet import reactor
        from twisted.internet.defer import Deferred
    except ImportError:
        return
    if not getattr(reactor, "running", False):
        return
    task = _embedded["task"]

    def on_shutdown():
        driver.request_stop()
        return Deferred.fromFuture(asyncio.ensure_future(asyncio.wait([task])))

    reactor.addSystemEventTrigger("before", "shutdown", on_shutdown)
