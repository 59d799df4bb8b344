"""Slurm's backfill plan: free GPUs per node over future time slots (``node_space``).

Rows are the slots' start times, columns the nodes; a running job gives its GPUs back at the
end of its time limit (rounded up to ``bf_resolution``), and every job the backfill pass
cannot start now reserves its nodes from its earliest start for its time limit.  A job
starts now only where it delays no reservation made before it: Slurm's backfill is
conservative, not EASY (every tested job that must wait gets a reservation inside
``bf_window``), and a reservation withholds its nodes whole (node bitmaps, not GPU counts).

>>> space = NodeSpace(0.0, np.array([8, 8]), resolution=1.0)
>>> space.release(10.0, np.array([0]), np.array([8]))   # a job on node 0 ends at 10 s
>>> space.free_over(0.0, 5.0).tolist(), space.free_over(10.0, 5.0).tolist()
([8, 8], [16, 8])
"""

from __future__ import annotations

import math

import numpy as np


class NodeSpace:
    """Free GPUs per node over time from ``now`` (slot 0) on.

    Parameters
    ----------
    now : float
        The plan's start, s.
    free : numpy.ndarray
        GPUs usable now per node (0 for nodes nothing may use), int.
    resolution : float
        ``bf_resolution``, s: planned ends and starts are rounded up to it.
    """

    def __init__(self, now: float, free: np.ndarray, *, resolution: float):
        self.now = now
        self.resolution = resolution
        self.times = [now]
        self.free = free.astype(np.int64)[None, :].copy()
        # nodes withheld whole by a waiting job's reservation (node_space's bitmaps)
        self.blocked = np.zeros_like(self.free, dtype=bool)

    def round_up(self, t: float) -> float:
        """``t`` on the resolution's grid (never before now)."""
        if t <= self.now:
            return self.now
        r = self.resolution
        return max(self.now, math.ceil(t / r - 1e-9) * r)

    def _slot(self, t: float) -> int:
        """The index of the slot starting at ``t`` (a slot is split there if needed)."""
        times = self.times
        i = int(np.searchsorted(times, t, side="right")) - 1
        if times[i] == t:
            return i
        times.insert(i + 1, t)
        self.free = np.insert(self.free, i + 1, self.free[i], axis=0)
        self.blocked = np.insert(self.blocked, i + 1, self.blocked[i], axis=0)
        return i + 1

    def release(self, t: float, nodes: np.ndarray, counts: np.ndarray) -> None:
        """GPUs given back on ``nodes`` from ``t`` on (a running job's planned end)."""
        t = self.round_up(t)
        k = self._slot(t)
        np.add.at(self.free[k:], (slice(None), nodes), counts)

    def _span(self, t: float, duration: float) -> tuple[int, int]:
        k = self._slot(t)
        end = (self._slot(self.round_up(t + duration)) if math.isfinite(duration)
               else len(self.times))
        return k, end

    def take(self, t: float, duration: float, nodes: np.ndarray, counts: np.ndarray) -> None:
        """``counts`` GPUs of ``nodes`` taken over ``[t, t + duration)`` (a job started now)."""
        k, end = self._span(t, duration)
        np.subtract.at(self.free[k:end], (slice(None), nodes), counts)

    def reserve(self, t: float, duration: float, nodes: np.ndarray) -> None:
        """``nodes`` withheld whole over ``[t, t + duration)`` for a waiting job: Slurm's
        backfill reserves node bitmaps, so no later job shares a reserved node then."""
        k, end = self._span(t, duration)
        self.blocked[k:end, nodes] = True

    def free_over(self, t: float, duration: float) -> np.ndarray:
        """The fewest GPUs free per node at any time in ``[t, t + duration)``."""
        k = int(np.searchsorted(self.times, t, side="right")) - 1
        end = (len(self.times) if not math.isfinite(duration)
               else int(np.searchsorted(self.times, t + duration, side="left")))
        return self.free[k:max(end, k + 1)].min(axis=0)

    def blocked_over(self, t: float, duration: float) -> np.ndarray:
        """Per node: whether a reservation withholds it at any time in ``[t, t + duration)``.

        >>> space = NodeSpace(0.0, np.array([8, 8]), resolution=1.0)
        >>> space.reserve(50.0, 10.0, np.array([1]))
        >>> space.blocked_over(0.0, 40.0).tolist(), space.blocked_over(0.0, 60.0).tolist()
        ([False, False], [False, True])
        """
        times = self.times
        k = max(0, int(np.searchsorted(times, t, side="right")) - 1)
        end = (len(times) if not math.isfinite(duration)
               else int(np.searchsorted(times, t + duration - 1e-9, side="left")))
        return self.blocked[k:max(end, k + 1)].any(axis=0)

    def fits(self, need: np.ndarray, duration: float) -> np.ndarray:
        """Slots x nodes: whether the node has ``need[node]`` GPUs free over the whole of
        ``[slot start, slot start + duration)`` (a job starting at that slot fits there).

        >>> space = NodeSpace(0.0, np.array([8, 0]), resolution=1.0)
        >>> space.release(10.0, np.array([1]), np.array([8]))
        >>> space.fits(np.array([8, 8]), 5.0).tolist()
        [[True, False], [True, True]]
        """
        times = np.asarray(self.times)
        k = len(times)
        bad = (self.free < need[None, :]) | self.blocked
        first_bad = np.where(bad, np.arange(k)[:, None], k)
        first_bad = np.minimum.accumulate(first_bad[::-1], axis=0)[::-1]
        if math.isfinite(duration):
            end = np.searchsorted(times, times + duration - 1e-9, side="left")
        else:
            end = np.full(k, k)
        return first_bad >= end[:, None]


def best_fit(nodes: np.ndarray, k: int, free_cpu: np.ndarray) -> np.ndarray | None:
    """``k`` of ``nodes`` (sorted indices) as cons_tres picks them by free CPUs.

    >>> best_fit(np.array([0, 1, 3]), 1, np.array([64, 63, 64, 62]))
    array([3])
    >>> best_fit(np.array([0, 1, 3, 4]), 2, np.array([64, 64, 64, 60, 60]))
    array([3, 4])
    """
    if nodes.size < k:
        return None
    if k == 0:
        return nodes[:0]
    if k == 1:
        return nodes[[int(np.argmin(free_cpu[nodes]))]]
    runs = np.split(nodes, np.flatnonzero(np.diff(nodes) != 1) + 1)
    chosen: list[int] = []
    while len(chosen) < k:
        left = k - len(chosen)
        long_enough = [r for r in runs if r.size >= left]
        if long_enough:
            best = min(long_enough, key=lambda r: free_cpu[r].sum())
            chosen.extend(best[:left].tolist())
            break
        best = max(runs, key=lambda r: r.size)  # none suffices: the largest, then the next
        chosen.extend(best.tolist())
        runs = [r for r in runs if r is not best]
    return np.array(sorted(chosen))
