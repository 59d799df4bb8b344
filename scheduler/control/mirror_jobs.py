"""One mirrored job's moves: made new, placed again, stopped, ended (:mod:`.mirror`'s half that
acts on runs).

A mirrored job holds what the real scheduler allocated, never the simulator's per-GPU
defaults: its cores and memory per GPU are the observed ones (``0`` when the scheduler did not
say), its NIC share ``0`` (Slurm does not allocate NIC bandwidth). The scheduler already decided
that the job fits: where the twin's node books hold less than the observation asks (an
inventory that says a node has fewer cores than Slurm does), the job takes what is left
(:func:`host_fit`) and is never refused for host resources.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scheduler.control.inject import placement_check
from scheduler.limits.bounds import job_check
from scheduler.model.job_run import DETECTING, DRAINING, HELD, QUEUED, REJECTED, RUNNING
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, Parallelism, TrainingJob

DEFAULT_LIMIT_S = 7 * 86400.0
"""Assumed length of a mirrored job with no time limit, s (the engine needs one to estimate
its progress; the mirror ends the job when the scheduler says it ended, whatever this says)."""
MAX_DONE = 0.99
LIVE = (QUEUED, RUNNING, DRAINING, DETECTING, HELD)
"""Run states of a job the twin still follows."""
HOLDING = (RUNNING, DRAINING, DETECTING)
"""Run states that hold GPUs."""
INTERRUPTING = {"NODE_FAIL": "node_fail", "BOOT_FAIL": "boot_fail", "FAILED": "job_failed",
                "OUT_OF_MEMORY": "out_of_memory", "PREEMPTED": "preempted_by_scheduler"}
"""Slurm end states that interrupt a job (cause names as the failure statistics show them)."""
PLANNED = {"PREEMPTED"}


def run_name(key: str, taken: dict) -> str:
    """The twin's name for scheduler job ``key``: ``slurm-<key>``; when the twin already
    ended a run of that name (the scheduler reused the id), ``slurm-<key>-r<n>``."""
    name, n = f"slurm-{key}", 1
    while name in taken:
        n += 1
        name = f"slurm-{key}-r{n}"
    return name


def training_job(engine, job, name: str, model: int | None,
                 host: tuple[float, float] = (0.0, 0.0)) -> TrainingJob:
    """The engine's job for observed ``job``: ``host`` = (cores, GB) per GPU it holds."""
    limit = job.time_limit_s if job.time_limit_s and job.time_limit_s > 0 else DEFAULT_LIMIT_S
    peak = float(engine.ledger.peak[model]) if model is not None else float(
        engine.ledger.peak.max())
    gpus = int(job.gpus)
    parallelism = None
    if job.params_b > 0 and gpus % (job.tp * job.pp) == 0:
        parallelism = Parallelism(tp=job.tp, pp=job.pp, dp=gpus // (job.tp * job.pp))
    return TrainingJob(job_id=-1, name=name, tenant=job.tenant or "mirror",
                       submit_s=engine.now, gpus=gpus,
                       work_flops=max(1.0, gpus * peak * DEFAULT_EFFICIENCY * limit),
                       params_b=float(job.params_b), parallelism=parallelism,
                       cpu_per_gpu=host[0], ram_gb_per_gpu=host[1], nic_gbps_per_gpu=0.0)


def done_fraction(job) -> float:
    limit = job.time_limit_s if job.time_limit_s and job.time_limit_s > 0 else DEFAULT_LIMIT_S
    return float(min(MAX_DONE, max(0.0, job.elapsed_s / limit)))


def observed_host(job) -> tuple[float, float]:
    """(cores, GB) per GPU the scheduler allocated to ``job``; 0 where it did not say."""
    return (max(0.0, float(job.cpus_per_gpu or 0.0)),
            max(0.0, float(job.ram_gb_per_gpu or 0.0)))


def host_fit(want: tuple[float, float], nodes: list[int], counts: list[int],
             host: tuple[np.ndarray, ...]) -> tuple[tuple[float, float], bool]:
    """``want`` (cores, GB per GPU) cut to what the twin's free ``host`` columns (cores, GB,
    NIC per node) hold on ``nodes`` for ``counts`` GPUs; and whether it was cut."""
    if not (want[0] > 0 or want[1] > 0):
        return (0.0, 0.0), False
    ids = np.asarray(nodes, dtype=np.int64)
    c = np.asarray(counts, dtype=float)
    out = []
    for need, free in zip(want, host[:2], strict=True):
        room = float(np.min(np.maximum(free[ids], 0.0) / c)) if need > 0 and ids.size else 0.0
        out.append(min(need, room))
    got = (out[0], out[1])
    return got, got[0] < want[0] - 1e-9 or got[1] < want[1] - 1e-9


def _counts(engine, job) -> list[int]:
    if job.gpus_per_node is not None:
        return [int(c) for c in job.gpus_per_node]
    return [int(engine.state.node_gpus[n]) for n in job.nodes]


def new_row(engine, job, name: str, free: np.ndarray, host: tuple[np.ndarray, ...],
            clamped: list) -> dict:
    """An inject row for a job new to the twin, checked (``free`` and ``host`` are taken
    from); one ``ValueError`` naming what is wrong."""
    if job.state == "pending":
        spec = training_job(engine, job, name, None)
        job_check(spec)
        if engine.jobs.admission.admit(-1, spec).state == REJECTED:
            raise ValueError(f"job {job.key}: no accelerator of this cluster can hold "
                             f"{job.gpus} GPUs")
        return {"job": spec, "state": "queued"}
    nodes = [int(n) for n in job.nodes]
    want = observed_host(job)
    got, cut = host_fit(want, nodes, _counts(engine, job), host)
    if cut:
        clamped.append(job.key)
    spec = training_job(engine, job, name, int(engine.state.node_model[nodes[0]]), got)
    job_check(spec)
    row = {"job": spec, "state": "running", "nodes": nodes, "done_fraction": done_fraction(job)}
    if job.gpus_per_node is not None:
        row["gpus_per_node"] = [int(c) for c in job.gpus_per_node]
    placement_check(engine, row, free, host)
    return row


def place_again(engine, run, job, free: np.ndarray, host: tuple[np.ndarray, ...],
                clamped: list) -> None:
    """Start a followed, queued run on the nodes the scheduler gave it now (its books kept,
    its host share the one observed now)."""
    if run.state != QUEUED:
        raise ValueError(f"job {job.key}: the twin's run is {run.state}, not queued")
    resize(engine, run, int(job.gpus))
    nodes = [int(n) for n in job.nodes]
    got, cut = host_fit(observed_host(job), nodes, _counts(engine, job), host)
    if cut:
        clamped.append(job.key)
    spec = replace(run.spec, cpu_per_gpu=got[0], ram_gb_per_gpu=got[1], nic_gbps_per_gpu=0.0)
    row = {"job": spec, "nodes": nodes}
    if job.gpus_per_node is not None:
        row["gpus_per_node"] = [int(c) for c in job.gpus_per_node]
    placement = placement_check(engine, row, free, host)
    run.spec = spec  # queued: it holds nothing the old figures were booked against
    engine.jobs.start(run, placement)


def resize(engine, run, gpus: int) -> None:
    """A queued run takes the GPU count its job has now (the scheduler's word wins: a job
    updated while pending, or started with another count); its wait and done share kept."""
    if run.gpus == gpus or run.state != QUEUED:
        return
    old = run.spec
    par = old.parallelism
    if par is not None:
        group = par.gpus // par.dp
        par = replace(par, dp=gpus // group) if gpus % group == 0 else None
    spec = replace(old, gpus=gpus, work_flops=old.work_flops * gpus / old.gpus,
                   parallelism=par)
    fresh = engine.jobs.admission.admit(run.idx, spec)
    if fresh.state == REJECTED:
        raise ValueError(f"job {run.spec.name}: no accelerator of this cluster can hold "
                         f"{gpus} GPUs")
    since, queued = run.queued_since, run.idx in engine.queue
    engine.jobs.leave_queue(run)
    run.remaining_flops *= gpus / old.gpus
    run.spec, run.gpus = spec, gpus
    run.models, run.affinity = fresh.models, fresh.affinity
    run.sig = (run.models, run.affinity)
    if queued:
        engine.jobs.requeue(run)
        run.queued_since = since


def unmoved(engine, book, run, job) -> bool:
    """For a job the twin follows: note a pending reason, or stop a run the scheduler moved
    (it is placed again after); True when it needs placing."""
    if job.state == "pending":
        book.reasons[run.spec.name] = job.reason
        resize(engine, run, int(job.gpus))
        return False
    book.reasons.pop(run.spec.name, None)
    if run.state == RUNNING and np.array_equal(np.sort(run.placement.nodes),
                                               np.sort(np.array(job.nodes, dtype=np.int64))):
        if job.gpus_per_node is None or np.array_equal(
                run.placement.counts[np.argsort(run.placement.nodes)],
                np.asarray(job.gpus_per_node, dtype=np.int64)[np.argsort(job.nodes)]):
            return False
    if run.state in HOLDING:
        stop(engine, run, "moved by the cluster's scheduler")
    return True


def stop(engine, run, reason: str) -> None:
    """Stop a running gang and queue it (no engine-side recovery: the scheduler decides)."""
    if run.state == DETECTING:
        run.cancel_event()
        engine.jobs.release(run)
        engine.jobs.requeue(run)
        return
    engine.jobs.preempt(run, reason=reason)


def end(engine, book, run, state: str) -> None:
    """End ``run`` as the scheduler reports it (``GONE``: it left the scheduler's view)."""
    jobs, rel = engine.jobs, engine.reliability
    book.ended[state] = book.ended.get(state, 0) + 1
    book.reasons.pop(run.spec.name, None)
    cause = INTERRUPTING.get(state)
    gpus = run.gpus
    if run.state in HOLDING:
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
