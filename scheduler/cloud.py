"""Cloud burst pools: burstable jobs that waited too long run in a public-cloud region.

A job runs there at the speed of the pool's accelerator after the pool's provisioning delay;
its GPU-hours (delay included: the instances are billed while they boot) and their cost are
booked apart from the on-premises ledger.  Prices are the preset's assumptions.
"""

from __future__ import annotations

from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import CloudPoolSpec
from scheduler.workload.jobs import TrainingJob


class CloudPools:
    def __init__(self, pools: tuple[CloudPoolSpec, ...]):
        self.pools = pools
        self.models = [get(p.model) for p in pools]
        self.used = [0] * len(pools)
        self.gpu_s = [0.0] * len(pools)
        self.jobs = [0] * len(pools)
        self.up = [True] * len(pools)

    def name(self, i: int) -> str:
        return f"{self.pools[i].provider}/{self.pools[i].region}"

    def accepts(self, job: TrainingJob) -> bool:
        return any(job.requirement.accepts(m) for m in self.models)

    def admit(self, job: TrainingJob, now: float) -> int | None:
        """The first pool that accepts ``job`` and has room; its GPUs are taken."""
        for i, (pool, model) in enumerate(zip(self.pools, self.models, strict=True)):
            if (self.up[i] and job.requirement.accepts(model)
                    and self.used[i] + job.gpus <= pool.max_gpus):
                self.used[i] += job.gpus
                self.jobs[i] += 1
                return i
        return None

    def duration_s(self, i: int, job: TrainingJob, remaining_flops: float) -> float:
        rate = job.gpus * self.models[i].bf16_tflops * 1e12 * job.efficiency
        return self.pools[i].provisioning_delay_s + remaining_flops / rate

    def release(self, i: int, job: TrainingJob, started: float, now: float) -> None:
        self.used[i] -= job.gpus
        self.gpu_s[i] += job.gpus * (now - started)

    def report(self, in_flight: list[tuple[int, int, float]], now: float) -> dict:
        """GPU-hours and cost per pool; ``in_flight`` is ``(pool, gpus, started)`` still running."""
        gpu_s = list(self.gpu_s)
        for i, gpus, started in in_flight:
            gpu_s[i] += gpus * (now - started)
        pools = []
        for i, pool in enumerate(self.pools):
            hours = gpu_s[i] / 3600.0
            pools.append({"pool": self.name(i), "model": pool.model, "jobs": self.jobs[i],
                          "gpu_hours": round(hours, 3),
                          "cost": round(hours * pool.price_per_gpu_hour, 2)})
        return {"gpu_hours": round(sum(p["gpu_hours"] for p in pools), 3),
                "cost": round(sum(p["cost"] for p in pools), 2),
                "jobs": sum(self.jobs), "pools": pools}
