"""Slurm's backfill cycle for the ``slurm`` policy (``sched/backfill``'s
``_attempt_backfill``): the plan of running jobs' limits, then the queue in order, each job
started now where its nodes are free for its whole limit, else reserved at its earliest start.
``m`` is the :class:`~scheduler.scheduling.slurm.mechanics.SlurmMechanics`.
"""

from __future__ import annotations

import math

import numpy as np
from sortedcontainers import SortedList

from scheduler.model.job_run import JobRun
from scheduler.model.state import Placement
from scheduler.scheduling.slurm import preemption
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
                  np.array([m.state.node_free[node]])))
    for run in m.jobs.running.values():
        rec = m.rec.get(run.idx)
        limit = rec.limit if rec is not None else math.inf
        if not math.isfinite(limit):
            continue
        p = run.placement
        counts = m.state.node_gpus[p.nodes] if whole_node else p.counts
        ends.add((rec.started + limit, p.nodes, counts))
    per_user: dict[str, int] = {}
    nowhere: set[tuple] = set()
    tested = 0
    horizon = now + conf.bf_window_s
    for idx in m.walk():
        run = m.jobs.runs[idx]
        rec = m.rec[idx]
        if not m.eligible(run, rec):
            continue
        if conf.bf_max_job_user:
            user = m.user_of(run)
            if per_user.get(user, 0) >= conf.bf_max_job_user:
                continue
            per_user[user] = per_user.get(user, 0) + 1
        tested += 1
        if tested > conf.bf_max_job_test:
            break
        m.counters["backfill_tested"] += 1
        m.s.counters["placement_decisions"] += 1
        # the plan only fills up during a cycle: a job of a shape that found no start
        # in it finds none either (its test is counted, as Slurm counts it)
        shape = (run.gpus, rec.per, rec.limit, rec.part, run.models)
        if shape in nowhere:
            continue
        mask = m.state.schedulable() & m.part_mask.get(rec.part, True)
        found = will_run(m, run, rec, ends, space, mask, horizon)
        if ((found is None or found[0] > now) and m.conf.preempt_type != "preempt/none"
                and now >= rec.waits_until
                and preemption.preempt_for(m, run, rec, mask & ~space.blocked[0])):
            continue  # backfill preempts too (will-run with preemptable jobs)
        if found is None:
            nowhere.add(shape)
            continue
        t, placement = found
        if t == now:
            m.start(run, rec, placement)
            m.counters["backfill_started"] += 1
            m.s.counters["backfilled"] += 1
            if math.isfinite(rec.limit):
                counts = (m.state.node_gpus[placement.nodes] if whole_node
                          else placement.counts)
                ends.add((now + rec.limit, placement.nodes, counts))
        else:
            m.counters["reservations"] += 1
            if run.reserved_start is None:
                run.reserved_start = t
            space.reserve(t, rec.limit, placement.nodes)


def will_run(m, run: JobRun, rec, ends, space: NodeSpace, mask: np.ndarray,
             horizon: float) -> tuple[float, Placement] | None:
    """When and where ``run`` would start as slurmctld's will-run test predicts it: now on
    the free nodes, else after batches of running jobs end (by their limits,
    :data:`WILL_RUN_WINDOW_S`), on nodes no reservation withholds over its whole limit; its
    start rounded down to ``bf_resolution``.  ``None`` if not within ``horizon``."""
    now, res = m.ctx.now, m.conf.bf_resolution_s
    free = m.free_now().astype(np.int64)
    placement = m.choose(run, rec, free, mask & ~space.blocked_over(now, rec.limit))
    if placement is not None:
        return now, placement
    if not ends:
        return None
    first = ends[0][0]
    top = first + (WILL_RUN_WINDOW_S - first % WILL_RUN_WINDOW_S)
    window = WILL_RUN_WINDOW_S
    i, n = 0, len(ends)
    while i < n:
        last = ends[i][0]
        while True:  # one batch: every job ending by top + window
            end, nodes, counts = ends[i]
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
        if start > horizon:
            return None
        placement = m.choose(run, rec, free, mask & ~space.blocked_over(start, rec.limit))
        if placement is not None:
            return start, placement
    # every running job gone and still withheld: try again where reservations end
    # (backfill.c's TRY_LATER at the next node_space boundary)
    for t in space.times:
        if t <= start:
            continue
        if t > horizon:
            return None
        placement = m.choose(run, rec, free, mask & ~space.blocked_over(t, rec.limit))
        if placement is not None:
            return t, placement
    return None
