"""The scheduler component: one pass per changed instant orders the queue, places gangs,
reserves for the head, backfills and preempts.

The policy (``scheduler.scheduling.policies``) decides the order and which mechanisms are on;
this module is the mechanics shared by all policies.  A pass runs after an instant in which the
cluster state (:attr:`ClusterState.version`) or the queue (:attr:`JobLifecycle.queue_version`)
changed, or when someone :meth:`Scheduler.wake`\\ s it (a new policy, a drill).  A pass skips a
gang whose shape already failed in the same pass (same accepted models and affinity, no
smaller), so a long queue costs a few placement attempts per distinct shape, not one per job.
"""

from __future__ import annotations

import math
import time

import numpy as np

from scheduler.model.job_run import QUEUED, JobRun
from scheduler.model.state import ClusterState
from scheduler.scheduling.lifecycle import JobLifecycle
from scheduler.scheduling.placement import Placer, Request
from scheduler.scheduling.policies import get_policy
from scheduler.scheduling.policies.base import attach_ranking
from scheduler.scheduling.preemption import (
    CASCADE_WAIT_S,
    blocked_request,
    choose_victims,
    evict,
    may_evict,
    tried_sets,
)
from scheduler.scheduling.queue_index import WAIT
from scheduler.scheduling.reservation import (
    Reservation,
    estimate_s,
    passed_wait,
    reserve,
    shorts_finder,
    verdict_for,
)
from scheduler.scheduling.reservation import backfill_mode as backfill_mode_of
from scheduler.scheduling.reservation import walk_on as walk_each
from scheduler.scheduling.slurm import mechanics_for
from scheduler.sim import Context, Handle, Kind

MAX_PASSES = 3
"""Passes per instant: a pass that preempts frees GPUs, so another one restarts the rest."""

RESOURCES = "Resources"
"""Pending reason (Slurm's word): too few free GPUs of the models the gang accepts."""
TOPOLOGY = "Topology"
"""Pending reason: enough GPUs free in total, but not within one domain (leaf, pod) the gang
must stay in, or not on hosts with its cores, RAM and NIC."""
PRIORITY = "Priority"
"""Pending reason (Slurm's word): a higher-ranked gang waits first (its reservation would be
delayed, or the pass stopped at it)."""


