"""The live driver as a mirror (``CLUSTERTWIN_SOURCE=mirror``): it follows a real cluster.

The engine runs the inventory's cluster with no workload of its own, no failure processes and
its scheduler held (:func:`scheduler.control.mirror.mirror_hold`); its clock is the wall clock
(``t`` = wall seconds since the mirror began, from the book's ``origin``). Every
``MIRROR_POLL_S`` :class:`MirrorPoller` reads the sources in a thread of their own (a slow or
dead source never holds up a frame): Slurm (``sinfo/squeue/sacct --json`` or slurmrestd) and,
when ``PROMETHEUS_URL`` is set, the DCGM exporter's series through Prometheus. What was read is
mapped to engine ids (:mod:`twin.mirror.follow`) and applied between two steps
(:func:`scheduler.control.mirror.observe`). :func:`live_driver` plugs the poller into the live
driver (which knows nothing of mirrors: ``twin.live`` sits below ``twin.mirror``).

Each source has a status in every frame (``frame["sources"]``): ``ok``, ``stale`` (the last
good read is older than two poll intervals) or ``error`` with the error's one line, the last
good read's wall time and age, and what could not be mapped. When a source fails the twin
keeps the last state it read and says how old it is; nothing is invented. The status is the
source's reachability only: an observation the engine refuses (it stays as it was) is one
``source`` event and an ``observation_refused`` problem of the sources read, never an error of
theirs (so no "reachable again" follows it).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from channels.db import database_sync_to_async

from scheduler.control.mirror import mirror_hold, observe
from scheduler.engine import Engine
from scheduler.reliability.profiles import load_profile
from scheduler.workload.jobs import Workload
from twin import app_setting
from twin.live.policy import LivePolicyError, live_policy

logger = logging.getLogger("twin.live.driver")

SOURCES = ("slurm", "prometheus")


class MirrorError(Exception):
    """The mirror cannot start (no inventory to mirror)."""

    def __init__(self, message: str = ""):
        super().__init__(message or "CLUSTERTWIN_SOURCE=mirror needs the cluster in the "
                         "inventory: build it with `manage.py import_inventory --from-slurm`")


def _slurm_read():
    from twin.mirror.slurm_source import slurm_view
    conf = app_setting("SLURM_CONF")
    return slurm_view(conf=Path(conf) if conf else None,
                      rest_url=app_setting("SLURM_REST_URL") or None,
                      token=app_setting("SLURM_REST_TOKEN") or None,
                      user=app_setting("SLURM_REST_USER") or None,
                      timeout=app_setting("MIRROR_TIMEOUT_S"),
                      max_bytes=int(app_setting("MIRROR_MAX_BYTES")))


def _prometheus_read():
    from twin.mirror.prom_source import prom_view
    return prom_view(app_setting("PROMETHEUS_URL"), timeout=app_setting("MIRROR_TIMEOUT_S"),
                     token=app_setting("PROMETHEUS_TOKEN") or None,
                     max_bytes=int(app_setting("MIRROR_MAX_BYTES")))


class MirrorPoller:
    """Polls the real cluster's sources and applies what they read to the mirror engine.

    Parameters
    ----------
    host : twin.live.engine_host.EngineHost
    clock : callable
        Wall clock in seconds (monotonic, the pacing's): when a poll is due.
    wall : callable
        Epoch seconds: the mirror's clock, and the sources' read times.
    """

    readers = {"slurm": _slurm_read, "prometheus": _prometheus_read}

    def __init__(self, *, host, clock, wall):
        self.host, self.clock, self.wall = host, clock, wall
        self.poll_task: asyncio.Task | None = None
        self._last_poll: float | None = None
        self._hosts = None
        self._source_events: list[tuple[str, str]] = []  # (source, error or "" when back)
        self._refused = ""  # why the last observation was refused ("" when it applied)
        self.sources = {name: {"state": "waiting", "last_ok": None, "last_try": None,
                               "age_s": None, "error": "", "read_s": None, "problems": {}}
                        for name in self._sources_used()}

    @staticmethod
    def _sources_used() -> tuple[str, ...]:
        return ("slurm",) + (("prometheus",) if app_setting("PROMETHEUS_URL") else ())

    def start_problem(self) -> str:
        """Why the mirror cannot start ('' when it can)."""
        return "" if self.host.inv is not None else str(MirrorError())

    def engine_build(self) -> Engine:
        """A fresh mirror engine of the inventory's cluster, its clock starting now (in the
        engine's thread)."""
        inv = self.host.inv
        if inv is None:
            raise MirrorError()
        profile = load_profile(self.host.failure_profile)
        engine = Engine(inv.plan, Workload(jobs=()), seed=self.host.seed, physics=True,
                        failure_modes=profile.modes, **self._fork_policy(inv.plan))
        book = mirror_hold(engine)
        book.origin = self.wall()
        book.profile = profile.name  # what the forks draw until the mirror measured enough
        engine.lineage = f"mirror:{inv.fingerprint}:{inv.cluster_id}"
        return engine

    @staticmethod
    def _fork_policy(plan) -> dict:
        """What the mirror's forks schedule by: the cluster's slurm.conf where it is readable
        and matches the inventory, else the twin's policy (logged)."""
        try:
            policy = live_policy(mirror=True)
            if policy.slurm_conf is not None and policy.slurm_conf.nodes and len(
                    policy.slurm_conf.nodes) != plan.n_nodes:
                raise LivePolicyError(
                    f"{policy.slurm_conf_path} has {len(policy.slurm_conf.nodes)} nodes, the "
                    f"inventory {plan.n_nodes}")
        except LivePolicyError as exc:
            logger.warning("mirror: forks schedule with the twin's default policy: %s", exc)
            return {}
        return {"policy": policy.name, "slurm_conf": policy.slurm_conf}

    async def refuse(self, cmd) -> None:
        """Speed, pause and drills act on a simulation; a mirror follows the real clock and
        the real cluster (a drill is a what-if from now)."""
        logger.warning("live engine: %s refused: the twin mirrors a real cluster", cmd.name)
        if cmd.name == "drill":
            from twin.live import services

            await database_sync_to_async(services.drill_outcome_record)(
                drill_id=cmd.drill_id, applied=False, t_sim=None,
                outcome={"error": "the live twin mirrors a real cluster: run the drill as a "
                                  "what-if from now"})

    def advance_s(self) -> float:
        """Simulated seconds to advance: up to the wall clock (a mirror runs in real time)."""
        engine = self.host.engine
        book = engine.mirror
        if book.origin is None:
            book.origin = self.wall() - engine.now
        return max(0.0, self.wall() - book.origin - engine.now)

    async def follow(self) -> None:
        """Start a poll when one is due; apply a finished one (between two steps)."""
        task = self.poll_task
        if task is not None and task.done():
            self.poll_task = None
            try:
                reads = task.result()
            except Exception:  # a reader's bug: the sources' status says it, the engine runs
                logger.exception("live engine: mirror poll failed")
                reads = {}
            await self._apply(reads)
        now = self.clock()
        if self.poll_task is None and (self._last_poll is None or now - self._last_poll
                                       >= app_setting("MIRROR_POLL_S")):
            self._last_poll = now
            self.poll_task = asyncio.create_task(asyncio.to_thread(self._read))

    def _read(self) -> dict:
        """Read every source (in a worker thread); a failure is that source's status."""
        out = {}
        for name in self.sources:
            started = self.wall()
            status = self.sources[name]
            status["last_try"] = started
            try:
                out[name] = self.readers[name]()
                if name == "prometheus" and self._hosts is not None:
                    # an exporter that stopped is absent from the answer, not an error
                    seen = set(getattr(out[name], "hosts", ()))
                    out[name].stale = [h for h in self._hosts.hostnames if h not in seen]
            except Exception as exc:  # SourceError (one line) or anything a source threw
                message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if status["state"] != "error" or status["error"] != message:
                    logger.warning("live engine: mirror source %s: %s", name, message)
                    self._source_events.append((name, message))
                status.update(state="error", error=message)
            else:
                if status["state"] == "error":
                    logger.info("live engine: mirror source %s is back", name)
                    self._source_events.append((name, ""))
                status.update(state="ok", error="", last_ok=started,
                              read_s=round(self.wall() - started, 3))
        return out

    async def _apply(self, reads: dict) -> None:
        from twin.mirror.follow import HostIndex, observation
        host = self.host
        if self._hosts is None or len(self._hosts.hostnames) != host.plan.n_nodes:
            from twin.inventory.models import Cluster

            cluster = await database_sync_to_async(Cluster.objects.get)(pk=host.inv.cluster_id)
            self._hosts = await database_sync_to_async(HostIndex.of)(cluster)
        events, self._source_events = list(self._source_events), []
        hosts = self._hosts

        def apply():  # in the engine's thread: mapping 100k GPUs takes a while
            engine = host.engine
            for name, message in events:
                engine.kernel.log("source", f"{name}: {message}" if message
                                  else f"{name}: reachable again", component=name)
            engine.mirror.hostnames = hosts.hostnames  # events name nodes by hostname
            obs, problems = observation(reads.get("slurm"), reads.get("prometheus"), hosts)
            stale = getattr(reads.get("prometheus"), "stale", None)
            if stale:
                problems["prometheus"]["stale_exporters"] = {"count": len(stale),
                                                             "names": list(stale[:10])}
            for name in reads:
                self.sources[name]["problems"] = problems.get(name, {})
            try:
                return observe(engine, obs)
            except ValueError as exc:  # the engine is as it was: said, and tried next poll
                message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if message != self._refused:
                    engine.kernel.log("source", f"mirror: observation refused: {message}",
                                      component="mirror")
                self._refused = message
                refusal = {"observation_refused": {"count": 1, "names": [message]}}
                for name in reads:  # refused, not unreachable: the source's state stays
                    self.sources[name]["problems"] = {**self.sources[name]["problems"],
                                                      **refusal}
                raise

        try:
            await host.call(apply)
        except ValueError as exc:
            logger.warning("live engine: mirror observation refused: %s", exc)
        else:
            self._refused = ""

    def sources_status(self) -> dict:
        """Each source's status now, for the frame (age and staleness at this instant)."""
        now, poll = self.wall(), app_setting("MIRROR_POLL_S")
        out = {}
        for name, st in self.sources.items():
            st = dict(st)
            st["age_s"] = None if st["last_ok"] is None else round(now - st["last_ok"], 1)
            if st["state"] == "ok" and st["age_s"] is not None and st["age_s"] > 2 * poll + 5:
                st["state"] = "stale"
            out[name] = st
        return out


def live_driver(**kwargs):
    """The live driver as configured: with ``CLUSTERTWIN_SOURCE=mirror`` it mirrors the real
    cluster through a :class:`MirrorPoller`, else it simulates. ``kwargs`` go to
    :class:`twin.live.driver.EngineDriver`."""
    from twin.live.driver import EngineDriver

    return EngineDriver(mirror=MirrorPoller if app_setting("SOURCE") == "mirror" else None,
                        **kwargs)
