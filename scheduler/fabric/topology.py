"""Columnar description of a scale-out (compute) fabric, shared by every builder.

A :class:`Fabric` is a set of flat numpy arrays indexed by integer id: endpoints (GPU NIC
ports, ids ``0 .. n_endpoints-1``) and switches (ids ``0 .. S-1`` in their own id space).
Every switch-to-switch link is one row of ``link_a`` / ``link_b`` / ``link_kind``; parallel
links between the same pair of switches are separate rows.  Endpoint links are implicit: the
endpoint ``i`` has exactly one link, to the leaf ``endpoint_leaf[i]``.

The networkx view (:meth:`Fabric.graph`) is built lazily, only on request, because a
100,000-endpoint fabric holds several hundred thousand links.

Cabling assumption (transceiver count)
--------------------------------------
Every switch-to-switch link is optical and has two transceivers, one per end.  Endpoint-to-leaf
links are optical too (two transceivers each): in a rail-optimised fabric the eight NICs of a
node go to eight different leaves, which are not in the node's rack, so copper DACs do not
reach.  A builder called with ``copper_endpoint_links=True`` records that endpoint links are
copper DACs (no transceivers); :meth:`Fabric.summary` then counts switch links only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import networkx as nx
import numpy as np

from scheduler.limits import checks

TIERS = ("leaf", "spine", "core")
"""Switch tier names; the code stored in :attr:`Fabric.switch_tier` is the index."""

LINK_KINDS = ("leaf-spine", "spine-core", "global", "island-uplink", "local")
"""Switch-link kind names; the code stored in :attr:`Fabric.link_kind` is the index."""

KINDS = ("fat-tree", "dragonfly+", "rail", "island", "dragonfly")
"""Fabric kinds the builders produce."""


@dataclass(frozen=True)
class FabricSummary:
    """Headline figures of a fabric.

    Parameters
    ----------
    kind : str
        Fabric kind, one of :data:`KINDS`.
    endpoints : int
        Endpoint (GPU NIC port) count.
    switches : dict of str to int
        Switch count per tier: ``{"leaf": .., "spine": .., "core": ..}``.
    links : int
        Physical links: endpoint links plus switch-to-switch links (parallel links counted
        one by one).
    transceivers : int
        Optical transceivers (two per optical link; see the module docstring).
    bisection_gbps : float
        Closed-form bisection bandwidth, Gb/s, one direction: the minimum cut between two
        halves of the endpoints.
    diameter : int
        Links on the longest shortest endpoint-to-endpoint path (the two endpoint links
        included): 2 on one leaf, 4 for leaf-spine-leaf, 5 for dragonfly+
        (leaf-spine-global-spine-leaf), 6 for a three-tier tree.
    """

    kind: str
    endpoints: int
    switches: dict
    links: int
    transceivers: int
    bisection_gbps: float
    diameter: int

    def as_dict(self) -> dict:
        """Plain-``dict`` form (JSON-serialisable)."""
        return {
            "kind": self.kind,
            "endpoints": int(self.endpoints),
            "switches": {k: int(v) for k, v in self.switches.items()},
            "links": int(self.links),
            "transceivers": int(self.transceivers),
            "bisection_gbps": float(self.bisection_gbps),
            "diameter": int(self.diameter),
        }


_ARRAY_DTYPES = {
    "switch_tier": np.int8,
    "switch_pod": np.int32,
    "switch_rail": np.int16,
    "endpoint_leaf": np.int32,
    "link_a": np.int32,
    "link_b": np.int32,
    "link_kind": np.int8,
}


@dataclass(frozen=True, eq=False)
class Fabric:
    """A scale-out fabric in columnar form.

    Parameters
    ----------
    kind : str
        ``"fat-tree"``, ``"dragonfly+"``, ``"rail"`` or ``"island"``.
    n_endpoints : int
        GPU NIC ports (one per GPU on a compute fabric); endpoint ids ``0 .. n_endpoints-1``.
    switch_tier : numpy.ndarray of int8
        Per switch: 0 leaf, 1 spine, 2 core (see :data:`TIERS`).
    switch_pod : numpy.ndarray of int32
        Per switch: pod / group / SU / island index; -1 for switches shared by all pods.
    switch_rail : numpy.ndarray of int16
        Per switch: rail index of a rail leaf, -1 otherwise.
    radix : int
        Ports per switch.
    port_gbps : float
        Port speed, Gb/s.
    endpoint_leaf : numpy.ndarray of int32
        Per endpoint: the leaf switch it attaches to.
    link_a, link_b : numpy.ndarray of int32
        Per switch-to-switch link: the lower-tier switch and the upper-tier (or, for a
        global link, peer) switch.
    link_kind : numpy.ndarray of int8
        Per switch link: 0 leaf-spine, 1 spine-core, 2 global, 3 island uplink, 4 local
        (router to router inside a plain Dragonfly group).
    params : dict
        Builder parameters; builders also store the closed forms ``bisection_gbps`` and
        ``diameter`` here, and ``copper_endpoint_links``.

    Notes
    -----
    Arrays are made read-only on construction.  Equality is identity (``eq=False``).
    """

    kind: str
    n_endpoints: int
    switch_tier: np.ndarray
    switch_pod: np.ndarray
    switch_rail: np.ndarray
    radix: int
    port_gbps: float
    endpoint_leaf: np.ndarray
    link_a: np.ndarray
    link_b: np.ndarray
    link_kind: np.ndarray
    params: dict

    def __post_init__(self) -> None:
        for name, dtype in _ARRAY_DTYPES.items():
            arr = np.array(getattr(self, name), dtype=dtype, copy=True)
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        n_sw = self.switch_tier.shape[0]
        if self.switch_pod.shape[0] != n_sw or self.switch_rail.shape[0] != n_sw:
            raise ValueError("switch_tier, switch_pod and switch_rail must have equal length")
        if self.endpoint_leaf.shape[0] != self.n_endpoints:
            raise ValueError("endpoint_leaf must have one entry per endpoint")
        if not (self.link_a.shape == self.link_b.shape == self.link_kind.shape):
            raise ValueError("link_a, link_b and link_kind must have equal length")

    def n_switches(self) -> int:
        """Switch count (all tiers)."""
        return int(self.switch_tier.shape[0])

    def links_total(self) -> int:
        """Physical links: endpoint links plus switch-to-switch links."""
        return int(self.n_endpoints + self.link_a.shape[0])

    def transceivers(self) -> int:
        """Optical transceivers: two per optical link (see the module docstring)."""
        n = 2 * int(self.link_a.shape[0])
        if not self.params.get("copper_endpoint_links", False):
            n += 2 * int(self.n_endpoints)
        return n

    def graph(self) -> nx.Graph:
        """The fabric as an undirected networkx graph, built on first call and cached.

        Nodes are ``("gpu", i)`` (attribute ``tier="gpu"``) and ``("sw", j)`` (attribute
        ``tier`` one of :data:`TIERS`, plus ``pod``).  Parallel links between one pair are one
        edge with ``count`` (multiplicity) and ``gbps`` (aggregate capacity,
        ``count * port_gbps``).  Do not mutate the returned graph; copy it first.
        """
        cached = self.__dict__.get("_graph")
        if cached is not None:
            return cached
        g = nx.Graph()
        g.add_nodes_from((("gpu", i), {"tier": "gpu"}) for i in range(self.n_endpoints))
        tiers = self.switch_tier.tolist()
        pods = self.switch_pod.tolist()
        g.add_nodes_from(
            (("sw", j), {"tier": TIERS[t], "pod": p})
            for j, (t, p) in enumerate(zip(tiers, pods, strict=True))
        )
        port = float(self.port_gbps)
        g.add_edges_from(
            (("gpu", i), ("sw", leaf), {"count": 1, "gbps": port})
            for i, leaf in enumerate(self.endpoint_leaf.tolist())
        )
        if self.link_a.size:
            lo = np.minimum(self.link_a, self.link_b).astype(np.int64)
            hi = np.maximum(self.link_a, self.link_b).astype(np.int64)
            keys, counts = np.unique(lo * self.n_switches() + hi, return_counts=True)
            a, b = np.divmod(keys, self.n_switches())
            g.add_edges_from(
                (("sw", x), ("sw", y), {"count": c, "gbps": c * port})
                for x, y, c in zip(a.tolist(), b.tolist(), counts.tolist(), strict=True)
            )
        object.__setattr__(self, "_graph", g)
        return g

    def summary(self) -> FabricSummary:
        """Headline figures; bisection and diameter are the builder's closed forms."""
        counts = np.bincount(self.switch_tier.astype(np.int64), minlength=len(TIERS))
        return FabricSummary(
            kind=self.kind,
            endpoints=int(self.n_endpoints),
            switches={name: int(counts[i]) for i, name in enumerate(TIERS)},
            links=self.links_total(),
            transceivers=self.transceivers(),
            bisection_gbps=float(self.params["bisection_gbps"]),
            diameter=int(self.params["diameter"]),
        )


