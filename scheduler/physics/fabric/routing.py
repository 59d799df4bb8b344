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
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from scheduler.physics.fabric.flows import (
    _TOL,
    _coalesce,
    _cross,
    _expand,
    _groups,
    _job_gpus,
    _minus,
    _ring_flows,
    _runs,
)
from scheduler.physics.fabric.maxmin import max_min_rates
from scheduler.physics.fabric.topology import LINK_KINDS, Fabric, _int

ROUTINGS = ("minimal", "ugal", "valiant")
"""Inter-group routing choices (they matter only on fabrics with global links)."""

PATTERNS = ("ring", "all_to_all")
"""Traffic patterns of :meth:`Router.update`."""



@dataclass(frozen=True)
class LoadResult:
    """Link loads and job shares after max-min fair sharing.

    Parameters
    ----------
    link_load_gbps : numpy.ndarray of float, shape (n_links, 2)
        Per switch link, Gb/s: column 0 from ``link_a`` to ``link_b`` (upwards, or along a
        global link), column 1 back.
    link_capacity_gbps : numpy.ndarray of float, shape (n_links,)
        Per link and direction, Gb/s; 0 for a failed link.
    utilisation : numpy.ndarray of float, shape (n_links,)
        Load of the busier direction over capacity; 0 on failed links.
    job_share : numpy.ndarray of float, shape (n_jobs,)
        Achieved fraction of each job's demand, in ``[0, 1]``; 0 only for a job cut off by
        failures.
    job_rate_gbps : numpy.ndarray of float, shape (n_jobs,)
        Achieved per-GPU rate, Gb/s.
    tier_utilisation : dict of str to dict
        Per link kind present (``"leaf-spine"``, ``"spine-core"``, ``"global"``,
        ``"island-uplink"``): ``{"mean", "p99", "max"}`` of :attr:`utilisation` over live links.
    elapsed_s : float
        Wall-clock time of the update, seconds.
    """

    link_load_gbps: np.ndarray
    link_capacity_gbps: np.ndarray
    utilisation: np.ndarray
    job_share: np.ndarray
    job_rate_gbps: np.ndarray
    tier_utilisation: dict
    elapsed_s: float


@dataclass(frozen=True)
class Route:
    """The ECMP route of one flow.

    Parameters
    ----------
    hops : int
        Links on every shortest path, endpoint links included (0 for a flow to itself).
    link : numpy.ndarray of int
        Switch links the flow crosses.
    direction : numpy.ndarray of int
        Per entry: 0 from ``link_a`` to ``link_b``, 1 back.
    fraction : numpy.ndarray of float
        Share of the flow on that link and direction.
    """

    hops: int
    link: np.ndarray
    direction: np.ndarray
    fraction: np.ndarray


@dataclass
class _Traffic:
    """Per-job offered load at full demand, aggregated for routing (Gb/s).

    Tables are tuples of equal-length arrays, all values >= 0, rows may repeat.
    ``leaf_out`` / ``leaf_in`` ``(job, leaf, gbps)``: traffic leaving / entering a leaf that is
    spread evenly over its uplinks: all off-leaf traffic on a tree, traffic within the group on
    a fabric with global links.  Trees: ``block_out`` / ``block_in`` ``(job, block, gbps)``
    leaving / entering a block.  Global links: ``leaf_to`` / ``leaf_from``
    ``(job, leaf, block, gbps)`` from a leaf to another group / into a leaf from another group,
    ``pair`` ``(job, block, block, gbps)`` between groups.  ``touch``: ``(job, leaf)`` of GPUs
    that send or receive on the fabric.
    """

    leaf_out: tuple
    leaf_in: tuple
    block_out: tuple = ()
    block_in: tuple = ()
    leaf_to: tuple = ()
    leaf_from: tuple = ()
    pair: tuple = ()
    touch: tuple = ()
    rows: tuple | None = None


@dataclass(frozen=True)
class _State:
    """Capacity under one failure set."""

    alive: np.ndarray        # per link
    members: np.ndarray      # live directed links per unit
    capacity: np.ndarray     # per unit, Gb/s
    failed_leaf: np.ndarray  # per switch
    # fabrics with global links; [group, local leaf or spine, other group] arrays
    leaf_up: np.ndarray | None = None   # live uplinks per leaf
    ok: np.ndarray | None = None        # [g, leaf, spine]: the bundle is live
    w: np.ndarray | None = None         # [g, spine, h]: live global links from spine to h
    z: np.ndarray | None = None         # [g, leaf, h]: sum of w over the leaf's live spines


