"""The live engine's driver: steps the core against the wall clock, applies commands, publishes.

One :class:`EngineDriver` owns one :class:`scheduler.engine.Engine`. Every ``FRAME_INTERVAL_S``
of wall time it advances the engine by ``speed`` times the wall seconds that really passed (so a
slow step does not slow the twin down: the next one covers more simulated time), builds the
live frame, writes it to the single ``LiveState`` row and publishes it to every dashboard.
Engine work (stepping, frames, pickling) runs in one worker thread, so the event loop that
serves WebSockets stays responsive; database writes go through ``database_sync_to_async``.

It runs embedded (a background task of the daphne process, started with the server by
:mod:`twin.config.asgi`, or by the first dashboard connection through :func:`driver_ensure_started`
where no server started it) or alone (``manage.py run_engine``).
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

from scheduler.live import live_frame, live_placement
from scheduler.presets import get_preset
from scheduler.reliability.profiles import DEFAULT as PROFILE_DEFAULT
from scheduler.reliability.profiles import PROFILES
from scheduler.simulate import Scenario
from twin import models as m
from twin.config.conf import app_setting
from twin.inventory import selectors as inventory_selectors
from twin.inventory.replanning import Inventory
from twin.live import broadcast, command_log, services
from twin.live import selectors as live_selectors
from twin.live.driver_inventory import InventoryFollowing, _cluster_preset, _inventory_read
from twin.live.driver_log import CommandLogging
from twin.live.engine_commands import (
    LOGGED_COMMANDS,
    Command,
    CommandError,
    command_parse,
)
from twin.live.snapshots import engine_blob, engine_unpickle, snapshot_leftovers_remove
from twin.mirror.poller import MirrorError, MirrorFollowing

logger = logging.getLogger(__name__)

SCENARIO_DAYS = 366
"""The live scenario's horizon, days of simulated time."""

MAX_CATCH_UP_S = 60.0
"""Most wall seconds one step makes up for (after a suspended machine, not a slow step)."""


def _failure_profile_read(inv: Inventory | None) -> str:
    """The running cluster's failure profile (the default without a cluster)."""
    name = (m.Cluster.objects.filter(pk=inv.cluster_id).values_list("failure_profile", flat=True)
            .first() if inv is not None else None)
    if name and name not in PROFILES:
        logger.warning("cluster failure profile %r is not shipped; the live engine draws %s",
                       name, PROFILE_DEFAULT)
    return name if name in PROFILES else PROFILE_DEFAULT


class EngineStartError(RuntimeError):
    """The engine cannot start as configured (the message says why and what to set)."""


