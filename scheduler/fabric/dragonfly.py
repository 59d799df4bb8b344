"""Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008) and Dragonfly+ (Shpiner et al., HiPINEB 2017).

Plain Dragonfly (:func:`plain_dragonfly`): a group has ``a`` routers, each with ``p`` terminals,
``a - 1`` local links (the routers of a group are joined all-to-all) and ``h`` global links;
router radix ``k = p + a - 1 + h``.  Groups are joined all-to-all by global links, at most
``a h + 1`` groups and ``N = a p (a h + 1)`` terminals; the paper's balanced choice is
``a = 2p = 2h``.  Minimal routes take at most one local, one global and one local hop: the
diameter is 3 router-to-router links, 5 links endpoint to endpoint.  Local links have link
kind ``"local"``, global links ``"global"``; every router is a leaf (tier 0).

Dragonfly+ is the Dragonfly of Kim, Dally, Scott and Abts (ISCA 2008) with every group a
two-level leaf/spine tree.  With radix-``r`` switches and ``h = r/2``:

* a group has ``h`` leaves, each with ``h`` endpoints and one uplink to each of ``h`` spines;
* each spine has ``h`` down ports and ``h`` global ports, so a group has ``h^2`` global ports;
* groups are joined all-to-all by global (spine-to-spine) links; the largest Dragonfly+ has
  ``h^2 + 1`` groups, one global link between every pair, and ``h^2 (h^2 + 1)`` endpoints.

With ``G`` groups below the maximum every pair is joined ``floor(h^2 / (G - 1))`` times and
the spare ports join extra pairs as evenly as possible (a circulant pattern; one port per group
stays free when both the spare count and ``G`` are odd).  A group's link ends take its spines'
global ports in order, so no spine uses more than ``h`` global ports.

Diameter (links, endpoint to endpoint): 4 inside a group (leaf-spine-leaf), 5 between groups
(leaf, spine, global link, spine, leaf), because every leaf reaches every spine of its group.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.fabric.routing_types import Route
from scheduler.fabric.topology import (
    LINK_KINDS,
    Fabric,
    _global_links,
    _group_bisection,
    _int,
    _make,
    _radix,
    _real,
)


def max_groups(radix: int) -> int:
    """Largest group count of a radix-``radix`` Dragonfly+: ``radix^2/4 + 1``.

    >>> max_groups(8)
    17
    """
    h = _radix(radix) // 2
    return h * h + 1


def dragonfly_plus(radix: int, *, groups: int | None = None, port_gbps: float = 400.0,
                   copper_endpoint_links: bool = False) -> Fabric:
    """Build a Dragonfly+ fabric (Shpiner et al., HiPINEB 2017).

    Parameters
    ----------
    radix : int
        Switch radix, ports; an even integer >= 4.
    groups : int, optional
        Groups, ``1 .. radix^2/4 + 1`` (default: the largest).
    port_gbps : float, optional
        Port speed, Gb/s.
    copper_endpoint_links : bool, optional
        Endpoint links are copper DACs (no transceivers).

    Returns
    -------
    Fabric
        ``kind="dragonfly+"`` with ``groups * radix^2/4`` endpoints; ``switch_pod`` is the
        group.

    Examples
    --------
    >>> f = dragonfly_plus(4)
    >>> f.n_endpoints, f.summary().switches["leaf"], f.summary().switches["spine"]
    (20, 10, 10)
    >>> f.summary().diameter
    5
    """
    r = _radix(radix)
    h = r // 2
    g_max = h * h + 1
    n_groups = g_max if groups is None else _int("groups", groups)
    if n_groups > g_max:
        raise ValueError(f"a radix-{r} Dragonfly+ has at most {g_max} groups, got {n_groups}")
    port_gbps = _real("port_gbps", port_gbps, 1e-9)
    n_leaf = n_groups * h
    spine0 = n_leaf
    leaves = np.arange(n_leaf, dtype=np.int64)
    la = np.repeat(leaves, h)
    lb = spine0 + np.repeat((leaves // h) * h, h) + np.tile(np.arange(h), n_leaf)
    ga, gb = _global_links(n_groups, spine0, h, h)
    link_a = np.concatenate([la, ga])
    link_b = np.concatenate([lb, gb])
    link_kind = np.concatenate([np.zeros(la.shape[0], np.int8), np.full(ga.shape[0], 2, np.int8)])
    tier = np.concatenate([np.zeros(n_leaf, np.int8), np.ones(n_leaf, np.int8)])
    pod = np.concatenate([leaves // h, leaves // h])
    n = n_leaf * h
    params = {
        "radix": r, "groups": n_groups, "global_links": int(ga.shape[0]),
        "global_links_per_pair": (h * h) // (n_groups - 1) if n_groups > 1 else 0,
        "copper_endpoint_links": bool(copper_endpoint_links),
        "bisection_gbps": _group_bisection(port_gbps, n, n_groups, int(ga.shape[0])),
        "diameter": 5 if n_groups > 1 else (4 if h > 1 else 2),
    }
    return _make("dragonfly+", n, tier, pod, np.full(tier.shape[0], -1), r, port_gbps,
                 np.arange(n, dtype=np.int64) // h, link_a, link_b, link_kind, params)


def dragonfly_plus_for(endpoints: int, *, radix: int = 64, **kw) -> Fabric:
    """The Dragonfly+ with the fewest groups holding ``endpoints`` endpoints.

    Parameters
    ----------
    endpoints : int
        Endpoints required, >= 1.
    radix : int, optional
        Switch radix (even, >= 4).
    **kw
        Passed to :func:`dragonfly_plus`.

    Raises
    ------
    ValueError
        Above ``radix^2/4 * (radix^2/4 + 1)`` endpoints; the message gives the maximum.

    Examples
    --------
    >>> dragonfly_plus_for(100, radix=8).params["groups"]
    7
    """
    endpoints = _int("endpoints", endpoints)
    h = _radix(radix) // 2
    groups = math.ceil(endpoints / (h * h))
    if groups > h * h + 1:
        raise ValueError(f"a radix-{radix} Dragonfly+ holds at most {h * h * (h * h + 1)} "
                         f"endpoints, got {endpoints}")
    return dragonfly_plus(radix, groups=groups, **kw)


LOCAL = LINK_KINDS.index("local")
GLOBAL = LINK_KINDS.index("global")


def dragonfly_max_groups(a: int, h: int) -> int:
    """Most groups of a plain Dragonfly: ``a h + 1`` (one global link per group pair).

    >>> dragonfly_max_groups(4, 2)
    9
    """
    return _int("a", a) * _int("h", h) + 1


def plain_dragonfly(p: int, a: int | None = None, h: int | None = None, *,
                    groups: int | None = None, port_gbps: float = 400.0,
                    copper_endpoint_links: bool = False) -> Fabric:
    """Build a plain Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008).

    Parameters
    ----------
    p : int
        Terminals per router.
    a : int, optional
        Routers per group (default ``2p``, the balanced choice).
    h : int, optional
        Global links per router (default ``p``).
    groups : int, optional
        Groups, ``1 .. a h + 1`` (default: the largest).
    port_gbps : float, optional
        Port speed, Gb/s.
    copper_endpoint_links : bool, optional
        Terminal links are copper DACs (no transceivers).

    Returns
    -------
    Fabric
        ``kind="dragonfly"``, ``groups * a * p`` endpoints; ``switch_pod`` is the group;
        ``radix`` the router radix ``p + a - 1 + h``.

    Examples
    --------
    The paper's Figure 5 example (p = h = 2, a = 4, radix 7): 9 groups, 72 terminals.

    >>> f = plain_dragonfly(2, 4, 2)
    >>> f.n_endpoints, f.n_switches(), f.radix, f.params["global_links"], f.summary().diameter
    (72, 36, 7, 36, 5)
    """
    p = _int("p", p)
    a = 2 * p if a is None else _int("a", a)
    h = p if h is None else _int("h", h)
    g_max = a * h + 1
    n_groups = g_max if groups is None else _int("groups", groups)
    if n_groups > g_max:
        raise ValueError(f"a Dragonfly with a={a}, h={h} has at most {g_max} groups, "
                         f"got {n_groups}")
    port_gbps = _real("port_gbps", port_gbps, 1e-9)
    n_r = n_groups * a
    iu, ju = np.triu_indices(a, 1)
    base = np.repeat(np.arange(n_groups, dtype=np.int64) * a, iu.size)
    la, lb = base + np.tile(iu, n_groups), base + np.tile(ju, n_groups)
    ga, gb = _global_links(n_groups, 0, a, h)
    link_a, link_b = np.concatenate([la, ga]), np.concatenate([lb, gb])
    kind = np.concatenate([np.full(la.size, LOCAL, np.int8), np.full(ga.size, GLOBAL, np.int8)])
    routers = np.arange(n_r, dtype=np.int64)
    n = n_r * p
    params = {
        "p": p, "a": a, "h": h, "groups": n_groups, "router_radix": p + a - 1 + h,
        "local_links": int(la.size), "global_links": int(ga.size),
        "copper_endpoint_links": bool(copper_endpoint_links),
        "bisection_gbps": _group_bisection(port_gbps, n, n_groups, int(ga.size)),
        "diameter": 5 if n_groups > 1 else (3 if a > 1 else 2),
    }
    return _make("dragonfly", n, np.zeros(n_r, np.int8), routers // a, np.full(n_r, -1),
                 p + a - 1 + h, port_gbps, np.arange(n, dtype=np.int64) // p, link_a, link_b,
                 kind, params)


def plain_dragonfly_for(endpoints: int, *, p: int = 16, **kw) -> Fabric:
    """The plain Dragonfly with the fewest groups holding ``endpoints`` terminals.

    >>> plain_dragonfly_for(1000, p=4).params["groups"]
    32
    """
    endpoints = _int("endpoints", endpoints)
    p = _int("p", p)
    a = kw.pop("a", None) or 2 * p
    h = kw.pop("h", None) or p
    groups = math.ceil(endpoints / (a * p))
    if groups > a * h + 1:
        raise ValueError(f"a Dragonfly with p={p}, a={a}, h={h} holds at most "
                         f"{a * p * (a * h + 1)} endpoints, got {endpoints}")
    return plain_dragonfly(p, a, h, groups=groups, **kw)


def dragonfly_route(fabric: Fabric, src: int, dst: int) -> Route:
    """Minimal ECMP route of one flow on a plain Dragonfly, as :meth:`Router.route` gives.

    Traffic between two groups is split evenly over the global links joining them (as the
    Dragonfly+ minimal routing of :mod:`scheduler.fabric.routing`); each path is
    local (to the router owning the global link, unless it is the source router), global,
    local (unless the far end is the destination router).  ``hops`` counts the links of the
    shortest of these paths, endpoint links included.

    >>> f = plain_dragonfly(2, 4, 2)
    >>> r = dragonfly_route(f, 0, 71)
    >>> r.hops, round(float(r.fraction[f.link_kind[r.link] == GLOBAL].sum()), 6)
    (5, 1.0)
    """
    if fabric.kind != "dragonfly":
        raise ValueError(f"dragonfly_route needs a plain Dragonfly, not a {fabric.kind} fabric")
    n = fabric.n_endpoints
    for name, v in (("src", src), ("dst", dst)):
        if not 0 <= int(v) < n:
            raise ValueError(f"{name} must be an endpoint id in 0 .. {n - 1}, got {v}")
    rs, rd = int(fabric.endpoint_leaf[src]), int(fabric.endpoint_leaf[dst])
    empty = np.zeros(0, np.int64)
    if src == dst:
        return Route(0, empty, empty, np.zeros(0))
    if rs == rd:
        return Route(2, empty, empty, np.zeros(0))
    la, lb = fabric.link_a.astype(np.int64), fabric.link_b.astype(np.int64)
    grp = fabric.switch_pod.astype(np.int64)
    local = fabric.link_kind == LOCAL

    def local_link(x: int, y: int) -> tuple[int, int]:
        i = np.flatnonzero(local & (((la == x) & (lb == y)) | ((la == y) & (lb == x))))[0]
        return int(i), 0 if la[i] == x else 1

    if grp[rs] == grp[rd]:
        i, d = local_link(rs, rd)
        return Route(3, np.array([i]), np.array([d]), np.ones(1))
    glob = np.flatnonzero((fabric.link_kind == GLOBAL)
                          & (((grp[la] == grp[rs]) & (grp[lb] == grp[rd]))
                             | ((grp[lb] == grp[rs]) & (grp[la] == grp[rd]))))
    if glob.size == 0:
        raise ValueError(f"groups {grp[rs]} and {grp[rd]} share no global link")
    w = 1.0 / glob.size
    acc: dict[tuple[int, int], float] = {}
    hops = 10
    for i in glob.tolist():
        near, far, d = (int(la[i]), int(lb[i]), 0) if grp[la[i]] == grp[rs] else (
            int(lb[i]), int(la[i]), 1)
        acc[(i, d)] = acc.get((i, d), 0.0) + w
        path = 3
        for x, y in ((rs, near), (far, rd)):
            if x != y:
                key = local_link(x, y)
                acc[key] = acc.get(key, 0.0) + w
                path += 1
        hops = min(hops, path)
    keys = sorted(acc)
    return Route(hops, np.array([k[0] for k in keys]), np.array([k[1] for k in keys]),
                 np.array([acc[k] for k in keys]))
