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
from dataclasses import dataclass

import numpy as np

from scheduler.model.job_run import QUEUED, JobRun, segment_length
from scheduler.model.state import ClusterState
from scheduler.scheduling.lifecycle import JobLifecycle
from scheduler.scheduling.placement import Placer, Request
from scheduler.scheduling.policies import get_policy
from scheduler.scheduling.preemption import choose_victims
from scheduler.sim import Context

MAX_PASSES = 3
"""Passes per instant: a pass that preempts frees GPUs, so another one restarts the rest."""


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

    def __init__(self, ctx: Context, *, state: ClusterState, jobs: JobLifecycle,
                 policy: str = "default", placement: str | None = None):
        self.ctx = ctx
        self.state = state
        self.jobs = jobs
        self.rng = ctx.rng("placement")
        self.set_policy(policy, placement)
        self.counters = {"placement_decisions": 0, "backfilled": 0, "passes": 0,
                         "backfill_depth_stops": 0, "scheduler_wall_s": 0.0}
        self.frag_models = np.zeros(state.n_models, dtype=bool)
        self.frag_version = 0  # bumped when the fragmentation verdict changes
        self.estimates: dict[int, tuple] = {}  # run -> (what it depends on, backfill estimate)
        self._seen: tuple[int, int] | None = None
        self._woken = False
        ctx.after_instant(self.maybe_run)

    def set_policy(self, name: str, placement: str | None = None) -> None:
        """Switch policy (and placement strategy); the next instant schedules with it."""
        self.policy = get_policy(name, placement=placement)
        self.placer = Placer(self.state, self.policy.placement, self.rng)
        self._woken = True

    def wake(self) -> None:
        """Run a pass after this instant even if neither the state nor the queue changed."""
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

    # ----------------------------------------------------------------- passes
    def maybe_run(self) -> None:
        """The instant hook: schedule if anything changed since the last pass."""
        if self._woken or self._seen != (self.state.version, self.jobs.queue_version):
            self.run()

    def run(self) -> None:
        started = time.perf_counter()
        for _ in range(MAX_PASSES):
            if not SchedulingPass(self).run():
                self.settle()
                break
        else:
            self._woken = True  # the last pass preempted too: try again after the next instant
        self.counters["passes"] += 1
        self.counters["scheduler_wall_s"] += time.perf_counter() - started


@dataclass
class Reservation:
    """EASY backfill: the head's start time (``shadow``) and the GPUs it leaves (``extra``)."""

    models: frozenset
    shadow: float
    extra: int


class SchedulingPass:
    """One pass over the queue; :meth:`run` returns whether it preempted anyone."""

    def __init__(self, scheduler: Scheduler):
        self.s = scheduler
        self.jobs = scheduler.jobs
        self.fresh: set[int] = set()  # gangs this pass preempted: back in the queue, not retried

    def run(self) -> bool:
        sch, jobs = self.s, self.jobs
        policy = sch.policy
        walk = jobs.index.ordered(policy.order, jobs.tenants, jobs.runs)
        free = sch.state.free_counts()[0].tolist()  # per model, Python ints: read per job
        failed: dict = {}
        frag = np.zeros(sch.state.n_models, dtype=bool)
        reservation: Reservation | None = None
        depth = policy.backfill_depth
        tested = 0
        any_free = max(free) > 0
        for key, run in walk:
            if run.state != QUEUED or run.idx in self.fresh:
                continue
            if reservation is not None:
                if not policy.backfill or not any_free:
                    break  # nothing more can start: no backfill, or no GPU free at all
                tested += 1
                if depth is not None and tested > depth:
                    sch.counters["backfill_depth_stops"] += 1
                    break
            models = run.models
            fits_in_total = sum(free[m] for m in models) >= run.gpus
            if run.gpus >= failed.get(run.sig, math.inf):
                if fits_in_total:
                    frag[list(models)] = True
                walk.drop(key)
                continue
            backfill_mode = None
            if reservation is not None:
                if not fits_in_total:
                    # behind a reservation nothing is preempted and free GPUs only shrink:
                    # neither this gang nor its partition can start in this pass
                    walk.drop(key)
                    continue
                backfill_mode = self._backfill_mode(run, reservation)
                if backfill_mode is None:
                    continue
            placement = None
            if fits_in_total:
                placement = sch.place(sch.request(run))
                if placement is None:
                    frag[list(models)] = True
            if placement is None and policy.preemption and reservation is None:
                placement = self._preempt_for(run)
                free = sch.state.free_counts()[0].tolist()
                any_free = max(free) > 0
            if placement is None:
                failed[run.sig] = min(run.gpus, failed.get(run.sig, math.inf))
                walk.drop(key)
                if reservation is None:
                    reservation = self._reserve(run, free) if policy.backfill else Reservation(
                        frozenset(), math.inf, 0)
                continue
            jobs.start(run, placement)
            free[placement.model] -= run.gpus
            any_free = max(free) > 0
            if backfill_mode is not None:
                sch.counters["backfilled"] += 1
                if backfill_mode == "extra":
                    reservation.extra -= run.gpus
        if not np.array_equal(frag, sch.frag_models):
            sch.frag_models = frag
            sch.frag_version += 1
        return bool(self.fresh)

    def _estimate_s(self, run: JobRun) -> float:
        """Wall time ``run`` would take from now on its preferred model (no failures).

        A queued run's estimate changes only with its remaining work, its interval, whether it
        ever ran (a restart) and the storage bandwidth: it is kept until one of those moves.
        """
        jobs = self.jobs
        key = (run.remaining_flops, run.interval_s, run.first_start is None,
               jobs.costs.storage_factor)
        cached = self.s.estimates.get(run.idx)
        if cached is not None and cached[0] == key:
            return cached[1]
        m = run.models[0]
        rate = run.gpus * jobs.peak[m] * run.spec.efficiency
        restart = 0.0 if run.first_start is None else jobs.restart_estimate(run)
        estimate = segment_length(run.remaining_flops / rate, restart, run.interval_s,
                                  jobs.estimate_write_s(run, m))
        self.s.estimates[run.idx] = (key, estimate)
        return estimate

    def _reserve(self, head: JobRun, free: list[int]) -> Reservation:
        models = frozenset(head.models)
        avail = sum(free[m] for m in head.models)
        shadow, extra = math.inf, 0
        for end, g, _ in self.jobs.ends(head.models):
            avail += g
            if avail >= head.gpus:
                shadow, extra = end, avail - head.gpus
                break
        if head.reserved_start is None and math.isfinite(shadow):
            head.reserved_start = shadow
        return Reservation(models, shadow, extra)

    def _backfill_mode(self, run: JobRun, res: Reservation) -> str | None:
        if not res.models.intersection(run.models):
            return "other"
        if self.s.ctx.now + self._estimate_s(run) <= res.shadow:
            return "short"
        if run.gpus <= res.extra:
            return "extra"
        return None

    def _preempt_for(self, run: JobRun):
        """Evict the cheapest victim set that lets ``run`` start; its placement, or ``None``."""
        sch = self.s
        victims = choose_victims(sch, run)
        if not victims:
            return None
        for v in victims:
            self.jobs.preempt(v, reason=f"makes room for {run.spec.name} (priority "
                                        f"{run.spec.priority}, tenant {run.spec.tenant})")
            self.fresh.add(v.idx)
        return sch.place(sch.request(run))
