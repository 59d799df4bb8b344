"""Cloud burst pools: burstable jobs that waited too long run in a public-cloud region.

A job runs there at the speed of the pool's accelerator after the pool's provisioning delay;
its GPU-hours (delay included: the instances are billed while they boot) and their cost are
booked apart from the on-premises ledger.  Prices are the preset's assumptions.
"""

from __future__ import annotations

from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import CloudPoolSpec
from scheduler.model.job_run import CLOUD, DONE, QUEUED
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


# ----------------------------------------------------------------- engine events
def burst_check(engine, run) -> None:
    """A burstable job's patience ran out: send it to the first cloud pool with room."""
    from scheduler.engine import CLOUD_DONE
    if run.state != QUEUED or run.first_start is not None:
        return
    pools = engine.cloud
    pool = pools.admit(run.spec, engine.now)
    if pool is None:
        return
    engine.queue.pop(run.idx, None)
    run.state = CLOUD
    run.cloud_pool = pool
    run.wait_s += engine.now - run.queued_since
    run.first_start = engine.now
    run.expected_end = engine.now + pools.duration_s(pool, run.spec, run.remaining_flops)
    engine._push(run.expected_end, CLOUD_DONE, run.idx)
    engine.log("burst", f"{run.spec.name} ({run.gpus} GPUs) bursts to {pools.name(pool)}",
               job=run.spec.name)
    engine.changed()


def cloud_done(engine, run) -> None:
    if run.state != CLOUD:
        return
    engine.cloud.release(run.cloud_pool, run.spec, run.first_start, engine.now)
    run.remaining_flops = 0.0
    run.state = DONE
    run.end_s = engine.now


def region_loss(engine, pool: int) -> list[int]:
    """A cloud region goes away: its jobs come back to the on-premises queue."""
    engine.cloud.up[pool] = False
    hit = []
    for run in engine.runs:
        if run.state == CLOUD and run.cloud_pool == pool:
            engine.cloud.release(pool, run.spec, run.first_start, engine.now)
            run.cloud_pool = -1
            run.first_start = None
            engine.requeue(run)
            hit.append(run.idx)
    return hit
