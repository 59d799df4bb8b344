"""Inter-group routing over global links (Dragonfly+, islands joined ``"dragonfly+"``).

On a fabric whose groups are joined by global links, the leaf hop of a flow that leaves its
group depends on where it is going, so loads are not summed per leaf as on a tree.  The units
(see :mod:`scheduler.fabric.routing`) are one per leaf-spine *bundle* and direction
(``[0, n_bundle)`` up, ``[n_bundle, 2 n_bundle)`` down) and one per ordered group pair (the
global links from one group to another, from ``_pair0``), then the dead unit.  Per failure set
the capacity state holds, per group, ``ok[g, leaf, spine]`` (the bundle is live),
``w[g, spine, h]`` (live global links from the spine to group ``h``) and
``z[g, leaf, h] = sum_spine ok w``.

* Traffic inside a group, and Valiant traffic, leaves a leaf evenly over its live uplinks.
* Minimal traffic to group ``h`` goes over the leaf's live bundles to spines that own live
  global links to ``h``, in proportion to how many they own (``w / z``), then evenly over the
  live global links of the pair; the same at the destination.
* ``routing="valiant"`` sends all of a pair's traffic through the ``G - 2`` other groups,
  uniformly; ``routing="ugal"`` diverts a fraction per ordered pair, decided once from offered
  load (:meth:`InterGroupRouting._valiant_share`; the model is in the routing module).

:class:`InterGroupRouting` is a mixin of :class:`~scheduler.fabric.routing.Router`:
it reads the index arrays that ``Router.__init__`` builds and adds no state of its own.
"""

from __future__ import annotations

import numpy as np

from scheduler.fabric.flows import _coalesce, _expand
from scheduler.fabric.routing_types import _State, _Traffic


class InterGroupRouting:
    """Load, capacity and per-job rows of inter-group traffic, for :class:`Router`.

    Uses the router's ``routing``, ``_global``, ``_a``, ``_b``, ``_kind``, ``_n_sw``,
    ``_n_blk``, ``_n_units``, ``_leaf_block``, ``_spine_block``, ``_local``, ``_n_bundle``,
    ``_bundle_leaf``, ``_bundle_of``, ``_bundle_spine_local``, ``_pair0`` and ``_dead``.
    """

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

    def _global_capacity(self, alive, members) -> dict:
        """The :class:`_State` fields of a fabric with global links (live ``alive`` links,
        ``members`` live directed links per unit)."""
        nb, g = self._n_bundle, self._n_blk
        leaf_up = np.bincount(self._bundle_leaf, weights=members[:nb], minlength=self._n_sw)
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
        return {"leaf_up": leaf_up, "ok": ok, "w": w, "z": ok @ w}

    def _global_totals(self, st: _State, tr: _Traffic, x, scale) -> np.ndarray:
        """Load per unit, Gb/s, each job's traffic scaled by ``scale`` (None: full demand);
        ``x`` the Valiant fraction per ordered group pair."""
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
