"""EASY backfill's mechanics for one pass: the head's reservation, whether a later gang may
start without delaying it, and walking through gangs known to wait (issue 25: long queues).

:class:`~scheduler.scheduling.passes.SchedulingPass` uses these; they decide nothing of their
own.  Behind the reservation, once a gang of a queue partition (one tenant, priority, size and
shape) would delay the reservation, a later gang of that partition in the same pass can differ
only by being short enough to end before the shadow time, until a gang starts or a placement
fails: it has the same size (the same ``extra`` test), the same models (the same free GPUs) and
the same failed-shape test.  Such gangs get the one estimate test (:func:`verdict_for`), and
the walk goes on through them without yielding (:func:`walk_on`,
:meth:`~scheduler.scheduling.queue_index.Ordered.wait_through`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.model.job_run import QUEUED, JobRun, segment_length
from scheduler.scheduling.queue_index import SKIP, STOP, WAIT, entry_of


@dataclass
class Reservation:
    """EASY backfill: the head's start time (``shadow``) and the GPUs it leaves (``extra``)."""

    models: frozenset
    shadow: float
    extra: int


def estimate_s(sch, run: JobRun) -> float:
    """Wall time ``run`` would take from now on its preferred model (no failures), s.

    A queued run's estimate changes only with its remaining work, its interval, whether it
    ever ran (a restart) and the storage bandwidth: it is kept in ``sch.estimates`` until one
    of those moves.
    """
    jobs = sch.jobs
    key = (run.remaining_flops, run.interval_s, run.first_start is None,
           jobs.costs.storage_factor)
    cached = sch.estimates.get(run.idx)
    if cached is not None and cached[0] == key:
        return cached[1]
    m = run.models[0]
    rate = run.gpus * jobs.peak[m] * run.spec.efficiency
    restart = 0.0 if run.first_start is None else jobs.restart_estimate(run)
    estimate = segment_length(run.remaining_flops / rate, restart, run.interval_s,
                              jobs.estimate_write_s(run, m))
    sch.estimates[run.idx] = (key, estimate)
    return estimate


def reserve(jobs, head: JobRun, free: list[int]) -> Reservation:
    """The head's reservation: the earliest end of running gangs at which enough GPUs of its
    models are free (``free`` per model now), and the GPUs it leaves then."""
    models = frozenset(head.models)
    avail = sum(free[m] for m in head.models)
    shadow, extra = math.inf, 0
    for end, g, _ in jobs.ends(head.models):
        avail += g
        if avail >= head.gpus:
            shadow, extra = end, avail - head.gpus
            break
    if head.reserved_start is None and math.isfinite(shadow):
        head.reserved_start = shadow
    return Reservation(models, shadow, extra)


def backfill_mode(sch, run: JobRun, res: Reservation) -> str | None:
    """How ``run`` may start behind ``res`` without delaying it: ``"other"`` (other models),
    ``"short"`` (it ends before the shadow time), ``"extra"`` (it fits in the GPUs the head
    leaves), or ``None`` (it would delay the head)."""
    if not res.models.intersection(run.models):
        return "other"
    if sch.ctx.now + estimate_s(sch, run) <= res.shadow:
        return "short"
    if run.gpus <= res.extra:
        return "extra"
    return None


def verdict_for(sch, fresh: set, res: Reservation) -> Callable[[JobRun], int]:
    """``verdict(run)`` on a gang of a waiting partition behind ``res``: ``SKIP`` (not
    queued, or preempted in this pass: the pass skips it), ``WAIT`` (it would delay the head,
    as :func:`backfill_mode` finds) or ``STOP`` (short enough: the pass tries it); see
    :mod:`~scheduler.scheduling.queue_index`."""
    now, estimates, shadow = sch.ctx.now, sch.estimates, res.shadow
    storage = sch.jobs.costs.storage_factor

    def verdict(r: JobRun) -> int:
        if r.state != QUEUED or r.idx in fresh:
            return SKIP
        known = estimates.get(r.idx)  # estimate_s, its cache read inline
        if known is not None and known[0] == (r.remaining_flops, r.interval_s,
                                              r.first_start is None, storage):
            estimate = known[1]
        else:
            estimate = estimate_s(sch, r)
        return WAIT if now + estimate > shadow else STOP

    return verdict


def walk_on(walk, waiting: set, verdict, limit: int, reasons: dict, reason: str) -> int:
    """Walk on, while the next gangs belong to ``waiting`` partitions and each would delay the
    reservation, up to ``limit`` of them: each waits for ``reason`` (in ``reasons``), as the
    pass would find one by one.  Returns how many were walked."""
    walked = walk.wait_through(waiting, verdict, limit)
    for run in walked:
        reasons[run.idx] = reason
    return len(walked)


def passed_wait(index, key: tuple, run: JobRun, reasons: dict, fresh, priority: str) -> None:
    """Partition ``key`` of queue ``index`` is dropped at ``run`` with a reason of its own: its
    gangs the pass passed before ``run`` keep theirs, ``priority`` (the rest of the pass leaves
    a gang that waits for a higher-ranked one without a reason of its own: the partition's, or
    Priority by default); ``fresh`` runs and those with a reason already are left alone."""
    part = index.parts.get(key)
    at = entry_of(run)
    if part is None or not part._lists[0][0] < at:
        return  # (most often) ``run`` is its partition's first gang
    for entry in part.irange(maximum=at, inclusive=(True, False)):
        if entry[-1] not in fresh and entry[-1] not in reasons:
            reasons[entry[-1]] = priority


def shorts_finder(jobs, look_ahead: bool, now: float, res: Reservation):
    """``shorts(partition)``: the entries of its gangs that end before ``res``'s shadow time
    if started ``now``, sorted (kept for this pass); ``None`` where the queue of lifecycle
    ``jobs`` keeps no estimates (then the walk asks a verdict per gang)."""
    index = jobs.index
    if not look_ahead or index.estimator is None:
        return None
    storage = jobs.costs.storage_factor
    if index.est_stamp != storage:  # estimates read the storage's speed: all moved
        index.use_estimator(index.estimator, jobs.runs, storage)
    return index.short_finder(now, res.shadow)
