"""Job routing on a plain Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008), for :class:`Router`.

A plain Dragonfly has no leaf/spine split: every router holds terminals, joins the other
routers of its group by one local link each and owns some of the group's global links.  The
units that loads are summed over (see :mod:`scheduler.fabric.routing`) are one per
directed local link (``[0, n_links)`` from ``link_a`` to ``link_b``, ``[n_links, 2 n_links)``
back) and one per ordered group pair (the global links from one group to another, from
``_pair0``, shared evenly by the live ones), then the dead unit.

* A flow inside a group takes the direct local link; when that link is down it takes the
  two-hop detours through the group's other routers, evenly (both links of a detour live).
* Minimal traffic from router ``r`` to group ``h`` is split evenly over the live global links
  of the pair: it goes to each router ``n`` of ``r``'s group in proportion to the live global
  links ``n`` owns to ``h`` (over the local link ``r -> n``, none when ``n = r``; only routers
  ``r`` still reaches), then on the pair's global links; the same at the destination group.
* ``routing="valiant"`` / ``"ugal"`` (the fraction per ordered group pair is the Dragonfly+
  one, :meth:`~scheduler.fabric.global_links.InterGroupRouting._valiant_share`):
  diverted traffic leaves its router towards every router of the group in proportion to its
  live global links, crosses the pair units of the two legs through each of the ``G - 2``
  other groups uniformly, and arrives the same way; the local hop inside the intermediate
  group is not charged.

Like the Dragonfly+ model, the split knows about failures one hop at a time: the source side
does not check that the far router of a global link still reaches the destination router.

:class:`PlainDragonflyRouting` is a mixin of :class:`~scheduler.fabric.routing.Router`;
it builds its index arrays in :meth:`_plain_init` and keeps per-failure state in
:class:`~scheduler.fabric.routing_types._State` (``ok`` and ``w``).
"""

from __future__ import annotations

import numpy as np

from scheduler.fabric.flows import _runs
from scheduler.fabric.routing_types import _Traffic
from scheduler.fabric.topology import LINK_KINDS, Fabric

_LOCAL = LINK_KINDS.index("local")
_GLOBAL = LINK_KINDS.index("global")


