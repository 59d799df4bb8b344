"""The k-ary three-tier fat-tree (Al-Fares, Loukissas, Vahdat, SIGCOMM 2008).

A full radix-``k`` fat-tree has ``k`` pods, each of ``k/2`` edge (leaf) and ``k/2`` aggregation
(spine) switches, ``(k/2)^2`` core switches and ``k^3/4`` hosts; it has ``k^3/4`` host links,
``k^3/4`` leaf-spine links and ``k^3/4`` spine-core links.

Oversubscription ``R > 1`` (leaf down:up ratio): every leaf keeps ``k`` ports but gives
``d = round(k R / (R + 1))`` of them to hosts and ``u = k - d`` upwards (``k = 64, R = 3``:
48 down / 16 up).  A pod then has ``k/2`` leaves and ``u`` spines (one link from every leaf to
every spine); spines keep ``k/2`` down / ``k/2`` up, so above the leaves the fabric is
non-blocking, and the core shrinks to ``u * k/2`` switches.  Hosts ``= pods * k/2 * d``.

Partial build (``pods < k``): spine ``s`` of every pod joins core plane ``s``; a plane has
``c`` cores, ``c`` the smallest divisor of ``k/2`` with ``c >= pods/2``, and each spine sends
``k/2 / c`` parallel links to each core of its plane (so ``c = k/2`` and one link each at full
size).  A single pod has no core layer (its spines' uplinks stay free).
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.fabric.topology import (
    Fabric,
    _divisor_at_least,
    _int,
    _make,
    _radix,
    _real,
    _round_half_up,
    _tree,
    _tree_bisection,
    _tree_diameter,
)


def leaf_split(k: int, oversubscription: float = 1.0) -> tuple[int, int]:
    """Leaf ports down (to hosts) and up for a leaf oversubscription ratio.

    >>> leaf_split(64, 3.0)
    (48, 16)
    """
    k = _radix(k, "k")
    r = _real("oversubscription", oversubscription, 1.0)
    down = k // 2 if r == 1.0 else _round_half_up(k * r / (r + 1.0))
    down = min(max(down, k // 2), k - 1)
    return down, k - down


def fat_tree(k: int, *, oversubscription: float = 1.0, port_gbps: float = 400.0,
             pods: int | None = None, copper_endpoint_links: bool = False) -> Fabric:
    """Build a radix-``k`` three-tier fat-tree (Al-Fares et al., SIGCOMM 2008).

    Parameters
    ----------
    k : int
        Switch radix, ports; an even integer >= 4.
    oversubscription : float, optional
        Leaf down:up port ratio, >= 1 (1 = non-blocking); see the module docstring.
    port_gbps : float, optional
        Port speed, Gb/s.
    pods : int, optional
        Pods to build, ``1 .. k`` (default ``k``).
    copper_endpoint_links : bool, optional
        Host links are copper DACs (no transceivers).

    Returns
    -------
    Fabric
        ``kind="fat-tree"``; ``pods * k/2 * d`` endpoints (``d`` host ports per leaf).

    Examples
    --------
    >>> f = fat_tree(4)
    >>> f.n_endpoints, f.summary().switches, f.links_total()
    (16, {'leaf': 8, 'spine': 8, 'core': 4}, 48)
    >>> fat_tree(64, oversubscription=3).n_endpoints
    98304
    """
    k = _radix(k, "k")
    down, up = leaf_split(k, oversubscription)
    n_pods = k if pods is None else _int("pods", pods)
    if n_pods > k:
        raise ValueError(f"a radix-{k} fat-tree has at most {k} pods, got {n_pods}")
    port_gbps = _real("port_gbps", port_gbps, 1e-9)
    half = k // 2
    cores = 0 if n_pods == 1 else _divisor_at_least(half, math.ceil(n_pods / 2))
    tier, pod, la, lb, lk = _tree([half] * n_pods, up, up, half, cores, core_kind=1)
    n = n_pods * half * down
    endpoint_leaf = np.arange(n, dtype=np.int64) // down
    params = {
        "k": k, "oversubscription": float(oversubscription), "pods": n_pods,
        "hosts_per_leaf": down, "leaf_uplinks": up, "cores_per_plane": cores,
        "copper_endpoint_links": bool(copper_endpoint_links),
        "bisection_gbps": _tree_bisection(port_gbps, n, lk, 1 if cores else None),
        "diameter": _tree_diameter(endpoint_leaf, pod, bool(cores)),
    }
    rail = np.full(tier.shape[0], -1)
    return _make("fat-tree", n, tier, pod, rail, k, port_gbps, endpoint_leaf, la, lb, lk,
                 params)


def fat_tree_capacity(radix: int = 64, oversubscription: float = 1.0) -> int:
    """Endpoints of the full-size fat-tree: ``k * k/2 * d`` (``k^3/4`` when non-blocking).

    >>> fat_tree_capacity(64)
    65536
    """
    down, _ = leaf_split(radix, oversubscription)
    return radix * (radix // 2) * down


def fat_tree_for(endpoints: int, *, radix: int = 64, oversubscription: float = 1.0,
                 **kw) -> Fabric:
    """The fat-tree with the fewest pods of radix-``radix`` switches holding ``endpoints``.

    Parameters
    ----------
    endpoints : int
        Endpoints (GPU NIC ports) required, >= 1.
    radix : int, optional
        Switch radix (even, >= 4).
    oversubscription : float, optional
        Leaf down:up ratio.
    **kw
        Passed to :func:`fat_tree` (``port_gbps``, ``copper_endpoint_links``).

    Raises
    ------
    ValueError
        If ``endpoints`` exceeds :func:`fat_tree_capacity`; the message gives the maximum.

    Examples
    --------
    >>> fat_tree_for(100, radix=8).params["pods"]
    7
    """
    endpoints = _int("endpoints", endpoints)
    k = _radix(radix)
    down, _ = leaf_split(k, oversubscription)
    per_pod = (k // 2) * down
    pods = math.ceil(endpoints / per_pod)
    if pods > k:
        raise ValueError(f"a radix-{k} fat-tree holds at most {k * per_pod} endpoints, "
                         f"got {endpoints}")
    return fat_tree(k, oversubscription=oversubscription, pods=pods, **kw)
