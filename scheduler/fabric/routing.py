"""ECMP routing, per-link load and max-min fair shares for every running job of a fabric.

Traffic model
-------------
A job is a set of endpoints (GPU ids = fabric endpoint ids) and a per-GPU scale-out demand
``d`` (Gb/s, at most the port speed).  ``pattern="ring"``: the job's GPUs, ordered by id, are
grouped into nodes (``gpus_per_node`` consecutive ids); the GPU of rank ``r`` on the job's
``k``-th node sends ``d`` to the GPU of rank ``r`` on its next node, the last node wrapping to
the first (rail-aligned rings when the job holds whole nodes).  ``pattern="all_to_all"``: every
GPU spreads ``d`` evenly over the job's GPUs on other nodes (aggregated per leaf, block and job
with closed forms; GPU pairs are never listed).  A one-node job sends nothing on the fabric.

Routing: ECMP over shortest paths, from switch indices
------------------------------------------------------
What follows is the default, ``balance="spread"``: every split is even, the fluid limit of
per-packet spraying or ideal adaptive routing.  ``balance="ecmp"`` hashes each flow of a tree
fabric onto one path instead (:mod:`~scheduler.fabric.ecmp`).
Leaves are grouped into *blocks*, the leaves sharing one set of spines: a fat-tree pod, an
island, a Dragonfly+ group, a rail spine group.  A flow inside one leaf uses only its two
endpoint links.  Inside a block it goes leaf -> spine -> leaf, split evenly over the source
leaf's live uplinks and the destination leaf's live downlinks.  Between blocks of a tree
(fat-tree, rail, islands under a core layer) it also crosses the source block's live upper
links (spine-core or island-uplink) and the destination block's, split evenly over each.
Between groups joined by global links (Dragonfly+, islands joined ``"dragonfly+"``):

* ``routing="minimal"``: evenly over the live global links between the two groups; the leaf
  hop goes only to spines that own such links, in proportion to how many they own (and the
  same at the destination), which is exactly the union of shortest paths.
* ``routing="valiant"``: through a random intermediate group (uniform over the ``G - 2``
  others): evenly over the two legs' global links; the leaf hops spread over all uplinks.
* ``routing="ugal"``: per ordered group pair, a flow-level UGAL-G (Kim et al., ISCA 2008):
  traffic leaves the minimal path only when the offered load exceeds its capacity, and only
  while the minimal path stays more than twice as loaded as the Valiant alternative (two global
  hops against one).  The diverted fraction solves ``(1 - x) m = max(1, 2 (a + x T / C_alt))``
  (``m`` minimal utilisation, ``a`` mean background utilisation of the detour links, ``T`` the
  pair's offered Gb/s, ``C_alt`` the detour capacity), decided once from offered load.

Load is summed per *unit*, a set of directed links that always carry equal load (one leaf's
uplinks, one block's upper links downwards, one leaf-spine bundle, the global links from one
group to another), with ``np.bincount``; each live member gets the unit's load over its live
member count.  Per-link capacity is ``port_gbps``; parallel links are separate rows, so a
unit's capacity is ``port_gbps`` times its live members.

Failures and approximations
---------------------------
Failed links and every link of a failed switch drop out of their unit; the unit's remaining
members share its load (weighted ECMP that knows about failures one tier at a time).
Reachability across tiers is not re-checked: a leaf whose live uplinks all reach spines whose
upper links failed still counts as connected.  A unit with no live member has capacity 0, and
a job that must cross it, or has a GPU on a failed leaf, gets share 0.  Valiant legs are spread
over every intermediate group even when a pair has lost all its global links, and the
leaf-spine bounce inside the intermediate group is not charged.  Endpoint links (GPU-leaf) are
not in the link arrays and are not a constraint (the demand never exceeds the port rate).

Fair share
----------
:func:`max_min_rates` is progressive filling over units: every job's per-GPU rate rises
together; a job stops at its demand or when a unit it crosses fills.  ``share = rate / d``.
Only units whose offered load exceeds their capacity enter the filling.

Cost
----
One update builds per-job tables with sorts and ``np.bincount`` over the jobs' GPUs (no loop
over GPUs, links or jobs), then fills units in a loop whose rounds each freeze at least one
job.  Measured on a 2-core machine with 1,000 jobs (``python -m bench.routing``): 8-12 ms on
the 101,120-GPU hyperscale-100k islands, 30-50 ms (ring) and 90-130 ms (all-to-all) on a
100,352-endpoint radix-64 Dragonfly+.

Modules
-------
On a plain Dragonfly (``kind="dragonfly"``) the units are directed local links and ordered group
pairs; :mod:`~scheduler.fabric.dragonfly_routing` builds them (ring traffic only).
:class:`Router` (here) builds the unit indices, the capacity state and the tree loads, and
runs the update.  :mod:`~scheduler.fabric.global_links` routes traffic between groups
joined by global links (minimal, Valiant, UGAL), :mod:`~scheduler.fabric.all_to_all`
builds the all-to-all tables in closed form, :mod:`~scheduler.fabric.routing_types`
holds the data classes (:class:`LoadResult` and :class:`Route` are importable from here), and
:mod:`~scheduler.fabric.maxmin` the progressive filling.
"""

