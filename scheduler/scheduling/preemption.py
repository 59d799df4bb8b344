"""Choosing whom to preempt: the cheapest set of gangs whose eviction lets a gang start.

Candidates are running gangs of a lower priority, or gangs running on borrowed quota when the
waiting gang is within its tenant's quota.  For a gang that must stay in one domain (pod, leaf
group, NVLink domain) the candidates are grouped by the domains they touch and each domain is
costed on its own: free GPUs there plus the cheapest victims there until the gang's size is
reached.  Domains are tried cheapest first, and a set is kept only if a trial placement with
those victims gone succeeds, so nobody is evicted for a gang that would still wait.
"""

from __future__ import annotations

import math

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


def _whole_node_sets(s, run: JobRun, m: int, on_m: list[JobRun], per: int) -> list[list[JobRun]]:
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
    level = (np.zeros(n, dtype=np.int64) if run.affinity == "any"
             else s.domain[run.affinity])
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


def may_evict(run: JobRun, within: bool, other: JobRun) -> bool:
    """Whether ``run`` (``within`` its tenant's quota or not) may evict ``other`` if old enough."""
    return other.model in run.models and (
        other.spec.priority < run.spec.priority
        or (other.borrowed and within and other.spec.tenant != run.spec.tenant))


def candidate_sets(scheduler, run: JobRun) -> tuple[list[list[JobRun]], float]:
    """Victim sets that would free enough GPUs, cheapest first (not yet trial-placed), and
    when the youngest excluded victim comes of age (infinity if none was excluded for age).

    ``scheduler`` is the :class:`~scheduler.scheduling.passes.Scheduler` (its ``jobs``,
    ``state``, ``placer`` and ``ctx``).
    """
    jobs, now = scheduler.jobs, scheduler.ctx.now
    within = jobs.tenants.within_quota(run)
    if (jobs.lowest_running_priority() >= run.spec.priority
            and not (within and jobs.borrowers_besides(run.spec.tenant))):
        return [], math.inf  # nobody it may evict, without looking at every running gang
    s = scheduler.state
    free_by_model = s.free_counts()[0]
    prio, tenant = run.spec.priority, run.spec.tenant
    models = [m for m in run.models
              if free_by_model[m] + jobs.holders.evictable_bound(
                  m, priority=prio, tenant=tenant, within=within) >= run.gpus]
    if not models:
        return [], math.inf  # even evicting every gang it may would not free enough
    eligible = [r for m in models
                for r in jobs.holders.evictable(m, priority=prio, tenant=tenant, within=within)
                if r.state == RUNNING]
    cands = [r for r in eligible if now - r.seg_start >= MIN_AGE_S]
    of_age = min((r.seg_start + MIN_AGE_S for r in eligible if now - r.seg_start < MIN_AGE_S),
                 default=math.inf)
    if not cands:
        return [], of_age
    cands.sort(key=lambda r: (r.spec.priority, not r.borrowed, -r.seg_start, r.idx))
    free_nodes = s.node_free * s.schedulable()
    sets = []
    for m in models:
        on_m = [r for r in cands if r.model == m]
        if not on_m:
            continue
        per = scheduler.placer.per_node[m]
        if run.gpus >= per:
            sets.extend(_whole_node_sets(s, run, m, on_m, per))
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
    return sets, of_age


def trial_place(scheduler, run: JobRun, victims: list[JobRun]):
    """Where ``run`` would go if ``victims`` were gone; the state is left as it was."""
    gone = [(v.placement, v.spec.cpu_per_gpu, v.spec.ram_gb_per_gpu, v.spec.nic_gbps_per_gpu)
            for v in victims]
    with scheduler.state.freed(gone):
        return scheduler.placer.place(scheduler.request(run))


def choose_victims(scheduler, run: JobRun) -> tuple[list[JobRun], float]:
    """The cheapest victim set after whose eviction ``run`` can be placed (else ``[]``), and
    the time until which an empty answer holds if no capacity and no running gang changes."""
    sets, of_age = candidate_sets(scheduler, run)
    for victims in sets[:MAX_TRIALS]:
        scheduler.counters["trial_placements"] += 1
        if trial_place(scheduler, run, victims) is not None:
            return victims, of_age
    return [], of_age
