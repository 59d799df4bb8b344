"""Max-min fair rates by progressive filling (water-filling) over shared link units."""

from __future__ import annotations

import numpy as np

from scheduler.fabric.flows import _TOL, _expand


def max_min_rates(job, unit, load_gbps, capacity_gbps, demand_gbps) -> np.ndarray:
    """Per-job per-GPU rates under max-min fairness, by progressive filling.

    Every job's per-GPU rate rises from 0 together; a job stops when it reaches its demand or
    when a unit it crosses is full (its load is proportional to its rate).

    Parameters
    ----------
    job, unit : numpy.ndarray of int
        One row per (job, unit) incidence; repeated pairs add up.
    load_gbps : numpy.ndarray of float
        The job's load on the unit at full demand, Gb/s.
    capacity_gbps : numpy.ndarray of float
        Capacity per unit id, Gb/s.
    demand_gbps : numpy.ndarray of float
        Per-job per-GPU demand, Gb/s.

    Returns
    -------
    numpy.ndarray of float
        Per-job rate, Gb/s, ``0 <= rate <= demand``; a job in no row gets its demand.

    Examples
    --------
    Two one-flow jobs on a 400 Gb/s unit with demands 300 and 150 Gb/s: the small one is
    served in full, the large one gets the rest.

    >>> max_min_rates(np.array([0, 1]), np.array([0, 0]), np.array([300.0, 150.0]),
    ...               np.array([400.0]), np.array([300.0, 150.0])).tolist()
    [250.0, 150.0]
    """
    demand = np.asarray(demand_gbps, dtype=float)
    rate = demand.copy()
    load = np.asarray(load_gbps, dtype=float)
    keep = load > 0
    job = np.asarray(job, dtype=np.int64)[keep]
    load = load[keep]
    if job.size == 0:
        return rate
    units, unit = np.unique(np.asarray(unit)[keep], return_inverse=True)
    cap = np.asarray(capacity_gbps, dtype=float)[units]
    order = np.argsort(job, kind="stable")
    job, unit, load = job[order], unit[order], load[order]
    per = load / demand[job]
    job_ptr = np.searchsorted(job, np.arange(demand.size + 1))
    by_unit = np.argsort(unit, kind="stable")
    unit_ptr = np.searchsorted(unit[by_unit], np.arange(units.size + 1))
    active = np.zeros(demand.size, bool)
    active[job] = True
    rate[active] = 0.0
    # incremental state: load of frozen jobs, rate slope and crossing count of active ones
    frozen = np.zeros(units.size)
    slope = np.bincount(unit, weights=per, minlength=units.size)
    crossing = np.bincount(unit, minlength=units.size)
    level = 0.0
    while active.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            fill = np.where(crossing > 0, (cap - frozen) / slope, np.inf)
        level = max(float(fill.min()), level)
        done = active & (demand <= level * (1 + _TOL))
        if done.any():
            rate[done] = demand[done]
        else:
            full = np.flatnonzero(fill <= level * (1 + _TOL) + _TOL)
            _, pos = _expand(unit_ptr, full)
            done = np.zeros(demand.size, bool)
            done[job[by_unit[pos]]] = True
            done &= active
            rate[done] = level
        _, r = _expand(job_ptr, np.flatnonzero(done))
        frozen += np.bincount(unit[r], weights=per[r] * rate[job[r]], minlength=units.size)
        slope -= np.bincount(unit[r], weights=per[r], minlength=units.size)
        crossing -= np.bincount(unit[r], minlength=units.size)
        active &= ~done
    return rate


# -------------------------------------------------------------------------------- router
