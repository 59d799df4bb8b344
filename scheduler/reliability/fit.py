"""Fit a failure profile from a fleet's own records, with exact Poisson confidence intervals.

Two inputs:

* a CSV of failures (:func:`read_failure_csv`): one row per failure, columns ``time`` (hours
  since the observation window opened), ``component`` (one of
  :data:`scheduler.reliability.failures.COMPONENTS`) and optionally ``unit`` (which one, an
  integer id); with the window's length and the units of each component (GPUs, nodes ...);
* counts and exposures (:func:`fit_counts`): e.g. the mirror's measured interruptions by cause
  (``engine.reliability.interruptions``) and the unit-hours they were observed over.
* job records of different sizes (:func:`read_job_csv`, :func:`fit_job_sizes`): each job's
  nodes (or GPUs), hours run and failures, split into a hardware rate per unit and a rate per
  job whatever its size (Poisson ML of ``a x units + b``, profile-likelihood intervals).

For the first two, each rate is the maximum-likelihood ``k / T`` (``k`` failures over ``T``
unit-hours) with the exact (Garwood) interval from chi-square quantiles (``scipy.stats.chi2``)::

    low  = chi2.ppf(a/2, 2k) / (2T)         (0 when k = 0)
    high = chi2.ppf(1 - a/2, 2k + 2) / (2T)     a = 1 - confidence

whose coverage is at least ``confidence`` for every true rate.  Detection and repair times are
not in such records: each fitted mode takes the ``llama3`` profile's for its component (the
profile file says so in each mode's ``source``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from scipy.stats import chi2

from scheduler.reliability.failures import BY_CAUSE, COMPONENTS, MODES, UNITS, FailureMode
from scheduler.reliability.profiles import Profile

_TIMES = {m.component: (m.detect_s, m.repair_h) for m in reversed(MODES)}
_TIMES.setdefault("job", (600, 0.25))


@dataclass(frozen=True)
class RateEstimate:
    """One fitted rate: ``count`` failures over ``exposure_h`` unit-hours."""

    cause: str
    component: str
    count: int
    exposure_h: float
    rate: float
    low: float
    high: float


def poisson_interval(count: int, exposure_h: float, confidence: float = 0.95) -> tuple:
    """Exact two-sided interval of a Poisson rate, per unit-hour.

    >>> lo, hi = poisson_interval(10, 1000.0)
    >>> round(lo * 1000, 3), round(hi * 1000, 3)
    (4.795, 18.39)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), not {confidence!r}")
    if not exposure_h > 0:
        raise ValueError(f"exposure must be > 0 unit-hours, not {exposure_h!r}")
    a = 1.0 - confidence
    low = 0.0 if count == 0 else float(chi2.ppf(a / 2, 2 * count)) / (2 * exposure_h)
    high = float(chi2.ppf(1 - a / 2, 2 * count + 2)) / (2 * exposure_h)
    return low, high


def fit_counts(counts: dict, exposure_h, *, components: dict | None = None,
               confidence: float = 0.95) -> list[RateEstimate]:
    """Rates and intervals from counts by cause.

    Parameters
    ----------
    counts : dict
        cause -> failures observed.
    exposure_h : float or dict
        Unit-hours each cause was observed over (one figure for all, or cause -> figure).
    components : dict, optional
        cause -> component (default: the Llama 3 mode of that name, else the cause itself
        when it names a component, else ``host``).
    confidence : float
        The intervals' coverage.
    """
    out = []
    for cause, k in sorted(counts.items()):
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"count of {cause!r} must be an integer >= 0, not {k!r}")
        t = exposure_h[cause] if isinstance(exposure_h, dict) else exposure_h
        comp = (components or {}).get(cause) or (
            BY_CAUSE[cause].component if cause in BY_CAUSE
            else cause if cause in COMPONENTS else "host")
        low, high = poisson_interval(k, float(t), confidence)
        out.append(RateEstimate(cause, comp, k, float(t), k / float(t), low, high))
    return out


