"""Compute islands: non-blocking leaf/spine blocks joined by an oversubscribed top layer.

After Meta's RoCE training clusters (Gangidi et al., "RDMA over Ethernet for Distributed AI
Training at Meta Scale", SIGCOMM 2024): GPUs sit in AI zones that are non-blocking inside
(rack switch to cluster switch), and zones are joined by an aggregation layer that is
oversubscribed (the paper's figure is 1:7; Meta's zones hold a few thousand GPUs on chassis
spines).  Here every switch has the same radix ``k``, so an island is a two-level block:

* ``d = round(k R / (R + 1))`` leaves (``R`` the oversubscription above the island), each with
  ``k/2`` GPU ports and one uplink to each of ``k/2`` spines;
* each spine has ``d`` down ports (one per leaf) and ``u = k - d`` up ports; the island is
  non-blocking inside and ``d : u`` (about ``R : 1``) oversubscribed above.
  Radix 64, R = 7: 56 leaves, 32 spines, 1,792 GPUs per island, 56 : 8 = 7 : 1.

``join="oversubscribed"`` (default): spine ``s`` of every island joins core plane ``s`` of
``c`` cores (``c`` the smallest divisor of ``u`` with ``c * k >= islands * u``); at most ``k``
islands (radix 64, R = 7: 114,688 GPUs).  ``join="dragonfly+"``: islands are joined all-to-all
by spine-to-spine global links as in Dragonfly+ (see :mod:`scheduler.fabric.dragonfly`); at
most ``k/2 * u + 1`` islands.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.fabric.topology import (
    Fabric,
    _divisor_at_least,
    _global_links,
    _group_bisection,
    _int,
    _make,
    _radix,
    _real,
    _round_half_up,
    _tree,
    _tree_bisection,
    _tree_diameter,
)

JOINS = ("oversubscribed", "dragonfly+")


def island_shape(radix: int = 64, oversubscription: float = 7.0) -> tuple[int, int]:
    """Spine ports down (= leaves per full island) and up for an oversubscription ratio.

    >>> island_shape(64, 7.0)
    (56, 8)
    """
    k = _radix(radix)
    r = _real("oversubscription", oversubscription, 1.0)
    down = min(max(_round_half_up(k * r / (r + 1.0)), k // 2), k - 1)
    return down, k - down


def max_islands(radix: int = 64, oversubscription: float = 7.0,
                join: str = "oversubscribed") -> int:
    """Most islands a join can hold: ``k`` (oversubscribed) or ``k/2 * u + 1`` (dragonfly+).

    >>> max_islands(64), max_islands(64, join="dragonfly+")
    (64, 257)
    """
    _, up = island_shape(radix, oversubscription)
    if join not in JOINS:
        raise ValueError(f"join must be one of {', '.join(JOINS)}, got {join!r}")
    return radix if join == "oversubscribed" else (radix // 2) * up + 1


def compute_islands(n_islands: int, *, radix: int = 64, oversubscription: float = 7.0,
                    join: str = "oversubscribed", island_leaves: int | None = None,
                    port_gbps: float = 400.0, copper_endpoint_links: bool = False) -> Fabric:
    """Build ``n_islands`` non-blocking islands joined by an oversubscribed top layer.

    Parameters
    ----------
    n_islands : int
        Islands, >= 1.
    radix : int, optional
        Switch radix, ports (even, >= 4).
    oversubscription : float, optional
        Ratio above the islands, >= 1 (Meta reports 7).
    join : {"oversubscribed", "dragonfly+"}, optional
        Top layer: core planes, or all-to-all global links between island spines.
    island_leaves : int, optional
        Leaves per island (default and maximum: the spine down ports ``d``).
    port_gbps : float, optional
        Port speed, Gb/s.
    copper_endpoint_links : bool, optional
        GPU links are copper DACs (no transceivers).

    Returns
    -------
    Fabric
        ``kind="island"``, ``n_islands * island_leaves * radix/2`` endpoints;
        ``switch_pod`` is the island.

    Examples
    --------
    >>> f = compute_islands(2, radix=8, oversubscription=3.0)
    >>> f.n_endpoints, f.summary().switches
    (48, {'leaf': 12, 'spine': 8, 'core': 4})
    """
    n_isl = _int("n_islands", n_islands)
    k = _radix(radix)
    down, up = island_shape(k, oversubscription)
    leaves = down if island_leaves is None else _int("island_leaves", island_leaves)
    if leaves > down:
        raise ValueError(f"an island of radix-{k} spines at 1:{oversubscription:g} has at most "
                         f"{down} leaves, got {leaves}")
    cap = max_islands(k, oversubscription, join)
    if n_isl > cap:
        raise ValueError(f"a radix-{k} {join} island fabric joins at most {cap} islands "
                         f"({cap * down * (k // 2)} GPUs), got {n_isl}")
    port_gbps = _real("port_gbps", port_gbps, 1e-9)
    half = k // 2
    n = n_isl * leaves * half
    endpoint_leaf = np.arange(n, dtype=np.int64) // half
    if join == "oversubscribed":
        cores = 0 if n_isl == 1 else _divisor_at_least(up, math.ceil(n_isl * up / k))
        tier, pod, la, lb, lk = _tree([leaves] * n_isl, half, half, up, cores, core_kind=3)
        bisection = _tree_bisection(port_gbps, n, lk, 3 if cores else None)
        diameter = _tree_diameter(endpoint_leaf, pod, bool(cores))
        n_global = 0
    else:
        cores = 0
        tier, pod, la, lb, lk = _tree([leaves] * n_isl, half, half, 0, 0)
        ga, gb = _global_links(n_isl, n_isl * leaves, half, up)
        la, lb = np.concatenate([la, ga]), np.concatenate([lb, gb])
        lk = np.concatenate([lk, np.full(ga.shape[0], 2, np.int8)])
        n_global = int(ga.shape[0])
        bisection = min(_group_bisection(port_gbps, n, n_isl, n_global),
                        _tree_bisection(port_gbps, n, lk, None))
        diameter = 5 if n_isl > 1 else _tree_diameter(endpoint_leaf, pod, False)
    params = {
        "n_islands": n_isl, "radix": k, "oversubscription": float(oversubscription),
        "join": join, "island_leaves": leaves, "island_endpoints": leaves * half,
        "spine_uplinks": up, "cores_per_plane": cores, "global_links": n_global,
        "copper_endpoint_links": bool(copper_endpoint_links),
        "bisection_gbps": bisection, "diameter": diameter,
    }
    return _make("island", n, tier, pod, np.full(tier.shape[0], -1), k, port_gbps,
                 endpoint_leaf, la, lb, lk, params)


def islands_for(endpoints: int, *, radix: int = 64, oversubscription: float = 7.0,
                join: str = "oversubscribed", island_endpoints: int | None = None,
                **kw) -> Fabric:
    """The fewest islands holding ``endpoints`` GPUs (the hyperscale preset).

    Parameters
    ----------
    endpoints : int
        GPUs required, >= 1.
    radix, oversubscription, join
        As for :func:`compute_islands`.
    island_endpoints : int, optional
        GPUs per island, rounded up to whole leaves (default: a full island,
        ``d * radix/2``; 1,792 at radix 64, 1:7).
    **kw
        Passed to :func:`compute_islands`.

    Examples
    --------
    >>> f = islands_for(100_000)
    >>> f.params["n_islands"], f.n_endpoints
    (56, 100352)
    """
    endpoints = _int("endpoints", endpoints)
    k = _radix(radix)
    down, _ = island_shape(k, oversubscription)
    half = k // 2
    leaves = down if island_endpoints is None else math.ceil(
        _int("island_endpoints", island_endpoints) / half)
    if leaves > down:
        raise ValueError(f"an island of radix-{k} switches at 1:{oversubscription:g} holds at "
                         f"most {down * half} GPUs, got {island_endpoints}")
    n_isl = math.ceil(endpoints / (leaves * half))
    cap = max_islands(k, oversubscription, join)
    if n_isl > cap:
        raise ValueError(f"a radix-{k} {join} island fabric holds at most "
                         f"{cap * leaves * half} GPUs, got {endpoints}")
    return compute_islands(n_isl, radix=k, oversubscription=oversubscription, join=join,
                           island_leaves=leaves, **kw)
