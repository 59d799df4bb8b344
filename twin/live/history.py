"""The twin's history: fleet, tenant and power figures of the live engine, downsampled.

Every ``HISTORY_STEP_S`` simulated seconds the engine's frame is reduced to the figures of
:data:`SERIES` (and one series per tenant) and kept as a :class:`twin.models.HistorySample`
row under the run's key (the event log's key: one run, one history), with the wall time it
was recorded.  Samples older than ``HISTORY_RETENTION_S`` simulated seconds are dropped.  When
an engine resumes from an older snapshot (a crash), the samples after its clock are dropped:
history never shows a future that did not happen.

:func:`series` answers ``/api/history``: one metric between two simulated times, as recorded or
(past :data:`MAX_POINTS` samples, or when asked) downsampled into buckets of simulated time,
each with the mean, minimum and maximum of its samples; the database extracts the one figure
from each row (a JSON key lookup), so a month of five-minute samples reads in a few tens of
milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from django.db.models import FloatField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from scheduler.frame_schema import StoredFrame
from twin import app_setting
from twin.live.models import HistorySample

SERIES: dict[str, tuple[str, str]] = {
    "fleet.allocated_pct": ("GPUs allocated", "%"),
    "fleet.gpus_down": ("GPUs down", "GPUs"),
    "fleet.mfu_pct": ("MFU since start", "%"),
    "fleet.mfu_window_pct": ("MFU over the last hour (windowed)", "%"),
    "fleet.goodput_pct": ("goodput since start", "%"),
    "jobs.queued": ("jobs queued", "jobs"),
    "jobs.running": ("jobs running", "jobs"),
    "failures.total": ("failures since start", "failures"),
    "inference.slo_pct": ("inference SLO attainment", "%"),
    "inference.serving_gpus": ("GPUs serving inference", "GPUs"),
    "power.it_mw": ("IT power", "MW"),
    "power.facility_mw": ("facility power", "MW"),
    "power.throttled_gpus": ("throttled GPUs", "GPUs"),
}
"""Fleet-wide series: name -> (label, unit).  Tenants add ``tenant.<name>.gpus``."""
TENANT_PREFIX = "tenant."
MAX_POINTS = 1000
"""Points per series at most: a longer span is answered in coarser buckets."""
RANGES: dict[str, float] = {"15m": 900.0, "1h": 3600.0, "6h": 21600.0, "24h": 86400.0,
                            "7d": 7 * 86400.0, "30d": 30 * 86400.0}
"""The range picker's spans (s), by name."""
BUCKETS_S = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
"""Bucket widths (s) chosen from, narrowest first: whole minutes, hours, days on the axis."""
_last: dict[str, float] = {}  # run -> simulated time of its newest sample (this process)
_PRUNE_EVERY = 100
_recorded = 0


def sample(frame: StoredFrame) -> dict[str, float]:
    """The figures of ``frame`` that history keeps (null ones are left out, never 0: no
    windowed MFU yet, no SLO without inference demand, no power model)."""
    out: dict[str, float] = {}
    util = frame["util"]
    if util["gpus"]:
        out["fleet.allocated_pct"] = 100.0 * util["allocated"] / util["gpus"]
        out["fleet.gpus_down"] = float(util["down"])
    out["fleet.mfu_pct"] = 100.0 * float(frame["mfu"])
    if frame["mfu_window"] is not None:
        out["fleet.mfu_window_pct"] = 100.0 * float(frame["mfu_window"])
    out["fleet.goodput_pct"] = 100.0 * float(frame["goodput"])
    jobs = frame["jobs"]
    out["jobs.queued"] = float(jobs["queued"])
    out["jobs.running"] = float(jobs["running"])
    out["failures.total"] = float(frame["failures"]["total"])
    inference = frame["inference"]
    if inference["slo_attainment"] is not None:
        out["inference.slo_pct"] = 100.0 * float(inference["slo_attainment"])
    out["inference.serving_gpus"] = float(inference["serving_gpus"])
    power = frame["power"]
    if power is not None:
        out["power.it_mw"] = float(power["it_mw"])
        out["power.facility_mw"] = float(power["facility_mw"])
        out["power.throttled_gpus"] = float(power["throttled_gpus"])
    for tenant in frame["tenants"]:
        out[f"{TENANT_PREFIX}{tenant['tenant']}.gpus"] = float(tenant["used_gpus"])
    return {k: v for k, v in out.items() if math.isfinite(v)}


