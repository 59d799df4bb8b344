"""AI zones of a given GPU count on chassis (modular) spines, after Meta's RoCE clusters.

Source: Gangidi et al., "RDMA over Ethernet for Distributed AI Training at Meta Scale",
SIGCOMM 2024 (section 3, "AI Zone"), and the Llama 3 report (section 3.3.1): a 24,576-GPU
cluster of 8 zones ("pods") of 3,072 GPUs; a zone is a two-stage Clos, rack training switches
(RTSW, one per rack of 16 GPUs, 192 racks) below modular cluster training switches (CTSW), and
non-blocking inside; zones are joined by aggregator switches (ATSW) with 1:7
oversubscription.  The CTSW is a chassis (Arista 7800-class, up to 576 x 400G ports,
second-hand: unconfirmed), so a zone is not bounded by a 64-port radix as
:func:`~scheduler.fabric.islands.compute_islands` is (1,792 GPUs at radix 64, 1:7).

Construction (a zone of ``G`` GPUs, ``p`` GPUs per leaf, oversubscription ``R`` above it):

* ``L = ceil(G / p)`` leaves, each with ``p`` GPU ports and ``u = p`` uplinks (non-blocking),
  one to each of ``u`` spines;
* each spine has ``L`` down ports and ``round(L / R)`` up ports (at least 1), so the zone is
  ``L : round(L / R)`` (about ``R : 1``) oversubscribed above; ``L`` plus the up ports must fit
  the chassis ``spine_radix``;
* spine ``s`` of every zone joins aggregation plane ``s`` of ``c`` chassis, ``c`` the fewest
  that take the plane's ``zones x up`` ports.

With the defaults (3,072 GPUs, 16 per leaf, 1:7, 576-port chassis): 192 leaves and 16 spines
per zone, 27 uplinks per spine (192 : 27 = 7.1 : 1), and 8 zones on 16 aggregation chassis.
The leaf-uplink count and the chassis size are not published in the paper: assumed.

The fabric has ``kind="island"`` (a zone is an island with a larger spine), so routing,
inventory and reports treat it as they treat islands; ``radix`` is the chassis radix and
``params["leaf_radix"]`` the leaf's.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.fabric.topology import (
    Fabric,
    _int,
    _make,
    _real,
    _round_half_up,
    _tree,
    _tree_bisection,
    _tree_diameter,
)

META_ZONE_GPUS = 3072
"""GPUs per AI zone (Meta, SIGCOMM 2024; Llama 3 report: 3,072-GPU pods)."""

META_GPUS_PER_LEAF = 16
"""GPUs per rack training switch: 192 racks of 16 GPUs per zone (same sources)."""

META_OVERSUBSCRIPTION = 7.0
"""Oversubscription above a zone, 1:7 (same sources)."""

CHASSIS_RADIX = 576
"""Ports of a modular spine or aggregation chassis, 400G (Arista 7800R-class with 576 x 400G:
second-hand, unconfirmed; override per build)."""


def compute_zones(n_zones: int, *, zone_gpus: int = META_ZONE_GPUS,
                  gpus_per_leaf: int = META_GPUS_PER_LEAF,
                  oversubscription: float = META_OVERSUBSCRIPTION,
                  spine_radix: int = CHASSIS_RADIX, port_gbps: float = 400.0,
                  copper_endpoint_links: bool = True) -> Fabric:
    """Build ``n_zones`` zones of ``zone_gpus`` GPUs on chassis spines (module docstring).

    Parameters
    ----------
    n_zones : int
        Zones, >= 1.
    zone_gpus : int, optional
        GPUs per zone (rounded up to whole leaves).
    gpus_per_leaf : int, optional
        GPU ports per leaf; also its uplinks (non-blocking leaves).
    oversubscription : float, optional
        Ratio above the zones, >= 1.
    spine_radix : int, optional
        Ports of a spine chassis and of an aggregation chassis.
    port_gbps : float, optional
        Port speed, Gb/s.
    copper_endpoint_links : bool, optional
        GPU-leaf links are copper DACs inside the rack (Meta's RTSWs: default True).

    Returns
    -------
    Fabric
        ``kind="island"``; ``switch_pod`` is the zone.

    Examples
    --------
    >>> f = compute_zones(8)
    >>> f.n_endpoints, f.summary().switches
    (24576, {'leaf': 1536, 'spine': 128, 'core': 16})
    """
    n_z = _int("n_zones", n_zones)
    g = _int("zone_gpus", zone_gpus)
    p = _int("gpus_per_leaf", gpus_per_leaf)
    r = _real("oversubscription", oversubscription, 1.0)
    k = _int("spine_radix", spine_radix, 4)
    port_gbps = _real("port_gbps", port_gbps, 1e-9)
    leaves = math.ceil(g / p)
    up = max(1, _round_half_up(leaves / r)) if n_z > 1 else 0
    if leaves + max(up, 1) > k:
        raise ValueError(f"a zone of {leaves} leaves at 1:{r:g} needs {leaves + max(up, 1)}-port "
                         f"spines, more than the {k}-port chassis")
    cores = math.ceil(n_z * up / k) if n_z > 1 else 0
    tier, pod, la, lb, lk = _tree([leaves] * n_z, p, p, up, cores, core_kind=3)
    n = n_z * leaves * p
    endpoint_leaf = np.arange(n, dtype=np.int64) // p
    params = {
        "n_islands": n_z, "zones": n_z, "zone_gpus": leaves * p, "island_endpoints": leaves * p,
        "island_leaves": leaves, "gpus_per_leaf": p, "leaf_radix": 2 * p,
        "spine_radix": k, "spine_uplinks": up, "cores_per_plane": cores,
        "oversubscription": float(r),
        "measured_oversubscription": leaves / up if up else 1.0,
        "join": "oversubscribed", "chassis": True,
        "copper_endpoint_links": bool(copper_endpoint_links),
        "bisection_gbps": _tree_bisection(port_gbps, n, lk, 3 if cores else None),
        "diameter": _tree_diameter(endpoint_leaf, pod, bool(cores)),
    }
    return _make("island", n, tier, pod, np.full(tier.shape[0], -1), k, port_gbps,
                 endpoint_leaf, la, lb, lk, params)


def zones_for(endpoints: int, *, zone_gpus: int = META_ZONE_GPUS, **kw) -> Fabric:
    """The fewest zones of ``zone_gpus`` GPUs holding ``endpoints`` GPUs.

    >>> zones_for(24_576).params["zones"]
    8
    """
    endpoints = _int("endpoints", endpoints)
    zone = _int("zone_gpus", zone_gpus)
    p = kw.get("gpus_per_leaf", META_GPUS_PER_LEAF)
    per_zone = math.ceil(zone / p) * p
    return compute_zones(math.ceil(endpoints / per_zone), zone_gpus=zone, **kw)