class EngineDriver(InventoryFollowing, CommandLogging, MirrorFollowing):
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
        :mod:`twin.live.snapshots`).
    layer : channel layer, optional
        Default: the configured one.
    """

    def __init__(self, *, preset: str | None = None, seed: int | None = None,
                 speed: float | None = None, frame_interval_s: float | None = None,
                 snapshot_interval_s: float | None = None, clock=time.monotonic, layer=None,
                 snapshot_in_child: bool | None = None, wall=time.time):
        self.preset = preset
        self.seed = app_setting("SEED") if seed is None else int(seed)
        self.speed = speed
        self.frame_interval_s = frame_interval_s or app_setting("FRAME_INTERVAL_S")
        self.snapshot_interval_s = snapshot_interval_s or app_setting("SNAPSHOT_INTERVAL_S")
        self.clock = clock
        self.wall = wall  # epoch seconds: a mirror's engine clock follows it
        self.layer = layer or get_channel_layer()
        self.snapshot_in_child = (hasattr(os, "fork") if snapshot_in_child is None
                                  else snapshot_in_child)
        self.engine = None
        self.inv: Inventory | None = None  # what runs (None: no cluster, the preset runs)
        self.failure_profile = PROFILE_DEFAULT  # the cluster's, read at start
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
        self._snapshot_log_seq = 0  # the last logged command in that blob
        self._log_seq = 0  # the last logged command applied to the engine (engine thread)
        self._unproven: list[int] = []  # logged commands applied since the last good step
        self._good_t = 0.0  # simulated time at the end of the last good step
        self._inbox: collections.deque = collections.deque()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="twin-engine")
        self._channel: str | None = None
        self._receiver: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._last_wall: float | None = None
        self._last_snapshot_wall: float | None = None
        self._snapshot_task: asyncio.Task | None = None
        self._mirror_init()

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Build (or resume) the engine and listen for commands."""
        state = await database_sync_to_async(live_selectors.live_state_get)()
        if state is not None:
            self.seq = state.seq
            self.paused = state.paused
            if self.speed is None:
                self.speed = state.speed
        if self.speed is None:
            self.speed = app_setting("SPEEDUP")
        if self.preset is None:
            self.preset = await database_sync_to_async(_cluster_preset)()
        problem = await database_sync_to_async(inventory_selectors.cluster_choice_problem)()
        if problem:  # never guess which cluster is the twin: say so where everyone looks
            await database_sync_to_async(services.live_state_health_set)(
                health="error", last_error=problem)
            raise EngineStartError(problem)
        await database_sync_to_async(services.live_state_health_set)(health="starting")
        left = snapshot_leftovers_remove()
        if left:
            logger.warning("live engine: removed %d snapshot file(s) a killed engine left: %s",
                           len(left), ", ".join(left))
        self.inv = await database_sync_to_async(_inventory_read)()
        self.failure_profile = await database_sync_to_async(_failure_profile_read)(self.inv)
        if self.mirroring and self.inv is None:
            problem = str(MirrorError())
            await database_sync_to_async(services.live_state_health_set)(
                health="error", last_error=problem)
            raise EngineStartError(problem)
        snap = await database_sync_to_async(live_selectors.engine_snapshot_latest)(
            preset=self.preset, seed=self.seed)
        after = await self._resume(snap)
        same_run = state is not None and state.inventory == self.log_key
        if after == 0 and not same_run:
            after = None  # built afresh for a run nobody was shown
        if after is None:  # a new run: nothing logged so far is its to replay
            self._log_seq = await database_sync_to_async(command_log.last_command_id)()
        else:
            # a crash lost what happened after the snapshot (or the whole run, if there was
            # none): replay the log and catch up with the last frame shown, so no applied drill
            # is lost and simulated time never goes back on screen
            await database_sync_to_async(command_log.commands_abandoned_refuse)(
                run=self.log_key)
            await self._replay(after=after, until=state.t_sim if same_run else 0.0)
        self._good_t = self.engine.now
        self._events_saved = await database_sync_to_async(services.engine_events_resume)(
            inventory=self.log_key, have=self.engine.kernel.logged)
        self._channel = await self.layer.new_channel()
        await self.layer.group_add(broadcast.ENGINE_GROUP, self._channel)
        self._receiver = asyncio.create_task(self._receive_loop())
        self._last_wall = self._last_snapshot_wall = self.clock()
        # drills posted while no engine ran are applied now, never left pending
        self._inbox.extend(await database_sync_to_async(command_log.drills_pending)())
        logger.info("live engine: %s (seed %d) at t=%.0f s, speed x%g%s", self.preset,
                    self.seed, self.engine.now, self.speed, ", paused" if self.paused else "")

    async def _resume(self, snap) -> int | None:
        """Set ``self.engine`` from the newest snapshot (re-planned if the inventory changed
        since), or afresh; returns the log row to replay after (``None``: a new run)."""
        engine = None
        if snap is not None:
            try:
                engine = await self._in_engine(engine_unpickle, bytes(snap.data))
            except Exception:
                logger.exception("live engine: the stored snapshot cannot be loaded")
        if engine is not None and self.mirroring != (getattr(engine, "mirror", None) is not None):
            logger.warning("live engine: the stored snapshot (t=%.0f s) was %s; the twin now "
                           "%s: building the engine afresh", snap.t_sim,
                           "simulated" if self.mirroring else "a mirror",
                           "mirrors a real cluster" if self.mirroring else "simulates")
            engine = None
        keys = getattr(engine, "keys", None)
        if engine is not None and self.inv is not None and keys and (
                keys.get("cluster") != self.inv.cluster_id):
            logger.warning("live engine: the stored snapshot (t=%.0f s) ran another cluster "
                           "(id %s, this is %s): building the engine afresh", snap.t_sim,
                           keys.get("cluster"), self.inv.cluster_id)
            engine = None
        if engine is None:
            self.engine = await self._in_engine(self._load_or_build, None)
            return 0  # replay the whole run's log, if it is the run that was shown
        self._log_seq = snap.log_seq
        if snap.inventory != self.inventory:
            # the inventory changed while the engine was down: carry the run over onto it
            logger.warning("live engine: the stored snapshot (t=%.0f s) ran inventory %s, the "
                           "database holds %s", snap.t_sim, snap.inventory or "(none)",
                           self.inventory or "(none)")
            self.engine = await self._in_engine(self._onto_inventory, engine)
            return snap.log_seq
        self.engine = engine
        self._snapshot_blob, self._snapshot_log_seq = bytes(snap.data), snap.log_seq
        if self.inv is not None:
            self.engine.keys = self.inv.keys
        return snap.log_seq

    def _load_or_build(self, data: bytes | None):
        if data is not None:
            try:
                return engine_unpickle(data)
            except Exception:
                logger.exception("live engine: the stored snapshot cannot be loaded; rebuilding")
        if self.mirroring:
            return self._mirror_build()
        engine, _ = Scenario(preset=self.preset, days=SCENARIO_DAYS, seed=self.seed,
                             failures=True, physics=True,
                             failure_profile=self.failure_profile).engine(plan=self.plan)
        # the run's name: its inventory and cluster (a rebuilt look-alike is another twin)
        engine.lineage = f"{self.inventory}:{self.inv.cluster_id}" if self.inv else None
        self._statuses_apply(engine)
        engine.run_until(get_preset(self.preset).warmup_s)  # issue 16: opens on a busy fleet
        return engine

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
        if self.mirroring:
            await self._mirror_follow()
            advance = self._mirror_advance_s()
        else:
            advance = 0.0 if self.paused else self.speed * elapsed
        try:
            frame = await self._in_engine(self._advance, advance)
            self.health = "ok"
            self._unproven.clear()  # the commands so far survived a step
            self._good_t = self.engine.now
        except Exception as exc:
            frame = await self._engine_failed(exc)
        self.steps += 1
        await self._events_flush()
        return await self._publish(frame)

    @property
    def log_key(self) -> str:
        """What the stored event log is kept under: the run's lineage (the inventory it
        started on; re-plans keep it), else the inventory, else the preset run."""
        lineage = getattr(self.engine, "lineage", None)
        return lineage or self.inventory or f"preset:{self.preset}:{self.seed}"

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
                 "lag_ticks": self.lag_ticks,
                 "source": "mirror" if self.mirroring else "simulate",
                 "sources": self.sources_status() if self.mirroring else None}
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

    # ----------------------------------------------------------------- snapshots
    async def snapshot(self) -> int | None:
        """Store the engine as it is now; returns the snapshot id (``None``: not taken,
        because commands applied since the last step have not yet survived one)."""
        if self._unproven:
            return None
        at = {}

        async def in_engine_marked(fn, *args):
            def run():  # the log position, read in the engine's thread at the same instant
                at["log_seq"] = self._log_seq
                return fn(*args)
            return await self._in_engine(run)

        blob, t_sim = await engine_blob(self.engine, in_engine=in_engine_marked,
                                        in_child=self.snapshot_in_child)
        self._snapshot_blob, self._snapshot_log_seq = blob, at["log_seq"]
        self._last_snapshot_wall = self.clock()
        return await database_sync_to_async(services.engine_snapshot_save)(
            data=blob, t_sim=t_sim, preset=self.preset, seed=self.seed,
            inventory=self.inventory, log_seq=at["log_seq"])

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
                self._inbox.append(await broadcast.command_receive(self.layer, self._channel))
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
        if self.mirroring and cmd.name in ("speed", "pause", "resume", "drill"):
            await self._mirror_refuse(cmd)
        elif cmd.name == "speed":
            self.speed = cmd.params["factor"]
            logger.info("live engine: speed x%g", self.speed)
        elif cmd.name in ("pause", "resume"):
            self.paused = cmd.name == "pause"
        elif cmd.name in LOGGED_COMMANDS:  # inventory edits and staff actions
            try:
                await self._apply_logged(cmd.name, cmd.params)
            except ValueError as exc:
                logger.warning("live engine: %s refused: %s", cmd.name, exc)
            except Exception as exc:  # it broke half-way: roll back to before it, run on
                await self._engine_failed(exc)
        elif cmd.name == "drill":
            await self._drill(cmd)

    async def _in_engine(self, fn, *args, **kwargs):
        """Run ``fn`` in the engine's own thread (one at a time: the engine is not shared)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))


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
