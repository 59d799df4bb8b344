"""Slurm's backfill plan of reservations (``node_space``): which nodes each waiting job
withholds, over future time slots.

Rows are the slots' start times, columns the nodes.  Every job a backfill cycle cannot start
now reserves its nodes from its predicted start for its time limit, and a later job may use a
node only where no reservation withholds it over the later job's whole limit: Slurm's backfill
is conservative, not EASY (every tested job that must wait gets a reservation inside
``bf_window``), and a reservation withholds its nodes whole (node bitmaps, not GPU counts).
When running jobs free their GPUs is will-run's question
(:func:`scheduler.scheduling.slurm.backfill.will_run`), not this plan's.

>>> space = NodeSpace(0.0, 2, resolution=1.0)
>>> space.reserve(50.0, 10.0, np.array([1]))
>>> space.blocked_over(0.0, 40.0).tolist(), space.blocked_over(0.0, 60.0).tolist()
([False, False], [False, True])
>>> space.times
[0.0, 50.0, 60.0]
"""

from __future__ import annotations

import math

import numpy as np


class NodeSpace:
    """Reserved nodes over time from ``now`` (slot 0) on.

    Parameters
    ----------
    now : float
        The plan's start, s.
    nodes : int
        Nodes of the cluster.
    resolution : float
        ``bf_resolution``, s: a reservation's end is rounded up to it.
    """

    def __init__(self, now: float, nodes: int, *, resolution: float):
        self.now = now
        self.resolution = resolution
        self.times = [now]
        self.blocked = np.zeros((1, nodes), dtype=bool)

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
        self.blocked = np.insert(self.blocked, i + 1, self.blocked[i], axis=0)
        return i + 1

    def reserve(self, t: float, duration: float, nodes: np.ndarray) -> None:
        """``nodes`` withheld whole over ``[t, t + duration)`` for a waiting job."""
        k = self._slot(t)
        end = (self._slot(self.round_up(t + duration)) if math.isfinite(duration)
               else len(self.times))
        self.blocked[k:end, nodes] = True

    def blocked_over(self, t: float, duration: float) -> np.ndarray:
        """Per node: whether a reservation withholds it at any time in ``[t, t + duration)``."""
        times = self.times
        k = max(0, int(np.searchsorted(times, t, side="right")) - 1)
        end = (len(times) if not math.isfinite(duration)
               else int(np.searchsorted(times, t + duration - 1e-9, side="left")))
        return self.blocked[k:max(end, k + 1)].any(axis=0)


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
