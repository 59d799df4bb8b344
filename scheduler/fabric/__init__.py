"""Interconnect layer: scale-out fabric builders (fat-tree, Dragonfly, Dragonfly+, rail, islands,
chassis zones), NVLink.

Every builder returns a columnar :class:`~scheduler.fabric.topology.Fabric`; use
:func:`build_fabric` to pick one by name.
"""

from __future__ import annotations

import numpy as np

from scheduler.fabric.dragonfly import (
    dragonfly_plus,
    dragonfly_plus_for,
    dragonfly_route,
    max_groups,
    plain_dragonfly,
    plain_dragonfly_for,
)
from scheduler.fabric.fattree import fat_tree, fat_tree_capacity, fat_tree_for, leaf_split
from scheduler.fabric.islands import compute_islands, island_shape, islands_for, max_islands
from scheduler.fabric.nvlink import HGX_B200, HGX_H100, NVL72, NVLinkDomain, nvlink_domains
from scheduler.fabric.rail import rail_capacity, rail_optimized, rail_optimized_for
from scheduler.fabric.topology import (
    KINDS,
    LINK_KINDS,
    TIERS,
    Fabric,
    FabricSummary,
    _int,
    _radix,
)
from scheduler.fabric.zones import compute_zones, zones_for

__all__ = [
    "HGX_B200", "HGX_H100", "KINDS", "LINK_KINDS", "NVL72", "TIERS", "Fabric", "FabricSummary",
    "NVLinkDomain", "build_fabric", "compute_islands", "compute_zones",
    "dragonfly_plus", "dragonfly_plus_for", "dragonfly_route",
    "endpoint_pod", "fat_tree", "fat_tree_capacity", "fat_tree_for", "island_shape",
    "islands_for", "leaf_split", "max_groups", "max_islands", "nvlink_domains",
    "plain_dragonfly", "plain_dragonfly_for",
    "rail_capacity", "rail_optimized", "rail_optimized_for", "zones_for",
]


def build_fabric(kind: str, *, endpoints: int | None = None, radix: int | None = None,
                 **kw) -> Fabric:
    """Build a fabric by kind.

    Parameters
    ----------
    kind : {"fat-tree", "dragonfly+", "rail", "island", "dragonfly"}
    endpoints : int, optional
        Size the fabric to hold at least this many endpoints (GPU NIC ports).
    radix : int, optional
        Switch radix (default 64).  Given alone, builds the full-size fabric: ``k^3/4``
        hosts for a fat-tree, ``k^2/4 (k^2/4 + 1)`` for Dragonfly+, ``k * su_per_group`` SUs
        for rail (``su_per_group`` = 4 at radix 64, fewer for small radices),
        the most islands for island.
    **kw
        Passed to the builder (``oversubscription``, ``port_gbps``, ``join``, ...).

    Raises
    ------
    ValueError
        Unknown kind, non-integer / non-positive ``endpoints``, bad radix, a size above the
        kind's capacity, or a keyword the builder does not take; one-line message.

    Examples
    --------
    >>> build_fabric("fat-tree", radix=8).n_endpoints
    128
    >>> build_fabric("dragonfly+", endpoints=100, radix=8).n_endpoints
    112
    """
    if kind not in KINDS:
        raise ValueError(f"unknown fabric kind {kind!r}; choose one of: {', '.join(KINDS)}")
    if endpoints is None and radix is None:
        raise ValueError("build_fabric needs endpoints, radix or both")
    r = 64 if radix is None else _radix(radix)
    if endpoints is not None:
        endpoints = _int("endpoints", endpoints)
    try:
        if kind == "fat-tree":
            if endpoints is None:
                return fat_tree(r, **kw)
            return fat_tree_for(endpoints, radix=r, **kw)
        if kind == "dragonfly+":
            if endpoints is None:
                return dragonfly_plus(r, **kw)
            return dragonfly_plus_for(endpoints, radix=r, **kw)
        if kind == "rail":
            if endpoints is None:
                # the largest spine group whose leaves fit one link to each spine
                rails = kw.get("gpus_per_node", 8)
                kw.setdefault("su_per_group", max(1, min(4, (r // 2) // rails)))
                kw.setdefault("nodes_per_su", r // 2)
                n_su = r * kw["su_per_group"]
                return rail_optimized(n_su, radix=r, **kw)
            return rail_optimized_for(endpoints, radix=r, **kw)
        if kind == "dragonfly":
            if endpoints is None:
                return plain_dragonfly(kw.pop("p", 16), **kw)
            return plain_dragonfly_for(endpoints, **kw)
        if "zone_gpus" in kw or "spine_radix" in kw or "n_zones" in kw:
            if endpoints is None:
                return compute_zones(kw.pop("n_zones", 8), **kw)
            kw.pop("n_zones", None)
            return zones_for(endpoints, **kw)
        if endpoints is None:
            return compute_islands(max_islands(r, kw.get("oversubscription", 7.0),
                                               kw.get("join", "oversubscribed")), radix=r, **kw)
        return islands_for(endpoints, radix=r, **kw)
    except TypeError as exc:
        raise ValueError(f"bad option for a {kind} fabric: {exc}") from None


def endpoint_pod(fabric: Fabric) -> np.ndarray:
    """Pod (fat-tree pod, Dragonfly+ group, rail SU, island) of every endpoint's leaf.

    >>> endpoint_pod(fat_tree(4)).tolist()
    [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    """
    return fabric.switch_pod[fabric.endpoint_leaf]
