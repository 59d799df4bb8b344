"""Rail-optimised fabric after NVIDIA's DGX SuperPOD H100 reference architecture.

Source: NVIDIA DGX SuperPOD Reference Architecture, DGX H100 (RA-11333-001).  A scalable unit
(SU) has 32 node slots and one 64-port NDR (400 Gb/s) leaf per rail; GPU ``i`` of every node
(its NIC ``i``) lands on rail ``i``'s leaf, so a leaf has 32 node ports and 32 uplinks.  The
RA reserves one node slot per SU-group for the UFM appliance, so 4 SU hold 127 DGX nodes
(1,016 GPUs); pass ``nodes=127`` to reproduce it.

Construction, calibrated on the RA's Table 4 (1-4 SU: 31/63/95/127 nodes, leaves 8/16/24/32,
spines 4/8/16/16, leaf-spine cables 256/512/768/1,024):

* up to ``two_tier_su`` SUs (default ``radix // gpus_per_node``: 8 at radix 64), two tiers:
  ``S`` spines shared by all rails, ``S`` the smallest divisor of the leaf uplink count
  ``u = radix - nodes_per_su`` with ``S * radix >= leaves * u``; leaf uplink ``j`` goes to
  spine ``j mod S``.  The two-tier limit is the point where the spines' ports are all taken
  by leaves (64 leaves x 32 uplinks = 32 spines x 64 ports).
* above that, three tiers: SUs form spine groups of ``su_per_group`` (4) SUs whose spines
  give half their ports down and half to a core layer, which keeps the fabric non-blocking.
  Spine ``s`` of every group joins core plane ``s``.  With radix 64 a group has 32 spines and
  the fabric grows to 64 groups (256 SU, 65,536 GPUs).

Validated (not fitted) against the RA's "larger DGX SuperPOD" component table (the same
QM9700 counts are printed in the DGX SuperPOD B200 RA, Table 3): 8 SU two-tier with 64 leaves,
32 spines, 2,048 + 2,048 cables; 16 SU with 128 leaves, 128 spines and 64 cores; 32 SU with
256 / 256 / 128; 64 SU with 512 / 512 / 256.  See ``tests/core/test_reference_fabrics.py``.

Every spine reaches every rail, so traffic between rails needs no NVLink hop (a rail-only
spine layer would split the fabric into eight disjoint networks).

``switch_pod`` is the SU for leaves, the spine group for three-tier spines, and -1 for spines of
a two-tier fabric and for cores (shared by all SUs).  ``switch_rail`` is the rail of a leaf.
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
    _tree,
    _tree_bisection,
    _tree_diameter,
)


def rail_optimized(n_su: int, *, nodes_per_su: int = 32, gpus_per_node: int = 8,
                   radix: int = 64, port_gbps: float = 400.0, nodes: int | None = None,
                   su_per_group: int = 4, two_tier_su: int | None = None,
                   copper_endpoint_links: bool = False) -> Fabric:
    """Build ``n_su`` rail-optimised scalable units (DGX SuperPOD H100 RA, RA-11333-001).

    Parameters
    ----------
    n_su : int
        Scalable units, >= 1.
    nodes_per_su : int, optional
        Node slots per SU (= node ports per leaf), less than ``radix``.
    gpus_per_node : int, optional
        GPUs (and NICs, and rails) per node.
    radix : int, optional
        Switch radix, ports (even, >= 4).
    port_gbps : float, optional
        Port speed, Gb/s.
    nodes : int, optional
        Nodes actually installed (default ``n_su * nodes_per_su``); must leave no SU empty.
        Endpoint ``i`` is GPU ``i % gpus_per_node`` of node ``i // gpus_per_node``.
    su_per_group : int, optional
        SUs per spine group of a three-tier fabric.
    two_tier_su : int, optional
        Most SUs built with two tiers (default ``radix // gpus_per_node``, the most leaves
        whose uplinks radix-``radix`` spines can take without a core layer); above it the
        fabric gets a core layer.
    copper_endpoint_links : bool, optional
        GPU links are copper DACs (not realistic for rails; default False).

    Returns
    -------
    Fabric
        ``kind="rail"`` with ``nodes * gpus_per_node`` endpoints.

    Examples
    --------
    >>> f = rail_optimized(4, nodes=127)
    >>> f.n_endpoints, f.summary().switches, int(f.link_a.size)
    (1016, {'leaf': 32, 'spine': 16, 'core': 0}, 1024)
    """
    n_su = _int("n_su", n_su)
    k = _radix(radix)
    nps = _int("nodes_per_su", nodes_per_su)
    rails = _int("gpus_per_node", gpus_per_node)
    group = _int("su_per_group", su_per_group)
    flat = max(1, k // rails) if two_tier_su is None else _int("two_tier_su", two_tier_su)
    port_gbps = _real("port_gbps", port_gbps, 1e-9)
    if nps >= k:
        raise ValueError(f"nodes_per_su must be below the radix {k}, got {nps}")
    n_nodes = n_su * nps if nodes is None else _int("nodes", nodes)
    if not (n_su - 1) * nps < n_nodes <= n_su * nps:
        raise ValueError(f"{n_su} SUs of {nps} slots take {(n_su - 1) * nps + 1}.."
                         f"{n_su * nps} nodes, got {n_nodes}")
    up = k - nps
    n_leaf = n_su * rails
    if n_su <= flat:
        spines = _divisor_at_least(up, math.ceil(n_leaf * up / k))
        if spines is None or n_leaf * up > spines * k:
            raise ValueError(f"{n_leaf} leaves do not fit a two-tier radix-{k} fabric; "
                             f"lower two_tier_su")
        tier, pod, la, lb, lk = _tree([n_leaf], up, spines, 0, 0)
        cores = 0
        n_groups = 1
        pod[n_leaf:] = -1
    else:
        half = k // 2
        n_groups = math.ceil(n_su / group)
        spines = _divisor_at_least(up, math.ceil(group * rails * up / half))
        if spines is None or group * rails * up > spines * half:
            raise ValueError(f"a spine group of {group} SUs does not fit radix-{k} spines; "
                             f"lower su_per_group")
        cores = _divisor_at_least(half, math.ceil(n_groups * half / k))
        if cores is None:
            raise ValueError(f"a radix-{k} rail fabric holds at most {k * group} SUs "
                             f"({k * group * nps * rails} GPUs), got {n_su}")
        sus = [min(group, n_su - q * group) for q in range(n_groups)]
        tier, pod, la, lb, lk = _tree([s * rails for s in sus], up, spines, half, cores, 1)
    pod[:n_leaf] = np.arange(n_leaf) // rails
    rail = np.full(tier.shape[0], -1, np.int64)
    rail[:n_leaf] = np.arange(n_leaf) % rails
    n = n_nodes * rails
    e = np.arange(n, dtype=np.int64)
    endpoint_leaf = (e // rails // nps) * rails + e % rails
    params = {
        "n_su": n_su, "nodes": n_nodes, "nodes_per_su": nps, "gpus_per_node": rails,
        "rails": rails, "su_per_group": group, "two_tier_su": flat, "spine_groups": n_groups,
        "spines_per_group": spines, "cores_per_plane": cores,
        "copper_endpoint_links": bool(copper_endpoint_links),
        "bisection_gbps": _tree_bisection(port_gbps, n, lk, 1 if cores else None),
        "diameter": _tree_diameter(endpoint_leaf, pod, bool(cores)),
    }
    return _make("rail", n, tier, pod, rail, k, port_gbps, endpoint_leaf, la, lb, lk, params)


def rail_capacity(radix: int = 64, *, nodes_per_su: int | None = None, gpus_per_node: int = 8,
                  su_per_group: int = 4) -> int:
    """Most GPUs a radix-``radix`` rail fabric holds (``radix * su_per_group`` SUs).

    >>> rail_capacity(64)
    65536
    """
    nps = radix // 2 if nodes_per_su is None else nodes_per_su
    return radix * su_per_group * nps * gpus_per_node


def rail_optimized_for(endpoints: int, *, radix: int = 64, gpus_per_node: int = 8,
                       nodes_per_su: int | None = None, **kw) -> Fabric:
    """The rail fabric with the fewest SUs (and whole nodes) holding ``endpoints`` GPUs.

    Parameters
    ----------
    endpoints : int
        GPUs required, >= 1; rounded up to whole nodes.
    radix : int, optional
        Switch radix.
    gpus_per_node : int, optional
        GPUs per node.
    nodes_per_su : int, optional
        Node slots per SU (default ``radix // 2``).
    **kw
        Passed to :func:`rail_optimized`.

    Examples
    --------
    >>> rail_optimized_for(1016).params["n_su"]
    4
    """
    endpoints = _int("endpoints", endpoints)
    k = _radix(radix)
    rails = _int("gpus_per_node", gpus_per_node)
    nps = k // 2 if nodes_per_su is None else _int("nodes_per_su", nodes_per_su)
    n_nodes = math.ceil(endpoints / rails)
    n_su = math.ceil(n_nodes / nps)
    cap = rail_capacity(k, nodes_per_su=nps, gpus_per_node=rails,
                        su_per_group=kw.get("su_per_group", 4))
    if endpoints > cap:
        raise ValueError(f"a radix-{k} rail fabric holds at most {cap} GPUs, got {endpoints}")
    return rail_optimized(n_su, nodes=n_nodes, nodes_per_su=nps, gpus_per_node=rails,
                          radix=k, **kw)
