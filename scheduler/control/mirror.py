"""A real cluster's state applied to a running engine: the twin as a mirror.

In mirror mode the real cluster's scheduler (Slurm) decides where jobs run and the real
hardware decides what fails; the engine keeps the books, the physics and the pages.  Its own
scheduler is *held* (:attr:`Scheduler.held`: no pass places anything) and it runs no failure
processes.  Each poll the twin reads the cluster and calls :func:`observe` with an
:class:`Observation` in engine ids (the twin's adapter maps hostnames to node ids); the engine
is brought to the observed state:

* jobs that ended (or left the scheduler's view) are ended with the scheduler's verdict:
  ``COMPLETED`` books the job done; ``NODE_FAIL``, ``BOOT_FAIL``, ``FAILED`` and
  ``OUT_OF_MEMORY`` count as an interruption by that cause (the measured failure statistics
  next to the model's predictions); ``PREEMPTED`` as a planned one;
* pending jobs wait in the engine's queue with the scheduler's reason; a running job that went
  back to pending (requeued) is stopped and queued;
* node statuses (up, drained) are set (:func:`~scheduler.control.inject.inject`);
* running jobs are placed where the scheduler put them, with the work done so far estimated
  from their elapsed time and time limit (a mirrored job is assumed to run to its time limit,
  :data:`DEFAULT_LIMIT_S` when it has none: the engine cannot know a real job's length); a job
  that declared its model (parameters, tensor and pipeline parallelism) is priced by the
  physics (communication over the fabric), one that did not as compute only;
* GPU telemetry (DCGM, through Prometheus) is kept per GPU; a new XID error on a GPU is an
  event.

A fork of a mirrored engine (a what-if from now) releases the scheduler with
:func:`release_fork`: its own policy then places the pending jobs.

Every observed job and node is checked before anything changes; a job the engine cannot
place (its GPUs are busy in the twin, or its nodes' accelerators differ) is not guessed at: it
is listed in :attr:`MirrorBook.rejected` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scheduler.control.inject import inject, placement_check
from scheduler.model.job_run import DETECTING, DRAINING, QUEUED, REJECTED, RUNNING
from scheduler.sim import Kind
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, Parallelism, TrainingJob

DEFAULT_LIMIT_S = 7 * 86400.0
"""Assumed length of a mirrored job with no time limit, s (the engine needs one to estimate
its progress; the mirror ends the job when the scheduler says it ended, whatever this says)."""
MAX_DONE = 0.99
JOB_STATES = ("running", "pending", "ended")
INTERRUPTING = {"NODE_FAIL": "node_fail", "BOOT_FAIL": "boot_fail", "FAILED": "job_failed",
                "OUT_OF_MEMORY": "out_of_memory", "PREEMPTED": "preempted_by_scheduler"}
"""Slurm end states that interrupt a job (cause names as the failure statistics show them)."""
PLANNED = {"PREEMPTED"}
TELEMETRY = ("util", "power_w", "temp_c", "tensor_active", "xid")


@dataclass
class ObservedJob:
    """One job as the real scheduler reports it (engine ids)."""

    key: str  # the scheduler's job id
    state: str  # running, pending or ended
    gpus: int
    name: str = ""
    tenant: str = "mirror"
    nodes: tuple[int, ...] = ()
    gpus_per_node: tuple[int, ...] | None = None
    reason: str = ""  # a pending job's reason; an ended job's end state (COMPLETED, NODE_FAIL…)
    elapsed_s: float = 0.0
    time_limit_s: float | None = None
    partition: str = ""
    params_b: float = 0.0  # the model, when the job declared it (else priced as compute only)
    tp: int = 1
    pp: int = 1


@dataclass
class Observation:
    """What one poll read: node statuses, jobs and, optionally, per-GPU telemetry."""

    nodes: dict[int, dict] = field(default_factory=dict)  # id -> {"up": bool, "drained": bool}
    jobs: list[ObservedJob] = field(default_factory=list)
    complete: bool = True  # the job list is the scheduler's whole view (absent jobs ended)
    telemetry: dict[str, np.ndarray] | None = None  # TELEMETRY name -> per-GPU (NaN: unknown)
    reasons: dict[int, str] = field(default_factory=dict)  # node id -> the scheduler's reason


class MirrorBook:
    """The mirror's own state, kept on the engine (:attr:`Engine.mirror
    <scheduler.engine.Engine.mirror>`): what it adopted."""

    origin: float | None = None
    """Wall-clock time (s) the twin's mirror driver maps simulated time 0 to; it sets this."""

    def __init__(self, n_gpus: int):
        self.runs: dict[str, int] = {}  # scheduler job id -> run index
        self.reasons: dict[str, str] = {}  # run name -> pending reason
        self.node_reasons: dict[int, str] = {}
        self.rejected: dict[str, str] = {}  # job id -> why the engine could not follow it
        self.ended: dict[str, int] = {}  # end state -> jobs
        self.counted: set[str] = set()  # ended jobs already counted (still listed)
        self.xid: dict[int, int] = {}  # XID code -> errors seen
        self.telemetry = {k: np.full(n_gpus, np.nan) for k in TELEMETRY}
        self.polls = 0


def mirror_hold(engine) -> MirrorBook:
    """Make ``engine`` a mirror (:meth:`Engine.become_mirror
    <scheduler.engine.Engine.become_mirror>`): its scheduler held; returns its book."""
    return engine.become_mirror()


def release_fork(fork, *, failures: bool = True) -> None:
    """A fork of a mirror runs by itself from now (a what-if): its scheduler places the
    pending jobs and (``failures``) the failure processes draw failures from now on, from the
    fork's own random streams (so seeds give the forecast its band)."""
    fork.scheduler.release()
    if failures:
        fork.reliability.enable()
    # an instant now, so a pass runs even if nothing else happens (a backfill cycle wakes it)
    fork.scheduler.ctx.schedule(fork.now, Kind.BACKFILL, None)


def _check(engine, obs: Observation) -> None:
    n_nodes = engine.plan.n_nodes
    for n, st in obs.nodes.items():
        if not isinstance(n, int | np.integer) or not 0 <= n < n_nodes:
            raise ValueError(f"node {n!r} is not a node of this cluster (0-{n_nodes - 1})")
        if not isinstance(st, dict) or set(st) - {"up", "drained"}:
            raise ValueError(f"node {n}: status must be a mapping of up/drained, not {st!r}")
    keys = set()
    for job in obs.jobs:
        if job.state not in JOB_STATES:
            raise ValueError(f"job {job.key}: state must be one of {JOB_STATES}, "
                             f"not {job.state!r}")
        if job.key in keys:
            raise ValueError(f"job {job.key} is listed twice")
        keys.add(job.key)
        if job.state == "running" and not job.nodes:
            raise ValueError(f"running job {job.key} has no nodes")
        if any(not 0 <= n < n_nodes for n in job.nodes):
            raise ValueError(f"job {job.key}: a node outside 0-{n_nodes - 1}")
    if obs.telemetry is not None:
        for k, col in obs.telemetry.items():
            if k not in TELEMETRY:
                raise ValueError(f"unknown telemetry {k!r}; known: {', '.join(TELEMETRY)}")
            if np.shape(col) != (engine.state.n_gpus,):
                raise ValueError(f"telemetry {k}: one value per GPU ({engine.state.n_gpus})")


def observe(engine, obs: Observation) -> dict:
    """Bring ``engine`` (a mirror, :func:`mirror_hold`) to ``obs``; returns what changed."""
    book = mirror_hold(engine)
    _check(engine, obs)
    changes = {"ended": [], "queued": [], "requeued": [], "started": [], "moved": [],
               "rejected": [], "nodes": {}, "xid": []}
    seen = {j.key: j for j in obs.jobs}
    runs = engine.runs
    for key, idx in list(book.runs.items()):
        job = seen.get(key)
        if job is None and not obs.complete:
            continue
        if job is None or job.state == "ended":
            _end(engine, book, runs[idx], job.reason if job else "GONE")
            del book.runs[key]
            book.counted.add(key)
            changes["ended"].append(key)
        elif job.state == "pending" and runs[idx].state in (RUNNING, DRAINING, DETECTING):
            _stop(engine, runs[idx], "requeued by the cluster's scheduler")
            changes["requeued"].append(key)
    nodes = _node_changes(engine, obs.nodes)
    if nodes:
        changed = inject(engine, nodes=nodes)
        changes["nodes"] = {k: v for k, v in changed.items()
                            if k in ("nodes_down", "nodes_up", "drained", "undrained") and v}
        _node_events(engine, changes["nodes"], obs.reasons)
    book.node_reasons = dict(obs.reasons) if obs.complete else {**book.node_reasons,
                                                                **obs.reasons}
    # jobs the scheduler moved (or started again) leave their old GPUs first, so that every
    # placement below is checked against the GPUs free once they all moved
    to_place: list[ObservedJob] = []
    for job in obs.jobs:
        if job.state == "ended":
            if job.key not in book.counted:  # seen only after it ended: counted once
                book.counted.add(job.key)
                book.ended[job.reason] = book.ended.get(job.reason, 0) + 1
            continue
        if job.key in book.runs and not _unmoved(engine, book, job):
            continue
        to_place.append(job)
    new_rows: list[tuple[str, dict]] = []
    names = {r.spec.name for r in engine.runs}
    free = engine.state.node_free.copy()
    for job in to_place:
        try:
            if job.key in book.runs:
                ran = engine.runs[book.runs[job.key]].first_start is not None
                _place_again(engine, book, job, free)
                changes["moved" if ran else "started"].append(job.key)
            else:
                new_rows.append((job.key, _new_row(engine, book, job, names, free)))
        except ValueError as exc:
            book.rejected[job.key] = str(exc)
            changes["rejected"].append(job.key)
        else:
            book.rejected.pop(job.key, None)
    if new_rows:  # one call: checked above against the same free GPUs, in the same order
        added = inject(engine, jobs=[row for _, row in new_rows])["jobs"]
        for (key, row), got in zip(new_rows, added, strict=True):
            book.runs[key] = got["idx"]
            changes["started" if row["state"] == "running" else "queued"].append(key)
    for key in [k for k in book.rejected if k not in seen]:
        del book.rejected[key]
    if obs.complete:  # ended jobs the scheduler no longer lists need no memory
        book.counted &= seen.keys()
    if obs.telemetry is not None:
        changes["xid"] = _telemetry(engine, book, obs.telemetry)
    book.polls += 1
    return changes


def _training_job(engine, job: ObservedJob, model: int | None) -> TrainingJob:
    limit = job.time_limit_s if job.time_limit_s and job.time_limit_s > 0 else DEFAULT_LIMIT_S
    peak = float(engine.ledger.peak[model]) if model is not None else float(
        engine.ledger.peak.max())
    gpus = int(job.gpus)
    parallelism = None
    if job.params_b > 0 and gpus % (job.tp * job.pp) == 0:
        parallelism = Parallelism(tp=job.tp, pp=job.pp, dp=gpus // (job.tp * job.pp))
    return TrainingJob(job_id=-1, name=f"slurm-{job.key}", tenant=job.tenant or "mirror",
                       submit_s=engine.now, gpus=gpus,
                       work_flops=max(1.0, gpus * peak * DEFAULT_EFFICIENCY * limit),
                       params_b=float(job.params_b), parallelism=parallelism)


def _done_fraction(job: ObservedJob) -> float:
    limit = job.time_limit_s if job.time_limit_s and job.time_limit_s > 0 else DEFAULT_LIMIT_S
    return float(min(MAX_DONE, max(0.0, job.elapsed_s / limit)))


def _node_changes(engine, nodes: dict[int, dict]) -> dict[int, dict]:
    """The statuses in ``nodes`` that differ from the engine's (inject sets only those)."""
    s = engine.state
    out = {}
    for n, st in nodes.items():
        diff = {k: v for k, v in st.items()
                if (k == "up" and bool(s.node_up[n]) != v)
                or (k == "drained" and bool(s.node_drained[n]) != v)}
        if diff:
            out[int(n)] = diff
    return out


NODE_EVENTS = {"nodes_down": ("node_down", "down"), "nodes_up": ("node_up", "back up"),
               "drained": ("drain", "drained"), "undrained": ("undrain", "undrained")}
MAX_NODE_EVENTS = 50  # per poll; more are one summary line


def _node_events(engine, changed: dict, reasons: dict) -> None:
    """One event per node whose status the cluster changed (its reason in the text)."""
    lines = [(kind, n, verb) for key, (kind, verb) in NODE_EVENTS.items()
             for n in changed.get(key, [])]
    for kind, n, verb in lines[:MAX_NODE_EVENTS]:
        why = reasons.get(n, "")
        engine.kernel.log(kind, f"node {n} {verb} in the cluster" + (f": {why}" if why else ""),
                          component=f"node {n}")
    if len(lines) > MAX_NODE_EVENTS:
        engine.kernel.log("observed", f"{len(lines) - MAX_NODE_EVENTS} more node changes in "
                                      "the cluster this poll")


def _new_row(engine, book: MirrorBook, job: ObservedJob, names: set, free: np.ndarray) -> dict:
    """An inject row for a job new to the twin, checked (``free`` is taken from)."""
    name = f"slurm-{job.key}"
    if name in names:
        raise ValueError(f"job {job.key}: the twin already had a job {name} (a reused id)")
    if job.state == "pending":
        spec = _training_job(engine, job, None)
        if engine.jobs.admission.admit(-1, spec).state == REJECTED:
            raise ValueError(f"job {job.key}: no accelerator of this cluster can hold "
                             f"{job.gpus} GPUs")
        names.add(name)
        book.reasons[name] = job.reason
        return {"job": spec, "state": "queued"}
    nodes = [int(n) for n in job.nodes]
    model = int(engine.state.node_model[nodes[0]])
    row = {"job": _training_job(engine, job, model), "state": "running", "nodes": nodes,
           "done_fraction": _done_fraction(job)}
    if job.gpus_per_node is not None:
        row["gpus_per_node"] = [int(c) for c in job.gpus_per_node]
    placement_check(engine, row, free)
    names.add(name)
    return row


def _unmoved(engine, book: MirrorBook, job: ObservedJob) -> bool:
    """For a job the twin follows: note a pending reason, or stop a run the scheduler moved
    (it is placed again after); True when it needs placing."""
    run = engine.runs[book.runs[job.key]]
    if job.state == "pending":
        book.reasons[run.spec.name] = job.reason
        return False
    book.reasons.pop(run.spec.name, None)
    if run.state == RUNNING and np.array_equal(np.sort(run.placement.nodes),
                                               np.sort(np.array(job.nodes, dtype=np.int64))):
        return False
    if run.state in (RUNNING, DRAINING, DETECTING):
        _stop(engine, run, "moved by the cluster's scheduler")
    return True


def _place_again(engine, book: MirrorBook, job: ObservedJob, free: np.ndarray) -> None:
    """Start a followed run on the nodes the scheduler gave it now (its books kept)."""
    run = engine.runs[book.runs[job.key]]
    if run.state != QUEUED:
        raise ValueError(f"job {job.key}: the twin's run is {run.state}, not queued")
    row = {"job": run.spec, "nodes": [int(n) for n in job.nodes]}
    if job.gpus_per_node is not None:
        row["gpus_per_node"] = [int(c) for c in job.gpus_per_node]
    engine.jobs.start(run, placement_check(engine, row, free))


def _stop(engine, run, reason: str) -> None:
    """Stop a running gang and queue it (no engine-side recovery: the scheduler decides)."""
    if run.state == DETECTING:
        run.cancel_event()
        engine.jobs.release(run)
        engine.jobs.requeue(run)
        return
    engine.jobs.preempt(run, reason=reason)


def _end(engine, book: MirrorBook, run, state: str) -> None:
    """End ``run`` as the scheduler reports it (``GONE``: it left the scheduler's view)."""
    jobs, rel = engine.jobs, engine.reliability
    book.ended[state] = book.ended.get(state, 0) + 1
    book.reasons.pop(run.spec.name, None)
    cause = INTERRUPTING.get(state)
    gpus = run.gpus
    if run.state in (RUNNING, DRAINING, DETECTING):
        if run.state == DETECTING:
            run.cancel_event()
        else:
            jobs.close(run, "finish" if state == "COMPLETED" else "kill",
                       "lost_work" if cause else "preempted")
        jobs.release(run)
    elif run.state == QUEUED:
        jobs.leave_queue(run)
    jobs.end_reported(run, interrupted=cause is not None)
    if cause is not None:
        rel.count_interruption(cause, planned=state in PLANNED)
    engine.kernel.log("job_end" if cause is None else "failure",
                      f"{run.spec.name} ({gpus} GPUs) ended in the cluster: {state}",
                      job=run.spec.name, cause=cause or state.lower())


def _telemetry(engine, book: MirrorBook, columns: dict[str, np.ndarray]) -> list[dict]:
    """Keep the columns; a GPU whose XID code changed to a non-zero one is an event."""
    out = []
    new = columns.get("xid")
    if new is not None:
        old = book.telemetry["xid"]
        fresh = np.flatnonzero(np.isfinite(new) & (new > 0) & ~(new == old))
        node_of = engine.state.gpu_node
        for g in fresh.tolist():
            code = int(new[g])
            book.xid[code] = book.xid.get(code, 0) + 1
            node = int(node_of[g])
            local = g - int(engine.state.node_first_gpu[node])
            engine.kernel.log("xid", f"XID {code} on node {node} GPU {local}",
                              component=f"node {node}", xid=code)
            out.append({"gpu": g, "xid": code})
    for k, col in columns.items():
        book.telemetry[k] = np.asarray(col, dtype=float).copy()
    return out


def mirror_summary(engine) -> dict | None:
    """The mirror's part of a live frame (``None`` for an engine that simulates)."""
    book = engine.mirror
    if book is None:
        return None
    tel = book.telemetry
    up = engine.state.gpu_up

    def stat(col, fn):
        vals = col[np.isfinite(col)]
        return round(float(fn(vals)), 3) if vals.size else None

    pending = {}
    for reason in book.reasons.values():
        pending[reason or "None"] = pending.get(reason or "None", 0) + 1
    return {"polls": book.polls,
            "pending_reasons": dict(sorted(pending.items(), key=lambda kv: -kv[1])),
            "ended": dict(sorted(book.ended.items())),
            "rejected": dict(list(sorted(book.rejected.items()))[:20]),
            "rejected_count": len(book.rejected),
            "xid": {str(k): v for k, v in sorted(book.xid.items())},
            "telemetry": {"gpus_reporting": int(np.isfinite(tel["util"]).sum()),
                          "gpus": int(up.size),
                          "util_mean_pct": stat(tel["util"], np.mean),
                          "power_kw": (round(float(np.nansum(tel["power_w"])) / 1000.0, 3)
                                       if np.isfinite(tel["power_w"]).any() else None),
                          "temp_max_c": stat(tel["temp_c"], np.max),
                          "tensor_active_mean": stat(tel["tensor_active"], np.mean)}}
