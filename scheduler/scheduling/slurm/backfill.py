"""Slurm's backfill cycle for the ``slurm`` policy (``sched/backfill``'s
``_attempt_backfill``): the plan of running jobs' limits, then the queue in order, each job
started now where its nodes are free for its whole limit, else reserved at its earliest start.
``m`` is the :class:`~scheduler.scheduling.slurm.mechanics.SlurmMechanics`.
"""

from __future__ import annotations

import math

import numpy as np
from sortedcontainers import SortedList

from scheduler.model.job_run import QUEUED, JobRun
from scheduler.model.state import Placement
from scheduler.scheduling.slurm import limits, preemption
from scheduler.scheduling.slurm.nodespace import NodeSpace

WILL_RUN_WINDOW_S = 30.0
"""cons_common's ``_will_run_test`` frees running jobs in batches: those ending within 30 s of
the first end (aligned to 30 s), then a window doubled each time; a job's predicted start is
the end of the last job of the batch after which it fits."""


def cycle(m) -> None:
    """One backfill cycle over the plan of running jobs' limits and reservations."""
    conf, now = m.conf, m.ctx.now
    m.counters["backfill_cycles"] += 1
    space = NodeSpace(now, m.state.node_gpus.size, resolution=conf.bf_resolution_s)
    whole_node = conf.memory_whole_node
    # when running jobs end by their limits (and completing nodes come free): will-run's view
    ends = SortedList(key=lambda e: e[0])
    for node in np.flatnonzero(m.completing > now).tolist():
        ends.add((float(m.completing[node]), np.array([node]),
                  np.array([m.state.node_free[node]]), -1))
    for run in m.jobs.running.values():
        rec = m.rec.get(run.idx)
        limit = rec.limit if rec is not None else math.inf
        if not math.isfinite(limit):
            continue
        p = run.placement
        counts = m.state.node_gpus[p.nodes] if whole_node else p.counts
        ends.add((limits.planned_end(m, run, rec, now), p.nodes, counts, run.idx))
    per_user: dict[str, int] = {}
    nowhere: set[tuple] = set()
    horizon = now + conf.bf_window_s
    tested = _walk(m, conf, now, horizon, ends, space, per_user, nowhere, whole_node)
    m.counters["backfill_tested"] += tested  # counted once a cycle: nothing reads them in one
    m.s.counters["placement_decisions"] += tested


def _walk(m, conf, now, horizon, ends, space, per_user, nowhere, whole_node) -> int:
    """The cycle's walk of the queue; returns the jobs it tested."""
    tested = 0
    runs, recs, book = m.jobs.runs, m.rec, m.book
    blocked = m.limits.blocked if m.limits.on else None
    max_user, max_test = conf.bf_max_job_user, conf.bf_max_job_test
    # without a per-user cap, QOS limits or reservations, a job of a shape found nowhere
    # in this cycle is only counted: the walk passes runs of them at once (Walk.skip)
    bulk = not (max_user or blocked is not None or book is not None)
    known = np.zeros(len(m.shapes), bool)  # by shape number: found nowhere
    walk = m.walk()
    while True:
        if bulk and nowhere:
            if known.size < len(m.shapes):
                known = np.append(known, np.zeros(len(m.shapes) - known.size, bool))
            counted, late, stop = walk.skip(now, known, max_test - tested)
            tested += counted
            for idx in late:
                m.eligible(runs[idx], recs[idx])  # (a wake-up at its eligibility)
            if stop:
                break
        idx = next(walk, None)
        if idx is None:
            break
        run = runs[idx]
        rec = recs[idx]
        if run.state != QUEUED or rec.eligible > now:
            m.eligible(run, rec)  # (a wake-up at its eligibility)
            continue
        if max_user:
            user = m.user_of(run)
            if per_user.get(user, 0) >= max_user:
                continue
            per_user[user] = per_user.get(user, 0) + 1
        if tested == max_test:
            break
        tested += 1
        if (blocked is not None and blocked(run, rec)) or (book is not None
                                                           and book.deferred(run, now)):
            continue  # a QOS limit holds it, or its reservation is not on: no plan for it
        # the plan only fills up during a cycle: a job of a shape that found no start
        # in it finds none either (its test is counted, as Slurm counts it)
        shape = m.shape_of(run, rec)
        if shape in nowhere:
            continue
        mask = m.state.schedulable() & m.part_mask.get(rec.part, True)
        gone = preemption.candidates(m, rec) if now >= rec.waits_until else []
        found = will_run(m, run, rec, ends, space, mask, horizon, gone)
        if found is not None and found[1] is None:
            # it fits now only with its preemptable jobs gone: backfill starts it, preempting
            preemption.preempt_for(m, run, rec, _open(m, run, rec, mask, space, now))
            continue
        if found is None:
            nowhere.add(shape)
            if known.size < len(m.shapes):
                known = np.append(known, np.zeros(len(m.shapes) - known.size, bool))
            known[m.shapes[shape]] = True
            continue
        t, placement = found
        if t == now:
            m.start(run, rec, placement)
            m.counters["backfill_started"] += 1
            m.s.counters["backfilled"] += 1
            if math.isfinite(rec.limit):
                counts = (m.state.node_gpus[placement.nodes] if whole_node
                          else placement.counts)
                ends.add((now + rec.limit, placement.nodes, counts, run.idx))
        else:
            m.counters["reservations"] += 1
            if run.reserved_start is None:
                run.reserved_start = t
            space.reserve(t, rec.limit, placement.nodes)
    return tested


