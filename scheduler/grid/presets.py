"""The ``grid`` preset: three owned sites of different sizes and generations, two cloud regions
in two jurisdictions, the WAN between them, and a seeded workload whose datasets live at
different places.

Sizes are small on purpose (a few simulated days run in seconds).  Prices are assumptions,
not quotes: energy at 0.05-0.11 $/kWh and PUE 1.1-1.4 (figures.md gives PUE 1.1 hyperscale to
1.5-1.6 industry average); clouds at 3.5-4 $/GPU-hour on demand and 0.09 $/GB egress to the
internet (list-price class of the large providers, assumed); owned-to-owned and into-cloud
traffic carry no egress charge (private lines and free ingress, assumed).
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.grid.jobs import GridJob
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import NodeGroup
from scheduler.hardware.grid_spec import CloudRegionSpec, GridSpec, SiteSpec, WanLinkSpec
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, TrainingJob

_SMALL_FAT_TREE = {"radix": 16}


def grid_spec() -> GridSpec:
    """The ``grid`` preset's places and links."""
    sites = (
        SiteSpec("eu-north", "se-lulea", "EU", (NodeGroup("H100-SXM", 32),), "fat-tree",
                 _SMALL_FAT_TREE, pue=1.1, power_price_per_kwh=0.05, stacks=("cuda",)),
        SiteSpec("eu-west", "fr-paris", "EU", (NodeGroup("A100-SXM4-80GB", 16),), "fat-tree",
                 _SMALL_FAT_TREE, pue=1.4, power_price_per_kwh=0.11, stacks=("cuda",)),
        SiteSpec("us-east", "us-virginia", "US", (NodeGroup("MI300X", 16),), "fat-tree",
                 _SMALL_FAT_TREE, pue=1.25, power_price_per_kwh=0.07, stacks=("rocm",)),
    )
    clouds = (
        CloudRegionSpec("aws", "eu-central-1", "EU", "H100-SXM", 128, 4.0, 1.6, 0.05, 600,
                        ("cuda",)),
        CloudRegionSpec("gcp", "us-central1", "US", "H100-SXM", 128, 3.5, 1.4, 0.05, 600,
                        ("cuda",)),
    )
    links = (
        WanLinkSpec("eu-north", "eu-west", 100.0, 30.0),
        WanLinkSpec("eu-north", "us-east", 40.0, 100.0),
        WanLinkSpec("eu-west", "us-east", 40.0, 80.0),
        WanLinkSpec("aws/eu-central-1", "eu-north", 40.0, 15.0, 0.09, 0.0),
        WanLinkSpec("aws/eu-central-1", "eu-west", 40.0, 10.0, 0.09, 0.0),
        WanLinkSpec("gcp/us-central1", "us-east", 40.0, 20.0, 0.09, 0.0),
        WanLinkSpec("aws/eu-central-1", "gcp/us-central1", 20.0, 90.0, 0.09, 0.09),
    )
    return GridSpec("grid", sites, clouds, links)


DATASETS = (
    # name, where it lives, GB, who may process it (sovereignty)
    ("web-crawl", "eu-north", 20_000.0, ()),
    ("code", "eu-west", 6_000.0, ()),
    ("speech", "us-east", 12_000.0, ()),
    ("vision", "aws/eu-central-1", 10_000.0, ()),
    ("health-eu", "eu-west", 4_000.0, ("EU",)),
    ("finance-us", "gcp/us-central1", 3_000.0, ("US",)),
)
"""The preset's datasets: where each lives, its size and any jurisdiction it may not leave."""

_GANGS = (8, 16, 32, 64)
_GANG_P = (0.35, 0.3, 0.2, 0.15)
_PARAMS_B = {8: 7.0, 16: 13.0, 32: 34.0, 64: 70.0}
_BYTES_PER_PARAM = 14.0  # weights, gradients and Adam moments (figures.md)


def grid_workload(days: float, seed: int, *, load: float = 1.0) -> tuple[GridJob, ...]:
    """Training jobs arriving over ``days`` (Poisson), each on one of :data:`DATASETS`.

    Compute is sized on H100s (median 4 h, log-normal, 0.5-24 h); a third of the jobs run on
    CUDA or ROCm, the rest on CUDA only.  ``load`` multiplies the arrival rate (1: about
    three jobs an hour, roughly the owned sites' capacity).
    """
    if not (days > 0 and math.isfinite(days)) or not (load > 0 and math.isfinite(load)):
        raise ValueError("a grid workload needs days > 0 and load > 0")
    rng = np.random.default_rng([seed, 30])
    h100 = get("H100-SXM").bf16_tflops * 1e12 * DEFAULT_EFFICIENCY
    rate_per_s = 3.0 * load / 3600.0
    jobs, t, k = [], 0.0, 0
    while True:
        t += float(rng.exponential(1.0 / rate_per_s))
        if t >= days * 86400.0:
            break
        gpus = int(rng.choice(_GANGS, p=_GANG_P))
        hours = float(np.clip(rng.lognormal(math.log(4.0), 0.8), 0.5, 24.0))
        name, home, gb, allowed = DATASETS[int(rng.integers(len(DATASETS)))]
        stacks = ("cuda", "rocm") if rng.random() < 1 / 3 else ("cuda",)
        params = _PARAMS_B[gpus]
        job = TrainingJob(k, f"g{k:04d}", f"team-{name}", round(t, 3), gpus,
                          gpus * h100 * hours * 3600.0, params_b=params,
                          checkpoint_gb=params * _BYTES_PER_PARAM,
                          checkpoint_interval_s=3600.0)
        jobs.append(GridJob(job, name, home, gb, allowed, stacks))
        k += 1
    return tuple(jobs)


GRID_PRESETS = {"grid": grid_spec}
"""Grid presets by name: a function returning the :class:`GridSpec`."""
