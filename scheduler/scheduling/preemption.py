"""Choosing whom to preempt: the cheapest set of gangs whose eviction lets a gang start.

Candidates are running gangs of a lower priority, or gangs running on borrowed quota when the
waiting gang is within its tenant's quota.  For a gang that must stay in one domain (pod, leaf
group, NVLink domain) the candidates are grouped by the domains they touch and each domain is
costed on its own: free GPUs there plus the cheapest victims there until the gang's size is
reached.  Domains are tried cheapest first, and a set is kept only if a trial placement with
those victims gone succeeds, so nobody is evicted for a gang that would still wait.
"""

from __future__ import annotations

import numpy as np

from scheduler.model.job_run import RUNNING, JobRun

MIN_AGE_S = 600.0
"""A gang that started less than this ago is not preempted (avoids thrashing)."""
MAX_TRIALS = 8
"""Trial placements per preemption attempt (each costs one placement)."""


def _cost(victims: list[JobRun]) -> tuple:
    return (max(v.spec.priority for v in victims), sum(v.gpus for v in victims))


def _fill(need: int, free: int, ordered: list[tuple[JobRun, int]]) -> list[JobRun] | None:
    """Cheapest-first ``(victim, GPUs it frees)`` until ``free`` plus theirs reaches ``need``,
    pruned of any that a later, larger victim made unnecessary; ``None`` if not enough.

    The gang is waiting, so when the free GPUs add up to its size they are fragmented: then
    the cheapest victim is taken anyway (its GPUs may be the ones that complete a fit; the
    trial placement decides).
    """
    chosen, pool = [], free
    for v, g in ordered:
        if pool >= need and chosen:
            break
        chosen.append((v, g))
        pool += g
    if pool < need:
        return None
    for v, g in sorted(chosen[:-1], key=lambda vg: -vg[1]):
        if pool - g >= need:
            chosen.remove((v, g))
            pool -= g
    return [v for v, _ in chosen]


def candidate_sets(scheduler, run: JobRun) -> list[list[JobRun]]:
    """Victim sets that would free enough GPUs, cheapest first (not yet trial-placed).

    ``scheduler`` is the :class:`~scheduler.scheduling.passes.Scheduler` (its ``jobs``,
    ``state``, ``placer`` and ``ctx``).
    """
    jobs, now = scheduler.jobs, scheduler.ctx.now
    within = jobs.tenants.within_quota(run)
    if (jobs.lowest_running_priority() >= run.spec.priority
            and not (within and jobs.borrowers_besides(run.spec.tenant))):
        return []  # nobody it may evict, without looking at every running gang
    cands = [r for r in jobs.running.values()
             if r.state == RUNNING and r.model in run.models
             and now - r.seg_start >= MIN_AGE_S
             and (r.spec.priority < run.spec.priority
                  or (r.borrowed and within and r.spec.tenant != run.spec.tenant))]
    if not cands:
        return []
    cands.sort(key=lambda r: (r.spec.priority, not r.borrowed, -r.seg_start, r.idx))
    s = scheduler.state
    free_nodes = s.node_free * s.schedulable()
    sets = []
    for m in run.models:
        on_m = [r for r in cands if r.model == m]
        if not on_m:
            continue
        if run.affinity == "any":
            free = int(free_nodes[s.model_mask[m]].sum())
            found = _fill(run.gpus, free, [(r, r.gpus) for r in on_m])
            if found:
                sets.append(found)
            continue
        level = s.domain[run.affinity]
        free_by_dom = np.bincount(level, weights=free_nodes * s.model_mask[m],
                                  minlength=s.n_domains[run.affinity])
        touched = sorted({int(d) for r in on_m for d in np.unique(level[r.placement.nodes])})
        for d in touched:
            # a victim that spans domains frees GPUs in d only for its nodes there
            inside = [(r, int(r.placement.counts[level[r.placement.nodes] == d].sum()))
                      for r in on_m]
            found = _fill(run.gpus, int(free_by_dom[d]), [(r, g) for r, g in inside if g])
            if found:
                sets.append(found)
    sets.sort(key=_cost)
    return sets


def trial_place(scheduler, run: JobRun, victims: list[JobRun]):
    """Where ``run`` would go if ``victims`` were gone; the state is left as it was."""
    gone = [(v.placement, v.spec.cpu_per_gpu, v.spec.ram_gb_per_gpu, v.spec.nic_gbps_per_gpu)
            for v in victims]
    with scheduler.state.freed(gone):
        return scheduler.placer.place(scheduler.request(run))


def choose_victims(scheduler, run: JobRun) -> list[JobRun]:
    """The cheapest victim set after whose eviction ``run`` can be placed; else []."""
    for victims in candidate_sets(scheduler, run)[:MAX_TRIALS]:
        if trial_place(scheduler, run, victims) is not None:
            return victims
    return []