class Scheduler:
    """Runs scheduling passes over the lifecycle's queue with one policy.

    Parameters
    ----------
    ctx : Context
    state : ClusterState
    jobs : JobLifecycle
        The queue and the running gangs; starts and preemptions go through it.
    policy : str
        A registered policy name.
    placement : str, optional
        Override the policy's placement strategy.
    """

    held = False
    ranking = None  # a ranking policy's component (sjf, las: Policy.ranking), or None
    """Place nothing (a mirror: the real cluster's scheduler starts jobs); :meth:`hold`,
    :meth:`release`."""

    def __init__(self, ctx: Context, *, state: ClusterState, jobs: JobLifecycle,
                 policy: str = "default", placement: str | None = None, slurm_conf=None):
        self.ctx = ctx
        self.state = state
        self.jobs = jobs
        self.rng = ctx.rng("placement")
        self.slurm_conf = slurm_conf  # the cluster's slurm.conf, for the ``slurm`` policy
        self.mechanics = None
        jobs.watch_queue(self)
        self.estimates: dict[int, tuple] = {}  # run -> (what it depends on, backfill estimate)
        self.set_policy(policy, placement)
        self.counters = {"placement_decisions": 0, "backfilled": 0, "passes": 0,
                         "passes_skipped": 0,
                         "backfill_depth_stops": 0, "trial_placements": 0,
                         "known_not_to_fit": 0, "scheduler_wall_s": 0.0}
        self.frag_models = np.zeros(state.n_models, dtype=bool)
        self.frag_version = 0  # bumped when the fragmentation verdict changes
        self._seen: tuple[int, int] | None = None
        self._woken = False
        self.backfilled_at = -math.inf  # when the last backfill cycle ran
        self._cycle: Handle | None = None  # the next backfill cycle, if one is waited for
        # when the last pass stopped at a blocked head to wait for the cycle: what it saw,
        # so an instant that only added later-ranked arrivals needs no pass (see maybe_run)
        self._stopped: tuple | None = None
        ctx.on(Kind.BACKFILL, self._cycle_due)
        ctx.after_instant(self.maybe_run)

    def set_policy(self, name: str, placement: str | None = None) -> None:
        """Switch policy (and placement strategy); the next instant schedules with it."""
        policy = get_policy(name, placement=placement)
        self.mechanics = mechanics_for(policy, self)  # before anything changes: may refuse
        self.policy = policy
        self.ranking = attach_ranking(self, policy)
        self.placer = Placer(self.state, self.policy.placement, self.rng)
        # what did not fit, remembered until capacity of its models grows (ClusterState.grown):
        # shape -> (fewest GPUs that failed, grown then); run -> its failed preemption attempt
        self.no_fit: dict[tuple, tuple[int, int]] = {}
        self.no_victims: dict[int, tuple] = {}
        self._woken = True
        # why each queued gang did not start in the last pass: by run, and by partition for
        # partitions the pass dropped whole (their gangs share the shape that failed)
        self.reasons: dict[int, str] = {}
        self.partition_reasons: dict[tuple, str] = {}
        # a backfilling pass reads queued gangs' estimates by partition (QueueIndex.shorts)
        keep = policy.backfill and self.mechanics is None
        self.jobs.index.use_estimator(self.estimate if keep else None, self.jobs.runs,
                                      self.jobs.costs.storage_factor)

    def estimate(self, run: JobRun) -> float:
        """Wall time queued ``run`` would take from now if started (backfill's estimate), s."""
        return estimate_s(self, run)

    def pending_reason(self, run: JobRun, partition: tuple) -> str:
        """Why queued ``run`` (in queue partition ``partition``) did not start in the last
        pass: :data:`RESOURCES`, :data:`TOPOLOGY` or :data:`PRIORITY` (a gang the pass never
        reached waits behind the one it stopped at)."""
        return self.reasons.get(run.idx) or self.partition_reasons.get(partition, PRIORITY)

    def on_queue(self, run: JobRun, joined: bool) -> None:
        """A run joined or left the queue: the policy's own mechanics keep their order."""
        if self.mechanics is not None:
            self.mechanics.on_queue(run, joined)

    def wake(self) -> None:
        """Run a pass after this instant even if neither the state nor the queue changed."""
        self._woken = True

    def backfill_now(self) -> bool:
        """Whether a pass may backfill now; if not, the next cycle is scheduled (it wakes
        the scheduler) and this pass stops at its reservation."""
        interval = self.policy.backfill_interval_s
        due = self.backfilled_at + (interval or 0.0)
        if interval is None or self.ctx.now >= due:
            self.backfilled_at = self.ctx.now
            return True
        if self._cycle is None:
            self._cycle = self.ctx.schedule(due, Kind.BACKFILL, None)
        return False

    def _cycle_due(self, payload) -> None:
        if payload is not None:  # a policy's own timer (the slurm policy's wake-ups, limits)
            if payload[0] == "rank":  # a ranking policy's (las: a demotion, a promotion)
                if self.ranking is not None:
                    self.ranking.on_timer(payload)
            elif self.mechanics is not None and payload[0] != "wake":
                self.mechanics.on_timer(payload)
            self._woken = True
            return
        self._cycle = None
        self._woken = True

    def settle(self) -> None:
        """Take the state and queue as seen (nothing to schedule for what is there now)."""
        self._seen = (self.state.version, self.jobs.queue_version)
        self._woken = False

    # ----------------------------------------------------------------- placement
    def request(self, run: JobRun) -> Request:
        j = run.spec
        return Request(gpus=j.gpus, models=run.models, affinity=run.affinity,
                       cpu_per_gpu=j.cpu_per_gpu, ram_gb_per_gpu=j.ram_gb_per_gpu,
                       nic_gbps_per_gpu=j.nic_gbps_per_gpu)

    def place(self, req: Request):
        """One placement decision (counted); ``None`` if the gang does not fit now."""
        self.counters["placement_decisions"] += 1
        return self.placer.place(req)

    def grown(self, models) -> int:
        """A sum of :attr:`ClusterState.grown` over ``models``: it moves iff capacity there can
        have grown (the counters only increase)."""
        g = self.state.grown
        return sum(g[m] for m in models)

    def place_queued(self, run: JobRun):
        """:meth:`place` for a queued gang, unless a gang of its shape and no larger size
        failed since capacity of its models last grew (placement only fails more often as
        free capacity shrinks)."""
        shape = (run.sig, run.spec.cpu_per_gpu, run.spec.ram_gb_per_gpu,
                 run.spec.nic_gbps_per_gpu)
        grown = self.grown(run.models)
        known = self.no_fit.get(shape)
        if known is not None and known[1] == grown and run.gpus >= known[0]:
            self.counters["known_not_to_fit"] += 1
            return None
        placement = self.place(self.request(run))
        if placement is None:
            smallest = known[0] if known is not None and known[1] == grown else math.inf
            self.no_fit[shape] = (min(run.gpus, smallest), grown)
        return placement

    def hold(self) -> None:
        """Place nothing from now on (a mirror: the real cluster's scheduler starts jobs)."""
        self.held = True

    def release(self) -> None:
        """Place again from the next pass (a fork of a mirror runs by itself)."""
        self.held = False

    def carry_counters(self, old: Scheduler) -> None:
        """Add ``old``'s counters to these (a re-planned engine keeps its predecessor's)."""
        for key, value in old.counters.items():
            self.counters[key] = self.counters.get(key, 0) + value

    # ----------------------------------------------------------------- passes
    def maybe_run(self) -> None:
        """The instant hook: schedule if anything changed since the last pass.

        A pass that stopped at a blocked head, waiting for the backfill cycle, is not repeated
        while that head is still first in order and would get the same answer: no capacity of
        its models grew, its quota standing is the same, and nothing it may evict started or
        came of age.  The pass would try it, fail, and stop there again.
        """
        if self.held:  # a mirrored cluster's own scheduler places its jobs
            self.settle()
            return
        if self._woken or self._seen != (self.state.version, self.jobs.queue_version):
            if not self._woken and self._stopped is not None and self.mechanics is None:
                started = time.perf_counter()
                same = self._same_head()
                self.counters["scheduler_wall_s"] += time.perf_counter() - started
                if same:
                    self._seen = (self.state.version, self.jobs.queue_version)
                    self.counters["passes_skipped"] += 1
                    return
            self.run()

    def _same_head(self) -> bool:
        stopped = self._stopped
        if stopped is None:
            return False
        head, grown, within, until, mark = stopped
        jobs = self.jobs
        if (head.state != QUEUED or self.grown(head.models) != grown or self.ctx.now >= until
                or jobs.tenants.within_quota(head) != within):
            return False
        if self.policy.preemption:
            moved = jobs.moved_since(mark)
            if moved is None or any(may_evict(head, within, r, self.ranking) for r in moved):
                return False
            known = self.no_victims.get(head.idx)
            if known and known[4:] != (tried_sets(self, head, blocked_request(self, head)),):
                return False  # other victim sets would be tried now
        if jobs.index.first(self.policy.order, jobs.tenants, jobs.runs) is not head:
            return False
        self._stopped = (head, grown, within, until, jobs.moved_mark())
        return True

    def run(self) -> None:
        started = time.perf_counter()
        self._stopped = None
        if self.mechanics is not None:  # a policy with mechanics of its own (slurm)
            for _ in range(MAX_PASSES):
                if not self.mechanics.run():
                    self.settle()
                    break
            else:
                self._woken = True
            self.counters["passes"] += 1
            self.counters["scheduler_wall_s"] += time.perf_counter() - started
            return
        self.evicted: set[int] = set()  # gangs preempted in this instant: they preempt nobody
        for _ in range(MAX_PASSES):
            scheduling = SchedulingPass(self)
            if not scheduling.run():
                self.settle()
                if scheduling.deferred:  # a gang preempted now may preempt in turn later
                    self.ctx.schedule(self.ctx.now + CASCADE_WAIT_S, Kind.BACKFILL, ("wake",))
                if scheduling.stopped_at is not None:
                    head = scheduling.stopped_at
                    known = self.no_victims.get(head.idx)
                    until = known[2] if known is not None else math.inf
                    self._stopped = (head, self.grown(head.models),
                                     self.jobs.tenants.within_quota(head), until,
                                     self.jobs.moved_mark())
                break
        else:
            self._woken = True  # the last pass preempted too: try again after the next instant
        self.counters["passes"] += 1
        self.counters["scheduler_wall_s"] += time.perf_counter() - started