def profile_from_estimates(estimates: list[RateEstimate], *, name: str, fleet: str,
                           source: str, confidence: float) -> Profile:
    """A profile whose modes carry the fitted rates (intervals in ``Profile.intervals``)."""
    modes, intervals = [], {}
    for e in estimates:
        detect_s, repair_h = _TIMES.get(e.component, (120, 8))
        modes.append(FailureMode(
            e.cause, e.component, e.rate, detect_s, repair_h, planned=e.component == "planned",
            source=f"fitted: {e.count} in {e.exposure_h:.6g} {UNITS[e.component]}-hours "
                   f"({source}); detection and repair from llama3 (assumed)"))
        intervals[e.cause] = (e.low, e.high)
    return Profile(name, fleet, source, tuple(modes), intervals, confidence)


def read_failure_csv(path) -> list[tuple[float, str, int | None]]:
    """The CSV's failures as ``(time_h, component, unit)``; a bad row raises one line naming
    the file, the line and the field."""
    return [row[1:] for row in _rows(path)]


def _csv_open(path) -> tuple[str, csv.DictReader]:
    """The file's name and a CSV reader over its text; one ``ValueError`` line when it is
    missing or not UTF-8."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path.name}: no such file") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path.name}: not UTF-8 text") from None
    return path.name, csv.DictReader(text.splitlines())


def _rows(path) -> list[tuple[int, float, str, int | None]]:
    name, reader = _csv_open(path)
    fields = reader.fieldnames or []
    for col in ("time", "component"):
        if col not in fields:
            raise ValueError(f"{name}: the header needs a '{col}' column (time, component[, "
                             "unit])")
    rows = []
    for row in reader:
        line = reader.line_num
        try:
            t = float(row["time"])
        except (TypeError, ValueError):
            raise ValueError(f"{name}:{line}: field 'time' must be hours since the window "
                             f"opened, not {row['time']!r}") from None
        if not (math.isfinite(t) and t >= 0):
            raise ValueError(f"{name}:{line}: field 'time' must be >= 0 hours, not {t!r}")
        comp = (row["component"] or "").strip()
        if comp not in COMPONENTS:
            raise ValueError(f"{name}:{line}: field 'component' must be one of "
                             f"{', '.join(COMPONENTS)}, not {comp!r}")
        unit = None
        raw = (row.get("unit") or "").strip()
        if raw:
            if not raw.isdigit():
                raise ValueError(f"{name}:{line}: field 'unit' must be an integer id >= 0, "
                                 f"not {raw!r}")
            unit = int(raw)
        rows.append((line, t, comp, unit))
    return rows


def fit_csv(path, *, window_days: float, gpus: int, nodes: int, units: dict | None = None,
            confidence: float = 0.95, name: str | None = None) -> Profile:
    """A profile fitted from a CSV of failures over a window of ``window_days``.

    Exposure per component: its units (``gpus`` for gpu, nic and endpoint_link, ``nodes`` for
    host, software and planned; ``units`` gives the others, e.g. ``{"leaf": 528}``, and may
    add components seen nowhere in the file, fitted as 0 failures) times the window's hours.
    """
    if not (isinstance(window_days, int | float) and math.isfinite(window_days)
            and window_days > 0):
        raise ValueError(f"window must be a positive number of days, not {window_days!r}")
    for flag, n in (("gpus", gpus), ("nodes", nodes)):
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"{flag} must be a positive integer, not {n!r}")
    hours = window_days * 24.0
    rows = _rows(path)
    have = {"gpu": gpus, "nic": gpus, "endpoint_link": gpus, "host": nodes, "software": nodes,
            "planned": nodes, **(units or {})}
    counts = {c: 0 for c in (units or {})}
    for line, t, comp, unit in rows:
        if t > hours:
            raise ValueError(f"{Path(path).name}:{line}: field 'time' {t:g} h is after the "
                             f"window's end ({hours:g} h)")
        if comp not in have:
            raise ValueError(f"{Path(path).name}:{line}: no unit count for component "
                             f"{comp!r}: give it (--units {comp}=N)")
        if unit is not None and unit >= have[comp]:
            raise ValueError(f"{Path(path).name}:{line}: field 'unit' {unit} is not below the "
                             f"{have[comp]} {comp} units")
        counts[comp] = counts.get(comp, 0) + 1
    estimates = fit_counts(counts, {c: have[c] * hours for c in counts},
                           components={c: c for c in counts}, confidence=confidence)
    stem = name or Path(path).stem
    return profile_from_estimates(
        estimates, name=stem, confidence=confidence,
        fleet=f"{gpus} GPUs on {nodes} nodes observed for {window_days:g} days",
        source=f"fitted from {Path(path).name}")


# ------------------------------------------------------------------ by job size
@dataclass(frozen=True)
class SizeFit:
    """:func:`fit_job_sizes`'s answer: ``rate = per_unit x units + per_job`` per job-hour.

    Attributes
    ----------
    per_unit, per_job : RateEstimate
        The hardware rate per unit-hour (component ``host`` per node or ``gpu`` per GPU) and
        the rate per running job and hour (component ``job``), each with its profile-likelihood
        interval.
    failures, jobs : int
        Failures and job records fitted.
    loglik : float
        The maximised Poisson log-likelihood (without the constant terms).
    """

    per_unit: RateEstimate
    per_job: RateEstimate
    failures: int
    jobs: int
    loglik: float


def _loglik(a: float, b: float, n, t, k) -> float:
    lam = a * n + b
    if np.any((k > 0) & (lam <= 0)):
        return -math.inf
    pos = k > 0
    return float(np.sum(k[pos] * np.log(lam[pos])) - np.sum(lam * t))


def _best_other(fixed: float, which: str, n, t, k) -> float:
    """The ML value of the other parameter with ``which`` (``a`` or ``b``) held at ``fixed``:
    the score is decreasing in it, so its root (or 0) is found by bisection."""
    w = t if which == "a" else n * t  # exposure of the free parameter
    x = n if which == "b" else np.ones_like(n)  # its multiplier in lambda

    def score(v: float) -> float:
        lam = (fixed * n + v) if which == "a" else (v * n + fixed)
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.sum(np.where(k > 0, k * x / lam, 0.0)) - np.sum(w))

    if score(0.0) <= 0:
        return 0.0
    hi = max(1e-12, float(k.sum()) / max(float(w.sum()), 1e-300))
    while score(hi) > 0:
        hi *= 2.0
    return float(brentq(score, 0.0, hi, xtol=1e-16 + 1e-13 * hi, maxiter=200))


def _profile_interval(which: str, best: float, n, t, k, lmax: float, drop: float) -> tuple:
    def excess(v: float) -> float:
        other = _best_other(v, which, n, t, k)
        ll = _loglik(v, other, n, t, k) if which == "a" else _loglik(other, v, n, t, k)
        return ll - (lmax - drop)

    low = 0.0 if excess(0.0) >= 0 else float(brentq(excess, 0.0, best, xtol=1e-16 + 1e-12 * best))
    step = max(best, float(k.sum() + 1) / float((n * t if which == "a" else t).sum()))
    hi = best + step
    while excess(hi) > 0:
        hi += step
        step *= 2.0
    high = float(brentq(excess, best, hi, xtol=1e-16 + 1e-12 * hi))
    return low, high


def fit_job_sizes(records, *, per: str = "node", confidence: float = 0.95) -> SizeFit:
    """Per-unit hardware and per-job rates from jobs of different sizes (Poisson ML).

    Each record is ``(units, hours, failures)``: a job (or jobs of one size, summed) on
    ``units`` nodes (``per="node"``) or GPUs (``per="gpu"``), observed for ``hours`` while it
    ran, with ``failures`` interruptions.  The model is Poisson with rate per job-hour
    ``a x units + b`` (``a``: hardware per unit-hour, ``b``: causes that come with a job
    whatever its size), ``a, b >= 0``.  The maximum likelihood is found by EM (each failure
    split between the two sources in proportion to their rates: the log-likelihood rises every
    step); each interval is the profile-likelihood one, where the log-likelihood maximised over
    the other parameter falls ``chi2.ppf(confidence, 1) / 2`` below the maximum (Wilks; a
    bound at 0 where it does not fall that far).  Sizes must differ to tell ``a`` from ``b``.

    >>> f = fit_job_sizes([(1, 10000.0, 20), (128, 100.0, 15)])
    >>> round(f.per_unit.rate * 1e3, 3), round(f.per_job.rate * 1e3, 3)  # exact: two equations
    (1.165, 0.835)
    """
    if per not in ("node", "gpu"):
        raise ValueError(f"per must be 'node' or 'gpu', not {per!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), not {confidence!r}")
    rows = list(records)
    if not rows:
        raise ValueError("no job records to fit")
    n = np.array([float(r[0]) for r in rows])
    t = np.array([float(r[1]) for r in rows])
    k = np.array([float(r[2]) for r in rows])
    if np.any(~np.isfinite(n) | (n < 1)) or np.any(~np.isfinite(t) | (t <= 0)) or np.any(
            (k < 0) | (k != np.floor(k))):
        raise ValueError("each job record needs units >= 1, hours > 0 and an integer "
                         "failure count >= 0")
    if np.unique(n).size < 2:
        raise ValueError("all job records have one size: the per-unit and per-job rates "
                         "cannot be told apart (records of at least two sizes are needed)")
    total = float(k.sum())
    a = b = total / (2.0 * float((n * t).sum() + t.sum())) if total else 0.0
    for _ in range(20000):
        if total == 0:
            break
        lam = a * n + b
        share = np.where(lam > 0, a * n / np.where(lam > 0, lam, 1.0), 0.5)
        a_new = float((k * share).sum() / (n * t).sum())
        b_new = float((k * (1.0 - share)).sum() / t.sum())
        done = abs(a_new - a) <= 1e-13 * max(a_new, 1e-300) and \
            abs(b_new - b) <= 1e-13 * max(b_new, 1e-300)
        a, b = a_new, b_new
        if done:
            break
    if total:  # EM creeps towards a bound: take the bound's exact optimum where it is better
        for cand in ((total / float((n * t).sum()), 0.0), (0.0, total / float(t.sum()))):
            if _loglik(*cand, n, t, k) >= _loglik(a, b, n, t, k):
                a, b = cand
    lmax = _loglik(a, b, n, t, k)
    drop = float(chi2.ppf(confidence, 1)) / 2.0
    a_ci = _profile_interval("a", a, n, t, k, lmax, drop)
    b_ci = _profile_interval("b", b, n, t, k, lmax, drop)
    comp = "host" if per == "node" else "gpu"
    unit_h = float((n * t).sum())
    job_h = float(t.sum())
    # each part's count: its ML share of the failures (EM's attribution), rounded
    return SizeFit(
        RateEstimate(f"{comp}_per_{per}", comp, round(a * unit_h), unit_h, a, *a_ci),
        RateEstimate("per_job", "job", round(b * job_h), job_h, b, *b_ci),
        int(total), len(rows), lmax)


def read_job_csv(path) -> list[tuple[int, float, int]]:
    """Job records as ``(units, hours, failures)`` from a CSV with columns ``units`` (nodes or
    GPUs of the job), ``hours`` (hours it ran) and ``failures``; a bad row raises one line
    naming the file, the line and the field."""
    name, reader = _csv_open(path)
    for col in ("units", "hours", "failures"):
        if col not in (reader.fieldnames or []):
            raise ValueError(f"{name}: the header needs a '{col}' column (units, hours, "
                             "failures)")
    out = []
    for row in reader:
        line = reader.line_num
        for col, cast, ok, what in (("units", int, lambda v: v >= 1, "an integer >= 1"),
                                    ("hours", float, lambda v: math.isfinite(v) and v > 0,
                                     "a number > 0"),
                                    ("failures", int, lambda v: v >= 0, "an integer >= 0")):
            try:
                value = cast((row[col] or "").strip())
            except ValueError:
                raise ValueError(f"{name}:{line}: field '{col}' must be {what}, not "
                                 f"{row[col]!r}") from None
            if not ok(value):
                raise ValueError(f"{name}:{line}: field '{col}' must be {what}, not "
                                 f"{row[col]!r}")
            row[col] = value
        out.append((row["units"], row["hours"], row["failures"]))
    return out


def profile_from_size_fit(fit: SizeFit, *, name: str, fleet: str, source: str,
                          confidence: float) -> Profile:
    """A profile of the two fitted modes (hardware per unit, per job) and their intervals."""
    what = (f"Poisson ML of rate = a x units + b over {fit.jobs} job records, "
            f"{fit.failures} failures")
    return profile_from_estimates(
        [fit.per_unit, fit.per_job], name=name, fleet=fleet, confidence=confidence,
        source=f"{source}; {what}; profile-likelihood intervals")
