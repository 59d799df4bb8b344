"""Elastic inference: replicas follow demand, borrowing GPUs from low-priority training.

Every ``demand_step_s`` each service's demand (replicas, from its diurnal curve with bursts,
times any surge factor) sets a target.  Replicas are placed on free GPUs first; when none fit,
the lowest-priority training gang below the service's priority checkpoints and lends its GPUs
(:meth:`JobLifecycle.lend`); the replicas placed on them are *borrowed*.  When demand falls,
borrowed replicas go first and the lent gang, still at the head of its queue, takes its GPUs
back.

SLO attainment is capacity-based: the share of demanded replica-time that had a replica to
serve it (requests beyond capacity queue and miss the latency target).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from scheduler.hardware.cluster import ClusterPlan
from scheduler.model.state import REPLICA_BASE, ClusterState, Placement
from scheduler.scheduling.lifecycle import JobLifecycle
from scheduler.scheduling.placement import Request
from scheduler.sim import Context, Kind
from scheduler.workload.jobs import InferenceService


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
    borrowed_gpus: int = 0  # GPUs of the borrowed replicas, kept as replicas come and go


class InferenceFleet:
    """The inference services (``DEMAND`` events), their replicas and their books.

    Parameters
    ----------
    ctx : Context
    plan, state
        The cluster; replicas are allocated on ``state``.
    jobs : JobLifecycle
        Lends GPUs of training gangs; its tenant book counts the replicas.
    place : callable
        ``place(request) -> Placement | None``: the scheduler's placement decision.
    services : tuple of InferenceService
    step_s : float
        Seconds between demand re-evaluations.
    """

    def __init__(self, ctx: Context, *, plan: ClusterPlan, state: ClusterState,
                 jobs: JobLifecycle, place, services: tuple[InferenceService, ...],
                 step_s: float):
        if isinstance(step_s, bool) or not step_s > 0:
            raise ValueError(f"demand_step_s must be a positive number, not {step_s!r}")
        self.ctx = ctx
        self.state = state
        self.jobs = jobs
        self.tenants = jobs.tenants
        self.place = place
        self.step_s = float(step_s)
        self.services = []
        for s in services:
            models = tuple(i for i, m in enumerate(plan.models) if s.requirement.accepts(m))
            self.services.append(ServiceRun(s, models))
        self.serving_by_model = np.zeros(state.n_models, dtype=np.int64)
        self._owner = REPLICA_BASE
        self._last_t = ctx.now
        self._lent_to: dict[int, int] = {}
        self.lent_jobs = 0
        ctx.on(Kind.DEMAND, self.on_demand)
        ctx.on_advance(self.integrate)
        jobs.watch_lending(self)

    def start(self) -> None:
        for i in range(len(self.services)):
            self.ctx.schedule(self.ctx.now, Kind.DEMAND, i)

    # ----------------------------------------------------------------- books
    def integrate(self, _t_from: float, t: float) -> None:
        """Serve demand up to ``t`` with the replicas there are (an advance hook)."""
        dt = t - self._last_t
        if dt <= 0:
            return
        for s in self.services:
            cap = len(s.replicas)
            s.served += min(cap, s.load) * dt
            s.demanded += s.load * dt
            s.borrowed_gpu_s += s.borrowed_gpus * dt
        self._last_t = t

    # ----------------------------------------------------------------- demand
    def on_demand(self, i: int) -> None:
        s, now = self.services[i], self.ctx.now
        if now >= s.surge_until:
            s.surge, s.surge_until = 1.0, math.inf
        s.load = s.spec.demand.load_at(now) * s.surge
        target = self._target(s)
        if target > len(s.replicas):
            self._grow(s, target, borrowed=False)
        elif target < len(s.replicas):
            self._shrink(s, target)
        s.pending = min(s.pending, max(0, target - len(s.replicas)))
        self.ctx.schedule(now + self.step_s, Kind.DEMAND, i)

    @staticmethod
    def _target(s: ServiceRun) -> int:
        """Replicas the service's load asks for, within its min and max.

        ``min()`` comes before ``ceil()``: a load beyond ``max_replicas``, however large (even
        inf or nan), asks for the most replicas and ``ceil()`` never sees it.
        """
        return max(s.spec.min_replicas, math.ceil(min(s.spec.max_replicas, s.load - 1e-9)))

    def surge(self, factor: float, until: float, service: str | None = None) -> list[str]:
        """Multiply demand by ``factor`` until ``until`` (s) on one service or all; their names.

        Raises ``ValueError`` for a service name that does not exist (nothing changes).
        """
        targets = self.services
        if service is not None:
            targets = [s for s in self.services if s.spec.name == service]
            if not targets:
                raise ValueError(f"no inference service named {service!r}")
        for s in targets:
            s.surge, s.surge_until = factor, until
        self.ctx.log("surge", f"inference demand x{factor:g} for "
                              f"{(until - self.ctx.now) / 3600:.1f} h on {len(targets)} service(s)")
        return [s.spec.name for s in targets]

    def surge_end(self, names: list[str], until: float) -> list[str]:
        """End now the surge that was to last until ``until`` (s) on the services ``names``:
        their next demand step reverts it, as when it runs out.  Services whose surge is over
        or was replaced since are left alone; returns the names ended."""
        now, ended = self.ctx.now, []
        for s in self.services:
            if s.spec.name in names and s.surge_until == until and now < until:
                s.surge_until = now
                ended.append(s.spec.name)
        return ended

    def _request(self, s: ServiceRun) -> Request:
        j = s.spec
        return Request(gpus=j.gpus_per_replica, models=s.models, affinity="nvlink",
                       cpu_per_gpu=j.cpu_per_gpu, ram_gb_per_gpu=j.ram_gb_per_gpu,
                       nic_gbps_per_gpu=j.nic_gbps_per_gpu)

    def _grow(self, s: ServiceRun, target: int, *, borrowed: bool) -> None:
        while len(s.replicas) + (0 if borrowed else s.pending) < target:
            placement = self.place(self._request(s)) if s.models else None
            if placement is None:
                if borrowed or not self._borrow(s, target):
                    return
                continue
            self._add(s, placement, borrowed)

    def _add(self, s: ServiceRun, placement: Placement, borrowed: bool) -> None:
        j = s.spec
        self._owner += 1
        gids = self.state.allocate(self._owner, placement, cpu_per_gpu=j.cpu_per_gpu,
                                ram_gb_per_gpu=j.ram_gb_per_gpu,
                                nic_gbps_per_gpu=j.nic_gbps_per_gpu)
        s.replicas.append(Replica(self._owner, placement, gids, borrowed))
        if borrowed:
            s.borrowed_gpus += placement.gpus
        self.serving_by_model[placement.model] += placement.gpus
        self.tenants.add_raw(j.tenant, placement.gpus, j.cpu_per_gpu, j.ram_gb_per_gpu,
                             j.nic_gbps_per_gpu, +1)

    def _shrink(self, s: ServiceRun, target: int) -> None:
        j = s.spec
        # borrowed replicas go back first, newest first
        newest = range(len(s.replicas) - 1, -1, -1)
        order = ([k for k in newest if s.replicas[k].borrowed]
                 + [k for k in newest if not s.replicas[k].borrowed])
        drop = set(order[:len(s.replicas) - target])
        for k in drop:
            r = s.replicas[k]
            self.state.release(r.owner, r.gids, r.placement, cpu_per_gpu=j.cpu_per_gpu,
                            ram_gb_per_gpu=j.ram_gb_per_gpu, nic_gbps_per_gpu=j.nic_gbps_per_gpu)
            self.serving_by_model[r.placement.model] -= r.placement.gpus
            self.tenants.add_raw(j.tenant, r.placement.gpus, j.cpu_per_gpu, j.ram_gb_per_gpu,
                                 j.nic_gbps_per_gpu, -1)
            if r.borrowed:
                s.borrowed_gpus -= r.placement.gpus
        s.replicas = [r for k, r in enumerate(s.replicas) if k not in drop]

    def on_nodes_lost(self, nodes) -> int:
        """Nodes went down (a failure, an operator): replicas with a GPU there die with them
        and are placed again elsewhere if there is room; returns how many were lost."""
        down = set(int(n) for n in nodes)
        lost = 0
        for s in self.services:
            dead = [k for k, r in enumerate(s.replicas)
                    if down.intersection(r.placement.nodes.tolist())]
            if not dead:
                continue
            j = s.spec
            for k in dead:
                r = s.replicas[k]
                self.state.release(r.owner, r.gids, r.placement, cpu_per_gpu=j.cpu_per_gpu,
                                   ram_gb_per_gpu=j.ram_gb_per_gpu,
                                   nic_gbps_per_gpu=j.nic_gbps_per_gpu)
                self.serving_by_model[r.placement.model] -= r.placement.gpus
                self.tenants.add_raw(j.tenant, r.placement.gpus, j.cpu_per_gpu,
                                     j.ram_gb_per_gpu, j.nic_gbps_per_gpu, -1)
                if r.borrowed:
                    s.borrowed_gpus -= r.placement.gpus
            s.replicas = [r for k, r in enumerate(s.replicas) if k not in set(dead)]
            lost += len(dead)
            self._grow(s, self._target(s), borrowed=False)
        return lost

    def _borrow(self, s: ServiceRun, target: int) -> bool:
        """Ask the lowest-priority training gang that could host replicas to lend its GPUs."""
        gpr = s.spec.gpus_per_replica
        cands = [r for r in self.jobs.running.values()
                 if r.state == "running" and r.model in s.models
                 and r.spec.priority < s.spec.priority and r.gpus >= gpr]
        if not cands:
            return False
        victim = min(cands, key=lambda r: (r.spec.priority, r.gpus, -r.seg_start, r.idx))
        self.jobs.lend(victim)
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
        self._grow(s, min(self._target(s), len(s.replicas) + expected), borrowed=True)

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
            "training_gpu_hours_lost_to_lending": round(self.jobs.lend_loss_gpu_s / 3600.0, 3),
            "serving_gpus_now": int(sum(p["gpus"] for p in per)),
            "per_service": per,
        }
