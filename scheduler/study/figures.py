"""The figures a study compares, read from one run's report (and its engine, for tenants).

Each :class:`Figure` names its unit and which way is better (``"higher"``, ``"lower"`` or
``None`` when neither is: inference GPU-hours, hot spares); a study's verdict uses it.  The
values come from :func:`scheduler.report.build_report`, nothing is recomputed here except the
sums and per-tenant means the report does not carry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scheduler.model.job_run import DONE, PENDING


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    unit: str
    better: str | None
    read: Callable[[dict], float | None]


def _get(*path):
    def read(r: dict):
        v = r
        for p in path:
            if not isinstance(v, dict) or v.get(p) is None:
                return None
            v = v[p]
        return float(v)
    return read


LEDGER = ("productive", "idle", "fragmented", "preempted", "lost_work", "recovery",
          "checkpoint_stall", "exposed_communication", "data_stall", "throttled",
          "down_for_repair", "hot_spare", "inference")
"""The ledger's categories (:class:`scheduler.model.ledger.Ledger`), GPU-hours."""
_NEUTRAL = ("hot_spare", "inference")


def _figures() -> dict[str, Figure]:
    out = [
        Figure("mfu", "MFU", "fraction", "higher", _get("mfu", "achieved")),
        Figure("goodput", "Goodput", "fraction", "higher", _get("goodput")),
        Figure("ettr", "ETTR", "fraction", "higher", _get("ettr")),
        Figure("wait_mean_h", "Queue wait, mean", "h", "lower", _get("jobs", "wait_hours", "mean")),
        Figure("wait_p95_h", "Queue wait, p95", "h", "lower", _get("jobs", "wait_hours", "p95")),
        Figure("jct_mean_h", "Job completion time, mean", "h", "lower",
               _get("jobs", "jct_hours", "mean")),
        Figure("jobs_completed", "Jobs completed", "jobs", "higher", _get("jobs", "completed")),
        Figure("interruptions", "Unplanned interruptions", "count", "lower",
               _get("interruptions", "unplanned")),
        Figure("lost_gpu_hours", "Lost GPU-hours (work redone)", "GPU-h", "lower",
               _get("study", "lost_gpu_hours")),
        Figure("energy_mwh", "Facility energy", "MWh", "lower",
               _get("power", "energy_mwh", "facility")),
        Figure("cloud_cost_usd", "Cloud burst spend", "USD", "lower", _get("cloud", "cost")),
        Figure("energy_cost_usd", "Energy cost", "USD", "lower", _get("study", "energy_cost_usd")),
        Figure("cost_usd", "Cost (energy + cloud)", "USD", "lower", _get("study", "cost_usd")),
        Figure("slo_attainment", "Inference SLO attainment", "fraction", "higher",
               _get("inference", "slo_attainment")),
    ]
    for cat in LEDGER:
        better = None if cat in _NEUTRAL else "higher" if cat == "productive" else "lower"
        out.append(Figure(f"ledger.{cat}", f"Ledger: {cat.replace('_', ' ')}", "GPU-h", better,
                          _get("ledger_gpu_hours", cat)))
    return {f.name: f for f in out}


FIGURES = _figures()

GRID_FIGURES = {f.name: f for f in (
    Figure("grid.cost_usd", "Grid cost (compute + egress)", "USD", "lower",
           _get("summary", "cost", "total")),
    Figure("grid.compute_cost_usd", "Grid compute cost", "USD", "lower",
           _get("summary", "cost", "compute")),
    Figure("grid.egress_usd", "WAN egress cost", "USD", "lower", _get("summary", "cost", "egress")),
    Figure("grid.wait_mean_h", "Grid wait, mean", "h", "lower",
           _get("summary", "wait_hours", "mean")),
    Figure("grid.wait_p95_h", "Grid wait, p95", "h", "lower", _get("summary", "wait_hours", "p95")),
    Figure("grid.moved_gb", "Moved for jobs (datasets + checkpoints)", "GB", "lower",
           _get("summary", "moved_gb", "jobs")),
    Figure("grid.replica_gb", "Moved as checkpoint replicas", "GB", None,
           _get("summary", "moved_gb", "replicas")),
    Figure("grid.wan_gb", "Moved over the WAN, all", "GB", "lower",
           _get("summary", "moved_gb", "total")),
    Figure("grid.data_move_h", "Waiting for data to move", "job-h", "lower",
           _get("summary", "data_move", "job_hours")),
    Figure("grid.jobs_completed", "Grid jobs completed", "jobs", "higher",
           _get("summary", "jobs", "completed")),
    Figure("grid.lost_h100_gpu_hours", "Work lost to region losses", "H100 GPU-h", "lower",
           _get("summary", "region_loss", "lost_h100_gpu_hours")),
    Figure("grid.mfu", "Grid MFU", "fraction", "higher", _get("mfu", "achieved")),
)}
"""What a grid study compares (:mod:`scheduler.study.grid`), read from its runs' grid reports
(:mod:`scheduler.grid.report`); a grid study's default figures."""