def record(*, run: str, t_sim: float, frame: StoredFrame) -> bool:
    """Keep ``frame``'s figures if ``HISTORY_STEP_S`` simulated seconds passed since the last
    sample of ``run``; True if a sample was written."""
    global _recorded
    last = _last.get(run)
    if last is None:
        last = (HistorySample.objects.filter(run=run).order_by("-t_sim")
                .values_list("t_sim", flat=True).first())
        last = -math.inf if last is None else last
    if t_sim < last:  # resumed from an older snapshot: what came after did not happen
        HistorySample.objects.filter(run=run, t_sim__gt=t_sim).delete()
        last = (HistorySample.objects.filter(run=run).order_by("-t_sim")
                .values_list("t_sim", flat=True).first())
        last = -math.inf if last is None else last
    if t_sim - last < app_setting("HISTORY_STEP_S"):
        _last[run] = last
        return False
    HistorySample.objects.create(run=run, t_sim=t_sim, values=sample(frame))
    _last[run] = t_sim
    _recorded += 1
    if _recorded % _PRUNE_EVERY == 0:
        HistorySample.objects.filter(
            run=run, t_sim__lt=t_sim - app_setting("HISTORY_RETENTION_S")).delete()
    return True


def backfill(*, run: str, samples: list[tuple[float, dict[str, float]]]) -> int:
    """Keep samples of ``run`` taken before any frame was shown (a fresh engine's warm-up,
    :mod:`twin.live.history_warmup`): what ``run`` had from the first of them on is dropped
    (a fresh engine's future replaces it).  Returns the number kept."""
    if not samples:
        return 0
    HistorySample.objects.filter(run=run, t_sim__gte=samples[0][0]).delete()
    HistorySample.objects.bulk_create(
        [HistorySample(run=run, t_sim=t, values=values) for t, values in samples],
        batch_size=1000)
    _last[run] = samples[-1][0]
    return len(samples)


def forget_process_cache() -> None:
    """Tests: forget what this process knows of the newest samples."""
    _last.clear()


def known(run: str) -> dict[str, tuple[str, str]]:
    """The series a run has: the fleet's and its tenants' (from its newest sample)."""
    newest = (HistorySample.objects.filter(run=run).order_by("-t_sim")
              .values_list("values", flat=True).first()) or {}
    tenants = {k: (f"GPUs used by {k[len(TENANT_PREFIX):-len('.gpus')]}", "GPUs")
               for k in sorted(newest) if k.startswith(TENANT_PREFIX)}
    return {**SERIES, **tenants}


def bucket_for(span: float) -> float | None:
    """The narrowest bucket width (s) of :data:`BUCKETS_S`, then whole days, that keeps
    ``span`` simulated seconds within :data:`MAX_POINTS` points; ``None`` when the samples
    as recorded fit."""
    recorded = app_setting("HISTORY_STEP_S")
    if span / recorded + 1 <= MAX_POINTS:
        return None
    need = span / (MAX_POINTS - 2)  # a span cut at bucket edges touches up to span/w + 2
    for width in BUCKETS_S:
        if width >= need and width > recorded:
            return float(width)
    return 86400.0 * math.ceil(need / 86400.0)


def series(*, run: str, metric: str, t_from: float | None = None, t_to: float | None = None,
           bucket: float | None = None, wall_clock: bool = False) -> dict:
    """``metric`` of ``run`` between two simulated times (default: the whole run).

    Samples as recorded when they fit in :data:`MAX_POINTS`; else (or when ``bucket`` s is
    coarser than the samples) one point per bucket of simulated time (aligned to multiples of
    its width): ``t`` its start, ``v`` the mean of its samples, ``min``/``max`` their extremes,
    ``n`` their count, ``wall`` the wall time its last sample was recorded.  ``wall_clock``: a
    mirror, whose clock is the wall's (said in ``clock``).  ``ValueError`` with one line for an
    unknown metric, a bad range or a bucket too narrow for the span."""
    names = known(run)
    if metric not in names and not (metric.startswith(TENANT_PREFIX)
                                    and metric.endswith(".gpus")):
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(names)}")
    if t_from is not None and t_to is not None and t_to < t_from:
        raise ValueError(f"'to' ({t_to:g}) is before 'from' ({t_from:g})")
    rows = HistorySample.objects.filter(run=run)
    if t_from is not None:
        rows = rows.filter(t_sim__gte=t_from)
    if t_to is not None:
        rows = rows.filter(t_sim__lte=t_to)
    value = Cast(KeyTextTransform(metric, "values"), FloatField())
    got = list(rows.order_by("t_sim").annotate(v=value).filter(v__isnull=False)
               .values_list("t_sim", "v", "pk"))
    t = np.array([g[0] for g in got], dtype=float)
    v = np.array([g[1] for g in got], dtype=float)
    points = aggregate(t, v, t_from=t_from, t_to=t_to, bucket=bucket)
    label, unit = names.get(metric, (metric, ""))
    return answer(metric=metric, label=label, unit=unit, wall_clock=wall_clock, points=points,
                  wall=_walls([got[i][2] for i in points.last_of.tolist()]))


