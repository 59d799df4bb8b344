"""The live driver as a mirror (``CLUSTERTWIN_SOURCE=mirror``): it follows a real cluster.

A mixin of :class:`twin.live.driver.EngineDriver`.  The engine runs the inventory's cluster with no
workload of its own, no failure processes and its scheduler held
(:func:`scheduler.control.mirror.mirror_hold`); its clock is the wall clock (``t`` = wall
seconds since the mirror began).  Every ``MIRROR_POLL_S`` the sources are read in a thread of
their own (a slow or dead source never holds up a frame): Slurm (``sinfo/squeue/sacct --json``
or slurmrestd) and, when ``PROMETHEUS_URL`` is set, the DCGM exporter's series through
Prometheus.  What was read is mapped to engine ids (:mod:`twin.mirror.follow`) and applied
between two steps (:func:`scheduler.control.mirror.observe`).

Each source has a status in every frame (``frame["sources"]``): ``ok``, ``stale`` (the last
good read is older than two poll intervals) or ``error`` with the error's one line, the last
good read's wall time and age, and what could not be mapped.  When a source fails the twin
keeps the last state it read and says how old it is; nothing is invented.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from scheduler.control.mirror import mirror_hold, observe
from scheduler.engine import Engine
from scheduler.workload.jobs import Workload
from twin.config.conf import app_setting

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
                      timeout=app_setting("MIRROR_TIMEOUT_S"))


def _prometheus_read():
    from twin.mirror.prom_source import prom_view
    return prom_view(app_setting("PROMETHEUS_URL"), timeout=app_setting("MIRROR_TIMEOUT_S"),
                     token=app_setting("PROMETHEUS_TOKEN") or None)


class MirrorFollowing:
    """Needs ``self.engine``, ``self.inv``, ``self.seed``, ``self._in_engine`` and a
    ``self.wall`` clock (epoch seconds)."""

    readers = {"slurm": _slurm_read, "prometheus": _prometheus_read}

    @property
    def mirroring(self) -> bool:
        return app_setting("SOURCE") == "mirror"

    def _mirror_init(self) -> None:
        self._poll_task: asyncio.Task | None = None
        self._last_poll: float | None = None
        self._hosts = None
        self._source_events: list[tuple[str, str]] = []  # (source, error or "" when back)
        self.sources = {name: {"state": "waiting", "last_ok": None, "last_try": None,
                               "age_s": None, "error": "", "read_s": None, "problems": {}}
                        for name in self._sources_used()}

    def _sources_used(self) -> tuple[str, ...]:
        return ("slurm",) + (("prometheus",) if app_setting("PROMETHEUS_URL") else ())

    def _mirror_build(self):
        """A fresh mirror engine of the inventory's cluster (its clock starts now)."""
        if self.inv is None:
            raise MirrorError()
        engine = Engine(self.plan, Workload(jobs=()), seed=self.seed, physics=True)
        mirror_hold(engine).origin = self.wall()
        engine.lineage = f"mirror:{self.inventory}:{self.inv.cluster_id}"
        return engine

    async def _mirror_refuse(self, cmd) -> None:
        """Speed, pause and drills act on a simulation; a mirror follows the real clock and
        the real cluster (a drill is a what-if from now)."""
        logger.warning("live engine: %s refused: the twin mirrors a real cluster", cmd.name)
        if cmd.name == "drill":
            from channels.db import database_sync_to_async

            from twin.control import services
            await database_sync_to_async(services.drill_outcome_record)(
                drill_id=cmd.drill_id, applied=False, t_sim=None,
                outcome={"error": "the live twin mirrors a real cluster: run the drill as a "
                                  "what-if from now"})

    def _mirror_advance_s(self) -> float:
        """Simulated seconds to advance: up to the wall clock (a mirror runs in real time)."""
        origin = getattr(self.engine.mirror, "origin", None)
        if origin is None:
            self.engine.mirror.origin = origin = self.wall() - self.engine.now
        return max(0.0, self.wall() - origin - self.engine.now)

    async def _mirror_follow(self) -> None:
        """Start a poll when one is due; apply a finished one (between two steps)."""
        task = self._poll_task
        if task is not None and task.done():
            self._poll_task = None
            try:
                reads = task.result()
            except Exception:  # a reader's bug: the sources' status says it, the engine runs
                logger.exception("live engine: mirror poll failed")
                reads = {}
            await self._mirror_apply(reads)
        now = self.clock()
        if self._poll_task is None and (self._last_poll is None or now - self._last_poll
                                        >= app_setting("MIRROR_POLL_S")):
            self._last_poll = now
            self._poll_task = asyncio.create_task(asyncio.to_thread(self._mirror_read))

    def _mirror_read(self) -> dict:
        """Read every source (in a worker thread); a failure is that source's status."""
        out = {}
        for name in self.sources:
            started = self.wall()
            status = self.sources[name]
            status["last_try"] = started
            try:
                out[name] = self.readers[name]()
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

    async def _mirror_apply(self, reads: dict) -> None:
        from twin.mirror.follow import HostIndex, observation
        if self._hosts is None or len(self._hosts.hostnames) != self.plan.n_nodes:
            from channels.db import database_sync_to_async

            from twin import models as m
            cluster = await database_sync_to_async(
                m.Cluster.objects.get)(pk=self.inv.cluster_id)
            self._hosts = await database_sync_to_async(HostIndex.of)(cluster)
        events, self._source_events = list(self._source_events), []
        hosts = self._hosts

        def apply():  # in the engine's thread: mapping 100k GPUs takes a while
            for name, message in events:
                self.engine.kernel.log("source", f"{name}: {message}" if message
                                       else f"{name}: reachable again", component=name)
            obs, problems = observation(reads.get("slurm"), reads.get("prometheus"), hosts)
            for name in reads:
                self.sources[name]["problems"] = problems.get(name, {})
            return observe(self.engine, obs)

        try:
            await self._in_engine(apply)
        except ValueError as exc:
            logger.warning("live engine: mirror observation refused: %s", exc)
            for name in reads:
                self.sources[name].update(state="error", error=f"refused: {exc}")

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
