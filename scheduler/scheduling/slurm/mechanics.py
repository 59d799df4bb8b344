"""The ``slurm`` policy's mechanics: Slurm's main scheduler and backfill pass, its
partitions, priorities, preemption and requeue, over the twin's cluster state.

What runs when, as slurmctld 22.05 does it (``docs/scheduling.md`` has the sources):

* **Main scheduler** (``schedule()``) after every instant in which a job arrived or ended,
  and every ``sched_interval`` while jobs wait:
  pending jobs in order (a job that may preempt the other first, then partition
  ``PriorityTier``, priority, submit time, job id), at most ``default_queue_depth`` of them.
  A job that cannot start marks its partition failed: no later job of that partition starts,
  and no later job of another partition starts on that partition's nodes.
* **Backfill** every ``bf_interval``: the same order, at most ``bf_max_job_test`` jobs (and
  ``bf_max_job_user`` per user); each starts now if its nodes are free for its whole time
  limit in the plan (:class:`~scheduler.scheduling.slurm.nodespace.NodeSpace`), otherwise it
  reserves its earliest start inside ``bf_window``.  Running jobs end in the plan at their
  time limit; they end in fact when their work is done.
* **Priorities**: ``priority/basic`` is first come first served; ``priority/multifactor``
  sets a job's priority at submission (age 0) and recomputes pending jobs' every
  ``PriorityCalcPeriod`` (:mod:`scheduler.scheduling.slurm.priority`).
* **Preemption** (``preempt/qos`` or ``preempt/partition_prio``): a job the main scheduler
  cannot start evicts, youngest first, running jobs it may preempt that have run at least
  ``PreemptExemptTime``.  ``REQUEUE`` puts a victim back in the queue to run again from its
  start, eligible again ``cred_expire + 1`` s later with a new submit time and age (Slurm's
  ``batch credential`` wait); ``CANCEL`` ends it.
* **Nodes**: a job asks for ``gpus_per_node`` GPUs on each of ``gpus / gpus_per_node`` nodes
  (or whole nodes plus one partial node); the lowest-numbered nodes that fit are taken.
  Without ``DefMemPerCPU`` (or per node or GPU) and with memory consumable, a job takes its
  nodes' whole memory: no other job shares them.
* **Time limits**: a job is ended (Slurm's ``TIMEOUT``) when it reaches its limit.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from scheduler.model.job_run import QUEUED, RUNNING, JobRun
from scheduler.model.state import Placement
from scheduler.scheduling.slurm import backfill, limits, preemption, reservations
from scheduler.scheduling.slurm.conf import SlurmConf
from scheduler.scheduling.slurm.nodespace import best_fit
from scheduler.scheduling.slurm.pending import PendingOrder
from scheduler.scheduling.slurm.priority import Factors, Usage
from scheduler.sim import Kind

TICK_PHASE_S = 0.5
"""Where in each second slurmctld's background loop (10 x 100 ms sleeps) and the backfill
agent's idle poll (1 s) fall: their phase is slurmctld's start time, unknown to a replay, so the
middle of the second (a submission waits half a second on average)."""
COMPLETE_S = 0.5
"""Seconds a job's nodes stay completing after its work ends (the batch step's exit, slurmd's
completion message, the epilog) before another job may start there: real Slurm's end-to-next-
start gap on emulated nodes (``docs/validation.md``: a gang ending at second ``e`` is followed
at ``e`` or ``e + 1``)."""


class _Job:
    """Slurm's record of one job: partition, tier, submit, eligibility (its priority and
    sort key are :class:`~scheduler.scheduling.slurm.pending.PendingOrder`'s columns)."""

    __slots__ = ("part", "tier", "submit", "eligible", "limit", "per", "nodes", "shape",
                 "preempts", "queued", "qos_prio", "started", "seq", "waits_until")

    def __init__(self):
        self.queued = False  # in the pending order
        self.shape = None  # backfill's shape of the job (backfill.cycle)
        self.started = None
        self.waits_until = -math.inf  # a preemptor waits for its victims' kill until then