# ------------------------------------------------------------------------------- helpers


class Router:
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

    Examples
    --------
    >>> from scheduler.physics.fabric import fat_tree
    >>> router = Router(fat_tree(4), gpus_per_node=2)
    >>> res = router.update([np.arange(8)], 100.0)   # a ring over 4 nodes in 2 pods
    >>> res.job_share.tolist(), float(res.link_load_gbps[router.fabric.link_kind == 1].sum())
    ([1.0], 800.0)
    >>> r = router.route(0, 15)
    >>> r.hops, r.link.size, float(r.fraction[r.direction == 0].sum())
    (6, 12, 2.0)
    """

    def __init__(self, fabric: Fabric, *, gpus_per_node: int = 8, routing: str = "minimal"):
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}, got {routing!r}")
        self.fabric = fabric
        self.gpus_per_node = _int("gpus_per_node", gpus_per_node)
        self.routing = routing
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
        self._cache: tuple | None = None

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
            tr = self._flows(j, src, dst, demand[j])
        else:
            tr = self._all_to_all(job, gpu, demand, n_jobs)
        x = self._valiant_share(st, tr)
        offered = self._totals(st, tr, x, None)
        hot = offered > st.capacity * (1 + _TOL) + _TOL
        hot[self._dead] = True
        rj, ru, rv = self._job_rows(st, tr, x, hot, demand)
        rate = max_min_rates(rj, ru, rv, st.capacity, demand)
        share = np.divide(rate, demand, out=np.ones(n_jobs), where=demand > 0)
        load = self._link_loads(st, self._totals(st, tr, x, share))
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
        """The ECMP route of one flow from endpoint ``src`` to ``dst`` on the intact fabric.

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
        kw = {}
        if self._global:
            nb, g = self._n_bundle, self._n_blk
            kw["leaf_up"] = np.bincount(self._bundle_leaf, weights=members[:nb], minlength=n_sw)
            glob = alive & (self._kind == 2)
            a, b = self._a[glob], self._b[glob]
            ga, gb = self._spine_block[a], self._spine_block[b]
            n_sp = self._bundle_of.shape[2]
            w = np.bincount(np.concatenate([(ga * n_sp + self._local[a]) * g + gb,
                                            (gb * n_sp + self._local[b]) * g + ga]),
                            minlength=g * n_sp * g).reshape(g, n_sp, g).astype(float)
            valid = self._bundle_of >= 0
            ok = np.zeros(self._bundle_of.shape)
            ok[valid] = members[self._bundle_of[valid]] > 0
            kw.update(ok=ok, w=w, z=ok @ w)
        st = _State(alive=alive, members=members,
                    capacity=members * float(self.fabric.port_gbps), failed_leaf=fs, **kw)
        self._cache = (fl.copy(), fs.copy(), st)
        return st

    # ------------------------------------------------------------------ traffic tables

    def _flows(self, j, src, dst, rate) -> _Traffic:
        """Traffic tables of explicit flows ``(job, src GPU, dst GPU, Gb/s)``."""
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

    def _all_to_all(self, job, gpu, demand, n_jobs) -> _Traffic:
        """Closed-form tables of all-to-all traffic (GPU ``e`` sends ``w_e`` to each peer).

        ``w_e = d / (N - n)``: ``N`` GPUs in the job, ``n`` of them on ``e``'s node.  Per
        (job, node, leaf) triple holding ``c`` GPUs: out of the leaf ``c w (N - C_A - n + c)``
        (``C_A`` the job's GPUs on the leaf); into it ``c (W - W_A - n w + c w)`` (``W`` sums of
        ``w``).  Cross-group tables are outer products per job (``W_A C_h``) minus the pairs
        inside a node that straddles groups (``c_A c_h w``).
        """
        n_nodes = self.fabric.n_endpoints // self.gpus_per_node + 1
        jn, jn_inv = _groups(job * n_nodes + gpu // self.gpus_per_node)
        jn_job = jn // n_nodes
        in_node = np.bincount(jn_inv, minlength=jn.size).astype(float)
        size = np.bincount(job, minlength=n_jobs).astype(float)
        peers = size[jn_job] - in_node
        w_jn = np.divide(demand[jn_job], peers, out=np.zeros(jn.size), where=peers > 0)
        wtot = np.bincount(job, weights=w_jn[jn_inv], minlength=n_jobs)
        leaf = self._ep_leaf[gpu]
        active = peers[jn_inv] > 0
        ctx = (jn_inv, jn_job, in_node, w_jn, size, wtot)
        tl, xl = self._a2a_level(ctx, leaf, self._n_sw)
        tb, xb = self._a2a_level(ctx, self._leaf_block[leaf], self._n_blk)
        touch = (job[active], leaf[active])
        if not self._global:
            return _Traffic(leaf_out=xl[:2] + xl[4:5], leaf_in=xl[:2] + xl[5:6],
                            block_out=xb[:2] + xb[4:5], block_in=xb[:2] + xb[5:6], touch=touch)
        lb = self._leaf_block
        # (job, leaf, other group): outer products per job, minus pairs inside one node
        ia, ib = _cross(xl[0], xb[0], n_jobs)
        ok = xb[1][ib] != lb[xl[1][ia]]
        ia, ib = ia[ok], ib[ok]
        ca, cb = _cross(tl[0], tb[0], jn.size)
        ok = tb[1][cb] != lb[tl[1][ca]]
        ca, cb = ca[ok], cb[ok]
        inside = tl[2][ca] * tb[2][cb] * w_jn[tl[0][ca]]
        tr = _Traffic(leaf_out=(), leaf_in=(), touch=touch)
        for name, total, main in (("leaf_to", xl[4], xl[3][ia] * xb[2][ib]),
                                  ("leaf_from", xl[5], xl[2][ia] * xb[3][ib])):
            rows = _minus((xl[0][ia], xl[1][ia], xb[1][ib], main),
                          (jn_job[tl[0][ca]], tl[1][ca], tb[1][cb], inside))
            setattr(tr, name, rows)
            # the rest of what leaves (enters) the leaf stays in its group: even ECMP
            local = (total - np.bincount(ia, weights=main, minlength=total.size)
                     + np.bincount(tl[3][ca], weights=inside, minlength=total.size))
            keep = local > _TOL
            setattr(tr, "leaf_out" if name == "leaf_to" else "leaf_in",
                    (xl[0][keep], xl[1][keep], local[keep]))
        pa, pb = _cross(xb[0], xb[0], n_jobs)
        ok = xb[1][pa] != xb[1][pb]
        pa, pb = pa[ok], pb[ok]
        qa, qb = _cross(tb[0], tb[0], jn.size)
        ok = tb[1][qa] != tb[1][qb]
        qa, qb = qa[ok], qb[ok]
        tr.pair = _minus((xb[0][pa], xb[1][pa], xb[1][pb], xb[3][pa] * xb[2][pb]),
                         (jn_job[tb[0][qa]], tb[1][qa], tb[1][qb],
                          tb[2][qa] * tb[2][qb] * w_jn[tb[0][qa]]))
        return tr

    @staticmethod
    def _a2a_level(ctx, x, nx):
        """All-to-all sums at one level (leaf or block ids ``x`` per GPU).

        Returns ``(node, x, count, row)`` per (job, node, x) triple (``row`` indexes the
        second table) and ``(job, x, count, w sum, out, in)`` per (job, x).
        """
        jn_inv, jn_job, in_node, w_jn, size, wtot = ctx
        t, t_inv = _groups(jn_inv * nx + x)
        c = np.bincount(t_inv, minlength=t.size).astype(float)
        t_jn, t_x = t // nx, t % nx
        t_job = jn_job[t_jn]
        w = w_jn[t_jn]
        jx, jx_inv = _groups(t_job * nx + t_x)
        cnt = np.bincount(jx_inv, weights=c, minlength=jx.size)
        wsum = np.bincount(jx_inv, weights=c * w, minlength=jx.size)
        out = c * w * (size[t_job] - cnt[jx_inv] - in_node[t_jn] + c)
        inn = c * (wtot[t_job] - wsum[jx_inv] - in_node[t_jn] * w + c * w)
        return ((t_jn, t_x, c, jx_inv),
                (jx // nx, jx % nx, cnt, wsum, np.bincount(jx_inv, weights=out, minlength=jx.size),
                 np.bincount(jx_inv, weights=inn, minlength=jx.size)))

    # ------------------------------------------------------------------- units and rows

    def _valiant_share(self, st: _State, tr: _Traffic) -> np.ndarray:
        """Fraction of each ordered group pair's traffic sent through an intermediate group."""
        g = self._n_blk
        x = np.zeros((g, g))
        if not self._global or self.routing == "minimal" or g <= 2:
            return x
        if self.routing == "valiant":
            x[:] = 1.0
            np.fill_diagonal(x, 0.0)
            return x
        _, s, d, v = tr.pair
        t = np.bincount(s * g + d, weights=v, minlength=g * g).reshape(g, g)
        c = st.capacity[self._pair0:self._dead].reshape(g, g)
        k = 1.0 / (g - 2)
        u = np.divide(t, c, out=np.zeros((g, g)), where=c > 0)
        background = np.maximum((u.sum(1)[:, None] - u) * k, (u.sum(0)[None, :] - u) * k)
        c_alt = np.minimum(c.sum(1)[:, None] - c, c.sum(0)[None, :] - c)
        m = np.divide(t, c, out=np.full((g, g), np.inf), where=c > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            detour = np.divide(t, c_alt, out=np.full((g, g), np.inf), where=c_alt > 0)
            x_eq = (m - 2 * background) / (m + 2 * detour)
            x_cap = 1.0 - 1.0 / m
        x = np.where(m > 1, np.clip(np.minimum(np.nan_to_num(x_eq, nan=1.0), x_cap), 0, 1), 0)
        x[(c_alt == 0) | (t == 0)] = 0.0
        return x

    def _totals(self, st, tr, x, scale) -> np.ndarray:
        """Load per unit, Gb/s, each job's traffic scaled by ``scale`` (None: full demand)."""
        if not self._global:
            j, u, v = self._tree_rows(tr)
            return np.bincount(u, weights=v if scale is None else v * scale[j],
                               minlength=self._n_units)
        n_sw, g = self._n_sw, self._n_blk
        sc = (lambda t: t[-1]) if scale is None else (lambda t: t[-1] * scale[t[0]])
        tot = np.zeros(self._n_units)
        for lo, to, down in ((tr.leaf_out, tr.leaf_to, False), (tr.leaf_in, tr.leaf_from, True)):
            valiant = self._valiant_of(x, to, down)
            minimal = sc(to) * (1.0 - valiant)
            uniform = (np.bincount(lo[1], weights=sc(lo), minlength=n_sw)
                       + np.bincount(to[1], weights=sc(to) * valiant, minlength=n_sw))
            nb = self._n_bundle
            bl = self._bundle_leaf
            tot[nb * down:nb * (down + 1)] += (uniform[bl] * st.members[nb * down:nb * (down + 1)]
                                               / np.maximum(st.leaf_up[bl], 1))
            # minimal: per group, (leaf x group) demand over z, times (group x spine) links
            n_leaf = st.z.shape[1]
            m = np.bincount((self._leaf_block[to[1]] * n_leaf + self._local[to[1]]) * g + to[2],
                            weights=minimal, minlength=st.z.size).reshape(st.z.shape)
            m = m.astype(float, copy=False)  # bincount of no rows is integer
            np.divide(m, st.z, out=m, where=st.z > 0)
            spread = (m @ st.w.transpose(0, 2, 1)) * st.ok
            valid = self._bundle_of >= 0
            tot[nb * down + self._bundle_of[valid]] += spread[valid]
        _, s, d, _ = tr.pair
        t = np.bincount(s * g + d, weights=sc(tr.pair), minlength=g * g).reshape(g, g)
        pair = (1.0 - x) * t
        if g > 2:
            val = x * t / (g - 2)
            pair += (val.sum(1)[:, None] - val) + (val.sum(0)[None, :] - val)
            np.fill_diagonal(pair, 0.0)
        tot[self._pair0:self._dead] += pair.ravel()
        return tot

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
        if not self._global:
            j, u, v = self._tree_rows(tr)
            parts.append((j[hot[u]], u[hot[u]], v[hot[u]]))
        else:
            parts += self._global_rows(st, tr, x, hot)
        j = np.concatenate([p[0] for p in parts])
        u = np.concatenate([p[1] for p in parts])
        v = np.concatenate([p[2] for p in parts])
        keep = hot[u] & (v > _TOL)
        return j[keep], u[keep], v[keep]

    def _global_rows(self, st, tr, x, hot):
        """Per-job rows of a fabric with global links, built only for leaves with hot units."""
        nb, g = self._n_bundle, self._n_blk
        parts = []
        for lo, to, down in ((tr.leaf_out, tr.leaf_to, False), (tr.leaf_in, tr.leaf_from, True)):
            hot_leaf = np.bincount(self._bundle_leaf, weights=hot[nb * down:nb * (down + 1)],
                                   minlength=self._n_sw) > 0
            hot_leaf |= st.leaf_up == 0
            valiant = self._valiant_of(x, to, down)
            m1, m2 = hot_leaf[lo[1]], hot_leaf[to[1]]
            parts.append(self._spread_uniform(
                st, np.concatenate([lo[0][m1], to[0][m2]]),
                np.concatenate([lo[1][m1], to[1][m2]]),
                np.concatenate([lo[2][m1], (to[3] * valiant)[m2]]), down, hot))
            parts.append(self._spread_minimal(st, to[0][m2], to[1][m2], to[2][m2],
                                              (to[3] * (1.0 - valiant))[m2], down, hot))
        hp = hot[self._pair0:self._dead].reshape(g, g)
        if not hp.any():
            return parts
        pj, ps, pd, pv = tr.pair
        xe = x[ps, pd]
        k = 1.0 / (g - 2) if g > 2 else 0.0
        # a pair unit's coefficient is a sum of signed terms: add them up per job first
        pairs = [(pj, self._pair0 + ps * g + pd, pv * (1.0 - xe - 2 * xe * k))]
        if g > 2 and xe.any():
            # Valiant legs: from the source group over its hot pairs, into the destination
            # group over its hot pairs (units listed by row, then by column)
            by_row = np.flatnonzero(hp)
            by_col = np.flatnonzero(hp.T)
            for grp, order, units in ((ps, by_row // g, by_row),
                                      (pd, by_col // g, (by_col % g) * g + by_col // g)):
                key, val = _coalesce(pj * g + grp, pv * xe * k)
                which, pos = _expand(np.searchsorted(order, np.arange(g + 1)), key % g)
                pairs.append((key[which] // g, self._pair0 + units[pos], val[which]))
        u = np.concatenate([p[1] for p in pairs])
        keep = hot[u]
        key, val = _coalesce(np.concatenate([p[0] for p in pairs])[keep] * self._n_units
                             + u[keep], np.concatenate([p[2] for p in pairs])[keep])
        parts.append((key // self._n_units, key % self._n_units, val))
        return parts

    def _valiant_of(self, x, to, down):
        """Valiant fraction of each row of ``leaf_to`` (``down``: ``leaf_from``)."""
        if not x.any():
            return np.zeros(to[1].size)
        here = self._leaf_block[to[1]]
        return x[to[2], here] if down else x[here, to[2]]

    def _hot_bundles(self, leaf, down, hot):
        """``(row, bundle)``: each ``leaf[row]``'s bundles that are hot in direction ``down``."""
        nb = self._n_bundle
        hot_b = np.flatnonzero(hot[nb * down:nb * (down + 1)])
        which, pos = _expand(np.searchsorted(self._bundle_leaf[hot_b], np.arange(self._n_sw + 1)),
                             leaf)
        return which, hot_b[pos]

    def _spread_uniform(self, st, job, leaf, value, down, hot):
        """Rows spreading ``value`` over each leaf's live bundles (by live members), kept only
        for ``hot`` bundle units; a leaf with no live uplink sends to the dead unit."""
        which, bundle = self._hot_bundles(leaf, down, hot)
        unit = bundle + self._n_bundle * down
        frac = st.members[unit] / np.maximum(st.leaf_up[leaf[which]], 1)
        dead = st.leaf_up[leaf] == 0
        return (np.concatenate([job[which], job[dead]]),
                np.concatenate([unit, np.full(dead.sum(), self._dead)]),
                np.concatenate([value[which] * frac, value[dead]]))

    def _spread_minimal(self, st, job, leaf, other, value, down, hot):
        """Rows of minimal inter-group traffic on ``hot`` bundles: over the leaf's live bundles
        to spines that own live global links to (or from) group ``other``, in proportion to how
        many they own; with no such spine the rows go to the dead unit."""
        grp, ll = self._leaf_block[leaf], self._local[leaf]
        z = st.z[grp, ll, other]
        which, bundle = self._hot_bundles(leaf, down, hot)
        unit = bundle + self._n_bundle * down
        w = (st.w[grp[which], self._bundle_spine_local[bundle], other[which]]
             * st.ok[grp[which], ll[which], self._bundle_spine_local[bundle]])
        keep = w > 0
        which, unit, w = which[keep], unit[keep], w[keep]
        dead = z == 0
        return (np.concatenate([job[which], job[dead]]),
                np.concatenate([unit, np.full(dead.sum(), self._dead)]),
                np.concatenate([value[which] * w / z[which], value[dead]]))

    def _link_loads(self, st, unit_load) -> np.ndarray:
        """Per link and direction, Gb/s: the unit's load over its live members."""
        out = np.zeros((self._a.size, 2))
        for col, unit in enumerate((self._unit_ab, self._unit_ba)):
            m = st.members[unit]
            np.divide(unit_load[unit], m, out=out[:, col], where=st.alive & (m > 0))
        return out
