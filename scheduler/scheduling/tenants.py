"""Tenants' usage, quotas and weights: the queue context the policies read."""

from __future__ import annotations

import numpy as np

from scheduler.model.job_run import JobRun
from scheduler.model.state import ClusterState
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
        self.usage = {n: [0.0, 0.0, 0.0, 0.0] for n in names}  # GPUs, cores, RAM, NIC
        self._cap = [float(c) for c in self.capacity]
        self._stamps = dict.fromkeys(names, 0)

    def _ensure(self, tenant: str) -> None:
        if tenant not in self.usage:
            self.usage[tenant] = [0.0, 0.0, 0.0, 0.0]
            self.weight[tenant] = 1.0
            self.quota[tenant] = 0
            self._stamps[tenant] = 0

    def add_raw(self, tenant: str, gpus: int, cpu: float, ram: float, nic: float,
                sign: int) -> None:
        self._ensure(tenant)
        u = self.usage[tenant]
        u[0] += sign * gpus
        u[1] += sign * gpus * cpu
        u[2] += sign * gpus * ram
        u[3] += sign * gpus * nic
        self._stamps[tenant] += 1

    def stamp(self, tenant: str) -> int:
        """Moves whenever what :meth:`dominant_share` or :meth:`within_quota` read of
        ``tenant`` changes (its usage): an ordering key cached with it is current while
        it has not moved."""
        self._ensure(tenant)
        return self._stamps[tenant]

    def add(self, run: JobRun, sign: int) -> None:
        j = run.spec
        self.add_raw(j.tenant, j.gpus, j.cpu_per_gpu, j.ram_gb_per_gpu, j.nic_gbps_per_gpu, sign)

    def dominant_share(self, tenant: str) -> float:
        self._ensure(tenant)
        u, cap = self.usage[tenant], self._cap
        return max((u[k] / cap[k] for k in range(4) if cap[k] > 0), default=0.0) / \
            self.weight[tenant]

    def within_quota(self, run: JobRun) -> bool:
        self._ensure(run.spec.tenant)
        return self.usage[run.spec.tenant][0] + run.gpus <= self.quota[run.spec.tenant]