class SlurmMechanics:
    """Slurm's scheduling over a :class:`~scheduler.scheduling.passes.Scheduler`'s state."""

    def __init__(self, scheduler, conf: SlurmConf):
        if conf is None:
            raise ValueError("policy slurm needs the cluster's slurm.conf (--slurm-conf PATH)")
        self.s = scheduler
        self.conf = conf
        self.ctx, self.state, self.jobs = scheduler.ctx, scheduler.state, scheduler.jobs
        n = self.state.node_gpus.size
        self.part_mask = self._partitions(n)
        self.default_part = next((p.name for p in conf.partitions if p.default),
                                 conf.partitions[0].name if conf.partitions else None)
        cpus = (sum(x.cpus for x in conf.nodes) if len(conf.nodes) == n
                else int(self.state.node_cpu.sum()))
        self.factors = Factors(
            nodes=n, cpus=max(1, cpus),
            part_factor_max=max((p.priority_job_factor for p in conf.partitions), default=1),
            qos_priority_max=max((q.priority for q in conf.qos.values()), default=0))
        self.usage = Usage(conf.decay_half_life_s)
        self.rec: dict[int, _Job] = {}
        self.shapes: dict[tuple, int] = {}  # backfill's job shapes, numbered (shape_of)
        self.pending = PendingOrder(conf.weights if conf.multifactor else None, self.factors,
                                    max_age_s=conf.max_age_s, favor_small=conf.favor_small)
        self.calc_at = 0.0  # next PriorityCalcPeriod recomputation
        self.fair: dict[str, float] = {}  # fair-share factors at the last recomputation
        self.accounted: dict[int, float] = {}  # started jobs -> usage booked up to then
        # slurmctld's three clocks (see the module's docstring): the background loop's last
        # schedule() and whether a submission asked for one, the periodic full pass, the
        # backfill agent's last cycle; a job end runs schedule() at once
        self.bg_last = -math.inf
        self.sched_requested = False
        self.full_at = conf.sched_interval_s
        self.bf_last = -math.inf
        self.ended = False
        self.completing = np.zeros(n)  # per node: busy until then after a preemption's kill
        self.seq = 0  # submissions recorded (priority/basic ranks jobs by it)
        self._wakes: set[float] = set()
        self._eligible_at: set[float] = set()  # times requeued jobs become eligible
        self.epoch = 0  # bumped when priorities or eligibility change
        self._bf_seen = None  # the signature the last backfill cycle saw
        self.counters = {"main_passes": 0, "backfill_cycles": 0, "backfill_skipped": 0,
                         "backfill_tested": 0,
                         "backfill_started": 0, "requeued": 0, "timeouts": 0,
                         "reservations": 0}
        self.limits = limits.QosLimits(self)
        self.book = reservations.book_for(conf, n)
        self.grace: dict[int, float] = {}  # victims in their preemption grace time -> kill
        self.killed: set[int] = set()  # victims being evicted: released after KILL_S instead
        warning = conf.warning()
        if warning:
            self.ctx.log("config", warning)
        for run in list(self.jobs.queue.values()):
            self.on_queue(run, True)
        self.jobs.run_watchers.append(self)

    def detach(self) -> None:
        """Stop following the lifecycle (the scheduler switched to another policy)."""
        if self in self.jobs.run_watchers:
            self.jobs.run_watchers.remove(self)

    def on_start(self, run: JobRun) -> None:
        pass

    def on_release(self, run: JobRun) -> None:
        """A running job ended or was stopped: its nodes complete (no job starts on them)
        for :data:`COMPLETE_S` (after a preemption's kill,
        :data:`~scheduler.scheduling.slurm.preemption.KILL_S`), then slurmctld runs
        schedule() as the epilog-complete message arrives."""
        if run.placement is None or run.idx not in self.rec:
            self.ended = True
            return
        if run.idx in self.killed:  # preemption set its nodes' release (KILL_S) already
            self.killed.discard(run.idx)
            return
        done = self.ctx.now + COMPLETE_S
        nodes = run.placement.nodes
        self.completing[nodes] = np.maximum(self.completing[nodes], done)
        if COMPLETE_S > 0:
            self.ctx.schedule(done, Kind.BACKFILL, ("killed",))
        else:
            self.ended = True

    # ----------------------------------------------------------------- set-up
    def _partitions(self, n: int) -> dict[str, np.ndarray]:
        names = [x.name for x in self.conf.nodes]
        if not self.conf.partitions:
            return {"": np.ones(n, dtype=bool)}
        if names and len(names) != n:
            raise ValueError(f"{self.conf.source} has {len(names)} nodes, the cluster {n}: "
                             "the partitions cannot be mapped onto it")
        pos = {name: i for i, name in enumerate(names)}
        masks = {}
        for p in self.conf.partitions:
            mask = np.zeros(n, dtype=bool)
            if p.nodes == ("ALL",):
                mask[:] = True
            else:
                mask[[pos[x] for x in p.nodes]] = True
            if not p.up:
                mask[:] = False
            masks[p.name] = mask
        return masks

    def _record(self, run: JobRun) -> _Job | None:
        """Slurm's record of ``run``, made at its first arrival; ``None`` if Slurm would
        refuse the job (an unknown partition, a limit above the partition's)."""
        rec = self.rec.get(run.idx)
        if rec is not None:
            return rec
        j, conf = run.spec, self.conf
        part_name = j.partition or self.default_part or ""
        part = next((p for p in conf.partitions if p.name == part_name), None)
        if conf.partitions and part is None:
            self._refuse(run, f"no partition {part_name!r} in {conf.source}")
            return None
        rec = _Job()
        rec.part = part_name
        rec.tier = part.priority_tier if part else 1
        rec.submit = j.submit_s
        rec.eligible = j.submit_s
        limit = j.time_limit_s
        if limit is None and part is not None:
            limit = part.default_time_s or part.max_time_s
        if part is not None and part.max_time_s is not None and limit is not None \
                and limit > part.max_time_s:
            self._refuse(run, f"time limit {limit:g} s above partition {part_name}'s MaxTime")
            return None
        limit = self.limits.time_limit(run, part, limit)
        rec.limit = math.inf if limit is None else float(limit)
        per_node = int(self.state.node_gpus.max())
        rec.per = j.gpus_per_node or min(j.gpus, per_node)
        rec.nodes = j.nodes or math.ceil(j.gpus / per_node)
        qos = conf.qos.get(j.qos)
        rec.preempts = frozenset(qos.preempt) if qos else frozenset()
        rec.qos_prio = qos.priority if qos else 0
        self.seq += 1
        rec.seq = self.seq
        self.pending.enter(  # its priority at submission (age 0)
            run.idx, job_id=j.job_id, tier=rec.tier, nodes=rec.nodes, qos_prio=rec.qos_prio,
            preemptor=len(rec.preempts) if conf.preempt_type == "preempt/qos" else 0,
            part_factor=part.priority_job_factor if part else None, user=self.user_of(run),
            seq=rec.seq, submit=rec.submit, fair=self.fair)
        # one task: one CPU on each node (CR_Core), which the node choice packs by
        run.spec = replace(j, cpu_per_gpu=1.0 / rec.per, ram_gb_per_gpu=0.0,
                           nic_gbps_per_gpu=0.0)
        why = self.limits.refuse(run, rec) or reservations.refuse(self.book, run, self.user_of(run))
        if why is not None:
            self._refuse(run, why)
            return None
        self.rec[run.idx] = rec
        return rec

    def _refuse(self, run: JobRun, why: str) -> None:
        self.jobs.cancel(run)
        self.ctx.log("slurm", f"{run.spec.name} refused: {why}", job=run.spec.name)

    # ----------------------------------------------------------------- priority
    @staticmethod
    def user_of(run: JobRun) -> str:
        return run.spec.user or run.spec.tenant

    def _recalc(self, now: float) -> None:
        """``PriorityCalcPeriod``: every pending job's priority again, age as of now."""
        conf = self.conf
        fair = None
        if conf.weights.get("fairshare"):
            # the decay thread books jobs' GPU-seconds since it last ran (those that ended
            # meanwhile up to their end)
            for idx, since in list(self.accounted.items()):
                run = self.jobs.runs[idx]
                until = now if run.state == RUNNING else run.end_s
                if until is not None:
                    self.usage.add(self.user_of(run), run.gpus * max(0.0, until - since),
                                   now=now)
                if run.state == RUNNING:
                    self.accounted[idx] = now
                else:
                    del self.accounted[idx]
            fair = self.fair = self.usage.fair_share(
                [self.user_of(r) for r in self.jobs.queue.values()], now=now,
                fair_tree=conf.fair_tree)
        self.pending.recalc(now, fair)
        if self.pending.items:
            self.sched_requested = True  # every queued job queued again
        self.epoch += 1

    def on_queue(self, run: JobRun, joined: bool) -> None:
        """Keep :attr:`pending` equal to the queue (keys frozen until the next recompute)."""
        rec = self.rec.get(run.idx)
        if not joined:
            if rec is not None and rec.queued:
                self.pending.remove(run.idx)
                rec.queued = False
            return
        rec = self._record(run)
        if rec is None or rec.queued or run.state != QUEUED:
            return
        rec.queued = True
        self.pending.add(run.idx, submit=rec.submit, eligible=rec.eligible,
                         kind=self.shapes[self.shape_of(run, rec)])
        self.sched_requested = True  # queue_job_scheduler(): the background loop's next tick

    def walk(self):
        """The queue in order, tolerating jobs that start, leave or join meanwhile."""
        return self.pending.walk()

    def shape_of(self, run: JobRun, rec: _Job) -> tuple:
        """What a backfill cycle's plan for a job depends on (a job that may preempt is
        planned without its victims): kept on its record, numbered in :attr:`shapes` (its
        pending order's ``kind``)."""
        shape = rec.shape
        if shape is None or shape[4] is not run.models:
            shape = rec.shape = (run.gpus, rec.per, rec.limit, rec.part, run.models,
                                 run.spec.reservation, rec.preempts)
            self.pending.kind[run.idx] = self.shapes.setdefault(shape, len(self.shapes))
        return shape

    # ----------------------------------------------------------------- the passes
    def run(self) -> bool:
        """One instant: priorities if due, the main scheduler if a job ended, a submission
        waits for the background loop's tick or the full pass is due, backfill on its
        agent's tick.  Returns whether anyone was preempted."""
        conf, now = self.conf, self.ctx.now
        if conf.multifactor and now >= self.calc_at:
            self._recalc(now)
            self.calc_at = (math.floor(now / conf.calc_period_s) + 1) * conf.calc_period_s
        background = (self.sched_requested and self._on_tick(now)
                      and now >= self.bg_last + conf.batch_sched_delay_s)
        full = now >= self.full_at
        preempted = False
        if self.ended or background or full:
            if background or full:
                self.bg_last, self.sched_requested = now, False
            if full:
                self.full_at = (math.floor(now / conf.sched_interval_s) + 1) * \
                    conf.sched_interval_s
            self.ended = False
            preempted = self._main(full_queue=full)
        if (conf.backfill and self._on_tick(now) and now >= self.bf_last + conf.bf_interval_s
                and self.pending.items):
            # the backfill agent runs a cycle only if jobs, nodes or partitions changed
            # since its last one (backfill.c, _more_work)
            if self._signature() != self._bf_seen:
                backfill.cycle(self)
                self._bf_seen = self._signature()
                self.bf_last = now
            else:
                self.counters["backfill_skipped"] += 1
        self._wakes_after(now)
        return preempted

    def _on_tick(self, t: float) -> bool:
        """Whether ``t`` is one of the background loop's and backfill agent's 1-s polls."""
        return abs((t - TICK_PHASE_S) - round(t - TICK_PHASE_S)) < 1e-9

    @staticmethod
    def _tick_from(t: float) -> float:
        """The first poll at or after ``t``."""
        return math.ceil(t - TICK_PHASE_S - 1e-9) + TICK_PHASE_S

    def _wakes_after(self, now: float) -> None:
        conf = self.conf
        if self.sched_requested:
            self.wake(self._tick_from(max(now + 1e-6, self.bg_last + conf.batch_sched_delay_s)))
        if self.pending.items:
            self.wake(self.full_at)
            self.wake(self.book.next_boundary(now) if self.book else math.inf)  # one's start, end
            if conf.backfill and self._signature() != self._bf_seen:
                self.wake(self._tick_from(max(now + 1e-6, self.bf_last + conf.bf_interval_s)))
            if conf.multifactor:
                self.wake(self.calc_at)

    def _signature(self) -> tuple:
        """What a backfill cycle's outcome depends on: the allocation, the queue, the
        priorities and which queued jobs are eligible."""
        return (self.state.version, self.jobs.queue_version, self.epoch)

    def wake(self, t: float) -> None:
        if math.isfinite(t) and t > self.ctx.now and t not in self._wakes:
            self._wakes.add(t)
            self.ctx.schedule(t, Kind.BACKFILL, ("slurm-wake", t))

    def on_timer(self, payload) -> None:
        """A wake-up (backfill or priority time, a requeued job's eligibility) or a job's
        time limit (``("timeout", run index, its start)``)."""
        if payload[0] == "slurm-wake":
            self._wakes.discard(payload[1])
            if self.book is not None and payload[1] in self.book.boundaries:  # last_resv_update
                self.epoch, self.sched_requested = self.epoch + 1, True
            if payload[1] in self._eligible_at:  # a requeued job may start again
                self._eligible_at.discard(payload[1])
                self.epoch += 1
        elif payload[0] == "grace":  # a victim's preemption grace time is over
            preemption.grace_over(self, payload)
        elif payload[0] == "killed":  # a job's nodes completed (epilog complete)
            self.ended = True
            self.epoch += 1  # last_node_update: the backfill agent's next poll runs a cycle
        elif payload[0] == "timeout":
            run = self.jobs.runs[payload[1]]
            rec = self.rec.get(run.idx)
            if run.state == RUNNING and rec is not None and rec.started == payload[2]:
                self.counters["timeouts"] += 1
                self.ctx.log("slurm", f"{run.spec.name} reached its time limit (TIMEOUT)",
                             job=run.spec.name)
                self.jobs.cancel(run)

    def eligible(self, run: JobRun, rec: _Job) -> bool:
        if run.state != QUEUED:
            return False
        if rec.eligible > self.ctx.now:
            self._eligible_at.add(rec.eligible)
            self.wake(rec.eligible)
            return False
        return True

    def free_now(self) -> np.ndarray:
        """GPUs each node can give a new job now (0 on nodes no job may use)."""
        s = self.state
        free = np.where(s.schedulable() & (self.completing <= self.ctx.now), s.node_free, 0)
        if self.conf.memory_whole_node:
            free = np.where(s.node_free == s.node_gpus, free, 0)
        return free

    def need(self, rec: _Job) -> np.ndarray:
        """GPUs per node a job takes from the plan (the whole node without a memory default)."""
        if self.conf.memory_whole_node:
            return self.state.node_gpus
        return np.full(self.state.node_gpus.size, rec.per)

    def choose(self, run: JobRun, rec: _Job, free: np.ndarray,
               mask: np.ndarray) -> Placement | None:
        """cons_tres' choice of nodes of one accepted model (``_eval_nodes``), or ``None``:
        a one-node job takes the fitting node with the fewest free CPUs (it packs onto busy
        nodes), a larger one the run of consecutive fitting nodes with the fewest free CPUs
        among those long enough, in index order; the first on ties."""
        s = self.state
        need = self.need(rec)
        whole, rem = run.gpus // rec.per, run.gpus % rec.per
        cpu = s.node_free_cpu
        for m in run.models:
            base = mask & s.model_mask[m]
            chosen = best_fit(np.flatnonzero(base & (free >= need)), whole, cpu)
            if chosen is None:
                continue
            if rem == 0:
                return Placement(chosen, np.full(whole, rec.per), m)
            part = base & (free >= (need if self.conf.memory_whole_node else rem))
            part[chosen] = False
            extra = best_fit(np.flatnonzero(part), 1, cpu)
            if extra is not None:
                return Placement(np.append(chosen, extra),
                                 np.append(np.full(whole, rec.per), rem), m)
        return None

    def start(self, run: JobRun, rec: _Job, placement: Placement) -> None:
        self.jobs.start(run, placement)
        rec.started = self.ctx.now
        if self.conf.weights.get("fairshare"):
            self.accounted[run.idx] = rec.started
        kill = limits.kill_time(self, run, rec)  # job_time_limit(): every PERIODIC_TIMEOUT
        if math.isfinite(kill):
            self.ctx.schedule(kill, Kind.BACKFILL, ("timeout", run.idx, rec.started))

    def _main(self, full_queue: bool = False) -> bool:
        """slurmctld's ``schedule()``: jobs in order, at most ``default_queue_depth`` of them
        unless it is the periodic full pass; a job that cannot start fails its partition."""
        self.counters["main_passes"] += 1
        avail = self.state.schedulable().copy()
        failed: set[str] = set()
        reasons = self.s.reasons = {}
        preempted = False
        free = self.free_now()
        tested = 0
        n_parts = len(self.part_mask)
        for idx in self.walk():
            if len(failed) == n_parts:
                break  # every partition failed: nothing more starts in this pass
            run = self.jobs.runs[idx]
            rec = self.rec[idx]
            if not self.eligible(run, rec):
                continue
            if rec.part in failed and not run.spec.reservation:
                reasons[idx] = "Priority"
                continue
            tested += 1
            if not full_queue and tested > self.conf.default_queue_depth + 1:
                break  # job_depth++ > def_job_limit: 101 jobs by default
            mask = avail & self.part_mask.get(rec.part, avail)
            mask, why = limits.admission(self, run, rec, mask)  # held: skipped, partition open
            if why is not None:
                reasons[idx] = why
                continue
            self.s.counters["placement_decisions"] += 1
            placement = self.choose(run, rec, free, mask)
            if placement is not None:
                self.start(run, rec, placement)
                free = self.free_now()
                continue
            why = self.book and self.book.not_available(self, run, rec, mask, avail)
            if why:
                reasons[idx] = why
                continue
            if (self.conf.preempt_type != "preempt/none" and self.ctx.now >= rec.waits_until
                    and preemption.preempt_for(self, run, rec, mask)):
                # the victims are signalled; the job starts in a later pass, once their
                # nodes are released (select_nodes returns ESLURM_NODES_BUSY meanwhile)
                preempted = True
                free = self.free_now()
            reasons[idx] = "Resources"
            if run.spec.reservation:  # it fails its reservation, not its partition
                self.book.fail(self, run)
                continue
            failed.add(rec.part)
            avail &= ~self.part_mask.get(rec.part, np.zeros_like(avail))
        return preempted
