"""Dragonfly+ (Shpiner, Haramaty, Eliad, Zdornov, Gafni, Zahavi, HiPINEB 2017).

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

from scheduler.physics.fabric.topology import (
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
