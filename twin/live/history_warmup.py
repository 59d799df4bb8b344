"""History of a fresh engine's warm-up: the days it runs before its first frame.

A preset with ``warmup_s`` (noc-4k: 3 simulated days) opens on a busy fleet; without this the
stored history would start where the warm-up ended, and the overview would draw a few points
after "3 warmed days".  :func:`warm_up` runs the warm-up in ``HISTORY_STEP_S`` strides and keeps
:func:`twin.live.history.sample` of each stride's end, as the live driver would have recorded
it; the driver stores them once the run's key is known (:func:`twin.live.history.backfill`).

Runs in the engine's thread: it touches the engine, never the database.
"""

from __future__ import annotations

from scheduler.model.job_run import DRAINING, QUEUED, RUNNING
from scheduler.report import utilisation
from twin.live.history import sample


def figures(engine) -> dict:
    """The fields of :func:`scheduler.live.live_frame` that history keeps, and only those
    (a full frame costs about 50 ms at noc-4k).  No windowed MFU: the
    window is the frame's to observe."""
    led = engine.horizon_ledger()
    # the runs holding GPUs and the queue, not every run of the scenario (most not arrived)
    holding = [r.state for r in engine.running.values()]
    runs = engine.runs
    power = None
    if engine.physics is not None and engine.physics.last_power is not None:
        p = engine.physics.last_power
        power = {"it_mw": round(p.it_mw, 4), "facility_mw": round(p.facility_mw, 4),
                 "throttled_gpus": p.throttled_gpus}
    return {"util": utilisation(engine), "mfu": led.mfu()["achieved"], "mfu_window": None,
            "goodput": round(led.goodput(), 6),
            "jobs": {"queued": sum(runs[i].state == QUEUED for i in engine.queue),
                     "running": holding.count(RUNNING) + holding.count(DRAINING)},
            "failures": {"total": sum(engine.reliability.failures.values())},
            "inference": {"serving_gpus": int(engine.fleet.serving_by_model.sum()),
                          "slo_attainment": engine.fleet.report()["slo_attainment"]},
            "power": power,
            "tenants": [{"tenant": t, "used_gpus": int(u[0])}
                        for t, u in engine.tenants.usage.items()]}


def warm_up(engine, *, until: float, step: float) -> list[tuple[float, dict[str, float]]]:
    """Run ``engine`` to ``until`` simulated seconds in strides of ``step`` s; the history
    samples at its start and at the end of each stride, as ``(t_sim, figures)``."""
    if engine.now >= until:
        return []
    out = [(float(engine.now), sample(figures(engine)))]
    while engine.now < until:
        engine.run_until(min(until, engine.now + step))
        out.append((float(engine.now), sample(figures(engine))))
    return out
