"""Fit a failure profile from a fleet's own records, with exact Poisson confidence intervals.

Two inputs:

* a CSV of failures (:func:`read_failure_csv`): one row per failure, columns ``time`` (hours
  since the observation window opened), ``component`` (one of
  :data:`scheduler.reliability.failures.COMPONENTS`) and optionally ``unit`` (which one, an
  integer id); with the window's length and the units of each component (GPUs, nodes ...);
* counts and exposures (:func:`fit_counts`): e.g. the mirror's measured interruptions by cause
  (``engine.reliability.interruptions``) and the unit-hours they were observed over.

Each rate is the maximum-likelihood ``k / T`` (``k`` failures over ``T`` unit-hours) with the
exact (Garwood) interval from chi-square quantiles (``scipy.stats.chi2``)::

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


def _rows(path) -> list[tuple[int, float, str, int | None]]:
    path = Path(path)
    name = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{name}: no such file") from None
    except UnicodeDecodeError:
        raise ValueError(f"{name}: not UTF-8 text") from None
    reader = csv.DictReader(text.splitlines())
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
