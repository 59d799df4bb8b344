"""The engine a live driver runs, in a thread of its own, and what it runs.

:class:`EngineHost` owns the :class:`scheduler.engine.Engine` (replaced whole by a re-plan or a
restore), the one worker thread every piece of engine work runs in (stepping, frames,
snapshots, commands: the engine is not shared, and the event loop that serves WebSockets stays
responsive), and the run's identity: the preset, the seed, the inventory it runs (read through
the one adapter, :class:`twin.inventory.replanning.Inventory`) and the cluster's failure
profile. It builds an engine afresh (a simulation of the inventory, or a mirror of it) or
loads one from a snapshot.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from concurrent.futures import ThreadPoolExecutor

from scheduler.presets import get_preset
from scheduler.reliability.profiles import DEFAULT as PROFILE_DEFAULT
from scheduler.reliability.profiles import PROFILES
from scheduler.simulate import Scenario
from scheduler.snapshot import loads as engine_loads
from twin import app_setting
from twin.inventory.models import Cluster
from twin.inventory.replanning import Inventory
from twin.live.driver_inventory import statuses_apply
from twin.live.history_warmup import warm_up
from twin.live.policy import live_policy

logger = logging.getLogger("twin.live.driver")

SCENARIO_DAYS = 366
"""The live scenario's horizon, days of simulated time."""


def failure_profile_read(inv: Inventory | None) -> str:
    """The running cluster's failure profile (the default without a cluster)."""
    name = (Cluster.objects.filter(pk=inv.cluster_id).values_list("failure_profile", flat=True)
            .first() if inv is not None else None)
    if name and name not in PROFILES:
        logger.warning("cluster failure profile %r is not shipped; the live engine draws %s",
                       name, PROFILE_DEFAULT)
    return name if name in PROFILES else PROFILE_DEFAULT


def _collector_off_long_lived() -> None:
    """Keep Python's cyclic garbage collector off everything alive now, the engine first.

    An engine is millions of objects that live as long as it runs: every full collection
    walked them all, at noc-4k 0.8-0.9 s with the serving loop stopped, about once a minute,
    and every dashboard's frame was late by as much (issue 28). Unfrozen and collected first,
    so the cycles of an engine this one replaces are freed before the rest is frozen (once
    per build, restore or re-plan: one such stop then)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class EngineHost:
    """The engine, its thread and what it runs.

    Parameters
    ----------
    preset : str or None
        The scenario (``None`` until the driver starts: the cluster's, else the default).
    seed : int
    fresh : callable, optional
        Builds a fresh engine instead of a simulation of the inventory (a mirror's
        ``engine_build``).
    """

    def __init__(self, *, preset: str | None, seed: int, fresh=None):
        self.preset = preset
        self.seed = seed
        self.fresh = fresh
        self._engine = None
        self.inv: Inventory | None = None  # what runs (None: no cluster, the preset runs)
        self.failure_profile = PROFILE_DEFAULT  # the cluster's, read at start
        self.warm_history: list = []  # a fresh engine's warm-up samples, not yet stored
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="twin-engine")

    async def call(self, fn, *args, **kwargs):
        """Run ``fn`` in the engine's own thread (one at a time: the engine is not shared)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False)

    @property
    def engine(self):
        """The engine that runs (None before the first build)."""
        return self._engine

    @engine.setter
    def engine(self, engine) -> None:
        self._engine = engine
        if engine is not None:
            _collector_off_long_lived()

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
        """What the stored event and command logs are kept under: the run's lineage (the
        inventory it started on; re-plans keep it), else the inventory, else the preset run."""
        lineage = self.engine.lineage if self.engine is not None else None
        return lineage or self.inventory or f"preset:{self.preset}:{self.seed}"

    def load_or_build(self, data: bytes | None):
        """The engine stored in ``data`` (a snapshot), else a fresh one (in the engine's
        thread: building a large cluster takes a while)."""
        if data is not None:
            try:
                return engine_loads(data)
            except Exception:
                logger.exception("live engine: the stored snapshot cannot be loaded; rebuilding")
        if self.fresh is not None:
            return self.fresh()
        policy = live_policy()  # checked at start-up (clustertwin.E002)
        engine, _ = Scenario(preset=self.preset, days=SCENARIO_DAYS, seed=self.seed,
                             failures=True, physics=True, policy=policy.name,
                             slurm_conf=policy.slurm_conf_path,
                             failure_profile=self.failure_profile).engine(plan=self.plan)
        # the run's name: its inventory and cluster (a rebuilt look-alike is another twin)
        engine.lineage = f"{self.inventory}:{self.inv.cluster_id}" if self.inv else None
        statuses_apply(engine, self.inv)
        # issue 16: opens on a busy fleet; issue 27: with the warm-up's history
        self.warm_history = warm_up(engine, until=get_preset(self.preset).warmup_s,
                                    step=app_setting("HISTORY_STEP_S"))
        return engine
