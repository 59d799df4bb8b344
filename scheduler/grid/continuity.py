"""Region-loss drills drawn at random, and the comparison of checkpoint replication policies
against region-loss rates (issue 30: how often should checkpoints go off-site?).

Each place loses its region as a Poisson process of ``rate_per_day`` (drawn from its own
seeded stream, so two replication policies meet the very same losses); a loss lasts
``duration_s``.  :func:`compare_replication` runs the grid once per (interval, rate, seed)
and reports, per interval and rate, the means over seeds of the work lost to the losses, the
bytes the replicas moved and what they cost in egress, and the jobs' mean wait.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.grid.run import grid_preset, run_grid
from scheduler.hardware.grid_spec import GridSpec


def random_region_losses(spec: GridSpec, *, days: float, rate_per_day: float,
                         duration_s: float, seed: int) -> list[tuple[str, float, float]]:
    """``(place, at_s, duration_s)`` for every loss drawn over ``days``, in time order."""
    if not (rate_per_day >= 0 and math.isfinite(rate_per_day)) or not duration_s > 0:
        raise ValueError("a region-loss rate must be >= 0 per day and a loss last > 0 s")
    out = []
    for k, place in enumerate(spec.places()):
        rng = np.random.default_rng([seed, 32, k])
        t = 0.0
        while rate_per_day > 0:
            t += float(rng.exponential(86400.0 / rate_per_day))
            if t >= days * 86400.0:
                break
            out.append((place, round(t, 3), float(duration_s)))
            t += duration_s  # a dark place cannot be lost again before it is back
    return sorted(out, key=lambda x: (x[1], x[0]))


def compare_replication(intervals, rates, *, seeds=(0, 1, 2), days: float = 2.0,
                        duration_s: float = 6 * 3600.0, policy="balanced") -> list[dict]:
    """One row per (replication interval, loss rate): means over ``seeds``.

    ``intervals`` are seconds or ``None`` (never off-site); ``rates`` region losses per
    place per day.  The grid, workload and losses of a seed are the same for every interval.
    """
    rows = []
    for rate in rates:
        for interval in intervals:
            runs = []
            for seed in seeds:
                spec, plans = grid_preset("grid")
                losses = random_region_losses(spec, days=days, rate_per_day=rate,
                                              duration_s=duration_s, seed=seed)
                _, rep = run_grid(spec, plans, days=days, seed=seed, policy=policy,
                                  replication_s=interval, region_loss=losses)
                runs.append((rep, len(losses)))
            summaries = [r["summary"] for r, _ in runs]
            rows.append({
                "replication_s": interval, "losses_per_place_day": rate,
                "losses": float(np.mean([n for _, n in runs])),
                "lost_h100_gpu_hours": _mean(s["region_loss"]["lost_h100_gpu_hours"]
                                             for s in summaries),
                "replica_gb": _mean(s["moved_gb"]["replicas"] for s in summaries),
                "egress_cost": _mean(s["cost"]["egress"] for s in summaries),
                "wait_hours": _mean(s["wait_hours"]["mean"] or 0.0 for s in summaries),
                "completed": _mean(s["jobs"]["completed"] for s in summaries),
            })
    return rows


def _mean(values) -> float:
    return round(float(np.mean(list(values))), 3)
