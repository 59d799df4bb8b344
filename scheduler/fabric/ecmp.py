"""Flow-level ECMP on tree fabrics: every flow hashed onto one path, then shared max-min fairly.

:class:`~scheduler.fabric.routing.Router` spreads a leaf's off-leaf traffic evenly over its live
uplinks by default (``balance="spread"``): the fluid limit of per-packet spraying or ideal
adaptive routing (Spectrum-X, InfiniBand AR, MegaScale's and Alibaba HPN's hash control).  With
``balance="ecmp"`` each flow instead takes one path chosen by a hash of its endpoints, as
switches do with the 5-tuple of an RDMA connection: a collective's few, long, line-rate
("elephant") flows collide on one uplink while others stay idle, and a synchronous collective
runs at the pace of its most loaded link.  With ``K`` flows hashed over ``M`` links the most
loaded link carries the maximum of a balls-into-bins draw (about ``ln K / ln ln K`` flows when
``K = M``), so the loss grows with the number of flows crossing a layer, even a non-blocking
one.

Paths (a folded Clos built by :func:`~scheduler.fabric.topology._tree`: leaf, spine, core)
-------------------------------------------------------------------------------------------
A flow between two leaves goes up one live uplink of its source leaf (hash 1) to spine ``s``.
Inside one block it comes down the live link from ``s`` to the destination leaf (hash 4).
Between blocks it goes up one live upper link of ``s`` (hash 2) to core ``c``, down one live link
from ``c`` into the destination block (hash 3) to spine ``s'``, and down from ``s'`` to the
destination leaf (hash 4).  Every hop hashes independently (switches seed their hash functions
apart, so paths do not polarise).  A flow inside one leaf crosses no switch link.

Failures are known one tier at a time, as with spreading: a downward hop with no live link
from the switch reached takes any live link into its destination (leaf or block) instead; a
hop with no live candidate at all cuts the job off (share 0), and so does a GPU on a failed
leaf.

Hashing is splitmix64 of ``(seed, source GPU, destination GPU, sub-flow, hop)``: the same seed
gives the same paths; another seed redraws them.  ``subflows`` splits each connection into that
many equal flows hashed apart (NCCL's ``NCCL_IB_QPS_PER_CONNECTION`` with switches hashing on
the queue pair, Meta's "E-ECMP with QP scaling", SIGCOMM 2024).

Units are single directed links (``2 * link + direction``, direction 0 upwards), so the
max-min filling of :func:`~scheduler.fabric.maxmin.max_min_rates` sees each link's own load.
Only the ring pattern lists flows; ``all_to_all`` (closed form, no GPU pairs) is refused.
"""

from __future__ import annotations

import numpy as np

from scheduler.fabric.flows import _TOL, _coalesce
from scheduler.fabric.maxmin import max_min_rates

BALANCES = ("spread", "ecmp")
"""How flows share equal-cost paths: ``spread`` evenly (the default), ``ecmp`` by flow hash."""

