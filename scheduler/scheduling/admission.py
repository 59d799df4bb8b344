"""Admission: which accelerator models a job accepts, and the tightest span it can get.

A job is admitted once, when it is submitted: the models it may run on (by requirement and by
whether one node of the model has the cores, RAM and NIC for the job's share), fastest first,
and its affinity relaxed to the tightest level where some domain of an accepted model is large
enough.  A job no model can hold is rejected.
"""

from __future__ import annotations

import numpy as np

from scheduler.hardware.cluster import ClusterPlan
from scheduler.model.job_run import REJECTED, JobRun
from scheduler.model.state import ClusterState
from scheduler.workload.jobs import AFFINITIES, TrainingJob


class Admission:
    """Admits jobs to one cluster (capacities per level and model are computed once)."""

    def __init__(self, plan: ClusterPlan, state: ClusterState):
        self.plan = plan
        self.state = state
        self._cap_cache: dict[tuple[str, int], int] = {}

    def admit(self, idx: int, job: TrainingJob) -> JobRun:
        """A new run for ``job`` (state ``pending``, or ``rejected`` if nothing can hold it)."""
        models = tuple(sorted((i for i, m in enumerate(self.plan.models)
                               if job.requirement.accepts(m) and self.host_holds(job, i)),
                              key=lambda i: (-self.plan.models[i].bf16_tflops, i)))
        affinity = None
        for level in AFFINITIES[AFFINITIES.index(job.affinity):]:
            if any(self.capacity(level, m) >= job.gpus for m in models):
                affinity = level
                break
        run = JobRun(idx, job, models, affinity or "any")
        if affinity is None:
            run.state = REJECTED
        return run

    def host_holds(self, job: TrainingJob, model: int) -> bool:
        """Whether a node of ``model`` has the cores, RAM and NIC for its share of the gang."""
        shape = self.plan.node_shape[model]
        k = min(job.gpus, self.plan.models[model].per_node)
        return (k * job.cpu_per_gpu <= shape.cpu_cores + 1e-9
                and k * job.ram_gb_per_gpu <= shape.ram_gb + 1e-9
                and job.nic_gbps_per_gpu <= shape.nic_gbps + 1e-9)

    def capacity(self, level: str, model: int) -> int:
        """GPUs of ``model`` in its largest ``level`` domain (``any``: all), spares left out."""
        key = (level, model)
        if key not in self._cap_cache:
            s = self.state
            mask = s.model_mask[model] & ~s.node_spare
            if level == "any":
                cap = int(s.node_gpus[mask].sum())
            else:
                per = np.bincount(s.domain[level][mask], weights=s.node_gpus[mask])
                cap = int(per.max()) if per.size else 0
            self._cap_cache[key] = cap
        return self._cap_cache[key]