@dataclass(frozen=True)
class Points:
    """A series as answered: ``t`` (each point's time or bucket start, s), ``v`` (the mean),
    ``lo``/``hi`` (extremes), ``n`` (samples per point), ``last_of`` (the index of each
    point's last sample among those given) and the ``bucket`` width (``None``: as recorded)."""

    t: np.ndarray
    v: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n: np.ndarray
    last_of: np.ndarray
    bucket: float | None


def aggregate(t: np.ndarray, v: np.ndarray, *, t_from: float | None, t_to: float | None,
              bucket: float | None) -> Points:
    """Samples ``v`` at times ``t`` (s, ascending) as :func:`series` answers them: as
    recorded when they fit in :data:`MAX_POINTS` (or ``bucket`` is no coarser than the
    samples), else one point per bucket of simulated time (aligned to multiples of its width;
    :func:`bucket_for` when ``bucket`` is ``None``).  ``ValueError`` for a bucket too narrow
    for the span."""
    recorded = app_setting("HISTORY_STEP_S")
    span = 0.0
    if t.size:
        span = ((t_to if t_to is not None else t[-1]) - (t_from if t_from is not None else t[0]))
    if bucket is None:
        bucket = bucket_for(span)
    elif span / bucket + 2 > MAX_POINTS:
        raise ValueError(f"bucket {bucket:g} s gives more than {MAX_POINTS} points over "
                         f"{span:g} s; use at least {math.ceil(span / (MAX_POINTS - 2))}")
    elif bucket <= recorded:
        bucket = None
    if bucket is None or not t.size:
        return Points(t, v, v, v, np.ones(t.size, dtype=int), np.arange(t.size), None)
    index = np.floor(t / bucket)
    first = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    n = np.diff(np.r_[first, t.size])
    return Points(index[first] * bucket, np.add.reduceat(v, first) / n,
                  np.minimum.reduceat(v, first), np.maximum.reduceat(v, first), n,
                  first + n - 1, bucket)


def answer(*, metric: str, label: str, unit: str, wall_clock: bool, points: Points,
           wall: list[str]) -> dict:
    """The JSON of a series (:func:`series`; ``wall``: when each point's last sample was
    recorded, ISO)."""
    recorded = app_setting("HISTORY_STEP_S")
    return {"metric": metric, "label": label, "unit": unit,
            "clock": "wall clock" if wall_clock else "simulated seconds",
            "aggregate": "bucket mean, min, max" if points.bucket else "as recorded",
            "step_s": points.bucket or recorded, "recorded_step_s": recorded,
            "max_points": MAX_POINTS,
            "t": [round(x, 3) for x in points.t.tolist()], "v": points.v.tolist(),
            "min": points.lo.tolist(), "max": points.hi.tolist(), "n": points.n.tolist(),
            "wall": wall}


def _walls(pks: list[int]) -> list[str]:
    """When the samples ``pks`` were recorded (ISO); read for the points shown only: turning
    every sample's timestamp into a datetime took most of a month's answer."""
    at: dict[int, str] = {}
    for k in range(0, len(pks), 500):  # within any SQLite's limit on query parameters
        at.update((pk, when.isoformat()) for pk, when in HistorySample.objects.filter(
            pk__in=pks[k:k + 500]).values_list("pk", "recorded_at"))
    return [at[pk] for pk in pks]
