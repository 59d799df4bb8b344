"""Array helpers for routing: per-job GPU tables and ring traffic, with sorts and runs only.

Shared by :mod:`scheduler.fabric.routing` and
:mod:`scheduler.fabric.maxmin`; no loop over GPUs, links or jobs.
"""

from __future__ import annotations

import numpy as np

_TOL = 1e-9
"""Loads below this (Gb/s) count as none."""


def _expand(ptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each ``rows[i]``, the positions ``ptr[r] .. ptr[r+1]-1``: ``(i, position)`` arrays."""
    start = ptr[rows]
    lens = ptr[rows + 1] - start
    which = np.repeat(np.arange(rows.size), lens)
    first = np.cumsum(lens) - lens
    return which, np.repeat(start - first, lens) + np.arange(which.size)


def _cross(seg_a: np.ndarray, seg_b: np.ndarray, n_seg: int) -> tuple[np.ndarray, np.ndarray]:
    """All index pairs ``(i, j)`` with ``seg_a[i] == seg_b[j]`` (``seg_b`` sorted)."""
    ptr = np.zeros(n_seg + 1, np.int64)
    np.cumsum(np.bincount(seg_b, minlength=n_seg), out=ptr[1:])
    return _expand(ptr, seg_a)


def _coalesce(key: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and the sum of ``value`` per key."""
    uniq, inv = np.unique(key, return_inverse=True)
    return uniq, np.bincount(inv, weights=value, minlength=uniq.size)


def _groups(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and each row's index among them (no sort if already sorted)."""
    if key.size and np.all(key[1:] >= key[:-1]):
        new = _starts(key)
        return key[new], np.cumsum(new) - 1
    return np.unique(key, return_inverse=True)


def _minus(plus: tuple, minus: tuple) -> tuple:
    """Table ``plus`` (unique keys) less table ``minus``: ``(a, b, c, value)``, values > 0."""
    if minus[0].size == 0:
        keep = plus[3] > _TOL
        return tuple(col[keep] for col in plus)
    n1 = int(max(plus[1].max(initial=0), minus[1].max(initial=0))) + 1
    n2 = int(max(plus[2].max(initial=0), minus[2].max(initial=0))) + 1
    key, val = _coalesce(np.concatenate([(p[0] * n1 + p[1]) * n2 + p[2] for p in (plus, minus)]),
                         np.concatenate([plus[3], -minus[3]]))
    keep = val > _TOL
    key, val = key[keep], val[keep]
    return key // (n1 * n2), (key // n2) % n1, key % n2, val


def _starts(*cols: np.ndarray) -> np.ndarray:
    """True where any column changes from the previous row (and at row 0)."""
    new = np.zeros(cols[0].size, bool)
    new[:1] = True
    for c in cols:
        new[1:] |= c[1:] != c[:-1]
    return new


def _job_gpus(jobs, n_endpoints: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ``(job, gpu)`` ordered by job then GPU id; rejects bad or repeated ids."""
    sizes = np.fromiter((len(j) for j in jobs), np.int64, len(jobs))
    gpu = (np.concatenate([np.asarray(j).ravel() for j in jobs]).astype(np.int64)
           if sizes.sum() else np.zeros(0, np.int64))
    job = np.repeat(np.arange(len(jobs), dtype=np.int64), sizes)
    if gpu.size and (gpu.min() < 0 or gpu.max() >= n_endpoints):
        raise ValueError(f"GPU ids must lie in 0 .. {n_endpoints - 1}")
    same = job[1:] == job[:-1]
    if np.any(same & (gpu[1:] <= gpu[:-1])):
        gpu = gpu[np.argsort(job * n_endpoints + gpu, kind="stable")]
        if np.any(same & (gpu[1:] == gpu[:-1])):
            raise ValueError("a job lists the same GPU twice")
    return job, gpu


def _runs(value, *cols):
    """Rows of ``cols`` where any column changes, with ``value`` summed over each run."""
    at = np.flatnonzero(_starts(*cols)) if value.size else np.zeros(0, np.int64)
    return (*(c[at] for c in cols), np.add.reduceat(value, at) if at.size else value[:0])


def _ring_flows(job, gpu, gpus_per_node: int, stride=None):
    """``(job, src, dst)`` of ring traffic, in source order: rank ``r`` of each node of a job
    sends to rank ``r`` of the job's node ``stride`` places on (1 by default; a stride of
    ``s`` nodes forms ``s`` interleaved rings, as data-parallel groups strided by TP x PP do)."""
    n = gpu.size
    idx = np.arange(n)
    run = np.maximum.accumulate(np.where(_starts(job, gpu // gpus_per_node), idx, 0))
    rank = idx - run
    order = np.argsort(job * gpus_per_node + rank, kind="stable")
    seg_new = _starts(job[order], rank[order])
    seg = np.maximum.accumulate(np.where(seg_new, idx, 0))
    if stride is None:
        nxt = np.where(np.append(seg_new[1:], True), seg, idx + 1)
    else:
        ends = np.flatnonzero(np.append(seg_new[1:], True))
        length = (ends - np.flatnonzero(seg_new) + 1)[np.cumsum(seg_new) - 1]
        nxt = seg + (idx - seg + np.asarray(stride)[job[order]]) % length
    dst = np.empty_like(gpu)
    dst[order] = gpu[order[nxt]]
    keep = np.empty(n, bool)
    keep[order] = nxt != idx
    return job[keep], gpu[keep], dst[keep]
