"""Slurm's preemption for the ``slurm`` policy: whom a job may evict and how.

``preempt/qos``: a job may evict running jobs whose QOS its QOS lists in ``Preempt``;
``preempt/partition_prio``: jobs of partitions of a lower ``PriorityTier``.  Victims must have
run ``PreemptExemptTime`` (the QOS's, else the cluster's); the youngest go first, and only
those on the nodes the job then takes are evicted.  ``PreemptMode`` (the QOS's, the
partition's, else the cluster's): ``REQUEUE`` runs the victim again from its start after its
batch credential expires (``cred_expire + 1`` s, with a new submit time and age: slurmctld's
``job_requeue``), ``CANCEL`` ends it, ``OFF`` protects it.  A victim with a ``GraceTime``
(its QOS's under ``preempt/qos``, its partition's under ``preempt/partition_prio``) is only
signalled and runs on until the first time-limit check (every 30 s) at or after its grace
ends, when it is preempted (``_job_check_grace``, then ``job_time_limit``).  ``m`` is the
:class:`~scheduler.scheduling.slurm.mechanics.SlurmMechanics` of the scheduler.
"""

from __future__ import annotations

import numpy as np

from scheduler.model.job_run import RUNNING, JobRun
from scheduler.scheduling.slurm.limits import next_check
from scheduler.sim import Kind

KILL_S = 0.05
"""Seconds from a preemption until its victims' nodes are released (signal, step end,
epilog complete): the preemptor starts in the pass that follows.  slurmctld's logs of the
agreement runs: ``preempted JobId=.. has been requeued`` to ``sched: Allocate`` of the
preemptor 0.03-0.06 s (the requeue's epilog complete runs schedule())."""


def may_preempt(m, rec, other: JobRun) -> bool:
    """Whether the job of record ``rec`` may evict running ``other``."""
    orec = m.rec.get(other.idx)
    if orec is None:
        return False
    if m.conf.preempt_type == "preempt/qos":
        return other.spec.qos in rec.preempts
    return orec.tier < rec.tier


def exempt_s(m, other: JobRun) -> float:
    """How long ``other`` must have run before it may be preempted, s."""
    q = m.conf.qos.get(other.spec.qos)
    if q is not None and q.preempt_exempt_time_s is not None:
        return q.preempt_exempt_time_s
    return m.conf.preempt_exempt_time_s


def mode_of(m, other: JobRun) -> str:
    """``other``'s PreemptMode: its QOS's, its partition's, else the cluster's."""
    q = m.conf.qos.get(other.spec.qos)
    if q is not None and q.preempt_mode:
        return q.preempt_mode
    part = next((p for p in m.conf.partitions if p.name == m.rec[other.idx].part),
                None)
    return (part.preempt_mode if part and part.preempt_mode else m.conf.preempt_mode)


def candidates(m, rec) -> list[JobRun]:
    """The running jobs the job of record ``rec`` may evict now (``slurm_find_preemptable_
    jobs``), in job-list order."""
    if m.conf.preempt_type == "preempt/none":
        return []
    now = m.ctx.now
    return sorted((r for r in m.jobs.running.values()
                   if may_preempt(m, rec, r) and now - m.rec[r.idx].started
                   >= exempt_s(m, r) and mode_of(m, r) != "OFF"), key=lambda r: r.idx)


