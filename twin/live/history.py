"""The twin's history: fleet, tenant and power figures of the live engine, downsampled.

Every ``HISTORY_STEP_S`` simulated seconds the engine's frame is reduced to the figures of
:data:`SERIES` (and one series per tenant) and kept as a :class:`twin.models.HistorySample`
row under the run's key (the event log's key: one run, one history), with the wall time it
was recorded.  Samples older than ``HISTORY_RETENTION_S`` simulated seconds are dropped.  When
an engine resumes from an older snapshot (a crash), the samples after its clock are dropped:
history never shows a future that did not happen.

:func:`series` answers ``/api/history``: one metric between two simulated times, averaged into
``step``-second buckets; the database extracts the one figure from each row (a JSON key
lookup), so a month of five-minute samples reads in a few tens of milliseconds.
"""

from __future__ import annotations

import math

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
MAX_POINTS = 5000  # per answer: a longer range needs a coarser step
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


def series(*, run: str, metric: str, t_from: float | None = None, t_to: float | None = None,
           step: float | None = None) -> dict:
    """``metric`` of ``run`` between two simulated times (default: the whole run), averaged
    into ``step``-second buckets (default: as recorded, or coarser to stay within
    :data:`MAX_POINTS`).  ``ValueError`` with one line for an unknown metric or a bad range."""
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
               .values_list("t_sim", "v", "recorded_at"))
    recorded = app_setting("HISTORY_STEP_S")
    if got:
        span = got[-1][0] - got[0][0]
        needed = span / MAX_POINTS
        if step is None and len(got) > MAX_POINTS:
            step = needed
        elif step is not None and step < needed:
            raise ValueError(f"step {step:g} s gives more than {MAX_POINTS} points over "
                             f"{span:g} s; use at least {math.ceil(needed)}")
    t, v, wall = [], [], []
    if step is None or step <= recorded:
        for ts, val, at in got:
            t.append(round(ts, 3))
            v.append(val)
            wall.append(at.isoformat())
    else:  # bucket means, stamped at the bucket's start and its last sample's wall time
        bucket, total, count, last_at = None, 0.0, 0, None
        for ts, val, at in got + [(math.inf, 0.0, None)]:
            b = math.floor(ts / step) if math.isfinite(ts) else None
            if bucket is not None and b != bucket:
                t.append(round(bucket * step, 3))
                v.append(total / count)
                wall.append(last_at.isoformat())
                total, count = 0.0, 0
            bucket = b
            last_at = at
            total += val
            count += 1
    label, unit = names.get(metric, (metric, ""))
    return {"metric": metric, "label": label, "unit": unit, "clock": "simulated seconds",
            "step_s": step or recorded, "t": t, "v": v, "wall": wall}
