"""The run report (``simulate --json``), JSON-safe.

Wall-clock fields (``wall_seconds``, ``scheduler.wall_seconds``,
``scheduler.decisions_per_second``) are the only ones that differ between two runs of the
same seed: :data:`WALL_CLOCK_FIELDS` lists them for comparisons.
"""

from __future__ import annotations

import numpy as np

from scheduler.model.job_run import CLOUD, DONE, DRAINING, PENDING, QUEUED, REJECTED, RUNNING

WALL_CLOCK_FIELDS = (("wall_seconds",), ("scheduler", "wall_seconds"),
                     ("scheduler", "decisions_per_second"))


def _pct(values, q) -> float | None:
    return round(float(np.percentile(values, q)), 3) if len(values) else None


def _mean(values) -> float | None:
    return round(float(np.mean(values)), 3) if len(values) else None


def job_figures(engine) -> dict:
    runs = [r for r in engine.runs if r.state != PENDING]
    started = [r for r in runs if r.first_start is not None]
    done = [r for r in runs if r.state == DONE]
    states = [r.state for r in runs]
    waits_h = [(r.first_start - r.spec.submit_s) / 3600.0 for r in started]
    jct_h = [(r.end_s - r.spec.submit_s) / 3600.0 for r in done]
    spans = [np.unique(engine.state.domain["pod"][r.placement.nodes]).size
             for r in runs if r.state == RUNNING and r.placement is not None]
    return {
        "submitted": len(runs),
        "rejected": states.count(REJECTED),
        "completed": len(done),
        "running_at_end": states.count(RUNNING) + states.count(DRAINING),
        "in_cloud_at_end": states.count(CLOUD),
        "queued_at_end": states.count(QUEUED),
        "preemptions": engine.counters["preemptions"],
        "wait_hours": {"mean": _mean(waits_h), "p95": _pct(waits_h, 95)},
        "jct_hours": {"mean": _mean(jct_h), "p95": _pct(jct_h, 95)},
        "running_pod_span_mean": _mean(spans),
    }


def fleet_ettr(engine) -> float | None:
    """GPU-weighted ETTR of every training run that started on premises (None: none yet)."""
    weights, ettrs = [], []
    for r in engine.jobs.training_runs():
        e = engine.ettr(r)
        if e is not None:
            weights.append(r.gpus)
            ettrs.append(e)
    return round(float(np.average(ettrs, weights=weights)), 6) if ettrs else None


def build_report(engine, *, scenario: dict, wall_seconds: float) -> dict:
    led = engine.horizon_ledger()
    hours = led.gpu_hours()
    s = engine.state
    largest = max(engine.runs, key=lambda r: (r.gpus, -r.idx), default=None)
    rel = engine.reliability
    c = engine.counters
    in_flight = [(r.cloud_pool, r.gpus, r.first_start) for r in engine.runs if r.state == CLOUD]
    return {
        "scenario": {**scenario, "gpus": s.n_gpus, "nodes": int(s.plan.n_nodes),
                     "fabric": s.plan.fabric.kind, "policy": engine.policy.name,
                     "placement": engine.policy.placement, "seed": engine.seed,
                     "simulated_hours": round(engine.now / 3600.0, 6)},
        "wall_seconds": round(wall_seconds, 3),
        "ledger_gpu_hours": hours,
        "ledger_total_gpu_hours": round(led.total_gpu_s() / 3600.0, 6),
        "mfu": led.mfu(),
        "goodput": round(led.goodput(), 6),
        "ettr": fleet_ettr(engine),
        "jobs": job_figures(engine),
        "largest_job": None if largest is None else largest_job(engine, largest),
        "interruptions": {"unplanned": rel.unplanned, "planned": rel.planned,
                          "by_cause": dict(sorted(rel.interruptions.items()))},
        "failures": rel.report(),
        **physics_figures(engine, led),
        "recovery": {"mode": engine.costs.recovery,
                     "checkpoint_interval": engine.jobs.checkpoint_interval or "per job",
                     "failures": rel.enabled},
        "inference": engine.fleet.report(),
        "cloud": engine.cloud.report(in_flight, engine.now),
        "scheduler": {
            "placement_decisions": c["placement_decisions"], "placements": c["placements"],
            "backfilled": c["backfilled"], "passes": c["passes"],
            "wall_seconds": round(c["scheduler_wall_s"], 3),
            "decisions_per_second": round(c["placement_decisions"] / c["scheduler_wall_s"], 1)
            if c["scheduler_wall_s"] > 0 else None,
        },
    }


def physics_figures(engine, led) -> dict:
    """``network``, ``storage`` and ``power``: measured when the physics runs."""
    if engine.physics is None:
        off = {"model": "off (simulate --physics on)"}
        return {"network": off, "storage": off, "power": off}
    return engine.physics.report(led)


def largest_job(engine, run) -> dict:
    """The largest gang's reliability figures (the Llama 3 style table)."""
    wall_h = ((run.end_s if run.end_s is not None else engine.now)
              - (run.first_start if run.first_start is not None else engine.now)) / 3600.0
    return {
        "name": run.spec.name, "gpus": run.gpus, "state": run.state,
        "interruptions": run.interruptions, "preemptions": run.preemptions,
        "mttf_hours": round(wall_h / run.interruptions, 3) if run.interruptions else None,
        "checkpoint_interval_s": round(run.interval_s, 1),
        "checkpoint_write_s": round(run.write_s, 2),
        "restart_s": round(engine.jobs.restart_estimate(run), 1),
        "ettr": None if engine.ettr(run) is None else round(engine.ettr(run), 6),
        "lost_gpu_hours": round(run.lost_gpu_s / 3600.0, 3),
    }


def utilisation(engine) -> dict:
    """GPUs now: allocated, idle, spare and down, and allocation by vendor."""
    s = engine.state
    free, spare, down = engine.free_counts()
    owned = s.gpu_owner >= 0
    by_vendor: dict[str, dict] = {}
    for m, model in enumerate(s.models):
        v = by_vendor.setdefault(model.vendor, {"gpus": 0, "allocated": 0})
        v["gpus"] += int(s.model_gpus[m])
        v["allocated"] += int(np.count_nonzero(owned & (s.gpu_model == m)))
    return {"gpus": s.n_gpus, "allocated": int(owned.sum()), "idle": int(free.sum()),
            "spare": int(spare.sum()), "down": int(down.sum()), "by_vendor": by_vendor}