class PlainDragonflyRouting:
    """Unit indices, capacity state and ``(job, unit, Gb/s)`` rows of a plain Dragonfly."""

    def _plain_init(self, fabric: Fabric) -> None:
        """Index arrays: routers grouped by ``switch_pod``, rank inside the group, and the unit
        of each directed local link as ``[router, rank of the other end]`` tables."""
        a = fabric.link_a.astype(np.int64)
        b = fabric.link_b.astype(np.int64)
        kind = fabric.link_kind.astype(np.int64)
        if np.any((kind != _LOCAL) & (kind != _GLOBAL)):
            raise ValueError("a plain Dragonfly has only local and global switch links")
        n_r = fabric.n_switches()
        grp = fabric.switch_pod.astype(np.int64)
        if n_r and (grp.min() < 0 or np.any(np.diff(grp) < 0)):
            raise ValueError("a plain Dragonfly's routers must be numbered group by group")
        local = kind == _LOCAL
        if np.any(grp[a[local]] != grp[b[local]]):
            raise ValueError("a local link joins routers of two groups")
        n_grp = int(grp.max()) + 1 if n_r else 1
        first = np.searchsorted(grp, np.arange(n_grp + 1))
        rank = np.arange(n_r) - first[grp]
        size = int(np.diff(first).max()) if n_r else 1
        n_links = a.size
        out_unit = np.full((n_r, size), -1, np.int64)   # unit of r -> (group's rank i)
        in_unit = np.full((n_r, size), -1, np.int64)    # unit of (group's rank i) -> r
        la, lb, li = a[local], b[local], np.flatnonzero(local)
        out_unit[la, rank[lb]], out_unit[lb, rank[la]] = li, n_links + li
        in_unit[lb, rank[la]], in_unit[la, rank[lb]] = li, n_links + li
        pair0 = 2 * n_links
        ga, gb = grp[a], grp[b]
        self._a, self._b, self._kind = a, b, kind
        self._unit_ab = np.where(local, np.arange(n_links), pair0 + ga * n_grp + gb)
        self._unit_ba = np.where(local, n_links + np.arange(n_links), pair0 + gb * n_grp + ga)
        self._pair0, self._dead = pair0, pair0 + n_grp * n_grp
        self._n_units = self._dead + 1
        self._n_sw, self._n_blk = n_r, n_grp
        self._ep_leaf = fabric.endpoint_leaf.astype(np.int64)
        self._leaf_block = self._spine_block = grp
        self._first, self._rank, self._size = first, rank, size
        self._out_unit, self._in_unit = out_unit, in_unit
        self._local_link = np.full((n_r, size), -1, np.int64)
        self._local_link[la, rank[lb]], self._local_link[lb, rank[la]] = li, li

    def _plain_capacity(self, alive: np.ndarray) -> dict:
        """``ok[r, i]``: router ``r`` reaches rank ``i`` of its group (itself, or over a live
        local link); ``w[r, h]``: live global links from router ``r`` to group ``h``; ``z[r]``
        all of router ``r``'s live global links."""
        ll = self._local_link
        ok = np.where(ll >= 0, alive[np.maximum(ll, 0)], False).astype(float)
        ok[np.arange(self._n_sw), self._rank] = 1.0
        glob = alive & (self._kind == _GLOBAL)
        a, b = self._a[glob], self._b[glob]
        g, grp = self._n_blk, self._spine_block
        w = np.bincount(np.concatenate([a * g + grp[b], b * g + grp[a]]),
                        minlength=self._n_sw * g).reshape(self._n_sw, g).astype(float)
        return {"ok": ok, "w": w, "z": w.sum(1)}

    def _plain_flows(self, j, src, dst, rate) -> _Traffic:
        """Traffic tables of explicit flows: ``leaf_out`` is ``(job, router, router, Gb/s)``
        inside a group; ``leaf_to``, ``leaf_from`` and ``pair`` as on Dragonfly+."""
        rs, rd = self._ep_leaf[src], self._ep_leaf[dst]
        touch = (np.concatenate([j, j]), np.concatenate([rs, rd]))
        off = rs != rd
        j, rs, rd, rate = j[off], rs[off], rd[off], rate[off]
        gs, gd = self._spine_block[rs], self._spine_block[rd]
        cross = gs != gd
        inside = ~cross
        tr = _Traffic(leaf_out=_runs(rate[inside], j[inside], rs[inside], rd[inside]),
                      leaf_in=(), touch=touch)
        j, rs, rd, gs, gd, rate = (v[cross] for v in (j, rs, rd, gs, gd, rate))
        tr.leaf_to, tr.leaf_from = _runs(rate, j, rs, gd), _runs(rate, j, rd, gs)
        tr.pair = _runs(rate, j, gs, gd)
        return tr

    def _plain_rows(self, st, tr: _Traffic, x: np.ndarray):
        """All ``(job, unit, Gb/s)`` rows of the traffic ``tr`` under the capacity state ``st``
        with Valiant fraction ``x`` per ordered group pair."""
        parts = [self._intra_rows(st, *tr.leaf_out)]
        for table, down in ((tr.leaf_to, False), (tr.leaf_from, True)):
            parts.append(self._edge_rows(st, *table, x, down))
        parts.append(self._pair_rows(*tr.pair, x))
        return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))

    # ------------------------------------------------------------------------ helpers

    def _candidates(self, router):
        """``(rows, size)`` router ids of each router's group by rank, and a validity mask."""
        cand = self._first[self._spine_block[router]][:, None] + np.arange(self._size)
        valid = cand < self._first[self._spine_block[router] + 1][:, None]
        return np.where(valid, cand, 0), valid

    def _intra_rows(self, st, j, rs, rd, v):
        """Direct local link, or the two-hop detours through the group when it is down."""
        ok = st.ok
        direct = ok[rs, self._rank[rd]] > 0
        rows = [(j[direct], self._out_unit[rs[direct], self._rank[rd[direct]]], v[direct])]
        j, rs, rd, v = j[~direct], rs[~direct], rd[~direct], v[~direct]
        cand, valid = self._candidates(rs)
        via = valid & (ok[rs] > 0) & (ok[rd] > 0) & (cand != rs[:, None]) & (cand != rd[:, None])
        n = via.sum(1)
        r, k = np.nonzero(via)
        share = v[r] / n[r]
        rows += [(j[r], self._out_unit[rs[r], k], share), (j[r], self._in_unit[rd[r], k], share),
                 (j[n == 0], np.full(int((n == 0).sum()), self._dead), v[n == 0])]
        return tuple(np.concatenate([p[i] for p in rows]) for i in range(3))

    def _edge_rows(self, st, j, router, other, v, x, down):
        """The local hop between ``router`` and the routers of its group owning global links to
        (``down``: from) group ``other``: minimal in proportion to those links, Valiant in
        proportion to all their live global links."""
        here = self._spine_block[router]
        xv = x[other, here] if down else x[here, other]
        cand, valid = self._candidates(router)
        reach = st.ok[router] * valid
        w_min = st.w[cand, other[:, None]] * reach
        w_val = st.z[cand] * reach if xv.any() else np.zeros_like(w_min)
        z_min, z_val = w_min.sum(1), w_val.sum(1)
        frac = (np.divide(w_min, z_min[:, None], out=np.zeros_like(w_min),
                          where=z_min[:, None] > 0) * (1 - xv)[:, None]
                + np.divide(w_val, z_val[:, None], out=np.zeros_like(w_val),
                            where=z_val[:, None] > 0) * xv[:, None])
        lost = np.where(z_min > 0, 0.0, 1 - xv) + np.where(z_val > 0, 0.0, xv)
        frac[np.arange(router.size), self._rank[router]] = 0.0   # own global links: no hop
        r, k = np.nonzero(frac > 0)
        unit = (self._in_unit if down else self._out_unit)[router[r], k]
        dead = lost > 0
        return (np.concatenate([j[r], j[dead]]),
                np.concatenate([unit, np.full(int(dead.sum()), self._dead)]),
                np.concatenate([v[r] * frac[r, k], v[dead] * lost[dead]]))

    def _pair_rows(self, j, gs, gd, v, x):
        """Global hops: the pair's own units, and both legs through every other group."""
        g, p0 = self._n_blk, self._pair0
        xv = x[gs, gd]
        rows = [(j, p0 + gs * g + gd, v * (1 - xv))]
        div = np.flatnonzero(xv > 0)
        if div.size and g > 2:
            r = np.repeat(div, g)
            mid = np.tile(np.arange(g), div.size)
            keep = (mid != gs[r]) & (mid != gd[r])
            r, mid = r[keep], mid[keep]
            leg = v[r] * xv[r] / (g - 2)
            rows += [(j[r], p0 + gs[r] * g + mid, leg), (j[r], p0 + mid * g + gd[r], leg)]
        return tuple(np.concatenate([p[i] for p in rows]) for i in range(3))
