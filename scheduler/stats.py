"""Means with 95 % confidence intervals, and paired differences against the baseline.

Seeds are the replications: each arm's runs of one seed meet the very same jobs (the workload
draws from its own stream, :mod:`scheduler.simulate`), so the difference of two arms on a
common seed removes the workload's share of the noise; the paired t interval on those
differences is tighter than the two arms' intervals side by side.  Intervals are Student t
(``scipy.stats.t``), exact for normal errors and close for the sums of many jobs a run's
figures are; ``tests/core/test_study_stats.py`` checks their coverage on seeded samples.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A mean and its two-sided :data:`LEVEL` interval over ``n`` values (``None``: n < 2)."""

    n: int
    mean: float | None
    low: float | None
    high: float | None
    sd: float | None

    def as_dict(self) -> dict:
        return asdict(self)


def mean_ci(values, level: float = LEVEL) -> Interval:
    """Student-t interval of the mean of ``values`` (``None`` entries dropped).

    Examples
    --------
    >>> i = mean_ci([1.0, 2.0, 3.0])
    >>> i.mean, round(i.low, 3), round(i.high, 3)
    (2.0, -0.484, 4.484)
    >>> mean_ci([5.0]).low is None
    True
    """
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = int(x.size)
    if n == 0:
        return Interval(0, None, None, None, None)
    mean = float(x.mean())
    if n < 2:
        return Interval(n, mean, None, None, None)
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * sd / math.sqrt(n)
    return Interval(n, mean, mean - half, mean + half, sd)


def verdict(diff: Interval, better: str | None) -> str:
    """``better``/``worse`` when the paired interval excludes 0, else ``not distinguishable``.

    A figure with no better direction reads ``higher``/``lower``; fewer than 2 common seeds
    read ``too few seeds``.

    Examples
    --------
    >>> verdict(mean_ci([1.0, 1.2, 0.9]), "higher"), verdict(mean_ci([1.0, 1.2, 0.9]), "lower")
    ('better', 'worse')
    >>> verdict(mean_ci([1.0, -1.2, 0.4]), "higher")
    'not distinguishable'
    """
    if diff.low is None:
        return "too few seeds"
    if diff.low <= 0.0 <= diff.high:
        return "not distinguishable"
    up = diff.low > 0.0
    if better is None:
        return "higher" if up else "lower"
    return "better" if up == (better == "higher") else "worse"


def paired(arm: dict[int, float | None], baseline: dict[int, float | None]) -> Interval:
    """Interval of ``arm - baseline`` over the seeds both have a value for."""
    common = sorted(s for s in arm if s in baseline
                    and arm[s] is not None and baseline[s] is not None)
    return mean_ci([arm[s] - baseline[s] for s in common])