def preempt_for(m, run: JobRun, rec, mask: np.ndarray) -> bool:
    """Evict, youngest first, the fewest preemptable jobs whose nodes let ``run`` start;
    ``False`` (nobody evicted) if even all of them would not."""
    cands = candidates(m, rec)
    if not cands:
        return False
    # preempt_qos.c _gen_job_prio: (QOS priority << 16) + nodes, smallest first ("we want to
    # put smaller jobs at the top of the preemption queue"); ties in job-list order
    cands.sort(key=lambda r: (qos_priority(m, r) << 16) + m.rec[r.idx].nodes)
    s = m.state
    free = m.free_now().astype(np.int64)
    chosen = []
    for victim in cands:
        chosen.append(victim)
        p = victim.placement
        if m.conf.memory_whole_node:
            free[p.nodes] = np.where(s.schedulable()[p.nodes], s.node_gpus[p.nodes], 0)
        else:
            np.add.at(free, p.nodes, p.counts)
        placement = m.choose(run, rec, free, mask)
        if placement is not None:
            break
    else:
        return False
    used = set(placement.nodes.tolist())
    victims = [v for v in chosen if used & set(v.placement.nodes.tolist())]
    now = m.ctx.now
    released = now + KILL_S
    for v in victims:
        grace = grace_s(m, v)
        if grace > 0 or v.idx in m.grace:
            if v.idx not in m.grace:  # signalled now, preempted when its grace is over
                m.grace[v.idx] = next_check(now + grace)
                m.ctx.schedule(m.grace[v.idx], Kind.BACKFILL,
                               ("grace", v.idx, m.rec[v.idx].started, run.idx))
                m.ctx.log("preempt", f"{v.spec.name} signalled for {run.spec.name}: "
                          f"{grace:g} s grace", job=v.spec.name)
            released = max(released, m.grace[v.idx] + KILL_S)
            continue
        m.completing[v.placement.nodes] = now + KILL_S
        evict(m, v, by=run)
    if victims:  # its victims' epilogs complete: schedule() then starts it
        rec.waits_until = released
        m.ctx.schedule(released, Kind.BACKFILL, ("killed",))
    return bool(victims)


def grace_s(m, victim: JobRun) -> float:
    """``victim``'s preemption grace time, s: its QOS's under ``preempt/qos``, its
    partition's under ``preempt/partition_prio``."""
    if m.conf.preempt_type == "preempt/qos":
        q = m.conf.qos.get(victim.spec.qos)
        return q.grace_time_s if q is not None else 0.0
    part = next((p for p in m.conf.partitions if p.name == m.rec[victim.idx].part), None)
    return part.grace_time_s if part is not None else 0.0


def grace_over(m, payload) -> None:
    """A victim's grace time is over (``("grace", victim, its start, preemptor)``): it is
    preempted now unless it ended meanwhile."""
    _, idx, started, by = payload
    m.grace.pop(idx, None)
    victim = m.jobs.runs[idx]
    if victim.state != RUNNING or m.rec[idx].started != started:
        return
    m.completing[victim.placement.nodes] = m.ctx.now + KILL_S
    evict(m, victim, by=m.jobs.runs[by])
    m.ctx.schedule(m.ctx.now + KILL_S, Kind.BACKFILL, ("killed",))


def qos_priority(m, run: JobRun) -> int:
    q = m.conf.qos.get(run.spec.qos)
    return q.priority if q is not None else 0


def evict(m, victim: JobRun, *, by: JobRun) -> None:
    """Preempt ``victim`` for ``by`` as its PreemptMode says."""
    mode = mode_of(m, victim)
    reason = f"preempted by {by.spec.name} ({mode})"
    m.killed.add(victim.idx)  # its nodes are released after KILL_S, not COMPLETE_S
    if mode == "CANCEL":
        m.jobs.cancel(victim)
        m.ctx.log("preempt", f"{victim.spec.name} {reason}", job=victim.spec.name)
        return
    # REQUEUE (and SUSPEND, modelled as REQUEUE): the batch script runs again from its
    # start, eligible after the credential's lifetime, as a newly submitted job
    rec = m.rec[victim.idx]
    now = m.ctx.now
    rec.submit = now  # its priority stays (no set_job_prio on requeue) until recomputed
    rec.eligible = now + m.conf.cred_expire_s + 1.0
    m.jobs.preempt(victim, reason=reason)  # back in the queue with the record above
    m.jobs.restart_from_scratch(victim)
    m.counters["requeued"] += 1
    m.wake(rec.eligible)
