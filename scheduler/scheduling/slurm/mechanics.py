"""The ``slurm`` policy's mechanics: Slurm's main scheduler and backfill pass, its
partitions, priorities, preemption and requeue, over the twin's cluster state.

What runs when, as slurmctld 22.05 does it (``docs/scheduling.md`` has the sources):

* **Main scheduler** (``schedule()``) after every instant in which a job arrived or ended:
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

import numpy as np
from sortedcontainers import SortedList

from scheduler.model.job_run import QUEUED, RUNNING, JobRun
from scheduler.model.state import Placement
from scheduler.scheduling.slurm.conf import SlurmConf
from scheduler.scheduling.slurm.nodespace import NodeSpace
from scheduler.scheduling.slurm.priority import Factors, Usage, combine
from scheduler.sim import Kind


class _Job:
    """Slurm's record of one job: partition, tier, submit, eligibility, priority."""

    __slots__ = ("part", "tier", "submit", "eligible", "prio", "limit", "per", "nodes",
                 "preempts", "key", "qos_prio", "started")

    def __init__(self):
        self.key = None
        self.started = None


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
        self.order = SortedList()  # (key, idx) of queued jobs
        self._queue_seen = -1
        self.calc_at = 0.0  # next PriorityCalcPeriod recomputation
        self.calc_last = 0.0  # the last one
        self.bf_at = 0.0  # next backfill cycle
        self._wakes: set[float] = set()
        self.counters = {"main_passes": 0, "backfill_cycles": 0, "backfill_tested": 0,
                         "backfill_started": 0, "requeued": 0, "timeouts": 0,
                         "reservations": 0}
        warning = conf.warning()
        if warning:
            self.ctx.log("config", warning)

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
        rec.limit = math.inf if limit is None else float(limit)
        per_node = int(self.state.node_gpus.max())
        rec.per = j.gpus_per_node or min(j.gpus, per_node)
        rec.nodes = j.nodes or math.ceil(j.gpus / per_node)
        qos = conf.qos.get(j.qos)
        rec.preempts = frozenset(qos.preempt) if qos else frozenset()
        rec.qos_prio = qos.priority if qos else 0
        rec.prio = self._priority(run, rec, waited_s=0.0)
        self.rec[run.idx] = rec
        return rec

    def _refuse(self, run: JobRun, why: str) -> None:
        self.jobs.cancel(run)
        self.ctx.log("slurm", f"{run.spec.name} refused: {why}", job=run.spec.name)

    # ----------------------------------------------------------------- priority
    def _priority(self, run: JobRun, rec: _Job, *, waited_s: float,
                  fair: dict | None = None) -> int:
        conf = self.conf
        if not conf.multifactor:
            return 0
        f = self.factors
        cpus = rec.nodes  # one task, one CPU per node unless the job asks (it does not here)
        part = next((p for p in conf.partitions if p.name == rec.part), None)
        factors = {"age": f.age(waited_s=waited_s, max_age_s=conf.max_age_s),
                   "jobsize": f.job_size(nodes=rec.nodes, cpus=cpus,
                                         favor_small=conf.favor_small),
                   "partition": f.partition(part.priority_job_factor) if part else 0.0,
                   "qos": f.qos(rec.qos_prio)}
        if conf.weights.get("fairshare"):
            factors["fairshare"] = (fair or {}).get(self._user(run), 1.0)
        return combine(conf.weights, factors)

    @staticmethod
    def _user(run: JobRun) -> str:
        return run.spec.user or run.spec.tenant

    def _recalc(self, now: float) -> None:
        """``PriorityCalcPeriod``: every pending job's priority again, age as of now."""
        conf = self.conf
        fair = None
        if conf.weights.get("fairshare"):
            # the decay thread books running jobs' GPU-seconds since it last ran
            for run in self.jobs.running.values():
                rec = self.rec.get(run.idx)
                since = max(self.calc_last, rec.started if rec and rec.started else now)
                self.usage.add(self._user(run), run.gpus * max(0.0, now - since), now=now)
            self.calc_last = now
            fair = self.usage.fair_share([self._user(r) for r in self.jobs.queue.values()],
                                         now=now, fair_tree=conf.fair_tree)
        for idx, run in self.jobs.queue.items():
            rec = self.rec.get(idx)
            if rec is not None:
                rec.prio = self._priority(run, rec, waited_s=now - rec.eligible, fair=fair)
                rec.key = None
        self.order = SortedList()
        self._queue_seen = -1

    def _key(self, rec: _Job, run: JobRun) -> tuple:
        preemptor = len(rec.preempts) if self.conf.preempt_type == "preempt/qos" else 0
        return (-preemptor, -rec.tier, -rec.prio, rec.submit, run.spec.job_id)

    def _sync(self) -> None:
        """Keep :attr:`order` equal to the queue (keys frozen until the next recompute)."""
        jobs = self.jobs
        if self._queue_seen == jobs.queue_version:
            return
        self._queue_seen = jobs.queue_version
        queued = jobs.queue
        for key, idx in list(self.order):
            if idx not in queued:
                self.order.remove((key, idx))
                self.rec[idx].key = None
        for idx, run in list(queued.items()):
            rec = self._record(run)
            if rec is None or rec.key is not None:
                continue
            rec.key = self._key(rec, run)
            self.order.add((rec.key, idx))

    # ----------------------------------------------------------------- the passes
    def run(self) -> bool:
        """One scheduling instant: priorities if due, the main pass, backfill if due.
        Returns whether anyone was preempted (the caller runs another pass)."""
        now = self.ctx.now
        if self.conf.multifactor and now >= self.calc_at:
            self._recalc(now)
            self.calc_at = (math.floor(now / self.conf.calc_period_s) + 1) * \
                self.conf.calc_period_s
        self._sync()
        preempted = self._main()
        if self.conf.backfill and now >= self.bf_at and not preempted:
            self._backfill()
            self.bf_at = (math.floor(now / self.conf.bf_interval_s) + 1) * \
                self.conf.bf_interval_s
        if self.order:
            self._wake(self.bf_at if self.conf.backfill else math.inf)
            if self.conf.multifactor:
                self._wake(self.calc_at)
        return preempted

    def _wake(self, t: float) -> None:
        if math.isfinite(t) and t > self.ctx.now and t not in self._wakes:
            self._wakes.add(t)
            self.ctx.schedule(t, Kind.BACKFILL, ("slurm-wake", t))

    def on_timer(self, payload) -> None:
        """A wake-up (backfill or priority time, a requeued job's eligibility) or a job's
        time limit (``("timeout", run index, its start)``)."""
        if payload[0] == "slurm-wake":
            self._wakes.discard(payload[1])
        elif payload[0] == "timeout":
            run = self.jobs.runs[payload[1]]
            rec = self.rec.get(run.idx)
            if run.state == RUNNING and rec is not None and rec.started == payload[2]:
                self.counters["timeouts"] += 1
                self.ctx.log("slurm", f"{run.spec.name} reached its time limit (TIMEOUT)",
                             job=run.spec.name)
                self.jobs.cancel(run)

    def _eligible(self, run: JobRun, rec: _Job) -> bool:
        if run.state != QUEUED:
            return False
        if rec.eligible > self.ctx.now:
            self._wake(rec.eligible)
            return False
        return True

    def _free_now(self) -> np.ndarray:
        """GPUs each node can give a new job now (0 on nodes no job may use)."""
        s = self.state
        free = np.where(s.schedulable(), s.node_free, 0)
        if self.conf.memory_whole_node:
            free = np.where(s.node_free == s.node_gpus, free, 0)
        return free

    def _need(self, rec: _Job) -> np.ndarray:
        """GPUs per node a job takes from the plan (the whole node without a memory default)."""
        if self.conf.memory_whole_node:
            return self.state.node_gpus
        return np.full(self.state.node_gpus.size, rec.per)

    def _choose(self, run: JobRun, rec: _Job, free: np.ndarray,
                mask: np.ndarray) -> Placement | None:
        """The lowest-numbered nodes of one accepted model that fit, or ``None``."""
        s = self.state
        need = self._need(rec)
        whole, rem = divmod(run.gpus, rec.per)
        if rec.per * rec.nodes != run.gpus:  # whole nodes plus one partial node
            whole, rem = run.gpus // rec.per, run.gpus % rec.per
        for m in run.models:
            ok = mask & s.model_mask[m] & (free >= need)
            nodes = np.flatnonzero(ok)
            if rem == 0:
                if nodes.size >= whole:
                    chosen = nodes[:whole]
                    return Placement(chosen, np.full(whole, rec.per), m)
                continue
            part_ok = np.flatnonzero(mask & s.model_mask[m] & (free >= (
                need if self.conf.memory_whole_node else rem)))
            if nodes.size >= whole and part_ok.size >= whole + 1:
                chosen = nodes[:whole]
                extra = part_ok[~np.isin(part_ok, chosen)][0]
                return Placement(np.append(chosen, extra),
                                 np.append(np.full(whole, rec.per), rem), m)
        return None

    def _start(self, run: JobRun, rec: _Job, placement: Placement) -> None:
        self.jobs.start(run, placement)
        rec.started = self.ctx.now
        if math.isfinite(rec.limit):
            self.ctx.schedule(self.ctx.now + rec.limit, Kind.BACKFILL,
                              ("timeout", run.idx, rec.started))
        self.s.counters["placement_decisions"] += 1

    def _main(self) -> bool:
        self.counters["main_passes"] += 1
        avail = self.state.schedulable().copy()
        failed: set[str] = set()
        reasons = self.s.reasons = {}
        preempted = False
        free = self._free_now()
        tested = 0
        n_parts = len(self.part_mask)
        for _, idx in self.order:
            if len(failed) == n_parts:
                break  # every partition failed: nothing more starts in this pass
            run = self.jobs.runs[idx]
            rec = self.rec[idx]
            if not self._eligible(run, rec):
                continue
            if rec.part in failed:
                reasons[idx] = "Priority"
                continue
            tested += 1
            if tested > self.conf.default_queue_depth:
                break
            mask = avail & self.part_mask.get(rec.part, avail)
            self.s.counters["placement_decisions"] += 1
            placement = self._choose(run, rec, free, mask)
            if placement is not None:
                self._start(run, rec, placement)
                free = self._free_now()
                continue
            if self.conf.preempt_type != "preempt/none" and self._preempt_for(run, rec, mask):
                preempted = True
                free = self._free_now()
                placement = self._choose(run, rec, free, mask)
                if placement is not None:
                    self._start(run, rec, placement)
                    free = self._free_now()
                    continue
            reasons[idx] = "Resources"
            failed.add(rec.part)
            avail &= ~self.part_mask.get(rec.part, np.zeros_like(avail))
        self._sync()
        return preempted

    def _backfill(self) -> None:
        """One backfill cycle over the plan of running jobs' limits and reservations."""
        conf, now = self.conf, self.ctx.now
        self.counters["backfill_cycles"] += 1
        space = NodeSpace(now, self._free_now(), resolution=conf.bf_resolution_s)
        whole_node = conf.memory_whole_node
        for run in self.jobs.running.values():
            rec = self.rec.get(run.idx)
            limit = rec.limit if rec is not None else math.inf
            if not math.isfinite(limit):
                continue
            p = run.placement
            counts = self.state.node_gpus[p.nodes] if whole_node else p.counts
            space.release(max(now + conf.bf_resolution_s, rec.started + limit), p.nodes,
                          counts)
        per_user: dict[str, int] = {}
        tested = 0
        horizon = now + conf.bf_window_s
        for _, idx in self.order:
            run = self.jobs.runs[idx]
            rec = self.rec[idx]
            if not self._eligible(run, rec):
                continue
            if conf.bf_max_job_user:
                user = self._user(run)
                if per_user.get(user, 0) >= conf.bf_max_job_user:
                    continue
                per_user[user] = per_user.get(user, 0) + 1
            tested += 1
            if tested > conf.bf_max_job_test:
                break
            self.counters["backfill_tested"] += 1
            self.s.counters["placement_decisions"] += 1
            mask = self.state.schedulable() & self.part_mask.get(rec.part, True)
            for t in space.starts(horizon):
                free = space.free_over(t, rec.limit)
                placement = self._choose(run, rec, free, mask)
                if placement is None:
                    continue
                counts = (self.state.node_gpus[placement.nodes] if whole_node
                          else placement.counts)
                if t == now:
                    self._start(run, rec, placement)
                    self.counters["backfill_started"] += 1
                    self.s.counters["backfilled"] += 1
                else:
                    self.counters["reservations"] += 1
                    if run.reserved_start is None:
                        run.reserved_start = t
                space.reserve(t, rec.limit, placement.nodes, counts)
                break
        self._sync()

    # ----------------------------------------------------------------- preemption
    def _may_preempt(self, rec: _Job, other: JobRun) -> bool:
        orec = self.rec.get(other.idx)
        if orec is None:
            return False
        if self.conf.preempt_type == "preempt/qos":
            return other.spec.qos in rec.preempts
        return orec.tier < rec.tier

    def _exempt_s(self, other: JobRun) -> float:
        q = self.conf.qos.get(other.spec.qos)
        if q is not None and q.preempt_exempt_time_s is not None:
            return q.preempt_exempt_time_s
        return self.conf.preempt_exempt_time_s

    def _mode(self, other: JobRun) -> str:
        q = self.conf.qos.get(other.spec.qos)
        if q is not None and q.preempt_mode:
            return q.preempt_mode
        part = next((p for p in self.conf.partitions if p.name == self.rec[other.idx].part),
                    None)
        return (part.preempt_mode if part and part.preempt_mode else self.conf.preempt_mode)

    def _preempt_for(self, run: JobRun, rec: _Job, mask: np.ndarray) -> bool:
        """Evict, youngest first, the fewest preemptable jobs whose nodes let ``run`` start;
        ``False`` (nobody evicted) if even all of them would not."""
        now = self.ctx.now
        cands = [r for r in self.jobs.running.values()
                 if self._may_preempt(rec, r) and now - self.rec[r.idx].started
                 >= self._exempt_s(r) and self._mode(r) != "OFF"]
        if not cands:
            return False
        cands.sort(key=lambda r: (-self.rec[r.idx].started, -r.idx))
        s = self.state
        free = self._free_now().astype(np.int64)
        chosen = []
        for victim in cands:
            chosen.append(victim)
            p = victim.placement
            if self.conf.memory_whole_node:
                free[p.nodes] = np.where(s.schedulable()[p.nodes], s.node_gpus[p.nodes], 0)
            else:
                np.add.at(free, p.nodes, p.counts)
            placement = self._choose(run, rec, free, mask)
            if placement is not None:
                break
        else:
            return False
        used = set(placement.nodes.tolist())
        victims = [v for v in chosen if used & set(v.placement.nodes.tolist())]
        for v in victims:
            self._evict(v, by=run)
        return bool(victims)

    def _evict(self, victim: JobRun, *, by: JobRun) -> None:
        mode = self._mode(victim)
        reason = f"preempted by {by.spec.name} ({mode})"
        if mode == "CANCEL":
            self.jobs.cancel(victim)
            self.ctx.log("preempt", f"{victim.spec.name} {reason}", job=victim.spec.name)
            return
        self.jobs.preempt(victim, reason=reason)
        # REQUEUE (and SUSPEND, modelled as REQUEUE): the batch script runs again from its
        # start, eligible after the credential's lifetime, as a newly submitted job
        self.jobs.restart_from_scratch(victim)
        self.counters["requeued"] += 1
        rec = self.rec[victim.idx]
        now = self.ctx.now
        rec.submit = now
        rec.eligible = now + self.conf.cred_expire_s + 1.0
        rec.key = None
        rec.prio = self._priority(victim, rec, waited_s=0.0)
        self._wake(rec.eligible)
