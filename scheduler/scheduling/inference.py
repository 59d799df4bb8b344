"""Elastic inference: replicas follow demand, borrowing GPUs from low-priority training.

Every ``demand_step_s`` each service's demand (replicas, from its diurnal curve with bursts,
times any surge factor) sets a target.  Replicas are placed on free GPUs first; when none fit,
the lowest-priority training gang below the service's priority checkpoints and lends its GPUs
(``Engine.lend``); the replicas placed on them are *borrowed*.  When demand falls, borrowed
replicas go first and the lent gang, still at the head of its queue, takes its GPUs back.

SLO attainment is capacity-based: the share of demanded replica-time that had a replica to
serve it (requests beyond capacity queue and miss the latency target).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from scheduler.model.state import Placement
from scheduler.scheduling.placement import Request
from scheduler.workload.jobs import InferenceService

REPLICA_BASE = 1 << 40
"""Owner ids of replicas start here, above any training job's index."""


@dataclass
class Replica:
    owner: int
    placement: Placement
    gids: np.ndarray
    borrowed: bool


@dataclass
class ServiceRun:
    spec: InferenceService
    models: tuple[int, ...]
    replicas: list[Replica] = field(default_factory=list)
    pending: int = 0
    load: float = 0.0
    served: float = 0.0
    demanded: float = 0.0
    borrowed_gpu_s: float = 0.0
    surge: float = 1.0
    surge_until: float = math.inf

    def borrowed_gpus(self) -> int:
        return sum(r.placement.gpus for r in self.replicas if r.borrowed)


