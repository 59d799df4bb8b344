"""What a grid is made of: sites, cloud regions and the WAN between them (issue 30).

The inventory adapter (``twin/inventory``) and the ``grid`` preset both produce a
:class:`GridSpec` and one :class:`~scheduler.hardware.cluster.ClusterPlan` per place; the core
(:mod:`scheduler.grid`) runs one engine per place, in step on one clock, with the grid's
placement, WAN transfers and continuity on top (a federation: each site keeps its own fabric,
storage, power and cooling models unchanged, and its own pages).  A preset's site carries
its ``groups``/``fabric_kind``; a site read from the inventory is an inventory cluster,
named by ``cluster``.  Places are named: a site by its
``name``, a cloud region by ``provider/region`` (:attr:`CloudRegionSpec.place`).  Every place
has a ``jurisdiction`` (``"EU"``, ``"US"`` ...): a job's allowed regions (sovereignty) name
places or jurisdictions.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SiteSpec:
    """An owned site: its own fabric, storage, power and cooling (a cluster of its own).

    ``groups``/``fabric_kind``/``fabric_kw``/``storage`` are what
    :func:`scheduler.hardware.cluster.plan_cluster` takes for one cluster.
    """

    name: str
    region: str
    jurisdiction: str
    groups: tuple = ()                    # tuple[NodeGroup, ...]
    fabric_kind: str = "fat-tree"
    fabric_kw: dict = field(default_factory=dict)
    storage: tuple = ()                   # tuple[StorageSpec, ...]
    pue: float = 1.2
    power_price_per_kwh: float = 0.08     # owned sites pay energy, not GPU-hours
    stacks: tuple[str, ...] = ()          # software stacks it runs (empty: any)
    cluster: str = ""                     # the inventory cluster that is this site, if any


@dataclass(frozen=True)
class CloudRegionSpec:
    """A public-cloud region's GPU pool: quota, prices, spot risk, start-up delay."""

    provider: str
    region: str
    jurisdiction: str
    model: str                            # catalog accelerator name
    quota_gpus: int
    on_demand_per_gpu_hour: float
    spot_per_gpu_hour: float | None = None          # None: no spot offer
    spot_interruptions_per_hour: float = 0.0         # per spot instance (node) hour
    startup_s: int = 600
    stacks: tuple[str, ...] = ()

    @property
    def place(self) -> str:
        return f"{self.provider}/{self.region}"


@dataclass(frozen=True)
class WanLinkSpec:
    """A WAN link between two places (site names or ``provider/region``), both directions.

    ``egress_per_gb`` is charged for bytes leaving ``a`` towards ``b`` and, unless
    ``egress_back_per_gb`` is given, the same for ``b`` towards ``a``.
    """

    a: str
    b: str
    gbps: float
    latency_ms: float
    egress_per_gb: float = 0.0
    egress_back_per_gb: float | None = None


@dataclass(frozen=True)
class GridSpec:
    name: str
    sites: tuple[SiteSpec, ...]
    clouds: tuple[CloudRegionSpec, ...] = ()
    links: tuple[WanLinkSpec, ...] = ()

    def places(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sites) + tuple(c.place for c in self.clouds)

    def check(self) -> None:
        """Refuse a grid that cannot be run, with one clear message."""
        names = self.places()
        if not self.sites:
            raise ValueError(f"grid {self.name}: at least one owned site is needed")
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"grid {self.name}: place names repeat: {', '.join(sorted(dup))}")
        for link in self.links:
            for end in (link.a, link.b):
                if end not in names:
                    raise ValueError(f"grid {self.name}: WAN link {link.a}-{link.b} names "
                                     f"{end!r}, which is no site or cloud region")
            if link.a == link.b:
                raise ValueError(f"grid {self.name}: WAN link {link.a}-{link.b} joins a place "
                                 "to itself")
            if link.gbps <= 0 or link.latency_ms < 0 or link.egress_per_gb < 0:
                raise ValueError(f"grid {self.name}: WAN link {link.a}-{link.b}: bandwidth must "
                                 "be positive, latency and egress price not negative")
        for c in self.clouds:
            if c.quota_gpus <= 0:
                raise ValueError(f"grid {self.name}: cloud region {c.place}: quota must be "
                                 "positive")
