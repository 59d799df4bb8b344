"""The live frame: everything the dashboard shows, as one JSON-safe dict built once per tick.

The web layer adds ``type`` and ``seq`` and encodes it once for every client; this module only
reads the engine.  Lists are capped (``top`` rows, the incidents at 32 kB) so a frame of the
100,000-GPU preset stays near 105 kB, and under 135 kB however many incidents are open
(``bench.frame_size``).
"""

from __future__ import annotations

import numpy as np

from scheduler.control.job_actions import held_jobs
from scheduler.control.mirror import mirror_summary
from scheduler.frame_schema import (
    Heatmaps,
    LiveFrame,
    MttfBucket,
    Power,
    QueuedJob,
    RunningJob,
    TenantUse,
)
from scheduler.frames import dashboard_frames, heat_detail, links_down, rack_status
from scheduler.hall_summary import hall_summary
from scheduler.model.job_run import CLOUD, DETECTING, DONE, DRAINING, QUEUED, RUNNING
from scheduler.placement_schema import LivePlacement
from scheduler.reliability.failures import job_failure_rate
from scheduler.reliability.incidents import incidents_view
from scheduler.report import fleet_ettr, utilisation
from scheduler.scheduling.queue_index import partition_of

SIZE_BUCKETS = (1, 8, 64, 512, 4096, 1 << 30)



QUEUE_ROWS_MAX = 20_000
"""Most queued gangs :func:`live_placement` lists for the paged queue (``queue_total`` counts
them all)."""

QUEUE_COLUMNS = ("position", "name", "tenant", "gpus", "priority", "wait_h",
                 "reserved_start_h", "reason")
"""The queue's columns, in the order of :func:`queue_rows`' lists."""


def queue_rows(engine, top: int | None = None) -> list[list]:
    """The queue in the policy's order as rows of :data:`QUEUE_COLUMNS`, the first ``top``.

    ``reason`` is why the gang waits, in Slurm's words where it has one: the mirrored
    scheduler's own reason, else the simulated scheduler's from its last pass (``Resources``,
    ``Topology`` or ``Priority``; :meth:`~scheduler.scheduling.passes.Scheduler.pending_reason`).
    ``reserved_start_h`` is the head's EASY reservation while it lies ahead (a reservation the
    clock has passed, the gang still waiting, is not shown).
    """
    order = sorted(engine.queue.values(), key=lambda r: engine.policy.order(r, engine.tenants))
    if top is not None:
        order = order[:top]
    mirror = getattr(engine, "mirror", None)
    mirrored = mirror.reasons if mirror is not None else None
    sched = engine.scheduler
    now = engine.now
    out = []
    for pos, r in enumerate(order, start=1):
        if mirrored is not None:
            reason = mirrored.get(r.spec.name, "")
        else:
            reason = sched.pending_reason(r, partition_of(r))
        reserved = r.reserved_start
        out.append([pos, r.spec.name, r.spec.tenant, r.gpus, r.spec.priority,
                    round((now - r.queued_since) / 3600.0, 3),
                    None if reserved is None or reserved < now else round(reserved / 3600.0, 3),
                    reason])
    return out


def _queue(engine, top: int) -> list[QueuedJob]:
    return [dict(zip(QUEUE_COLUMNS, row, strict=True)) for row in queue_rows(engine, top)]


def _running(engine, top: int) -> list[RunningJob]:
    runs = sorted((r for r in engine.running.values()), key=lambda r: (-r.gpus, r.idx))[:top]
    dom = engine.state.domain
    return [{"name": r.spec.name, "tenant": r.spec.tenant, "gpus": r.gpus, "state": r.state,
             "model": engine.plan.models[r.model].name,
             "span": {"pods": int(np.unique(dom["pod"][r.placement.nodes]).size),
                      "leaves": int(np.unique(dom["leaf"][r.placement.nodes]).size)},
             # model FLOP/s achieved over the gang's peak (the step model's kernel efficiency
             # when physics prices the gang, else the job's own)
             "mfu": round(float(r.rate * r.slow / (r.gpus * engine.ledger.peak[r.model])), 4)
             if r.state == RUNNING else 0.0,
             "running_h": round((engine.now - r.seg_start) / 3600.0, 3)}
            for r in runs]


