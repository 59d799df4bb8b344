"""Small hand-built grids for the grid tests (no preset): sites of a few H100 nodes."""

from __future__ import annotations

from scheduler.grid.federation import Grid
from scheduler.grid.jobs import GridJob
from scheduler.grid.places import plans_from_spec
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import NodeGroup
from scheduler.hardware.grid_spec import GridSpec, SiteSpec, WanLinkSpec
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, TrainingJob

HOUR = 3600.0
H100_RATE = get("H100-SXM").bf16_tflops * 1e12 * DEFAULT_EFFICIENCY
"""FLOP/s of one H100 at the default kernel efficiency: ``hours`` of work below are on H100s."""


def site(name: str, nodes: int = 1, *, jurisdiction: str = "EU", price: float = 0.1,
         stacks: tuple[str, ...] = ()) -> SiteSpec:
    return SiteSpec(name, name, jurisdiction, (NodeGroup("H100-SXM", nodes),), "fat-tree",
                    {"radix": 8}, power_price_per_kwh=price, stacks=stacks)


def link(a: str, b: str, gbps: float = 10.0, ms: float = 0.0, egress: float = 0.0):
    return WanLinkSpec(a, b, gbps, ms, egress)


def gjob(k: int, *, gpus: int = 8, hours: float = 1.0, submit_h: float = 0.0,
         dataset: str = "", data_site: str = "", dataset_gb: float = 0.0,
         allowed: tuple[str, ...] = (), stacks: tuple[str, ...] = (),
         checkpoint_gb: float = 0.0) -> GridJob:
    job = TrainingJob(k, f"j{k}", "t", submit_h * HOUR, gpus, gpus * H100_RATE * hours * HOUR,
                      checkpoint_gb=checkpoint_gb, checkpoint_interval_s=HOUR)
    return GridJob(job, dataset, data_site, dataset_gb, allowed, stacks)


def grid(sites, links=(), jobs=(), **kw) -> Grid:
    spec = GridSpec("test", tuple(sites), (), tuple(links))
    return Grid(spec, plans_from_spec(spec), jobs, **kw)