from __future__ import annotations

import time

import numpy as np

from scheduler.fabric.all_to_all import all_to_all_traffic
from scheduler.fabric.dragonfly import dragonfly_route
from scheduler.fabric.dragonfly_routing import PlainDragonflyRouting
from scheduler.fabric.ecmp import BALANCES, EcmpPaths
from scheduler.fabric.flows import _TOL, _job_gpus, _ring_flows, _runs
from scheduler.fabric.global_links import InterGroupRouting
from scheduler.fabric.maxmin import max_min_rates
from scheduler.fabric.routing_types import LoadResult, Route, _State, _Traffic
from scheduler.fabric.topology import LINK_KINDS, Fabric, _int

ROUTINGS = ("minimal", "ugal", "valiant")
"""Inter-group routing choices (they matter only on fabrics with global links)."""

PATTERNS = ("ring", "all_to_all")
"""Traffic patterns of :meth:`Router.update`."""


def check_balance(fabric: Fabric, balance: str) -> None:
    """Refuse a ``balance`` unknown or not modelled on ``fabric`` (one-line ``ValueError``).

    >>> from scheduler.fabric import dragonfly_plus
    >>> check_balance(dragonfly_plus(4), "ecmp")
    Traceback (most recent call last):
    ...
    ValueError: load balance 'ecmp' needs a tree fabric, not a dragonfly+ with global links
    """
    if balance not in BALANCES:
        raise ValueError(f"unknown load balance {balance!r}; choose one of: "
                         f"{', '.join(BALANCES)}")
    if balance != "spread" and (fabric.kind == "dragonfly" or np.any(fabric.link_kind == 2)):
        raise ValueError(f"load balance {balance!r} needs a tree fabric, not a {fabric.kind} "
                         "with global links")


