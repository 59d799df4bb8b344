"""Choosing whom to preempt: the cheapest set of gangs whose eviction lets a gang start, bounded
as production schedulers bound it.

* **Exemption** (Slurm's ``PreemptExemptTime``): a gang is not preempted before the first
  checkpoint of its latest start is usable (:func:`exempt_until`), and never in its first
  :data:`MIN_EXEMPT_S`; the exemption is capped at :data:`MAX_EXEMPT_S`.
* **Candidates**: running gangs of a lower priority, and gangs running on borrowed quota when
  the waiting gang is within its tenant's quota, if their priority is not higher
  (:func:`may_evict`).
* **Order**: lowest priority first, then least work lost (:func:`loss_s`: compute since the
  last usable checkpoint plus the restart, per GPU), borrowed before owned, youngest first.
  A set costs its highest priority, then its lost GPU-seconds, then its GPUs.  (Priority
  comes first: a higher-priority victim that loses less would, back in the queue, evict the
  lower-priority gang in turn, losing more in all.)
* **Fewest victims**: each set is pruned of any victim a larger one made unnecessary, and a
  set is kept only if a trial placement with those victims gone succeeds, so nobody is evicted
  for a gang that would still wait.

For a gang that must stay in one domain (pod, leaf group, NVLink domain) the candidates are
grouped by the domains they touch and each domain is costed on its own: free GPUs there plus
the cheapest victims there until the gang's size is reached.  The scheduler asks with the
affinity it will place with (:func:`blocked_request`: ``any`` unless the policy is compact, so
nobody is preempted to make a placement compact), evicts one set per pass, lets no gang it
evicted preempt in the same instant (:data:`CASCADE_WAIT_S`) and logs each set as one wave
(:func:`evict`, :func:`wave`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from scheduler.model.job_run import RUNNING, JobRun
from scheduler.scheduling.placement import Request

MIN_EXEMPT_S = 600.0
"""No gang is preempted in its first ten minutes after a start, whatever its checkpoints."""
MAX_EXEMPT_S = 1800.0
"""Nor is it exempt longer than this after a start, however long its checkpoint interval: a
higher-priority gang waits at most half an hour for a gang's protection to end.  Measured on
the 4:1 fat-tree superpod case (``docs/scheduling.md``): 0.43 % of GPU-hours preempted with a
flat 10 min, 0.34 % with this cap, 0.37 % with 1 h, 0.39 % with 2 h; protection past half an
hour buys nothing there and only delays higher-priority gangs."""
CASCADE_WAIT_S = 30.0
"""A gang preempted in an instant preempts nobody in it; the scheduler looks again this long
after (a backfill cycle, Slurm's ``bf_interval`` default), so a wave does not cascade."""
MAX_TRIALS = 8
"""Trial placements per preemption attempt (each costs one placement)."""


def exempt_until(run: JobRun) -> float:
    """When running ``run`` may first be preempted, s: once the first checkpoint since its
    latest start is usable (restart, one interval, the write and its lag), but no sooner
    than :data:`MIN_EXEMPT_S` and no later than :data:`MAX_EXEMPT_S` after that start.

    Before that a preemption would throw away everything the start bought (its restart and
    all its compute since), and a gang preempted that early, again and again, never
    progresses.  A re-rate (a new segment at a new speed) is not a start.
    """
    started = run.last_start if run.last_start is not None else run.seg_start
    first = run.restart_s + run.interval_s + run.write_s + run.lag_s
    return started + min(max(first, MIN_EXEMPT_S), MAX_EXEMPT_S)


def loss_s(jobs, run: JobRun, now: float) -> float:
    """Seconds per GPU that preempting ``run`` at ``now`` throws away: its compute since its
    last usable checkpoint, and the restart it will pay to run again."""
    b = run.books_at(now)
    return b.computed_s - b.saved_s + jobs.restart_estimate(run)


def _cost(victims: list[JobRun], loss: dict[int, float]) -> tuple:
    return (max(v.spec.priority for v in victims), sum(loss[v.idx] * v.gpus for v in victims),
            sum(v.gpus for v in victims))


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


def _whole_node_sets(s, run: JobRun, affinity: str, m: int, on_m: list[JobRun],
                     per: int) -> list[list[JobRun]]:
    """Victim sets for a gang of whole nodes (plus a remainder), one per domain, cheapest
    domains first.

    A node counts once it would be entirely free: its free GPUs plus those of the candidates
    on it make the whole node.  Each node is ranked by the costliest candidate it waits for
    (candidates are in cost order; a node free now ranks -1); a domain's cost is the rank of
    its ``whole``-th node.  Its set is the candidates on the nodes of at most that rank,
    pruned to those needed, plus, for a remainder, those that give the cheapest other node
    room for it.  GPU counts alone (as for sub-node gangs) would propose sets that free
    scattered GPUs of many nodes and no whole one.
    """
    whole, rem = divmod(run.gpus, per)
    nodes = np.concatenate([r.placement.nodes for r in on_m])
    counts = np.concatenate([r.placement.counts for r in on_m])
    rank = np.repeat(np.arange(len(on_m)), [r.placement.nodes.size for r in on_m])
    n = s.node_free.size
    last = np.full(n, -1, dtype=np.int64)
    np.maximum.at(last, nodes, rank)
    usable = s.schedulable() & s.model_mask[m]
    after = s.node_free + np.bincount(nodes, weights=counts, minlength=n).astype(np.int64)
    ok = np.flatnonzero(usable & (after == s.node_gpus))
    if ok.size < whole:
        return []
    level = np.zeros(n, dtype=np.int64) if affinity == "any" else s.domain[affinity]
    ok = ok[np.lexsort((last[ok], level[ok]))]
    dom = level[ok]
    starts = np.flatnonzero(np.r_[True, dom[1:] != dom[:-1]])
    sizes = np.diff(np.r_[starts, ok.size])
    fits = np.flatnonzero(sizes >= whole)
    kth = last[ok[starts[fits] + whole - 1]]
    room = _room_rank(s, nodes, counts, rank, rem, usable) if rem else None
    sets = []
    for i in fits[np.argsort(kth, kind="stable")][:MAX_TRIALS]:
        inside = ok[starts[i]:starts[i] + sizes[i]]
        cut = last[inside[whole - 1]]
        alive, kept = _prune(nodes, rank, inside[last[inside] <= cut], whole, on_m)
        if rem:
            # the remainder: the other node of this domain that has room soonest
            d = level[inside[0]]
            other = np.flatnonzero(usable & (level == d) & (room < np.iinfo(np.int64).max))
            other = other[~np.isin(other, list(alive))]
            if other.size == 0:
                continue
            best = other[np.argmin(room[other])]
            kept |= set(rank[(nodes == best) & (rank <= room[best])].tolist())
        if kept:
            sets.append([on_m[v] for v in sorted(kept)])
    return sets


def _room_rank(s, nodes, counts, rank, rem: int, usable: np.ndarray) -> np.ndarray:
    """Per node, the rank of the candidate after whose eviction (with all cheaper ones on it)
    the node has ``rem`` GPUs free: -1 if it has now, the int64 maximum if never."""
    big = np.iinfo(np.int64).max
    room = np.where(usable & (s.node_free >= rem), -1, big)
    order = np.lexsort((rank, nodes))
    nd, ct, rk = nodes[order], counts[order], rank[order]
    cum = np.cumsum(ct)
    first = np.r_[True, nd[1:] != nd[:-1]]
    base = np.maximum.accumulate(np.where(first, np.arange(nd.size), 0))
    before = cum - ct  # cumulative before this entry, over all nodes
    own = cum - before[base]  # cumulative within the node, this entry included
    enough = usable[nd] & (s.node_free[nd] + own >= rem)
    cand = np.full(s.node_free.size, big)
    np.minimum.at(cand, nd[enough], rk[enough])
    return np.minimum(room, cand)


def _prune(nodes: np.ndarray, rank: np.ndarray, usable: np.ndarray, need: int,
           on_m: list[JobRun]) -> tuple[set[int], set[int]]:
    """The candidates on ``usable`` nodes (each would be whole without them), less any whose
    nodes are not needed to keep ``need`` whole nodes (larger candidates are dropped first):
    the nodes left whole, and the candidates' ranks."""
    on = np.isin(nodes, usable)
    by_victim: dict[int, set[int]] = {}
    for v, n in zip(rank[on].tolist(), nodes[on].tolist(), strict=True):
        by_victim.setdefault(v, set()).add(n)
    alive = set(usable.tolist())
    kept = set(by_victim)
    last_needed = max(kept, default=-1)
    for v in sorted(kept - {last_needed}, key=lambda v: (-on_m[v].gpus, -v)):
        # nodes of v stay usable only if v stays; drop v if enough whole nodes remain
        if len(alive - by_victim[v]) >= need:
            alive -= by_victim[v]
            kept.discard(v)
    return alive, kept


def may_evict(run: JobRun, within: bool, other: JobRun, ranking=None) -> bool:
    """Whether ``run`` (``within`` its tenant's quota or not) may evict ``other`` once its
    exemption ends: ``other`` has a lower priority, or it runs on another tenant's borrowed
    quota and its priority is not higher (a reclaim never evicts a gang that would evict the
    reclaimer in turn: quota and priority would take the GPUs back and forth).  A policy's
    ``ranking`` that decides who may be evicted (``las``: lower queues) decides instead."""
    if ranking is not None and ranking.evicts:
        return ranking.may_evict(run, other)
    o = other.spec
    return other.model in run.models and (
        o.priority < run.spec.priority
        or (other.borrowed and within and o.tenant != run.spec.tenant
            and o.priority <= run.spec.priority))


def candidate_sets(scheduler, run: JobRun, affinity: str | None = None,
                   ) -> tuple[list[list[JobRun]], float]:
    """Victim sets that would free enough GPUs for ``run`` placed with ``affinity`` (default:
    its own), cheapest first (not yet trial-placed), and when the first excluded victim's
    exemption ends (infinity if none was excluded for it).

    ``scheduler`` is the :class:`~scheduler.scheduling.passes.Scheduler` (its ``jobs``,
    ``state``, ``placer``, ``ctx`` and ``ranking``).
    """
    jobs, now = scheduler.jobs, scheduler.ctx.now
    affinity = run.affinity if affinity is None else affinity
    ranking = scheduler.ranking if getattr(scheduler, "ranking", None) is not None \
        and scheduler.ranking.evicts else None
    s = scheduler.state
    free_by_model = s.free_counts()[0]
    if ranking is not None:  # the policy's ranking decides who may be evicted (las)
        eligible = [r for r in ranking.evictable(run) if r.state == RUNNING]
        models = [m for m in run.models
                  if free_by_model[m] + sum(r.gpus for r in eligible if r.model == m)
                  >= run.gpus]
    else:
        within = jobs.tenants.within_quota(run)
        if (jobs.lowest_running_priority() >= run.spec.priority
                and not (within and jobs.borrowers_besides(run.spec.tenant))):
            return [], math.inf  # nobody it may evict, without looking at every running gang
        prio, tenant = run.spec.priority, run.spec.tenant
        models = [m for m in run.models
                  if free_by_model[m] + jobs.holders.evictable_bound(
                      m, priority=prio, tenant=tenant, within=within) >= run.gpus]
        eligible = [r for m in models
                    for r in jobs.holders.evictable(m, priority=prio, tenant=tenant,
                                                    within=within)
                    if r.state == RUNNING and r.spec.priority <= prio]
    if not models:
        return [], math.inf  # even evicting every gang it may would not free enough
    ends = {r.idx: exempt_until(r) for r in eligible}
    cands = [r for r in eligible if now >= ends[r.idx]]
    of_age = min((t for t in ends.values() if now < t), default=math.inf)
    if not cands:
        return [], of_age
    loss = {r.idx: loss_s(jobs, r, now) for r in cands}
    if ranking is not None:
        cands.sort(key=lambda r: (ranking.victim_order(r), loss[r.idx], r.idx))
    else:
        cands.sort(key=lambda r: (r.spec.priority, loss[r.idx], not r.borrowed,
                                  -(r.last_start or 0.0), r.idx))
    free_nodes = s.node_free * s.schedulable()
    sets = []
    for m in models:
        on_m = [r for r in cands if r.model == m]
        if not on_m:
            continue
        per = scheduler.placer.per_node[m]
        if run.gpus >= per:
            sets.extend(_whole_node_sets(s, run, affinity, m, on_m, per))
            continue
        if affinity == "any":
            free = int(free_nodes[s.model_mask[m]].sum())
            found = _fill(run.gpus, free, [(r, r.gpus) for r in on_m])
            if found:
                sets.append(found)
            continue
        level = s.domain[affinity]
        free_by_dom = np.bincount(level, weights=free_nodes * s.model_mask[m],
                                  minlength=s.n_domains[affinity])
        touched = sorted({int(d) for r in on_m for d in np.unique(level[r.placement.nodes])})
        for d in touched:
            # a victim that spans domains frees GPUs in d only for its nodes there
            inside = [(r, int(r.placement.counts[level[r.placement.nodes] == d].sum()))
                      for r in on_m]
            found = _fill(run.gpus, int(free_by_dom[d]), [(r, g) for r, g in inside if g])
            if found:
                sets.append(found)
    sets.sort(key=lambda victims: _cost(victims, loss))
    return sets, of_age


def trial_place(scheduler, request: Request, victims: list[JobRun]):
    """Where ``request`` would go if ``victims`` were gone; the state is left as it was."""
    gone = [(v.placement, v.spec.cpu_per_gpu, v.spec.ram_gb_per_gpu, v.spec.nic_gbps_per_gpu)
            for v in victims]
    with scheduler.state.freed(gone):
        return scheduler.placer.place(request)


def tried_sets(scheduler, run: JobRun, request: Request, sets=None) -> tuple:
    """The victim sets an attempt for ``run`` trial-places (the first :data:`MAX_TRIALS` of
    :func:`candidate_sets`, or of ``sets``), as ids.  Which sets these are follows the work
    each candidate would lose, which moves with time (it grows while a gang computes and drops
    when its checkpoint becomes usable): a failed attempt holds only while they are the same."""
    if sets is None:
        sets, _ = candidate_sets(scheduler, run, request.affinity)
    return tuple(tuple(v.idx for v in victims) for victims in sets[:MAX_TRIALS])


def choose_victims(scheduler, run: JobRun, request: Request | None = None,
                   ) -> tuple[list[JobRun], float, tuple]:
    """The cheapest victim set after whose eviction ``run`` can be placed as ``request`` asks
    (default: :meth:`Scheduler.request`; its affinity is the one victims are sought for), else
    ``[]``; the time until which an empty answer holds if no capacity and no running gang
    changes; and the sets it tried (:func:`tried_sets`): the answer holds only while the same
    sets would be tried."""
    request = scheduler.request(run) if request is None else request
    sets, of_age = candidate_sets(scheduler, run, request.affinity)
    tried = tried_sets(scheduler, run, request, sets)
    for victims in sets[:MAX_TRIALS]:
        scheduler.counters["trial_placements"] += 1
        if trial_place(scheduler, request, victims) is not None:
            return victims, of_age, tried
    return [], of_age, tried


WAVE_NAMED = 8
"""Victims a wave's line names in its text (all are in its ``jobs``)."""


def wave(run: JobRun, victims: list[JobRun], now: float) -> tuple[str, dict]:
    """The event-log line of one preemption wave, before it happens: its text ("mid-1597
    preempted 13 jobs, 52 GPUs: ...") and its fields (``job``: the preemptor; ``jobs``: the
    victims, so each one's page lists it).  The text names the work since the victims'
    checkpoints that the wave throws away.

    >>> from scheduler.workload.jobs import TrainingJob
    >>> def gang(i, gpus):
    ...     r = JobRun(i, TrainingJob(job_id=i, name=f"j{i}", tenant="t", submit_s=0.0,
    ...                               gpus=gpus, work_flops=1e18), (0,), "any")
    ...     r.state, r.interval_s = RUNNING, 3600.0
    ...     return r
    >>> text, extra = wave(gang(9, 16), [gang(1, 8), gang(2, 4)], now=1800.0)
    >>> for part in text.split("; "):
    ...     print(part)
    j9 preempted 2 jobs, 12 GPUs: j1 (8 GPUs), j2 (4 GPUs)
    6.0 GPU-h since their checkpoints lost (for j9: priority 0, tenant t)
    >>> extra
    {'job': 'j9', 'jobs': ['j1', 'j2']}
    """
    gpus = sum(v.gpus for v in victims)
    lost_h = sum(v.gpus * (b.computed_s - b.saved_s)
                 for v in victims for b in (v.books_at(now),)) / 3600.0
    named = ", ".join(f"{v.spec.name} ({v.gpus} GPUs)" for v in victims[:WAVE_NAMED])
    if len(victims) > WAVE_NAMED:
        named += f" and {len(victims) - WAVE_NAMED} more"
    n = len(victims)
    j = run.spec
    text = (f"{j.name} preempted {n} job{'s' if n != 1 else ''}, {gpus} GPUs: {named}; "
            f"{lost_h:.1f} GPU-h since their checkpoints lost (for {j.name}: priority "
            f"{j.priority}, tenant {j.tenant})")
    return text, {"job": j.name, "jobs": [v.spec.name for v in victims]}


def blocked_request(scheduler, run: JobRun) -> Request:
    """What blocked ``run`` is placed, and its victims sought, with: its request, with its
    affinity relaxed to ``any`` unless the policy is compact (nobody is preempted to make a
    placement compact; a gang that fits across domains starts there)."""
    request = scheduler.request(run)
    if scheduler.policy.compact or run.affinity == "any":
        return request
    return replace(request, affinity="any")


def evict(scheduler, run: JobRun, victims: list[JobRun]) -> None:
    """Preempt ``victims`` to make room for ``run``, logged as one wave (:func:`wave`)."""
    text, extra = wave(run, victims, scheduler.ctx.now)
    for v in victims:
        scheduler.jobs.preempt(v, reason=f"makes room for {run.spec.name}", log=False)
    scheduler.ctx.log("preempt", text, **extra)