def will_run(m, run: JobRun, rec, ends, space: NodeSpace, mask: np.ndarray,
             horizon: float, gone: list[JobRun] = ()
             ) -> tuple[float, Placement | None] | None:
    """When and where ``run`` would start as slurmctld's will-run test predicts it: now on
    the free nodes, else after batches of running jobs end (by their limits,
    :data:`WILL_RUN_WINDOW_S`), on nodes no reservation withholds over its whole limit; its
    start rounded down to ``bf_resolution``.  ``None`` if not within ``horizon``.

    ``gone``: the running jobs ``run`` may preempt.  As cons_common's ``_will_run_test``
    with preemptee candidates, they leave the plan at once: ``(now, None)`` if ``run`` fits
    now only without them (backfill then starts it by preemption), and the later starts are
    predicted from the other jobs' ends alone."""
    now = m.ctx.now
    free = m.free_now().astype(np.int64)
    open_now = _open(m, run, rec, mask, space, now)
    placement = m.choose(run, rec, free, open_now)
    if placement is not None:
        return now, placement
    if len(gone):
        for r in gone:
            p = r.placement
            if m.conf.memory_whole_node:
                free[p.nodes] = m.state.node_gpus[p.nodes]
            else:
                np.add.at(free, p.nodes, p.counts)
        if m.choose(run, rec, free, open_now) is not None:
            return now, None
        ids = {r.idx for r in gone}
        ends = [e for e in ends if e[3] not in ids]
    # the earliest of will-run's batch ends and the plan's (and advance reservations')
    # boundaries at which it fits: backfill.c retries a start past the next boundary there
    # (TRY_LATER with later_start), so a node a reservation frees sooner wins over a later
    # batch end
    steps = _batches(m, ends, free) if len(ends) else []
    book = m.book.boundaries if m.book is not None else ()
    times = sorted({t for t, _ in steps} | {t for t in (*space.times, *book) if t > now})
    k, cur = 0, free
    for t in times:
        if t > horizon:
            return None
        while k < len(steps) and steps[k][0] <= t:
            cur = steps[k][1]
            k += 1
        placement = m.choose(run, rec, cur, _open(m, run, rec, mask, space, t))
        if placement is not None:
            return t, placement
    return None


def _open(m, run, rec, mask: np.ndarray, space: NodeSpace, t: float) -> np.ndarray:
    """The nodes of ``mask`` no backfill reservation nor advance reservation withholds from
    ``run`` over ``[t, t + limit)``."""
    out = mask & ~space.blocked_over(t, rec.limit)
    return out if m.book is None else out & m.book.usable(run, rec.limit, t, mask)


def _batches(m, ends, free: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """Will-run's batches of running jobs' ends (:data:`WILL_RUN_WINDOW_S`): per batch, the
    start it gives (its last end, rounded down to ``bf_resolution``, after now) and the GPUs
    free after it."""
    now, res = m.ctx.now, m.conf.bf_resolution_s
    free = free.copy()
    first = ends[0][0]
    top = first + (WILL_RUN_WINDOW_S - first % WILL_RUN_WINDOW_S)
    window = WILL_RUN_WINDOW_S
    out = []
    i, n = 0, len(ends)
    while i < n:
        last = ends[i][0]
        while True:  # one batch: every job ending by top + window
            end, nodes, counts, _ = ends[i]
            np.add.at(free, nodes, counts)
            last = end
            i += 1
            if i == n or ends[i][0] > top + window:
                break
        while i < n and ends[i][0] > top + window:
            window *= 2
        start = math.floor(last / res) * res
        if start <= now:  # only with nodes still running or completing now: not yet
            start = now + res
        out.append((start, free.copy()))
    return out
