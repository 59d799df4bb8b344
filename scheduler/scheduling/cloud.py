"""Cloud burst pools: burstable jobs that waited too long run in a public-cloud region.

A job runs there at the speed of the pool's accelerator after the pool's provisioning delay;
its GPU-hours (delay included: the instances are billed while they boot) and their cost are
booked apart from the on-premises ledger.  Prices are the preset's assumptions.
"""

from __future__ import annotations

import copy

from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import CloudPoolSpec
from scheduler.model.job_run import CLOUD, DONE, QUEUED, JobRun
from scheduler.scheduling.lifecycle import JobLifecycle
from scheduler.sim import Context, Kind
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


class CloudBurst:
    """Sends burstable jobs that waited too long to a cloud pool (``BURST_CHECK`` and
    ``CLOUD_DONE`` events) and brings them back when a region is lost."""

    def __init__(self, ctx: Context, *, pools: CloudPools, jobs: JobLifecycle):
        self.ctx = ctx
        self.pools = pools
        self.jobs = jobs
        ctx.on(Kind.BURST_CHECK, self.burst_check)
        ctx.on(Kind.CLOUD_DONE, self.cloud_done)
        jobs.watch_arrivals(self)

    def on_arrive(self, run: JobRun) -> None:
        if run.spec.burstable and self.pools.accepts(run.spec):
            self.ctx.schedule(self.ctx.now + run.spec.burst_after_s, Kind.BURST_CHECK, run)

    def burst_check(self, run: JobRun) -> None:
        """A burstable job's patience ran out: send it to the first cloud pool with room."""
        if run.state != QUEUED or run.first_start is not None:
            return
        now, pools = self.ctx.now, self.pools
        pool = pools.admit(run.spec, now)
        if pool is None:
            return
        self.jobs.leave_queue(run)
        run.state = CLOUD
        run.cloud_pool = pool
        run.wait_s += now - run.queued_since
        run.first_start = now
        run.expected_end = now + pools.duration_s(pool, run.spec, run.remaining_flops)
        run.event = self.ctx.schedule(run.expected_end, Kind.CLOUD_DONE, run)
        self.ctx.log("burst", f"{run.spec.name} ({run.gpus} GPUs) bursts to {pools.name(pool)}",
                     job=run.spec.name)

    def carry_pools(self, pools: CloudPools) -> None:
        """Take over another engine's pools (their use and books) if they are the same pools."""
        if pools.pools == self.pools.pools:
            self.pools = copy.deepcopy(pools)

    def carry(self, run: JobRun) -> None:
        """A run bursting in a cloud pool, carried over from another engine (a re-plan): its
        end stays when it was."""
        run.event = self.ctx.schedule(max(run.expected_end, self.ctx.now), Kind.CLOUD_DONE, run)

    def cloud_done(self, run: JobRun) -> None:
        run.event = None
        self.pools.release(run.cloud_pool, run.spec, run.first_start, self.ctx.now)
        run.remaining_flops = 0.0
        run.state = DONE
        run.end_s = self.ctx.now

    def region_back(self, pool: int) -> bool:
        """A lost cloud region serves again (its evicted jobs stay queued on premises); whether
        it was down."""
        was_down = not self.pools.up[pool]
        self.pools.up[pool] = True
        return was_down

    def region_loss(self, pool: int) -> list[int]:
        """A cloud region goes away: its jobs come back to the on-premises queue."""
        self.pools.up[pool] = False
        hit = []
        for run in self.jobs.runs:
            if run.state == CLOUD and run.cloud_pool == pool:
                run.cancel_event()
                self.pools.release(pool, run.spec, run.first_start, self.ctx.now)
                run.cloud_pool = -1
                run.first_start = None
                self.jobs.requeue(run)
                hit.append(run.idx)
        return hit
