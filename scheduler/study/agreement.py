"""How closely two schedulers' job logs agree, job by job (issue 25: the twin against Slurm).

A job log maps a job id to the start of the job's last run (seconds from the stream's start,
as ``sacct``'s Start and the twin's ``--job-log`` write it).  :func:`compare` pairs the jobs
both logs hold and gives three figures:

* the median of ``|start_a - start_b|`` (seconds);
* the share of jobs whose starts differ by at most ``within_s`` (5 s by default), inclusive;
* Kendall's tau-b of the two start orders (``scipy.stats.kendalltau``): 1 when every pair of
  jobs starts in the same order in both logs, -1 when every pair is reversed; pairs tied in
  one log (same second) count as tau-b counts them, so a log that starts many jobs in one
  second is not punished for an order it never gave.

:func:`read_job_log` reads the ``job_id,submit_s,start_s,end_s,gpus,nodes`` CSV.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

JOB_LOG_HEADER = ("job_id", "submit_s", "start_s", "end_s", "gpus", "nodes")


@dataclass(frozen=True)
class Agreement:
    """Per-job agreement of two logs' starts.

    Attributes
    ----------
    jobs : int
        Jobs in both logs (the ones compared).
    median_abs_s : float
        Median absolute start difference, seconds.
    within_share : float
        Share (0-1) of jobs whose starts differ by at most ``within_s``.
    within_s : float
        The tolerance of ``within_share``, seconds.
    tau : float
        Kendall's tau-b of the start orders (1.0 when fewer than two jobs, or when either log
        starts every job at one instant and the other does too).
    only_a, only_b : tuple of int
        Job ids in one log and not the other (sorted).
    """

    jobs: int
    median_abs_s: float
    within_share: float
    within_s: float
    tau: float
    only_a: tuple[int, ...] = ()
    only_b: tuple[int, ...] = ()

    def line(self) -> str:
        """One line: ``44 jobs, median |Δstart| 1.0 s, 95.5 % within 5 s, tau 0.981``."""
        return (f"{self.jobs} jobs, median |Δstart| {self.median_abs_s:g} s, "
                f"{100 * self.within_share:.1f} % within {self.within_s:g} s, "
                f"tau {self.tau:.3f}")


def compare(a: dict[int, float], b: dict[int, float], *, within_s: float = 5.0) -> Agreement:
    """Agreement of two job logs' starts (job id -> start seconds) over their common jobs.

    Raises
    ------
    ValueError
        When the logs share no job, or a start is not a finite number.
    """
    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError(f"the two job logs share no job id ({len(a)} and {len(b)} jobs)")
    sa = np.array([a[j] for j in common], dtype=float)
    sb = np.array([b[j] for j in common], dtype=float)
    if not (np.isfinite(sa).all() and np.isfinite(sb).all()):
        raise ValueError("a job log holds a start that is not a finite number")
    diff = np.abs(sa - sb)
    tau = _tau(sa, sb)
    return Agreement(jobs=len(common), median_abs_s=float(np.median(diff)),
                     within_share=float(np.mean(diff <= within_s)), within_s=within_s, tau=tau,
                     only_a=tuple(sorted(set(a) - set(b))),
                     only_b=tuple(sorted(set(b) - set(a))))


def _tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b; 1.0 where it is undefined because both orders are all ties."""
    if len(x) < 2:
        return 1.0
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return 1.0
    tau = stats.kendalltau(x, y, variant="b").statistic
    return 0.0 if tau is None or math.isnan(tau) else float(tau)


def read_job_log(path: str | Path) -> dict[int, float]:
    """Job id -> start seconds from a ``job_id,submit_s,start_s,end_s,gpus,nodes`` CSV.

    Raises
    ------
    ValueError
        When the header is not that one, or a row's job id or start is not a number.
    """
    with open(path, newline="") as fh:
        rows = csv.reader(fh)
        header = tuple(next(rows, ()))
        if header != JOB_LOG_HEADER:
            raise ValueError(f"{path}: the header is {','.join(header)!r}, "
                             f"not {','.join(JOB_LOG_HEADER)!r}")
        out = {}
        for n, row in enumerate(rows, start=2):
            try:
                out[int(row[0])] = float(row[2])
            except (ValueError, IndexError):
                raise ValueError(f"{path} line {n}: job id and start_s must be numbers, "
                                 f"got {row!r}") from None
        return out
