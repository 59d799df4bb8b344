"""Builders for small literal clusters and hand-written workloads (no presets, no Django).

Work is given in hours on an H100 at the default kernel efficiency, so a job of ``hours=2``
computes for exactly two hours on H100 nodes and ``2 * 989 / tflops`` hours elsewhere.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scheduler.engine import Engine
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import (
    CloudPoolSpec,
    ClusterPlan,
    NodeGroup,
    NodeShape,
    StorageSpec,
    plan_cluster,
)
from scheduler.scheduling.placement import Request
from scheduler.workload.jobs import (
    DEFAULT_EFFICIENCY,
    DemandCurve,
    InferenceService,
    Tenant,
    TrainingJob,
    Workload,
)

H100_FLOPS = get("H100-SXM").bf16_tflops * 1e12
"""Peak BF16 FLOP/s of one H100, the reference for ``hours``."""

HOUR = 3600.0


def small_plan(nodes: int = 4, model: str = "H100-SXM", *, fabric: str = "fat-tree",
               fabric_kw: dict | None = None, groups: tuple[NodeGroup, ...] | None = None,
               shape: NodeShape | None = None, spares: int = 0,
               storage: tuple[StorageSpec, ...] = (),
               cloud_pools: tuple[CloudPoolSpec, ...] = ()) -> ClusterPlan:
    """A literal cluster: ``nodes`` nodes of ``model`` (or explicit ``groups``).

    The default radix-8 fat-tree has 128 ports, pods of two 8-GPU nodes and one leaf per node.
    """
    if groups is None:
        groups = (NodeGroup(model, nodes, spares=spares, shape=shape or NodeShape()),)
    if fabric_kw is None:
        fabric_kw = {"radix": 8} if fabric == "fat-tree" else {}
    return plan_cluster("test", groups, fabric_kind=fabric, fabric_kw=fabric_kw,
                        storage=storage, cloud_pools=cloud_pools)


def central_storage(write_gb_s: float, read_gb_s: float | None = None) -> tuple[StorageSpec]:
    """One central tier (checkpoints go there), GB/s."""
    return (StorageSpec("pfs", "central", 1000.0, read_gb_s or write_gb_s, write_gb_s),)


def work_flops(hours: float, gpus: int, efficiency: float = DEFAULT_EFFICIENCY) -> float:
    """Model FLOPs that ``gpus`` H100s compute in ``hours`` at ``efficiency``."""
    return hours * HOUR * gpus * H100_FLOPS * efficiency


def job(job_id: int = 0, *, gpus: int = 8, hours: float = 1.0, submit_h: float = 0.0,
        tenant: str = "research", **kw) -> TrainingJob:
    """A training gang of ``gpus`` GPUs computing ``hours`` on H100, submitted at ``submit_h``."""
    kw.setdefault("name", f"j{job_id}")
    return TrainingJob(job_id=job_id, tenant=tenant, submit_s=submit_h * HOUR, gpus=gpus,
                       work_flops=work_flops(hours, gpus, kw.get("efficiency",
                                                                 DEFAULT_EFFICIENCY)), **kw)


def service(service_id: int = 0, *, gpus_per_replica: int = 8, peak_replicas: float = 2.0,
            trough_fraction: float = 0.25, peak_hour: float = 12.0, **kw) -> InferenceService:
    """An inference service whose demand peaks at ``peak_hour`` (replicas)."""
    kw.setdefault("name", f"svc{service_id}")
    kw.setdefault("tenant", "serving")
    return InferenceService(
        service_id=service_id, gpus_per_replica=gpus_per_replica,
        demand=DemandCurve(peak_replicas=peak_replicas, trough_fraction=trough_fraction,
                           peak_hour=peak_hour), **kw)


def workload(*jobs: TrainingJob, services: tuple[InferenceService, ...] = (),
             tenants: tuple[Tenant, ...] = ()) -> Workload:
    """A workload of ``jobs``; ids (and default names) follow their position (the run index)."""
    jobs = tuple(replace(j, job_id=i, name=f"j{i}" if j.name == f"j{j.job_id}" else j.name)
                 for i, j in enumerate(jobs))
    return Workload(jobs=jobs, services=services, tenants=tenants, source="test")


def run_engine(plan: ClusterPlan, wl: Workload, *, until_h: float | None = None,
           **kw) -> Engine:
    """An engine on ``plan`` (seed 0 unless given), run to ``until_h`` hours if given."""
    kw.setdefault("seed", 0)
    e = Engine(plan, wl, **kw)
    if until_h is not None:
        e.run_until(until_h * HOUR)
    return e


def request(gpus: int, models: tuple[int, ...] = (0,), **kw) -> Request:
    return Request(gpus=gpus, models=models, **kw)


def occupy(state, nodes, gpus_each: int | None = None, *, owner: int = 10_000) -> None:
    """Take ``gpus_each`` GPUs (default: all) on each of ``nodes`` in a bare ClusterState."""
    from scheduler.model.state import Placement
    nodes = np.atleast_1d(np.asarray(nodes, dtype=np.int64))
    counts = (state.node_gpus[nodes] if gpus_each is None
              else np.full(nodes.size, gpus_each, dtype=np.int64))
    for k, (n, c) in enumerate(zip(nodes, counts, strict=True)):
        state.allocate(owner + k, Placement(np.array([n]), np.array([c]), int(state.node_model[n])),
                       cpu_per_gpu=0.0, ram_gb_per_gpu=0.0, nic_gbps_per_gpu=0.0)


def pods_spanned(state, placement) -> int:
    return int(np.unique(state.domain["pod"][placement.nodes]).size)