def _mttf_by_size(engine) -> list[MttfBucket]:
    started = [r for r in engine.runs if r.first_start is not None and r.cloud_pool < 0]
    gpus = np.array([r.gpus for r in started], dtype=np.int64)
    hours = np.array([((r.end_s if r.end_s is not None else engine.now) - r.first_start)
                      for r in started]) / 3600.0
    inter = np.array([r.interruptions for r in started], dtype=np.int64)
    nodes = np.array([r.placement.nodes.size if r.placement is not None
                      else -(-r.gpus // 8) for r in started], dtype=np.int64)
    bucket = np.searchsorted(SIZE_BUCKETS, gpus, side="right") - 1
    n_b = len(SIZE_BUCKETS) - 1
    jobs = np.bincount(bucket, minlength=n_b)
    n = np.bincount(bucket, weights=inter, minlength=n_b)
    h = np.bincount(bucket, weights=hours, minlength=n_b)
    size = np.bincount(bucket, weights=gpus, minlength=n_b)
    span = np.bincount(bucket, weights=nodes, minlength=n_b)
    out: list[MttfBucket] = []
    for b, (lo, hi) in enumerate(zip(SIZE_BUCKETS[:-1], SIZE_BUCKETS[1:], strict=True)):
        # the model's MTTF for the bucket's mean job (failures.job_failure_rate), beside the
        # one measured here (in a mirror: the real cluster's interruptions)
        predicted = (1.0 / job_failure_rate(span[b] / jobs[b], size[b] / jobs[b],
                                            engine.reliability.modes) if jobs[b] else None)
        out.append({"gpus": f"{lo}-{hi - 1}" if hi < 1 << 30 else f">={lo}",
                    "jobs": int(jobs[b]), "interruptions": int(n[b]),
                    "mttf_hours": round(float(h[b] / n[b]), 2) if n[b] else None,
                    "predicted_mttf_hours": round(float(predicted), 2) if predicted else None})
    return out


def _heatmaps(engine) -> Heatmaps:
    """The topology page's maps with one summary line per data hall (what a merged rack cell
    cannot say: how many racks are out, the hall's power and hottest outlet)."""
    maps = dashboard_frames(engine)
    ph = engine.physics
    power = ph.last_power if ph is not None else None
    maps["halls"] = hall_summary(engine.plan, rack_status(engine),
                                 None if power is None else power.rack_kw,
                                 None if power is None else power.outlet_c)
    return maps


def live_frame(engine, *, top: int = 50) -> LiveFrame:
    """The dashboard's view of ``engine`` now (no ``type``/``seq``: the publisher adds them).

    ``mfu`` is the MFU since the start of the run; ``mfu_window`` the MFU of the last
    :data:`~scheduler.model.ledger.MFU_WINDOW_S` simulated seconds, from the ledger copies
    the engine's ``mfu_window`` keeps at each frame, and ``mfu_window_s`` the seconds it
    covers (shorter while the first window fills).
    """
    led = engine.horizon_ledger()
    engine.mfu_window.observe(engine.now, led)
    windowed = engine.mfu_window.mfu(engine.now, led)
    util = utilisation(engine)
    states = [r.state for r in engine.runs]
    rel = engine.reliability
    mfu = led.mfu()
    power: Power | None = None
    if engine.physics is not None and engine.physics.last_power is not None:
        p = engine.physics.last_power
        power = {"it_mw": round(p.it_mw, 4), "facility_mw": round(p.facility_mw, 4),
                 "rack_peak_kw": round(float(p.rack_kw.max()), 2),
                 "throttled_gpus": p.throttled_gpus}
    tenants: list[TenantUse] = [
        {"tenant": t, "used_gpus": int(u[0]), "quota_gpus": int(engine.tenants.quota[t])}
        for t, u in engine.tenants.usage.items()]
    return {
        "t": round(engine.now, 3),
        "util": util,
        "mfu": mfu["achieved"], "loss_pp": mfu["loss_pp"], "goodput": round(led.goodput(), 6),
        "mfu_window": windowed["achieved"], "mfu_window_s": windowed["span_s"],
        "ettr": fleet_ettr(engine),
        "ledger_gpu_hours": led.gpu_hours(),
        "jobs": {"queued": states.count(QUEUED),
                 "running": states.count(RUNNING) + states.count(DRAINING),
                 "recovering": states.count(DETECTING), "in_cloud": states.count(CLOUD),
                 "done": states.count(DONE),
                 "preemptions": engine.counters["preemptions"]},
        "queue": _queue(engine, top),
        "running_jobs": _running(engine, top),
        "tenants": tenants,
        "inference": {"serving_gpus": int(engine.fleet.serving_by_model.sum()),
                      "slo_attainment": engine.fleet.report()["slo_attainment"]},
        "interruptions": {"unplanned": rel.unplanned, "planned": rel.planned,
                          "by_cause": dict(sorted(rel.interruptions.items()))},
        "failures": {"total": sum(rel.failures.values()),
                     "spares_free": util["spare"],
                     "repairs_pending": rel.repairs_pending,
                     "lemon_nodes": list(rel.lemons),
                     "mttf_by_size": _mttf_by_size(engine)},
        "power": power,
        "events": list(engine.events)[-top:],
        "heatmaps": _heatmaps(engine),
        "mirror": mirror_summary(engine),
        "incidents": incidents_view(rel.incidents, engine.now, top),
    }


def _ranges(ids: np.ndarray) -> list[list[int]]:
    """Sorted ids as ``[[first, last], ...]`` runs (a gang's nodes are mostly contiguous)."""
    if ids.size == 0:
        return []
    ids = np.unique(ids)
    breaks = np.flatnonzero(np.diff(ids) != 1)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [ids.size - 1]])
    return [[int(ids[a]), int(ids[b])] for a, b in zip(starts, ends, strict=True)]


def gpu_holders(engine) -> tuple[dict[int, list[list[int]]], dict[str, list[list[int]]]]:
    """Which GPUs each allocation holds, read off ``gpu_owner`` in one vectorised pass.

    Returns the GPU runs ``[[first, last], ...]`` (engine GPU ids, ascending) of each training
    run by its index (``run.idx``, the owner id it allocates under), and of each inference
    service's replicas together by the service's name.  A run may cross a node boundary: a gang
    on whole consecutive nodes is one run.  Python touches runs, never single GPUs.
    """
    owner = engine.state.gpu_owner
    if owner.size == 0:
        return {}, {}
    cut = np.flatnonzero(owner[1:] != owner[:-1]) + 1
    first = np.concatenate([[0], cut])
    last = np.concatenate([cut - 1, [owner.size - 1]])
    who = owner[first]
    held = who >= 0
    first, last, who = first[held], last[held], who[held]
    replica_service = {rep.owner: s.spec.name for s in engine.fleet.services
                       for rep in s.replicas}
    training: dict[int, list[list[int]]] = {}
    serving: dict[str, list[list[int]]] = {}
    for o, a, b in zip(who.tolist(), first.tolist(), last.tolist(), strict=True):
        service = replica_service.get(o)
        if service is None:
            training.setdefault(o, []).append([a, b])
        else:
            runs = serving.setdefault(service, [])
            if runs and runs[-1][1] + 1 == a:  # two replicas side by side: one run
                runs[-1][1] = b
            else:
                runs.append([a, b])
    return training, serving


def live_placement(engine) -> LivePlacement:
    """Where every gang holding GPUs is, and every node's live status, by engine ids.

    Kept apart from :func:`live_frame` (which every dashboard receives each tick): the API's
    rack, node and job views and the admin's live columns read it.  ``jobs`` maps a job name to
    its state, GPUs, tenant and node runs ``[[first, last], ...]``; ``down``, ``drained`` and
    ``spare`` are node runs; ``gpus_down`` GPU runs (a GPU or its NIC link out);
    ``switches_down`` failed switches; ``links_down`` switch links out (themselves or through
    a failed switch); ``storage`` each tier's share of its bandwidth left (drills, failures
    and operators); ``heat`` the heatmaps at full resolution (``/api/heatmap`` zooms them);
    ``queue`` the first :data:`QUEUE_ROWS_MAX` rows of :func:`queue_rows` (``/api/queue``
    pages them) and ``queue_total`` the queue's length.  Which GPUs exactly (engine GPU ids,
    from ``gpu_owner``; :func:`gpu_holders`): each job's ``gpu_runs`` and ``serving``, each
    inference service's GPU runs by name.
    """
    s = engine.state
    held, serving = gpu_holders(engine)
    jobs = {}
    for r in engine.running.values():
        jobs[r.spec.name] = {"state": r.state, "gpus": r.gpus, "tenant": r.spec.tenant,
                             "model": engine.plan.models[r.model].name,
                             "nodes": _ranges(r.placement.nodes),
                             "gpu_runs": held.get(r.idx, [])}
    rel = engine.reliability
    storage = {spec.tier: rel.storage_fraction(spec.tier) for spec in engine.plan.storage}
    if "central" in storage:  # drills' and failures' slowdowns act on the central tier
        storage["central"] = min(1.0, float(engine.costs.storage_factor))
    return {"t": round(engine.now, 3), "jobs": jobs,
            "down": _ranges(np.flatnonzero(~s.node_up)),
            "drained": _ranges(np.flatnonzero(s.node_drained)),
            "spare": _ranges(np.flatnonzero(s.node_spare)),
            "gpus_down": _ranges(np.flatnonzero(~s.gpu_up)),
            "switches_down": _ranges(np.array(
                sorted(k for k, n in rel.failed_switches.items() if n > 0), dtype=np.int64)),
            "links_down": _ranges(np.flatnonzero(links_down(engine))),
            "storage": storage, "heat": heat_detail(engine), "held": held_jobs(engine),
            "queue": queue_rows(engine, QUEUE_ROWS_MAX), "queue_total": len(engine.queue),
            "serving": serving}


def in_ranges(node: int, runs: list[list[int]]) -> bool:
    """Whether ``node`` lies in one of the ``[first, last]`` runs."""
    return any(a <= node <= b for a, b in runs)