def figure_names() -> tuple[str, ...]:
    return tuple(FIGURES)


def figure(name: str) -> Figure:
    """A figure by name; ``wait_mean_h:TENANT`` and ``jct_mean_h:TENANT`` per tenant;
    ``grid.*`` a grid study's (:data:`GRID_FIGURES`)."""
    if name in FIGURES:
        return FIGURES[name]
    if name in GRID_FIGURES:
        return GRID_FIGURES[name]
    base, _, tenant = name.partition(":")
    what = {"wait_mean_h": "Queue wait, mean", "jct_mean_h": "Job completion time, mean"}[base]
    return Figure(name, f"{what} ({tenant})", "h", "lower",
                  _get("study", "tenants", tenant, base))


def study_extras(engine, report: dict, *, energy_price_usd_per_mwh: float | None) -> dict:
    """What the report does not carry: lost GPU-hours, costs, waits and JCT per tenant."""
    runs = [r for r in engine.runs if r.state != PENDING]
    tenants: dict[str, dict] = {}
    for name in sorted({r.spec.tenant for r in runs}):
        mine = [r for r in runs if r.spec.tenant == name]
        waits = [(r.first_start - r.spec.submit_s) / 3600.0 for r in mine
                 if r.first_start is not None]
        jct = [(r.end_s - r.spec.submit_s) / 3600.0 for r in mine if r.state == DONE]
        tenants[name] = {"jobs": len(mine),
                         "wait_mean_h": round(float(np.mean(waits)), 6) if waits else None,
                         "jct_mean_h": round(float(np.mean(jct)), 6) if jct else None}
    extras = {"lost_gpu_hours": round(sum(r.lost_gpu_s for r in engine.runs) / 3600.0, 6),
              "tenants": tenants}
    energy = (report.get("power") or {}).get("energy_mwh", {}).get("facility")
    if energy_price_usd_per_mwh is not None and energy is not None:
        extras["energy_cost_usd"] = round(energy * energy_price_usd_per_mwh, 2)
        extras["cost_usd"] = round(extras["energy_cost_usd"] + report["cloud"]["cost"], 2)
    return extras


def read_figures(report: dict, names) -> dict[str, float | None]:
    """The named figures of one run's report (with its ``study`` extras)."""
    return {n: figure(n).read(report) for n in names}


WHATIF_BETTER = {"jobs_hit": "lower", "gpu_hours_lost": "lower", "productive_gpu_hours": "higher",
                 "queue_wait_mean_h": "lower", "queue_wait_p95_h": "lower", "started": "higher",
                 "completed": "higher", "queued_at_end": "lower", "interruptions": "lower",
                 "preemptions": "lower", "mfu": "higher", "ettr": "higher"}
"""Which way is better for each figure of a what-if (:data:`scheduler.control.whatif.METRICS`)."""


def whatif_figures(metrics: dict[str, str]) -> list[Figure]:
    """A what-if's figures (the arms' own, not the deltas) as study figures."""
    out = []
    for name, meaning in metrics.items():
        if name in ("jobs_hit", "gpu_hours_lost"):
            continue  # deltas of the action against the baseline, not an arm's own figure
        unit = "fraction" if name in ("mfu", "ettr") else "h" if name.endswith("_h") else \
            "GPU-h" if name.endswith("gpu_hours") else "count"
        out.append(Figure(name, meaning.split(",")[0], unit, WHATIF_BETTER.get(name),
                          _get(name)))
    return out
