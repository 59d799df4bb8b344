"""One scheduling pass: order the queue, place gangs, reserve for the head, backfill, preempt.

The policy (``scheduler.scheduling.policies``) decides the order and which mechanisms are on;
this module is the mechanics shared by all policies.  A pass skips a gang whose shape already
failed in the same pass (same accepted models and affinity, no smaller), so a long queue costs
a few placement attempts per distinct shape, not one per job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scheduler.model.job_run import DRAINING, QUEUED, RUNNING, JobRun, segment_length
from scheduler.model.state import ClusterState
from scheduler.scheduling.preemption import choose_victims
from scheduler.workload.jobs import Workload


class TenantBook:
    """Per-tenant usage, quotas and weights (the queue context policies read).

    Quotas are GPUs.  When the workload gives no tenant a quota, the schedulable GPUs are split
    by weight, so every tenant has a guaranteed share and may borrow beyond it.
    """

    def __init__(self, state: ClusterState, workload: Workload):
        sched = ~state.node_spare
        self.capacity = np.array([
            state.node_gpus[sched].sum(), state.node_cpu[sched].sum(),
            state.node_ram[sched].sum(), state.node_nic[sched].sum()], dtype=float)
        names = workload.tenant_names()
        given = {t.name: t for t in workload.tenants}
        self.weight = {n: (given[n].weight if n in given else 1.0) for n in names}
        if any(t.quota_gpus for t in workload.tenants):
            self.quota = {n: (given[n].quota_gpus if n in given else 0) for n in names}
        else:
            total = sum(self.weight.values()) or 1.0
            self.quota = {n: int(self.capacity[0] * w / total) for n, w in self.weight.items()}
        self.usage = {n: np.zeros(4) for n in names}

    def _ensure(self, tenant: str) -> None:
        if tenant not in self.usage:
            self.usage[tenant] = np.zeros(4)
            self.weight[tenant] = 1.0
            self.quota[tenant] = 0

    def add_raw(self, tenant: str, gpus: int, cpu: float, ram: float, nic: float,
                sign: int) -> None:
        self._ensure(tenant)
        self.usage[tenant] += sign * np.array([gpus, gpus * cpu, gpus * ram, gpus * nic])

    def add(self, run: JobRun, sign: int) -> None:
        j = run.spec
        self.add_raw(j.tenant, j.gpus, j.cpu_per_gpu, j.ram_gb_per_gpu, j.nic_gbps_per_gpu, sign)

    def dominant_share(self, tenant: str) -> float:
        self._ensure(tenant)
        return float((self.usage[tenant] / self.capacity).max() / self.weight[tenant])

    def within_quota(self, run: JobRun) -> bool:
        self._ensure(run.spec.tenant)
        return self.usage[run.spec.tenant][0] + run.gpus <= self.quota[run.spec.tenant]


@dataclass
class Reservation:
    """EASY backfill: the head's start time (``shadow``) and the GPUs it leaves (``extra``)."""

    models: frozenset
    shadow: float
    extra: int


class SchedulingPass:
    def __init__(self, engine):
        self.e = engine

    def run(self) -> None:
        e = self.e
        policy = e.policy
        order = sorted(e.queue.values(), key=lambda r: policy.order(r, e.tenants))
        free = e.free_counts()[0].copy()
        failed: dict = {}
        frag = np.zeros(e.state.n_models, dtype=bool)
        reservation: Reservation | None = None
        for run in order:
            if run.state != QUEUED:
                continue
            if reservation is not None and not policy.backfill:
                break
            models = list(run.models)
            fits_in_total = free[models].sum() >= run.gpus
            if run.gpus >= failed.get(run.sig, math.inf):
                frag[models] |= fits_in_total
                continue
            backfill_mode = None
            if reservation is not None:
                backfill_mode = self._backfill_mode(run, reservation)
                if backfill_mode is None:
                    continue
            placement = None
            if fits_in_total:
                placement = e.place(e.request(run))
                if placement is None:
                    frag[models] = True
            if placement is None and policy.preemption and reservation is None:
                placement = self._preempt_for(run)
                free = e.free_counts()[0].copy()
            if placement is None:
                failed[run.sig] = min(run.gpus, failed.get(run.sig, math.inf))
                if reservation is None:
                    reservation = self._reserve(run, free) if policy.backfill else Reservation(
                        frozenset(), math.inf, 0)
                continue
            e.start(run, placement)
            free[placement.model] -= run.gpus
            if backfill_mode is not None:
                e.counters["backfilled"] += 1
                if backfill_mode == "extra":
                    reservation.extra -= run.gpus
        e.frag_models = frag

    def _estimate_s(self, run: JobRun) -> float:
        """Wall time ``run`` would take from now on its preferred model (no failures)."""
        e = self.e
        m = run.models[0]
        rate = run.gpus * e.peak[m] * run.spec.efficiency
        restart = 0.0 if run.first_start is None else e.restart_estimate(run)
        return segment_length(run.remaining_flops / rate, restart, run.interval_s,
                              e.estimate_write_s(run, m))

    def _reserve(self, head: JobRun, free: np.ndarray) -> Reservation:
        e = self.e
        models = frozenset(head.models)
        avail = int(free[list(head.models)].sum())
        ends = sorted((r.expected_end if r.state == RUNNING else r.seg_start + r.write_s, r.gpus)
                      for r in e.running.values()
                      if r.model in models and r.state in (RUNNING, DRAINING))
        shadow, extra = math.inf, 0
        for end, g in ends:
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
        if self.e.now + self._estimate_s(run) <= res.shadow:
            return "short"
        if run.gpus <= res.extra:
            return "extra"
        return None

    def _preempt_for(self, run: JobRun):
        e = self.e
        victims = choose_victims(e, run)
        if not victims:
            return None
        for v in victims:
            e.preempt(v, reason=f"makes room for {run.spec.name} (priority "
                                f"{run.spec.priority}, tenant {run.spec.tenant})")
        return e.place(e.request(run))