def walk_on(walk, waiting: set, verdict, shorts, limit: int | float) -> int:
    """Pass over the next gangs of ``waiting`` partitions that would delay the reservation:
    by partition with ``shorts`` (:meth:`~.queue_index.Ordered.wait_bulk`: the queue keeps
    estimates and no gang was preempted in this pass), else one by one
    (:func:`~.reservation.walk_on`); how many, or ``-1`` if the depth ends among them.
    Their pending reason is Priority, the default: nothing is written."""
    if shorts is not None:
        return walk.wait_bulk(waiting, shorts, limit)
    return walk_each(walk, waiting, verdict, limit, {}, PRIORITY)


def depth_left(depth: int | None, tested: int) -> int | float:
    """Gangs a backfill pass may still test (``depth``: the policy's, ``None``: no limit)."""
    return math.inf if depth is None else depth - tested


class SchedulingPass:
    """One pass over the queue; :meth:`run` returns whether it preempted anyone."""

    look_ahead = True
    """Behind a reservation, walk on through the gangs of partitions known to wait
    (:mod:`~scheduler.scheduling.reservation`); ``False`` tests each gang in full (the same
    outcome, slower: the tests compare the two)."""

    def __init__(self, scheduler: Scheduler):
        self.s = scheduler
        self.jobs = scheduler.jobs
        self.fresh: set[int] = set()  # gangs this pass preempted: back in the queue, not retried
        self.deferred = False  # a gang preempted in this instant would have preempted in turn
        self.stopped_at: JobRun | None = None  # the head it stopped at to wait for the cycle
        self.reasons: dict[int, str] = {}  # run -> why it did not start (pending_reason)
        self.partition_reasons: dict[tuple, str] = {}

    def run(self) -> bool:
        sch, jobs = self.s, self.jobs
        policy = sch.policy
        walk = jobs.index.ordered(policy.order, jobs.tenants, jobs.runs)
        free = sch.state.free_counts()[0].tolist()  # per model, Python ints: read per job
        free_of: dict[tuple, int] = {}  # accepted models -> free GPUs of them (as ``free``)
        failed: dict = {}
        failed_why: dict = {}  # shape -> the reason its smallest failed gang got
        reasons, part_reasons = self.reasons, self.partition_reasons
        frag = np.zeros(sch.state.n_models, dtype=bool)
        head: JobRun | None = None  # the first gang that could not start
        reservation: Reservation | None = None  # its reservation, made by a backfill cycle
        depth = policy.backfill_depth
        tested = 0
        any_free = max(free) > 0
        # partitions whose last gang, behind the reservation, would have delayed it: until a
        # gang starts or a placement fails (free GPUs, ``extra`` and ``failed`` as they were),
        # a later gang of theirs can differ only by being short enough (see reservation.py)
        waiting: set = set()
        verdict = None  # verdict_for the reservation, once there is one
        shorts = None  # shorts(partition): its runs short enough to backfill, once reserved
        fresh, backfill = self.fresh, policy.backfill
        for key, run in walk:
            if run.state != QUEUED or run.idx in fresh:
                continue
            if head is not None:
                if not backfill or not any_free:
                    break  # nothing more can start: no backfill, or no GPU free at all
                if reservation is None:
                    if not sch.backfill_now():
                        self.stopped_at = head
                        break  # the next backfill cycle is scheduled
                    reservation = reserve(jobs, head, free)
                    verdict = verdict_for(sch, fresh, reservation)
                    shorts = shorts_finder(self.jobs, self.look_ahead, self.s.ctx.now,
                                           reservation)
                tested += 1
                if depth is not None and tested > depth:
                    sch.counters["backfill_depth_stops"] += 1
                    break
                if key in waiting and verdict(run) == WAIT:  # it would delay the head
                    walked = walk_on(walk, waiting, verdict, shorts if not fresh else None,
                                     depth_left(depth, tested))
                    if walked < 0:  # the depth ends among waiting gangs
                        sch.counters["backfill_depth_stops"] += 1
                        break
                    tested += walked
                    continue
            models = run.models
            total = free_of.get(models)
            if total is None:
                total = free_of[models] = sum(free[m] for m in models)
            fits_in_total = total >= run.gpus
            if run.gpus >= failed.get(run.sig, math.inf):
                if fits_in_total:
                    frag[list(models)] = True
                passed_wait(self.jobs.index, key, run, self.reasons, self.fresh, PRIORITY)
                part_reasons[key] = failed_why[run.sig]
                walk.drop(key)
                continue
            backfill_mode = None
            if reservation is not None:
                if not fits_in_total:
                    # behind a reservation nothing is preempted and free GPUs only shrink:
                    # neither this gang nor its partition can start in this pass
                    part_reasons[key] = PRIORITY
                    walk.drop(key)
                    continue
                backfill_mode = backfill_mode_of(sch, run, reservation)
                if backfill_mode is None:  # it would delay the head's reservation
                    if self.look_ahead:
                        waiting.add(key)
                        walked = walk_on(walk, waiting, verdict,
                                         shorts if not fresh else None,
                                         depth_left(depth, tested))
                        if walked < 0:
                            sch.counters["backfill_depth_stops"] += 1
                            break
                        tested += walked
                    continue
            placement = None
            if fits_in_total:
                placement = sch.place_queued(run)
                if placement is None:
                    frag[list(models)] = True
            if placement is None and policy.preemption and head is None and not self.fresh:
                # one preemptor per pass: the next pass (MAX_PASSES) serves the next one
                placement = self._preempt_for(run, fits_in_total)
                free = sch.state.free_counts()[0].tolist()
                free_of.clear()
                any_free = max(free) > 0
            if placement is None:
                waiting.clear()  # ``failed`` moves: a waiting partition may now be dropped
                if run.gpus < failed.get(run.sig, math.inf):
                    failed_why[run.sig] = TOPOLOGY if fits_in_total else RESOURCES
                failed[run.sig] = min(run.gpus, failed.get(run.sig, math.inf))
                passed_wait(self.jobs.index, key, run, self.reasons, self.fresh, PRIORITY)
                reasons[run.idx] = part_reasons[key] = failed_why[run.sig]
                walk.drop(key)
                if head is None:
                    head = run
                continue
            jobs.start(run, placement)
            waiting.clear()  # fewer GPUs free: a waiting partition may no longer fit
            sch.no_victims.pop(run.idx, None)
            free[placement.model] -= run.gpus
            free_of.clear()
            any_free = max(free) > 0
            if backfill_mode is not None:
                sch.counters["backfilled"] += 1
                if backfill_mode == "extra":
                    reservation.extra -= run.gpus
        sch.reasons, sch.partition_reasons = reasons, part_reasons
        if self.stopped_at is not None:
            frag |= sch.frag_models  # what the last cycle saw behind the head still holds
        if not np.array_equal(frag, sch.frag_models):
            sch.frag_models = frag
            sch.frag_version += 1
        return bool(self.fresh)

    def _estimate_s(self, run: JobRun) -> float:
        """Wall time ``run`` would take from now (:func:`~.reservation.estimate_s`), s."""
        return estimate_s(self.s, run)

    def _still_no_victims(self, run, within: bool, grown: int, known: tuple, request) -> bool:
        """Whether a failed preemption attempt for ``run`` would fail again: no capacity grew,
        its quota standing is the same, no excluded victim came of age, no gang it may evict
        started or changed since, and the same victim sets would be tried."""
        was_grown, was_within, of_age, mark, *tried = known  # no sets: an older snapshot's
        moved = None if self.s.ctx.now >= of_age else self.jobs.moved_since(mark)
        if was_grown != grown or was_within != within or moved is None \
                or any(may_evict(run, within, r, self.s.ranking) for r in moved) \
                or tried != [tried_sets(self.s, run, request)]:  # the victim sets moved
            return False
        self.s.no_victims[run.idx] = (grown, within, of_age, self.jobs.moved_mark(), *tried)
        return True

    def _preempt_for(self, run: JobRun, fits_in_total: bool):
        """Start blocked ``run`` across domains if it fits only so, else evict the cheapest
        victims that let it start (bounded: :mod:`~scheduler.scheduling.preemption`): its
        placement, or ``None``.  A gang preempted in this instant preempts nobody in it."""
        sch, jobs = self.s, self.jobs
        request = blocked_request(sch, run)
        if fits_in_total and request.affinity != run.affinity:
            placement = sch.place(request)
            if placement is not None:
                sch.counters["relaxed"] = sch.counters.get("relaxed", 0) + 1
                return placement
        if run.idx in sch.evicted:
            self.deferred = True
            return None
        within = jobs.tenants.within_quota(run)
        grown = sch.grown(run.models)
        known = sch.no_victims.get(run.idx)
        if known is not None and self._still_no_victims(run, within, grown, known, request):
            return None
        mark = jobs.moved_mark()
        victims, of_age, tried = choose_victims(sch, run, request)
        if not victims:
            sch.no_victims[run.idx] = (grown, within, of_age, mark, tried)
            return None
        sch.no_victims.pop(run.idx, None)
        evict(sch, run, victims)
        self.fresh.update(v.idx for v in victims)
        sch.evicted.update(v.idx for v in victims)
        return sch.place(request)
