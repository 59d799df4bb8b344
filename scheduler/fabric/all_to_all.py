"""All-to-all traffic tables in closed form, aggregated per leaf, block and job.

Every GPU of a job spreads its demand ``d`` evenly over the job's GPUs on other nodes; a
one-node job sends nothing on the fabric.  The tables (:class:`~.routing_types._Traffic`) are
sums over GPUs computed with sorts and ``np.bincount`` (GPU pairs are never listed), so their
size grows with the (job, leaf) and (job, block) pairs, not with the square of a job's size.
The routing of the tables is :class:`~scheduler.fabric.routing.Router`'s.
"""

from __future__ import annotations

import numpy as np

from scheduler.fabric.flows import _TOL, _cross, _groups, _minus
from scheduler.fabric.routing_types import _Traffic


def all_to_all_traffic(job, gpu, demand, n_jobs, *, gpus_per_node: int, n_endpoints: int,
                       ep_leaf, leaf_block, n_blk: int, global_links: bool) -> _Traffic:
    """Closed-form tables of all-to-all traffic (GPU ``e`` sends ``w_e`` to each peer).

    ``w_e = d / (N - n)``: ``N`` GPUs in the job, ``n`` of them on ``e``'s node.  Per
    (job, node, leaf) triple holding ``c`` GPUs: out of the leaf ``c w (N - C_A - n + c)``
    (``C_A`` the job's GPUs on the leaf); into it ``c (W - W_A - n w + c w)`` (``W`` sums of
    ``w``).  Cross-group tables are outer products per job (``W_A C_h``) minus the pairs
    inside a node that straddles groups (``c_A c_h w``).

    Parameters
    ----------
    job, gpu : numpy.ndarray of int
        Per GPU of every job: its job index and GPU (endpoint) id, ordered by job then GPU
        id (as :func:`~.flows._job_gpus` returns them).
    demand : numpy.ndarray of float, shape (n_jobs,)
        Per-GPU demand of each job, Gb/s.
    n_jobs : int
        Number of jobs.
    gpus_per_node, n_endpoints : int
        Node size (node ``k`` holds GPU ids ``k * gpus_per_node ..``) and fabric endpoints.
    ep_leaf : numpy.ndarray of int
        Leaf switch of each endpoint.
    leaf_block : numpy.ndarray of int, shape (n_switches,)
        Block (pod, island, group) of each leaf.
    n_blk : int
        Number of blocks.
    global_links : bool
        The blocks are groups joined by global links (tables ``leaf_to`` / ``leaf_from`` /
        ``pair``) rather than a tree (tables ``block_out`` / ``block_in``).
    """
    n_nodes = n_endpoints // gpus_per_node + 1
    jn, jn_inv = _groups(job * n_nodes + gpu // gpus_per_node)
    jn_job = jn // n_nodes
    in_node = np.bincount(jn_inv, minlength=jn.size).astype(float)
    size = np.bincount(job, minlength=n_jobs).astype(float)
    peers = size[jn_job] - in_node
    w_jn = np.divide(demand[jn_job], peers, out=np.zeros(jn.size), where=peers > 0)
    wtot = np.bincount(job, weights=w_jn[jn_inv], minlength=n_jobs)
    leaf = ep_leaf[gpu]
    active = peers[jn_inv] > 0
    ctx = (jn_inv, jn_job, in_node, w_jn, size, wtot)
    tl, xl = _a2a_level(ctx, leaf, leaf_block.size)
    tb, xb = _a2a_level(ctx, leaf_block[leaf], n_blk)
    touch = (job[active], leaf[active])
    if not global_links:
        return _Traffic(leaf_out=xl[:2] + xl[4:5], leaf_in=xl[:2] + xl[5:6],
                        block_out=xb[:2] + xb[4:5], block_in=xb[:2] + xb[5:6], touch=touch)
    lb = leaf_block
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
