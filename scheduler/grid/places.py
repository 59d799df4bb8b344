"""A grid's places: one engine each (an owned site or a cloud region), their plans and prices.

An owned site is a cluster of its own, planned from its :class:`SiteSpec` by
:func:`scheduler.hardware.cluster.plan_cluster` (or read from the inventory); a cloud region is
a pool of ``quota_gpus`` GPUs of its model on a small non-blocking fat-tree, billed per GPU-hour
a gang holds it plus the start-up delay of every gang started there (instances are billed
from boot).  Owned sites pay energy: a GPU slot draws its accelerator's power linear in use
plus the host's share (:mod:`scheduler.hardware.power`), times the site's PUE, at the site's
power price; down GPUs draw nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.engine import Engine
from scheduler.hardware.cluster import ClusterPlan, NodeGroup, StorageSpec, plan_cluster
from scheduler.hardware.grid_spec import CloudRegionSpec, GridSpec, SiteSpec
from scheduler.hardware.power import gpu_power_w, host_power_w
from scheduler.model.job_run import PENDING, QUEUED
from scheduler.model.ledger import INDEX
from scheduler.workload.jobs import Workload

CLOUD_RADIX = 16
"""Switch radix of a cloud region's fabric (a radix-16 fat-tree holds 1,024 GPUs)."""

CENTRAL_GB_S_PER_GPU = 1.0
"""A site without storage of its own gets a central tier at the vendors' rule of thumb of
1 GB/s read per GPU and half that for writes (as :mod:`scheduler.presets` sizes its clusters)."""

_UNBILLED = ("idle", "fragmented", "hot_spare", "down_for_repair")
"""Ledger categories in which a cloud GPU is not held by a gang (not billed)."""


def _default_storage(name: str, gpus: int) -> tuple[StorageSpec, ...]:
    return (StorageSpec(f"{name}-pfs", "central", 4.0 * gpus, CENTRAL_GB_S_PER_GPU * gpus,
                        CENTRAL_GB_S_PER_GPU * gpus / 2, True),)


def site_plan(site: SiteSpec) -> ClusterPlan:
    """The cluster of an owned site of a preset (one that names its node groups)."""
    if not site.groups:
        raise ValueError(f"site {site.name} names no node groups: give its plan (the "
                         "inventory's cluster) instead")
    from scheduler.hardware.catalog import get
    gpus = sum(g.nodes * get(g.model).per_node for g in site.groups)
    return plan_cluster(site.name, site.groups, fabric_kind=site.fabric_kind,
                        fabric_kw=dict(site.fabric_kw),
                        storage=site.storage or _default_storage(site.name, gpus))


def cloud_plan(cloud: CloudRegionSpec) -> ClusterPlan:
    """A cloud region's pool: ``quota_gpus`` GPUs (whole nodes) on a small fat-tree."""
    from scheduler.hardware.catalog import get
    per_node = get(cloud.model).per_node
    nodes = cloud.quota_gpus // per_node
    if nodes < 1:
        raise ValueError(f"cloud region {cloud.place}: a quota of {cloud.quota_gpus} GPUs is "
                         f"less than one node of {per_node} {cloud.model}")
    return plan_cluster(cloud.place, (NodeGroup(cloud.model, nodes),), fabric_kind="fat-tree",
                        fabric_kw={"radix": CLOUD_RADIX},
                        storage=_default_storage(cloud.place, nodes * per_node))


def plans_from_spec(spec: GridSpec) -> dict[str, ClusterPlan]:
    """One plan per place of a preset's grid (sites by their groups, clouds by quota)."""
    spec.check()
    plans = {s.name: site_plan(s) for s in spec.sites}
    plans.update({c.place: cloud_plan(c) for c in spec.clouds})
    return plans


def check_plans(spec: GridSpec, plans: dict) -> dict[str, ClusterPlan]:
    """Every place's plan: the given ones (the inventory hands its owned sites' plans), and
    for the rest a cloud region's pool (:func:`cloud_plan`) or a preset site's cluster
    (:func:`site_plan`).  A plan for a place the grid lacks, or one that is not a plan, or
    a site with neither plan nor node groups, is refused in one line."""
    places = spec.places()
    extra = [str(p) for p in plans if p not in places]
    if extra:
        raise ValueError(f"grid {spec.name}: plans must name places of the grid; not a "
                         f"place: {', '.join(extra)}")
    for p, plan in plans.items():
        if not isinstance(plan, ClusterPlan):
            raise ValueError(f"grid {spec.name}: the plan of {p} is not a ClusterPlan")
    out = {}
    for s in spec.sites:
        out[s.name] = plans[s.name] if s.name in plans else site_plan(s)
    for c in spec.clouds:
        out[c.place] = plans[c.place] if c.place in plans else cloud_plan(c)
    return out