class Router(InterGroupRouting, PlainDragonflyRouting):
    """Routing, link loads and fair shares for one fabric (precomputed once per fabric).

    Parameters
    ----------
    fabric : Fabric
        The scale-out fabric; endpoint ids are GPU ids.
    gpus_per_node : int, optional
        GPUs per node: node ``k`` holds GPU ids ``k * gpus_per_node ..`` (ring grouping).
    routing : {"minimal", "ugal", "valiant"}, optional
        Inter-group routing on fabrics with global links (ignored on trees); see the module
        docstring.
    balance : {"spread", "ecmp"}, optional
        How flows share equal-cost paths: evenly (the default: per-packet spraying or ideal
        adaptive routing), or each flow on one hashed path (:mod:`~scheduler.fabric.ecmp`;
        tree fabrics and ring traffic only).
    hash_seed : int, optional
        Seed of the ECMP hash (``balance="ecmp"``): the same seed, the same paths.
    subflows : int, optional
        ECMP flows per connection (queue pairs hashed apart), ``1 .. 64``.

    Examples
    --------
    >>> from scheduler.fabric import fat_tree
    >>> router = Router(fat_tree(4), gpus_per_node=2)
    >>> res = router.update([np.arange(8)], 100.0)   # a ring over 4 nodes in 2 pods
    >>> res.job_share.tolist(), float(res.link_load_gbps[router.fabric.link_kind == 1].sum())
    ([1.0], 800.0)
    >>> r = router.route(0, 15)
    >>> r.hops, r.link.size, float(r.fraction[r.direction == 0].sum())
    (6, 12, 2.0)
    """

    balance = "spread"
    """How flows share equal-cost paths (:data:`~scheduler.fabric.ecmp.BALANCES`); a class
    default, so that a router pickled before the option existed spreads as it did."""
    _ecmp: EcmpPaths | None = None

    def __init__(self, fabric: Fabric, *, gpus_per_node: int = 8, routing: str = "minimal",
                 balance: str = "spread", hash_seed: int = 0, subflows: int = 1):
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}, got {routing!r}")
        check_balance(fabric, balance)
        self.fabric = fabric
        self.gpus_per_node = _int("gpus_per_node", gpus_per_node)
        self.routing = routing
        self._cache: tuple | None = None
        self._plain = fabric.kind == "dragonfly"
        if self._plain:
            self._global = True
            self._plain_init(fabric)
            return
        n_sw = fabric.n_switches()
        a = fabric.link_a.astype(np.int64)
        b = fabric.link_b.astype(np.int64)
        kind = fabric.link_kind.astype(np.int64)
        up = kind == 0
        spine_block = np.maximum(fabric.switch_pod.astype(np.int64), 0)
        spine_of = np.full(n_sw, -1, np.int64)
        spine_of[a[up]] = b[up]
        leaf_block = np.where(spine_of >= 0, spine_block[np.maximum(spine_of, 0)], 0)
        if np.any(leaf_block[a[up]] != spine_block[b[up]]):
            raise ValueError("a leaf's uplinks reach spines of several pods")
        self._global = bool(np.any(kind == 2))
        if self._global and np.any((kind == 1) | (kind == 3)):
            raise ValueError("a fabric with both global links and a core layer is not supported")
        self._a, self._b, self._kind = a, b, kind
        self._ep_leaf = fabric.endpoint_leaf.astype(np.int64)
        self._leaf_block = leaf_block
        self._spine_block = spine_block
        self._n_sw = n_sw
        n_blk = int(spine_block.max()) + 1 if n_sw else 1
        self._n_blk = n_blk
        if self._global:
            keys = np.unique(a[up] * n_sw + b[up])
            n_bundle = keys.size
            self._bundle_leaf = keys // n_sw
            bundle = np.searchsorted(keys, a * n_sw + b)
            # every leaf and spine gets its rank inside its group, for dense per-group arrays
            local = np.zeros(n_sw, np.int64)
            for tier, group in ((0, leaf_block), (1, spine_block)):
                ids = np.flatnonzero(fabric.switch_tier == tier)
                ids = ids[np.argsort(group[ids], kind="stable")]
                grp = group[ids]
                local[ids] = np.arange(ids.size) - np.searchsorted(grp, grp)
            self._local = local
            self._bundle_spine_local = local[keys % n_sw]
            bundle_of = np.full((n_blk, int(local[self._bundle_leaf].max()) + 1,
                                 int(self._bundle_spine_local.max()) + 1), -1, np.int64)
            bundle_of[leaf_block[self._bundle_leaf], local[self._bundle_leaf],
                      self._bundle_spine_local] = np.arange(n_bundle)
            self._bundle_of = bundle_of
            ga, gb = spine_block[a], spine_block[b]
            pair0 = 2 * n_bundle
            self._pair0 = pair0
            self._unit_ab = np.where(up, bundle, pair0 + ga * n_blk + gb)
            self._unit_ba = np.where(up, n_bundle + bundle, pair0 + gb * n_blk + ga)
            self._n_bundle = n_bundle
            self._dead = pair0 + n_blk * n_blk
        else:
            blk = spine_block[a]
            self._unit_ab = np.where(up, a, 2 * n_sw + blk)
            self._unit_ba = np.where(up, n_sw + a, 2 * n_sw + n_blk + blk)
            self._dead = 2 * n_sw + 2 * n_blk
        self._n_units = self._dead + 1
        if balance == "ecmp":  # set only then: a spreading router pickles as it always did
            self.balance = balance
            tier = fabric.switch_tier
            block = np.where(tier == 2, -1, np.where(tier == 0, leaf_block, spine_block))
            self._ecmp = EcmpPaths(a, b, block, n_sw, fabric.port_gbps, seed=hash_seed,
                                   subflows=subflows)

    # ---------------------------------------------------------------------- public API

    def update(self, jobs: list[np.ndarray], demand_gbps, *,
               failed_links: np.ndarray | None = None,
               failed_switches: np.ndarray | None = None, pattern: str = "ring",
               ring_stride: np.ndarray | None = None) -> LoadResult:
        """Route every job, share the fabric max-min fairly and return per-link loads.

        Parameters
        ----------
        jobs : list of numpy.ndarray of int
            Per job, its GPU (endpoint) ids, in any order.
        demand_gbps : float or numpy.ndarray of float
            Per-GPU scale-out demand, Gb/s, ``0 .. port_gbps``: one value or one per job.
        failed_links : numpy.ndarray of bool, optional
            Per switch link: True if down.
        failed_switches : numpy.ndarray of bool, optional
            Per switch: True if down (all its links are down; its endpoints are cut off).
        pattern : {"ring", "all_to_all"}, optional
            Traffic pattern (module docstring).
        ring_stride : numpy.ndarray of int, optional
            Per job, the distance in nodes between ring neighbours (default 1): a
            data-parallel ring of a TP x PP job joins nodes ``tp * pp / gpus_per_node`` apart.

        Returns
        -------
        LoadResult
        """
        t0 = time.perf_counter()
        if pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {pattern!r}")
        n_jobs = len(jobs)
        demand = np.asarray(demand_gbps, dtype=float)
        if demand.shape not in ((), (n_jobs,)):
            raise ValueError(f"demand_gbps needs one value or {n_jobs}, got {demand.shape}")
        demand = np.broadcast_to(demand, (n_jobs,)).copy()
        port = float(self.fabric.port_gbps)
        if np.any(~np.isfinite(demand)) or np.any(demand < 0) or np.any(demand > port):
            raise ValueError(f"demand_gbps must lie in 0 .. port_gbps ({port:g})")
        st = self._state(failed_links, failed_switches)
        job, gpu = _job_gpus(jobs, self.fabric.n_endpoints)
        if pattern == "ring":
            stride = None
            if ring_stride is not None:
                stride = np.maximum(1, np.asarray(ring_stride, dtype=np.int64))
                if stride.shape != (n_jobs,):
                    raise ValueError(f"ring_stride needs one value per job ({n_jobs})")
            j, src, dst = _ring_flows(job, gpu, self.gpus_per_node, stride)
            if self._ecmp is not None:
                rate, load = self._ecmp.share(st.alive, st.failed_leaf, j, src, dst,
                                              self._ep_leaf[src], self._ep_leaf[dst], demand)
                share = np.divide(rate, demand, out=np.ones(n_jobs), where=demand > 0)
                return self._result(st, load, share, rate, t0)
            tr = self._flows(j, src, dst, demand[j])
        elif self._ecmp is not None:
            raise ValueError("balance='ecmp' hashes listed flows: use pattern='ring'")
        elif self._plain:
            raise ValueError("all_to_all traffic on a plain Dragonfly is not modelled; "
                             "use pattern='ring'")
        else:
            tr = all_to_all_traffic(job, gpu, demand, n_jobs, gpus_per_node=self.gpus_per_node,
                                    n_endpoints=self.fabric.n_endpoints, ep_leaf=self._ep_leaf,
                                    leaf_block=self._leaf_block, n_blk=self._n_blk,
                                    global_links=self._global)
        x = self._valiant_share(st, tr)
        if self._plain:
            tr.rows = self._plain_rows(st, tr, x)
        offered = self._totals(st, tr, x, None)
        hot = offered > st.capacity * (1 + _TOL) + _TOL
        hot[self._dead] = True
        rj, ru, rv = self._job_rows(st, tr, x, hot, demand)
        rate = max_min_rates(rj, ru, rv, st.capacity, demand)
        share = np.divide(rate, demand, out=np.ones(n_jobs), where=demand > 0)
        load = self._link_loads(st, self._totals(st, tr, x, share))
        return self._result(st, load, share, rate, t0)

    def _result(self, st, load, share, rate, t0) -> LoadResult:
        """Utilisation per link and tier from per-link loads, as a :class:`LoadResult`."""
        port = float(self.fabric.port_gbps)
        cap = np.where(st.alive, port, 0.0)
        busier = np.maximum(load[:, 0], load[:, 1])
        util = np.divide(busier, cap, out=np.zeros(cap.size), where=cap > 0)
        tiers = {}
        for code, name in enumerate(LINK_KINDS):
            mask = self._kind == code
            if mask.any():
                live = util[mask & st.alive]
                tiers[name] = ({"mean": float(live.mean()), "p99": float(np.percentile(live, 99)),
                                "max": float(live.max())} if live.size
                               else {"mean": 0.0, "p99": 0.0, "max": 0.0})
        return LoadResult(link_load_gbps=load, link_capacity_gbps=cap, utilisation=util,
                          job_share=share, job_rate_gbps=rate, tier_utilisation=tiers,
                          elapsed_s=time.perf_counter() - t0)

    def route(self, src: int, dst: int) -> Route:
        """The ECMP route of one flow from endpoint ``src`` to ``dst`` on the intact fabric
        (the even split over every shortest path, whatever the router's ``balance``).

        Parameters
        ----------
        src, dst : int
            Endpoint (GPU) ids.

        Returns
        -------
        Route
            Links, directions and the fraction of the flow on each (minimal routing: a single
            flow never congests a path).
        """
        n = self.fabric.n_endpoints
        for v in (src, dst):
            if not 0 <= int(v) < n:
                raise ValueError(f"endpoint ids must lie in 0 .. {n - 1}, got {v}")
        if self._plain:
            return dragonfly_route(self.fabric, src, dst)
        st = self._state(None, None)
        tr = self._flows(np.zeros(1, np.int64), np.array([src], np.int64),
                         np.array([dst], np.int64), np.ones(1))
        x = np.zeros((self._n_blk, self._n_blk))
        load = self._link_loads(st, self._totals(st, tr, x, None))
        link, direction = np.nonzero(load > _TOL)
        ls, ld = self._ep_leaf[src], self._ep_leaf[dst]
        if src == dst:
            hops = 0
        elif ls == ld:
            hops = 2
        elif self._leaf_block[ls] == self._leaf_block[ld]:
            hops = 4
        else:
            hops = 5 if self._global else 6
        return Route(hops=hops, link=link, direction=direction, fraction=load[link, direction])

    # -------------------------------------------------------------------- capacity state

    def _state(self, failed_links, failed_switches) -> _State:
        n_links, n_sw = self._a.size, self._n_sw
        fl = np.zeros(n_links, bool) if failed_links is None else np.asarray(failed_links, bool)
        fs = np.zeros(n_sw, bool) if failed_switches is None else np.asarray(failed_switches,
                                                                               bool)
        if fl.shape != (n_links,) or fs.shape != (n_sw,):
            raise ValueError(f"failed_links needs {n_links} booleans and failed_switches "
                             f"{n_sw}")
        if self._cache is not None and np.array_equal(self._cache[0], fl) \
                and np.array_equal(self._cache[1], fs):
            return self._cache[2]
        alive = ~fl & ~fs[self._a] & ~fs[self._b]
        members = (np.bincount(self._unit_ab[alive], minlength=self._n_units)
                   + np.bincount(self._unit_ba[alive], minlength=self._n_units))
        kw = ({} if not self._global else self._plain_capacity(alive) if self._plain
              else self._global_capacity(alive, members))
        st = _State(alive=alive, members=members,
                    capacity=members * float(self.fabric.port_gbps), failed_leaf=fs, **kw)
        self._cache = (fl.copy(), fs.copy(), st)
        return st

    # ------------------------------------------------------------------ traffic tables

    def _flows(self, j, src, dst, rate) -> _Traffic:
        """Traffic tables of explicit flows ``(job, src GPU, dst GPU, Gb/s)``."""
        if self._plain:
            return self._plain_flows(j, src, dst, rate)
        ls, ld = self._ep_leaf[src], self._ep_leaf[dst]
        touch = (np.concatenate([j, j]), np.concatenate([ls, ld]))
        off = ls != ld
        j, ls, ld, rate = j[off], ls[off], ld[off], rate[off]
        bs, bd = self._leaf_block[ls], self._leaf_block[ld]
        cross = bs != bd
        # flows of one node are adjacent: summing runs shrinks the tables (rows may repeat)
        even = ~cross if self._global else np.ones(cross.size, bool)
        tr = _Traffic(leaf_out=_runs(rate[even], j[even], ls[even]),
                      leaf_in=_runs(rate[even], j[even], ld[even]), touch=touch)
        j, ls, ld, bs, bd, rate = (v[cross] for v in (j, ls, ld, bs, bd, rate))
        if not self._global:
            tr.block_out, tr.block_in = _runs(rate, j, bs), _runs(rate, j, bd)
        else:
            tr.leaf_to, tr.leaf_from = _runs(rate, j, ls, bd), _runs(rate, j, ld, bs)
            tr.pair = _runs(rate, j, bs, bd)
        return tr

    # ------------------------------------------------------------------- units and rows

    def _totals(self, st, tr, x, scale) -> np.ndarray:
        """Load per unit, Gb/s, each job's traffic scaled by ``scale`` (None: full demand)."""
        if not self._global or self._plain:
            j, u, v = self._tree_rows(tr)
            return np.bincount(u, weights=v if scale is None else v * scale[j],
                               minlength=self._n_units)
        return self._global_totals(st, tr, x, scale)

    def _tree_rows(self, tr):
        """``(job, unit, Gb/s)`` rows of a tree fabric (cached on the traffic object)."""
        if tr.rows is None:
            n_sw, nb = self._n_sw, self._n_blk
            tabs = (tr.leaf_out, tr.leaf_in, tr.block_out, tr.block_in)
            offs = (0, n_sw, 2 * n_sw, 2 * n_sw + nb)
            tr.rows = (np.concatenate([t[0] for t in tabs]),
                       np.concatenate([t[1] + o for t, o in zip(tabs, offs, strict=True)]),
                       np.concatenate([t[2] for t in tabs]))
        return tr.rows

    def _job_rows(self, st, tr, x, hot, demand):
        """Per-job ``(job, unit, Gb/s)`` rows on ``hot`` units (a pair may repeat)."""
        tj, tl = tr.touch
        dead = np.unique(tj[st.failed_leaf[tl]])
        parts = [(dead, np.full(dead.size, self._dead), demand[dead])]
        if not self._global or self._plain:
            j, u, v = self._tree_rows(tr)
            parts.append((j[hot[u]], u[hot[u]], v[hot[u]]))
        else:
            parts += self._global_rows(st, tr, x, hot)
        j = np.concatenate([p[0] for p in parts])
        u = np.concatenate([p[1] for p in parts])
        v = np.concatenate([p[2] for p in parts])
        keep = hot[u] & (v > _TOL)
        return j[keep], u[keep], v[keep]

    def _link_loads(self, st, unit_load) -> np.ndarray:
        """Per link and direction, Gb/s: the unit's load over its live members."""
        out = np.zeros((self._a.size, 2))
        for col, unit in enumerate((self._unit_ab, self._unit_ba)):
            m = st.members[unit]
            np.divide(unit_load[unit], m, out=out[:, col], where=st.alive & (m > 0))
        return out