_U64 = np.uint64


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic)."""
    x = x + _U64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def flow_hash(seed: int, src: np.ndarray, dst: np.ndarray, sub: np.ndarray,
              hop: int) -> np.ndarray:
    """The uint64 hash of each flow at one hop: deterministic in all its arguments.

    >>> a = flow_hash(1, np.array([0, 0]), np.array([5, 5]), np.array([0, 1]), 1)
    >>> bool(a[0] == flow_hash(1, np.array([0]), np.array([5]), np.array([0]), 1)[0])
    True
    >>> bool(a[0] == a[1])
    False
    """
    h = _mix(np.full(np.shape(src), seed % 2**64, dtype=_U64))
    for part in (src, dst, sub):
        h = _mix(h ^ np.asarray(part).astype(_U64))
    return _mix(h ^ _U64(hop))


def expected_max_load(flows: int, links: int) -> float:
    """Expected flows on the busiest of ``links`` links when ``flows`` flows each pick one
    uniformly and independently (balls into bins; exact, not asymptotic).

    ``P(max <= m) = K! / M^K [x^K] (sum_{i <= m} x^i / i!)^M`` for ``K`` flows, ``M`` links.

    >>> expected_max_load(3, 3)  # (6 spread x 1 + 18 x 2 + 3 all on one x 3) / 27
    1.8888888888888888
    >>> expected_max_load(5, 1)
    5.0
    """
    k, m = int(flows), int(links)
    if k < 0 or m < 1:
        raise ValueError(f"need flows >= 0 and links >= 1, got {flows}, {links}")
    fact = np.cumprod(np.concatenate([[1.0], np.arange(1, k + 1, dtype=float)]))
    norm = fact[k] / float(m) ** k
    below = 0.0  # sum over cap of P(max > cap) = E[max]
    for cap in range(k):
        base = np.where(np.arange(k + 1) <= cap, 1.0 / fact, 0.0)
        poly, p, e = np.zeros(k + 1), base, m
        poly[0] = 1.0
        while e:  # base ** m truncated at degree k, by squaring
            if e & 1:
                poly = np.convolve(poly, p)[: k + 1]
            p = np.convolve(p, p)[: k + 1]
            e >>= 1
        below += 1.0 - min(1.0, float(norm * poly[k]))
    return float(below)


class _Table:
    """Links sorted by a key, for picking one live link per flow among those with its key."""

    def __init__(self, key: np.ndarray, link: np.ndarray):
        order = np.argsort(key, kind="stable")
        self.key, self.link = key[order], link[order]

    def pick(self, alive: np.ndarray, query: np.ndarray, h: np.ndarray) -> np.ndarray:
        """Per query, the live link of that key at ``h mod count`` (-1 where none is live)."""
        live = alive[self.link]
        key, link = self.key[live], self.link[live]
        lo = np.searchsorted(key, query, "left")
        n = np.searchsorted(key, query, "right") - lo
        at = lo + (h % np.maximum(n, 1).astype(_U64)).astype(np.int64)
        return np.where(n > 0, link[np.minimum(at, max(link.size - 1, 0))] if link.size else -1,
                        -1)


class EcmpPaths:
    """Hashed paths of a tree fabric's flows (tables built once per fabric).

    Parameters
    ----------
    link_a, link_b : numpy.ndarray of int
        Per link, its lower and upper switch.
    switch_block : numpy.ndarray of int
        Per switch, its block (a leaf's: its spines'); -1 for cores.
    n_switches : int
    port_gbps : float
        Capacity of every link and direction, Gb/s.
    seed : int
        Hash seed (>= 0).
    subflows : int
        Flows per connection, hashed apart, each carrying ``1 / subflows`` of it.
    """

    def __init__(self, link_a, link_b, switch_block, n_switches: int, port_gbps: float, *,
                 seed: int = 0, subflows: int = 1):
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"hash_seed must be an integer >= 0, not {seed!r}")
        if isinstance(subflows, bool) or not isinstance(subflows, int | np.integer) \
                or not 1 <= subflows <= 64:
            raise ValueError(f"subflows must be an integer in 1 .. 64, not {subflows!r}")
        a = np.asarray(link_a, np.int64)
        b = np.asarray(link_b, np.int64)
        blk = np.asarray(switch_block, np.int64)
        self.a, self.b, self.n_links = a, b, a.size
        self.seed, self.subflows = int(seed), int(subflows)
        self.port = float(port_gbps)
        self.n_sw = int(n_switches)
        self.n_blk = int(blk.max(initial=0)) + 1
        self.blk = blk
        links = np.arange(a.size)
        self.up_from = _Table(a, links)                     # a switch's uplinks
        self.pair = _Table(a * self.n_sw + b, links)        # the links of one lower-upper pair
        upper = blk[b] < 0  # links into the core layer (cores have no block)
        self.block_up = _Table(blk[a[upper]], links[upper])           # a block's upper links
        self.core_into = _Table(b[upper] * self.n_blk + blk[a[upper]], links[upper])
        self.dead = 2 * a.size
        self.n_units = self.dead + 1

    def rows(self, alive, job, src, dst, ls, ld, rate):
        """``(job, unit, Gb/s)`` rows of the flows' hashed paths (flows off their leaf only).

        ``unit`` is ``2 * link + direction`` (0 up, 1 down) or :attr:`dead` for a flow with no
        live path.
        """
        q = self.subflows
        if q > 1:
            sub = np.tile(np.arange(q, dtype=np.int64), job.size)
            job, src, dst, ls, ld = (np.repeat(v, q) for v in (job, src, dst, ls, ld))
            rate = np.repeat(rate / q, q)
        else:
            sub = np.zeros(job.size, np.int64)
        h = [flow_hash(self.seed, src, dst, sub, hop) for hop in range(4)]
        a, b = self.a, self.b
        l1 = self.up_from.pick(alive, ls, h[0])
        s = np.where(l1 >= 0, b[np.maximum(l1, 0)], -1)
        bs, bd = self.blk[ls], self.blk[ld]
        cross = bs != bd
        l2 = np.full(job.size, -1)
        l3 = np.full(job.size, -1)
        top = s.copy()
        if cross.any():
            c = np.flatnonzero(cross)
            up = self.up_from.pick(alive, s[c], h[1][c])
            up = np.where(up >= 0, up, self.block_up.pick(alive, bs[c], h[1][c]))
            down = np.where(up >= 0, self.core_into.pick(alive, b[np.maximum(up, 0)] * self.n_blk
                                                         + bd[c], h[2][c]), -1)
            down = np.where((up >= 0) & (down < 0), self.block_up.pick(alive, bd[c], h[2][c]),
                            down)
            l2[c], l3[c] = up, down
            top[c] = np.where(down >= 0, a[np.maximum(down, 0)], -1)
        l4 = self.pair.pick(alive, ld * self.n_sw + top, h[3])
        l4 = np.where(l4 >= 0, l4, self.up_from.pick(alive, ld, h[3]))
        dead = (l1 < 0) | (l4 < 0) | (cross & ((l2 < 0) | (l3 < 0)))
        hops = [(l1, 0, np.ones(job.size, bool)), (l2, 0, cross), (l3, 1, cross),
                (l4, 1, np.ones(job.size, bool))]
        j = np.concatenate([job[m & ~dead] for _, _, m in hops] + [job[dead]])
        u = np.concatenate([2 * lk[m & ~dead] + d for lk, d, m in hops]
                           + [np.full(int(dead.sum()), self.dead)])
        v = np.concatenate([rate[m & ~dead] for _, _, m in hops] + [rate[dead]])
        key, val = _coalesce(j * self.n_units + u, v)
        return key // self.n_units, key % self.n_units, val

    def share(self, alive, failed_leaf, job, src, dst, ls, ld, demand):
        """Max-min rates of every job over its flows' hashed paths.

        Parameters
        ----------
        alive : numpy.ndarray of bool
            Per link: True if up.
        failed_leaf : numpy.ndarray of bool
            Per switch: True if down (a job with a GPU under it is cut off).
        job, src, dst : numpy.ndarray of int
            Per flow: its job, source and destination GPU.
        ls, ld : numpy.ndarray of int
            Per flow: the source and destination GPUs' leaves.
        demand : numpy.ndarray of float
            Per job: per-GPU demand, Gb/s (each flow carries its job's demand).

        Returns
        -------
        tuple of numpy.ndarray
            Per-job rate (Gb/s), and per link and direction the load, Gb/s, shape
            ``(n_links, 2)``.
        """
        off = ls != ld
        cut = np.unique(np.concatenate([job[failed_leaf[ls]], job[failed_leaf[ld]]]))
        j, u, v = self.rows(alive, job[off], src[off], dst[off], ls[off], ld[off],
                            demand[job[off]])
        j = np.concatenate([j, cut])
        u = np.concatenate([u, np.full(cut.size, self.dead)])
        v = np.concatenate([v, demand[cut]])
        cap = np.append(np.repeat(np.where(alive, self.port, 0.0), 2), 0.0)
        offered = np.bincount(u, weights=v, minlength=self.n_units)
        hot = offered > cap * (1 + _TOL) + _TOL
        hot[self.dead] = True
        keep = hot[u] & (v > _TOL)
        rate = max_min_rates(j[keep], u[keep], v[keep], cap, demand)
        share = np.divide(rate, demand, out=np.ones(demand.size), where=demand > 0)
        load = np.bincount(u, weights=v * share[j], minlength=self.n_units)
        return rate, load[: self.dead].reshape(self.n_links, 2)