@dataclass
class Place:
    """One site or cloud region of a running grid: its engine and books."""

    name: str
    spec: SiteSpec | CloudRegionSpec
    engine: Engine
    dark: bool = False
    gangs_started: int = 0          # cloud: gangs that paid a start-up delay here
    startup_gpu_s: float = 0.0      # cloud: GPU-seconds of start-up billed
    dark_since: float | None = None
    dark_s: float = 0.0
    data_move_s: float = 0.0        # time jobs submitted here waited for their data
    spot: bool = False              # cloud: runs on spot instances (price and interruptions)
    spot_interruptions: int = 0
    runs: dict = field(default_factory=dict)   # engine run index -> grid job name
    supply: dict = field(default_factory=dict)  # cut model -> its cut (scheduler.grid.supply)
    supply_cut_s: float = 0.0       # hours of supply cut here, s (ended cuts)
    refused_gpu_s: float = 0.0      # GPU-seconds of capacity the cuts withheld (ended cuts)

    @property
    def is_cloud(self) -> bool:
        return isinstance(self.spec, CloudRegionSpec)

    @property
    def jurisdiction(self) -> str:
        return self.spec.jurisdiction

    @property
    def stacks(self) -> tuple[str, ...]:
        return self.spec.stacks

    @property
    def startup_s(self) -> float:
        return float(self.spec.startup_s) if self.is_cloud else 0.0

    def gpus(self) -> int:
        return int(self.engine.state.n_gpus)

    def capacity(self, job) -> tuple[int, int]:
        """(model index, GPUs) of the largest pool here that ``job``'s requirement accepts
        (-1, 0 if none)."""
        plan = self.engine.plan
        best = (-1, 0)
        for m, model in enumerate(plan.models):
            if job.requirement.accepts(model):
                n = int(plan.node_gpus[(plan.node_model == m) & ~plan.node_spare].sum())
                if n > best[1]:
                    best = (m, n)
        return best

    @property
    def cloud_price(self) -> float:
        """A cloud's price per GPU-hour: spot where the grid runs on spot, else on demand."""
        return float(self.spec.spot_per_gpu_hour if self.spot
                     else self.spec.on_demand_per_gpu_hour)

    def price_per_gpu_hour(self, model: int) -> float:
        """What one busy GPU-hour of ``model`` costs here, $ (energy or the cloud's price)."""
        if self.is_cloud:
            return self.cloud_price
        acc = self.engine.plan.models[model]
        kw = (gpu_power_w(acc, 1.0) + host_power_w(1.0)) / 1000.0
        return kw * self.spec.pue * self.spec.power_price_per_kwh

    def expected_wait_s(self, gpus: int, model: int, inbound_gpus: int) -> float:
        """When a gang of ``gpus`` could start here, from now, s: enough GPUs of ``model``
        free for it and for every gang queued (or on its way) ahead of it, as the running
        gangs end (first come, first served: backfill can only do better).  A queue longer
        than the pool is drained as a fluid: the GPU-seconds ahead over the pool's GPUs."""
        e = self.engine
        free = int(e.state.free_counts()[0][model])
        queued = [r for r in e.runs if r.state in (QUEUED, PENDING) and model in r.models]
        need = gpus + inbound_gpus + sum(r.gpus for r in queued)
        if need <= free:
            return 0.0
        running = [r for r in e.running.values() if r.model == model]
        capacity = self.capacity_of(model)
        if need <= capacity:
            for end, n in sorted((r.expected_end, r.gpus) for r in running):
                free += n
                if need <= free:
                    return max(0.0, end - e.now)
        peak = e.plan.models[model].bf16_tflops * 1e12
        ahead_gpu_s = (sum(r.gpus * max(0.0, r.expected_end - e.now) for r in running)
                       + sum(r.remaining_flops / (peak * r.spec.efficiency) for r in queued))
        return ahead_gpu_s / max(capacity, 1)

    def capacity_of(self, model: int) -> int:
        plan = self.engine.plan
        return int(plan.node_gpus[(plan.node_model == model) & ~plan.node_spare].sum())

    # ----------------------------------------------------------------- books
    def cost(self) -> float:
        """$ spent here up to now: energy (site) or GPU-hours held plus start-ups (cloud)."""
        led = self.engine.horizon_ledger()
        gpu_s = led.gpu_s
        if self.is_cloud:
            busy = float(gpu_s.sum() - sum(gpu_s[INDEX[c]].sum() for c in _UNBILLED))
            return (busy + self.startup_gpu_s) / 3600.0 * self.cloud_price
        kwh = 0.0
        idle_rows = [INDEX[c] for c in ("idle", "fragmented", "hot_spare")]
        down = INDEX["down_for_repair"]
        for m, acc in enumerate(self.engine.plan.models):
            idle = float(gpu_s[idle_rows, m].sum())
            busy = float(gpu_s[:, m].sum()) - idle - float(gpu_s[down, m])
            kwh += (busy * (gpu_power_w(acc, 1.0) + host_power_w(1.0))
                    + idle * (gpu_power_w(acc, 0.0) + host_power_w(0.0))) / 3.6e6
        return kwh * self.spec.pue * self.spec.power_price_per_kwh


def build_places(spec: GridSpec, plans: dict, *, seed: int, engine_options: dict,
                 spot: bool = False) -> dict[str, Place]:
    """One engine per place, each seeded apart from the others (same seed, same grid);
    with ``spot``, every cloud region that offers spot runs on it."""
    specs = {s.name: s for s in spec.sites} | {c.place: c for c in spec.clouds}
    out = {}
    for i, name in enumerate(spec.places()):
        engine = Engine(plans[name], Workload(jobs=()), seed=seed * 1009 + i, **engine_options)
        out[name] = Place(name, specs[name], engine, spot=spot and isinstance(
            specs[name], CloudRegionSpec) and specs[name].spot_per_gpu_hour is not None)
    return out
