"""Operator actions on one training job: hold, release, cancel, requeue, reprioritise.

Each action names the job (its name, as the dashboard shows it) and who asked (``by``, for the
event log), checks that the job is in a state where the action makes sense and raises
``ValueError`` with a message for that person otherwise, before anything changes.  The moves
themselves are the job lifecycle's (:class:`~scheduler.scheduling.lifecycle.JobLifecycle`):

=============  ================  ==============================================================
action         from              what happens
=============  ================  ==============================================================
hold           queued            out of every scheduling pass until released; its pending reason
                                 is Slurm's ``JobHeldUser``
release        held              back in the queue with its submit time, priority and wait so far
cancel         queued, held,     ended for good (``cancelled``, counted); a running gang frees its
               running           GPUs, keeps the compute its last checkpoint covers and the rest
                                 is booked ``preempted`` in the ledger
requeue        running           stopped like a preemption (work up to its last checkpoint kept)
                                 and queued again
priority       queued, held      a new priority (:data:`~scheduler.limits.bounds.JOB_PRIORITY`);
                                 the queue order follows
=============  ================  ==============================================================

A gang that is lending its GPUs, recovering from a failure or running in a cloud pool is in the
middle of a move of its own: actions on it are refused until it is back in the queue or running.
"""

from __future__ import annotations

from scheduler.limits.bounds import JOB_PRIORITY
from scheduler.model.job_run import HELD, QUEUED, RUNNING

HELD_REASON = "JobHeldUser"
"""The pending reason of a held job (Slurm's, for a job held by its user or an operator)."""

BY_MAX = 150
"""Longest name of whoever asked (Django's username length)."""


def _by(by) -> str:
    if not isinstance(by, str) or len(by) > BY_MAX:
        raise ValueError(f"by must be a name of at most {BY_MAX} characters, not {by!r}")
    return by or "an operator"


def _run(engine, job):
    """The run of the job named ``job`` (the latest, should a name have been reused)."""
    if not isinstance(job, str) or not job:
        raise ValueError(f"job must be a job name, not {job!r}")
    for run in reversed(engine.runs):
        if run.spec.name == job:
            return run
    raise ValueError(f"no job named {job!r} in this engine")


ACTION_STATES = {"hold": (QUEUED,), "release": (HELD,), "cancel": (QUEUED, HELD, RUNNING),
                 "requeue": (RUNNING,), "priority": (QUEUED, HELD)}
"""The states of a job each action applies to (the twin checks the same table first)."""

_DONE_WORDS = {"hold": "held", "release": "released", "cancel": "cancelled",
               "requeue": "requeued", "priority": "reprioritised"}
_STATE_WORDS = {"draining": "lending its GPUs to inference",
                "detecting": "recovering from a failure", "cloud": "running in a cloud pool",
                "pending": "not submitted yet"}


def action_refusal(action: str, job: str, state: str) -> str | None:
    """Why ``action`` does not apply to job ``job`` in ``state`` (``None`` if it does).

    >>> action_refusal("hold", "j1", "running")
    'job j1 is running: only queued jobs can be held'
    >>> action_refusal("release", "j1", "queued")
    'job j1 is queued, not held: there is nothing to release'
    """
    allowed = ACTION_STATES[action]
    if state in allowed:
        return None
    shown = _STATE_WORDS.get(state, state)
    if action == "release":
        return f"job {job} is {shown}, not held: there is nothing to release"
    names = ", ".join(allowed[:-1]) + " or " + allowed[-1] if len(allowed) > 1 else allowed[0]
    return f"job {job} is {shown}: only {names} jobs can be {_DONE_WORDS[action]}"


def _check(run, action: str) -> None:
    why = action_refusal(action, run.spec.name, run.state)
    if why is not None:
        raise ValueError(why)


def _done(engine, run, kind: str | None, text: str, by: str) -> dict:
    if kind is not None:
        engine.kernel.log(kind, f"{run.spec.name} {text} by {by}", job=run.spec.name)
    engine.scheduler.wake()
    return {"job": run.spec.name, "state": run.state, "priority": run.spec.priority, "by": by}


def hold_job(engine, *, job, by: str = "") -> dict:
    """Keep a queued job out of scheduling until it is released."""
    run, by = _run(engine, job), _by(by)
    _check(run, "hold")
    engine.jobs.hold(run)
    return _done(engine, run, "hold", f"held ({HELD_REASON})", by)


def release_job(engine, *, job, by: str = "") -> dict:
    """Put a held job back in the queue, where it was."""
    run, by = _run(engine, job), _by(by)
    _check(run, "release")
    engine.jobs.unhold(run)
    return _done(engine, run, "hold", "released", by)


def cancel_job(engine, *, job, by: str = "") -> dict:
    """End a queued, held or running job for good."""
    run, by = _run(engine, job), _by(by)
    _check(run, "cancel")
    was = run.state
    engine.jobs.cancel(run)
    return _done(engine, run, "cancel", f"cancelled ({was})", by)


def requeue_job(engine, *, job, by: str = "") -> dict:
    """Stop a running job as a preemption would and queue it again."""
    run, by = _run(engine, job), _by(by)
    _check(run, "requeue")
    engine.jobs.preempt(run, reason=f"requeued by {by}")  # logs "<job> preempted: requeued by"
    return _done(engine, run, None, "", by)


def prioritise_job(engine, *, job, priority, by: str = "") -> dict:
    """Give a queued or held job a new priority (bounded: :data:`JOB_PRIORITY`)."""
    run, by = _run(engine, job), _by(by)
    priority = JOB_PRIORITY.check("priority", priority)
    _check(run, "priority")
    old = run.spec.priority
    engine.jobs.set_priority(run, priority)
    return _done(engine, run, "priority", f"priority {old} -> {priority}", by)


def held_jobs(engine) -> list[dict]:
    """Every held job, oldest submission first, as the twin shows it (with its pending
    reason)."""
    held = sorted((r for r in engine.runs if r.state == HELD),
                  key=lambda r: (r.spec.submit_s, r.idx))
    return [{"name": r.spec.name, "tenant": r.spec.tenant, "gpus": r.gpus,
             "priority": r.spec.priority, "reason": HELD_REASON,
             "wait_h": round((engine.now - r.queued_since) / 3600.0, 3)} for r in held]


JOB_ACTIONS = {"job_hold": hold_job, "job_release": release_job, "job_cancel": cancel_job,
               "job_requeue": requeue_job, "job_priority": prioritise_job}
"""Engine command name -> action (``apply_command`` dispatches these)."""