class InferenceFleet:
    def __init__(self, engine, services: tuple[InferenceService, ...], step_s: float):
        self.e = engine
        self.step_s = float(step_s)
        self.services = []
        for s in services:
            models = tuple(i for i, m in enumerate(engine.plan.models)
                           if s.requirement.accepts(m))
            self.services.append(ServiceRun(s, models))
        self._owner = REPLICA_BASE
        self._last_t = 0.0
        self._lent_to: dict[int, int] = {}
        self.lent_jobs = 0

    def start(self) -> None:
        from scheduler.engine import DEMAND
        for i in range(len(self.services)):
            self.e._push(0.0, DEMAND, i)

    # ----------------------------------------------------------------- books
    def integrate(self, t: float) -> None:
        dt = t - self._last_t
        if dt <= 0:
            return
        for s in self.services:
            cap = len(s.replicas)
            s.served += min(cap, s.load) * dt
            s.demanded += s.load * dt
            s.borrowed_gpu_s += s.borrowed_gpus() * dt
        self._last_t = t

    # ----------------------------------------------------------------- demand
    def on_demand(self, i: int) -> None:
        from scheduler.engine import DEMAND
        e, s = self.e, self.services[i]
        if e.now >= s.surge_until:
            s.surge, s.surge_until = 1.0, math.inf
        s.load = s.spec.demand.load_at(e.now) * s.surge
        target = min(s.spec.max_replicas, max(s.spec.min_replicas, math.ceil(s.load - 1e-9)))
        if target > len(s.replicas):
            self._grow(s, target, borrowed=False)
        elif target < len(s.replicas):
            self._shrink(s, target)
        s.pending = min(s.pending, max(0, target - len(s.replicas)))
        e._push(e.now + self.step_s, DEMAND, i)

    def _request(self, s: ServiceRun) -> Request:
        j = s.spec
        return Request(gpus=j.gpus_per_replica, models=s.models, affinity="nvlink",
                       cpu_per_gpu=j.cpu_per_gpu, ram_gb_per_gpu=j.ram_gb_per_gpu,
                       nic_gbps_per_gpu=j.nic_gbps_per_gpu)

    def _grow(self, s: ServiceRun, target: int, *, borrowed: bool) -> None:
        e = self.e
        while len(s.replicas) + (0 if borrowed else s.pending) < target:
            placement = e.place(self._request(s)) if s.models else None
            if placement is None:
                if borrowed or not self._borrow(s, target):
                    return
                continue
            self._add(s, placement, borrowed)

    def _add(self, s: ServiceRun, placement: Placement, borrowed: bool) -> None:
        e, j = self.e, s.spec
        self._owner += 1
        gids = e.state.allocate(self._owner, placement, cpu_per_gpu=j.cpu_per_gpu,
                                ram_gb_per_gpu=j.ram_gb_per_gpu,
                                nic_gbps_per_gpu=j.nic_gbps_per_gpu)
        s.replicas.append(Replica(self._owner, placement, gids, borrowed))
        e.infer_by_model[placement.model] += placement.gpus
        e.tenants.add_raw(j.tenant, placement.gpus, j.cpu_per_gpu, j.ram_gb_per_gpu,
                          j.nic_gbps_per_gpu, +1)
        e.changed()

    def _shrink(self, s: ServiceRun, target: int) -> None:
        e, j = self.e, s.spec
        # borrowed replicas go back first, newest first
        order = sorted(range(len(s.replicas)), key=lambda k: (not s.replicas[k].borrowed, -k))
        drop = set(order[:len(s.replicas) - target])
        for k in drop:
            r = s.replicas[k]
            e.state.release(r.owner, r.gids, r.placement, cpu_per_gpu=j.cpu_per_gpu,
                            ram_gb_per_gpu=j.ram_gb_per_gpu, nic_gbps_per_gpu=j.nic_gbps_per_gpu)
            e.infer_by_model[r.placement.model] -= r.placement.gpus
            e.tenants.add_raw(j.tenant, r.placement.gpus, j.cpu_per_gpu, j.ram_gb_per_gpu,
                              j.nic_gbps_per_gpu, -1)
        s.replicas = [r for k, r in enumerate(s.replicas) if k not in drop]
        e.changed()

    def _borrow(self, s: ServiceRun, target: int) -> bool:
        """Ask the lowest-priority training gang that could host replicas to lend its GPUs."""
        e = self.e
        gpr = s.spec.gpus_per_replica
        cands = [r for r in e.running.values()
                 if r.state == "running" and r.model in s.models
                 and r.spec.priority < s.spec.priority and r.gpus >= gpr]
        if not cands:
            return False
        victim = min(cands, key=lambda r: (r.spec.priority, r.gpus, -r.seg_start, r.idx))
        e.lend(victim)
        self._lent_to[victim.idx] = self.services.index(s)
        s.pending += min(victim.gpus // gpr, target - len(s.replicas) - s.pending)
        self.lent_jobs += 1
        return True

    def forget_lend(self, run) -> None:
        """A lending gang failed before handing over: its replicas will not come."""
        i = self._lent_to.pop(run.idx, None)
        if i is not None:
            s = self.services[i]
            s.pending = max(0, s.pending - run.gpus // s.spec.gpus_per_replica)

    def on_lend_ready(self, run) -> None:
        """A lent gang's GPUs are free: place the waiting replicas on them first."""
        i = self._lent_to.pop(run.idx, None)
        if i is None:
            return
        s = self.services[i]
        expected = run.gpus // s.spec.gpus_per_replica
        s.pending = max(0, s.pending - expected)
        target = min(s.spec.max_replicas,
                     max(s.spec.min_replicas, math.ceil(s.load - 1e-9)))
        self._grow(s, min(target, len(s.replicas) + expected), borrowed=True)

    # ----------------------------------------------------------------- figures
    def report(self) -> dict:
        demanded = sum(s.demanded for s in self.services)
        served = sum(s.served for s in self.services)
        per = [{"service": s.spec.name, "replicas": len(s.replicas),
                "gpus": sum(r.placement.gpus for r in s.replicas),
                "slo_attainment": round(s.served / s.demanded, 6) if s.demanded else None,
                "borrowed_gpu_hours": round(s.borrowed_gpu_s / 3600.0, 3)}
               for s in self.services]
        return {
            "services": len(self.services),
            "slo_attainment": round(served / demanded, 6) if demanded else None,
            "borrowed_gpu_hours": round(sum(s.borrowed_gpu_s for s in self.services) / 3600, 3),
            "lent_training_jobs": self.lent_jobs,
            "training_gpu_hours_lost_to_lending": round(self.e.lend_loss_gpu_s / 3600.0, 3),
            "serving_gpus_now": int(sum(p["gpus"] for p in per)),
            "per_service": per,
        }