# --------------------------------------------------------------------------- helpers
# Shared by the builders; private to the package.


def _int(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``, else ValueError (bools rejected)."""
    value = checks.integer(name, value, given="got")
    return checks.integer(name, value, at_least=minimum, expect=f">= {minimum}", given="got")


def _radix(value, name: str = "radix") -> int:
    """An even switch radix >= 4, else ValueError."""
    r = _int(name, value, 4)
    if r % 2:
        raise ValueError(f"{name} must be an even integer >= 4, got {r}")
    return r


def _real(name: str, value, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return float(value)


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def _divisor_at_least(n: int, lower: int) -> int | None:
    """Smallest divisor of ``n`` that is >= ``lower`` (None if ``lower > n``)."""
    for d in range(max(1, lower), n + 1):
        if n % d == 0:
            return d
    return None


def _tree(pod_leaves, leaf_up: int, spines_per_pod: int, spine_up: int, cores_per_plane: int,
          core_kind: int = 1):
    """Switch and link arrays of a (two- or three-tier) folded Clos.

    Leaves are numbered pod-major from 0, then the ``P * spines_per_pod`` spines pod-major,
    then the ``spines_per_pod * cores_per_plane`` cores plane-major.  Leaf uplink ``u`` goes to
    spine ``u % spines_per_pod`` of its pod; the uplink ``u`` of spine ``s`` goes to core
    ``u % cores_per_plane`` of plane ``s``.  ``cores_per_plane=0`` builds no core layer.
    Returns ``(tier, pod, link_a, link_b, link_kind)``.
    """
    pod_leaves = np.asarray(pod_leaves, dtype=np.int64)
    n_pods = pod_leaves.shape[0]
    n_leaf = int(pod_leaves.sum())
    s = spines_per_pod
    n_spine = n_pods * s
    leaf_pod = np.repeat(np.arange(n_pods, dtype=np.int64), pod_leaves)
    la = np.repeat(np.arange(n_leaf, dtype=np.int64), leaf_up)
    lb = n_leaf + np.repeat(leaf_pod * s, leaf_up) + np.tile(np.arange(leaf_up) % s, n_leaf)
    parts_a, parts_b, parts_k = [la], [lb], [np.zeros(la.shape[0], np.int8)]
    n_core = 0
    if cores_per_plane:
        c = cores_per_plane
        n_core = s * c
        core0 = n_leaf + n_spine
        spine_ids = n_leaf + np.arange(n_spine, dtype=np.int64)
        plane = np.tile(np.arange(s, dtype=np.int64), n_pods)
        ca = np.repeat(spine_ids, spine_up)
        cb = core0 + np.repeat(plane * c, spine_up) + np.tile(np.arange(spine_up) % c, n_spine)
        parts_a.append(ca)
        parts_b.append(cb)
        parts_k.append(np.full(ca.shape[0], core_kind, np.int8))
    tier = np.concatenate([np.zeros(n_leaf, np.int8), np.ones(n_spine, np.int8),
                           np.full(n_core, 2, np.int8)])
    pod = np.concatenate([leaf_pod, np.repeat(np.arange(n_pods, dtype=np.int64), s),
                          np.full(n_core, -1, np.int64)])
    return tier, pod, np.concatenate(parts_a), np.concatenate(parts_b), np.concatenate(parts_k)


def _all_to_all_pairs(n_groups: int, ports: int):
    """Group pairs of an all-to-all multigraph in which each group has at most ``ports`` links.

    Every pair is joined ``ports // (n_groups - 1)`` times; the ``e`` spare ports per group
    join extra pairs as evenly as possible: a circulant (group ``i`` to ``i + d`` for
    ``d = 1 .. e // 2``), plus the matching ``i`` to ``i + n/2`` when ``e`` is odd and
    ``n_groups`` even.  With ``e`` odd and ``n_groups`` odd one port per group stays unused.
    Returns ``(ga, gb)`` int64 arrays, one row per link.
    """
    if n_groups < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    m, e = divmod(ports, n_groups - 1)
    iu, ju = np.triu_indices(n_groups, 1)
    ga, gb = [np.tile(iu, m)], [np.tile(ju, m)]
    idx = np.arange(n_groups, dtype=np.int64)
    for d in range(1, e // 2 + 1):
        ga.append(idx)
        gb.append((idx + d) % n_groups)
    if e % 2 and n_groups % 2 == 0:
        half = idx[: n_groups // 2]
        ga.append(half)
        gb.append(half + n_groups // 2)
    return np.concatenate(ga).astype(np.int64), np.concatenate(gb).astype(np.int64)


def _global_links(n_groups: int, spine0: int, spines_per_group: int, ports_per_spine: int):
    """Spine-to-spine global links joining groups all-to-all (Dragonfly+ style).

    Group ``g`` owns spines ``spine0 + g * spines_per_group + (0 .. spines_per_group-1)``; its
    link ends fill their global ports in order (port ``q`` on local spine
    ``q // ports_per_spine``).  Returns ``(link_a, link_b)``.
    """
    ga, gb = _all_to_all_pairs(n_groups, spines_per_group * ports_per_spine)
    if ga.size == 0:
        return ga, gb
    ends = np.concatenate([ga, gb])
    order = np.argsort(ends, kind="stable")
    sorted_groups = ends[order]
    starts = np.searchsorted(sorted_groups, np.arange(n_groups))
    rank = np.empty_like(ends)
    rank[order] = np.arange(ends.shape[0]) - starts[sorted_groups]
    spine = spine0 + ends * spines_per_group + rank // ports_per_spine
    n = ga.shape[0]
    return spine[:n], spine[n:]


def _tree_bisection(port_gbps: float, n_endpoints: int, link_kind: np.ndarray,
                    upper_kind: int | None) -> float:
    """Closed-form bisection of a symmetric tree, Gb/s.

    Splitting the pods (or, in one pod, the leaves) in two halves, the cut is the smallest of
    half the endpoint links, half the leaf-spine links and half the spine-to-top links.
    """
    cuts = [n_endpoints, int(np.count_nonzero(link_kind == 0))]
    if upper_kind is not None:
        cuts.append(int(np.count_nonzero(link_kind == upper_kind)))
    return port_gbps * min(cuts) / 2.0


def _group_bisection(port_gbps: float, n_endpoints: int, n_groups: int, n_global: int) -> float:
    """Closed-form bisection of all-to-all joined groups, Gb/s.

    A balanced split crosses ``(G/2)^2`` of the ``G(G-1)/2`` group pairs, so with global links
    spread evenly over pairs the cut is ``n_global * G / (2 (G - 1))`` links (a fractional group
    stands in for the split group when ``G`` is odd); capped by half the endpoint links.
    Groups are internally non-blocking.
    """
    if n_groups < 2:
        return port_gbps * n_endpoints / 2.0
    return port_gbps * min(n_endpoints / 2.0, n_global * n_groups / (2.0 * (n_groups - 1)))


def _tree_diameter(endpoint_leaf: np.ndarray, switch_pod: np.ndarray, has_top: bool) -> int:
    """Links on the longest endpoint-to-endpoint shortest path of a tree."""
    leaves = np.unique(endpoint_leaf)
    if leaves.shape[0] <= 1:
        return 2
    if not has_top or np.unique(switch_pod[leaves]).shape[0] <= 1:
        return 4
    return 6


def _make(kind: str, n_endpoints: int, tier, pod, rail, radix: int, port_gbps: float,
          endpoint_leaf, la, lb, lk, params: dict) -> Fabric:
    return Fabric(kind=kind, n_endpoints=int(n_endpoints), switch_tier=tier, switch_pod=pod,
                  switch_rail=rail, radix=int(radix), port_gbps=float(port_gbps),
                  endpoint_leaf=endpoint_leaf, link_a=la, link_b=lb, link_kind=lk,
                  params=dict(params))
