"""The event engine: one seeded object owns the clock, the event heap, the RNG and the state.

Events are ordered by ``(time, kind priority, sequence)``; every random draw comes from child
generators of one ``SeedSequence``, so the same plan, workload and seed give the same books.
After the events of one instant are handled, one scheduling pass runs if anything changed.
The engine never sleeps or reads a clock for simulated time: ``twin/`` paces it live.
"""

from __future__ import annotations

import heapq
import time
from collections import deque

import numpy as np

from scheduler.hardware.cluster import ClusterPlan
from scheduler.model.job_run import (
    CLOUD,
    DETECTING,
    DONE,
    DRAINING,
    PENDING,
    QUEUED,
    REJECTED,
    RUNNING,
    JobRun,
    segment_length,
)
from scheduler.model.ledger import Ledger
from scheduler.model.state import ClusterState
from scheduler.physics.job_speed import Physics
from scheduler.reliability import checkpoint, recovery
from scheduler.reliability.failure_engine import FailureEngine
from scheduler.reliability.failures import job_failure_rate
from scheduler.scheduling.cloud import CloudPools, burst_check, cloud_done
from scheduler.scheduling.inference import InferenceFleet
from scheduler.scheduling.passes import SchedulingPass, TenantBook
from scheduler.scheduling.placement import Placer, Request
from scheduler.scheduling.policies import get_policy
from scheduler.workload.jobs import AFFINITIES, TrainingJob, Workload

# event kinds, in the order they are handled within one instant: capacity is freed first
FINISH, DRAIN_DONE, CLOUD_DONE, DEMAND, ARRIVE, BURST_CHECK, REPAIR, DETECT, FAIL, TICK = range(10)


class Engine:
    """A cluster run forward in simulated time.

    Parameters
    ----------
    plan : ClusterPlan
        The inventory.
    workload : Workload
        Jobs, inference services and tenants.
    seed : int
        Seeds every random stream.
    policy : str
        A registered policy name (see :mod:`scheduler.scheduling.policies`).
    placement : str, optional
        Override the policy's placement strategy (``topology``, ``first-fit``, ``random``).
    demand_step_s : float
        How often inference demand is re-evaluated, s.
    failures : bool
        Run the failure processes (off: the failure-free baseline).
    weibull_shape : float, optional
        Weibull gaps of the same mean instead of exponential ones.
    checkpoint_interval : None, "auto" or float
        Compute seconds between checkpoints: each job's own (None), Young/Daly from the job's
        failure rate and checkpoint cost ("auto"), or one figure for all.
    recovery : {"disk", "memory"}
        Checkpoint to the central tier, or to peers' memory (Gemini) with disk as fallback.
    spares : float, optional
        Fraction of each model's nodes held as hot spares (default: the plan's own).
    physics : bool
        Let the fabric, storage and power models set each gang's speed
        (:mod:`scheduler.physics.job_speed`); off, gangs compute at their kernel efficiency.
    physics_tick_s : float
        How often the physics is re-evaluated, s.
    """

    def __init__(self, plan: ClusterPlan, workload: Workload, *, seed: int = 0,
                 policy: str = "default", placement: str | None = None,
                 demand_step_s: float = 900.0, failures: bool = False,
                 weibull_shape: float | None = None, checkpoint_interval=None,
                 recovery: str = "disk", spares: float | None = None,
                 physics: bool = False, physics_tick_s: float = 1800.0):
        self.plan = plan
        self.workload = workload
        self.seed = int(seed)
        streams = np.random.SeedSequence(self.seed).spawn(3)
        self.rng_placement = np.random.default_rng(streams[0])
        self.rng_inference = np.random.default_rng(streams[1])
        self.rng_failures = np.random.default_rng(streams[2])
        self.state = ClusterState(plan)
        if spares is not None:
            self._set_spares(spares)
        if recovery not in checkpoint.RECOVERY_MODES:
            raise ValueError(f"recovery must be one of {checkpoint.RECOVERY_MODES}, "
                             f"not {recovery!r}")
        if checkpoint_interval not in (None, "auto") and not (
                isinstance(checkpoint_interval, (int, float)) and checkpoint_interval > 0):
            raise ValueError("checkpoint_interval must be None, 'auto' or positive seconds")
        self.recovery = recovery
        self.checkpoint_interval = checkpoint_interval
        self.storage_factor = 1.0
        self.policy = get_policy(policy, placement=placement)
        self.placer = Placer(self.state, self.policy.placement, self.rng_placement)
        self.peak = np.array([m.bf16_tflops * 1e12 for m in plan.models])
        self.ledger = Ledger(self.peak)
        self.now = 0.0
        self._heap: list = []
        self._seq = 0
        self.events = deque(maxlen=2000)
        self.counters = {"placement_decisions": 0, "placements": 0, "preemptions": 0,
                         "backfilled": 0, "passes": 0, "scheduler_wall_s": 0.0}
        self._cap_cache: dict = {}
        self.tenants = TenantBook(self.state, workload)
        central = [s for s in plan.storage if s.tier == "central"]
        self.central_write_gb_s = central[0].write_gb_s if central else 0.0
        self.central_read_gb_s = central[0].read_gb_s if central else 0.0

        self.runs = [self._admit(i, job) for i, job in enumerate(workload.jobs)]
        self.queue: dict[int, JobRun] = {}
        self.running: dict[int, JobRun] = {}
        self.frag_models = np.zeros(self.state.n_models, dtype=bool)
        self.infer_by_model = np.zeros(self.state.n_models, dtype=np.int64)
        self._counts: np.ndarray | None = None
        self._dirty = False
        self.lend_loss_gpu_s = 0.0
        self.cloud = CloudPools(plan.cloud_pools)
        self.fleet = InferenceFleet(self, workload.services, demand_step_s)
        self.reliability = FailureEngine(self, enabled=failures, weibull_shape=weibull_shape)
        self.physics = Physics(self, tick_s=physics_tick_s) if physics else None
        for run in self.runs:
            self._push(run.spec.submit_s, ARRIVE, run.idx)
        self.fleet.start()
        self.reliability.start()
        if self.physics is not None:
            self.physics.start()

    def _set_spares(self, fraction: float) -> None:
        if not 0 <= fraction < 1:
            raise ValueError(f"spares must be a fraction in [0, 1), not {fraction!r}")
        s = self.state
        spare = np.zeros(s.plan.n_nodes, dtype=bool)
        for m in range(s.n_models):
            nodes = np.flatnonzero(s.model_mask[m])
            k = int(round(fraction * nodes.size))
            if k:
                # spread evenly, so every pod has some
                spare[nodes[np.linspace(0, nodes.size - 1, k).round().astype(int)]] = True
        s.set_node_flags(slice(None), spare=False)
        s.set_node_flags(spare, spare=True)

    # ----------------------------------------------------------------- stepping API
    def peek(self) -> float | None:
        """Time of the next event, or ``None`` when none is left."""
        return self._heap[0][0] if self._heap else None

    def step(self) -> bool:
        """Handle every event of the next instant, then schedule; ``False`` if none is left."""
        if not self._heap:
            return False
        t = self._heap[0][0]
        self._advance(t)
        while self._heap and self._heap[0][0] == t:
            _, kind, _, a, b = heapq.heappop(self._heap)
            self._dispatch(kind, a, b)
        if self._dirty:
            self._schedule()
        return True

    def run_until(self, t_end: float, progress=None) -> None:
        """Step until simulated time ``t_end`` (s); ``progress(now)`` is called now and then."""
        last = time.perf_counter()
        while self._heap and self._heap[0][0] <= t_end:
            self.step()
            if progress is not None and time.perf_counter() - last > 0.2:
                progress(self.now)
                last = time.perf_counter()
        self._advance(t_end)
        if progress is not None:
            progress(self.now)

    def command(self, command: str, /, **params) -> dict:
        """Apply a what-if or operator command now; bad parameters raise ``ValueError``."""
        from scheduler.control.commands import apply_command
        result = apply_command(self, command, **params)
        if self._dirty:
            self._schedule()
        return result

    def snapshot(self) -> dict:
        """JSON-safe view of the state now (books of open segments included)."""
        from scheduler.report import snapshot
        return snapshot(self)

    # ----------------------------------------------------------------- events
    def _push(self, t: float, kind: int, a: int, b: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (float(t), kind, self._seq, a, b))

    def _dispatch(self, kind: int, a: int, b: int) -> None:
        if kind == FINISH:
            run = self.runs[a]
            if run.state == RUNNING and run.version == b:
                self._finish(run)
        elif kind == DRAIN_DONE:
            run = self.runs[a]
            if run.state == DRAINING and run.version == b:
                self._drain_done(run)
        elif kind == CLOUD_DONE:
            cloud_done(self, self.runs[a])
        elif kind == DEMAND:
            self.fleet.on_demand(a)
        elif kind == ARRIVE:
            self._arrive(self.runs[a])
        elif kind == BURST_CHECK:
            burst_check(self, self.runs[a])
        elif kind == FAIL:
            self.reliability.on_fail(a)
        elif kind == DETECT:
            run = self.runs[a]
            if run.state == DETECTING and run.version == b:
                recovery.on_detected(self, run)
        elif kind == REPAIR:
            self.reliability.on_repair(a)
        elif kind == TICK:
            self.physics.on_tick()

    def log(self, kind: str, text: str, **extra) -> None:
        self.events.append({"t": round(self.now, 3), "kind": kind, "text": text, **extra})

    # ----------------------------------------------------------------- time integration
    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt < 0:
            raise ValueError(f"time cannot go back from {self.now} to {t}")
        if dt > 0:
            counts = self.free_counts()
            free, spare, down = counts
            frag = np.where(self.frag_models, free, 0)
            self.ledger.book_counts("fragmented", frag, dt)
            self.ledger.book_counts("idle", free - frag, dt)
            self.ledger.book_counts("hot_spare", spare, dt)
            self.ledger.book_counts("down_for_repair", down, dt)
            self.ledger.book_counts("inference", self.infer_by_model, dt)
            self.fleet.integrate(t)
            self.now = t

    def free_counts(self) -> np.ndarray:
        """Free GPUs per model on schedulable, spare and unavailable nodes (3 x models)."""
        if self._counts is None:
            s = self.state
            up = s.node_up & ~s.node_drained
            w = s.node_free
            self._counts = np.stack([
                np.bincount(s.node_model, weights=w * s.schedulable(), minlength=s.n_models),
                np.bincount(s.node_model, weights=w * (up & s.node_spare), minlength=s.n_models),
                np.bincount(s.node_model, weights=w * ~up, minlength=s.n_models),
            ]).astype(np.int64)
        return self._counts

    def changed(self) -> None:
        """Capacity or the queue changed: recount and schedule at the end of this instant."""
        self._counts = None
        self._dirty = True

    # ----------------------------------------------------------------- admission
    def _admit(self, idx: int, job: TrainingJob) -> JobRun:
        models = tuple(sorted((i for i, m in enumerate(self.plan.models)
                               if job.requirement.accepts(m) and self._host_holds(job, i)),
                              key=lambda i: (-self.plan.models[i].bf16_tflops, i)))
        affinity = None
        for level in AFFINITIES[AFFINITIES.index(job.affinity):]:
            if any(self._capacity(level, m) >= job.gpus for m in models):
                affinity = level
                break
        run = JobRun(idx, job, models, affinity or "any")
        if affinity is None:
            run.state = REJECTED
        return run

    def _host_holds(self, job: TrainingJob, model: int) -> bool:
        """Whether a node of ``model`` has the cores, RAM and NIC for its share of the gang."""
        shape = self.plan.node_shape[model]
        k = min(job.gpus, self.plan.models[model].per_node)
        return (k * job.cpu_per_gpu <= shape.cpu_cores + 1e-9
                and k * job.ram_gb_per_gpu <= shape.ram_gb + 1e-9
                and job.nic_gbps_per_gpu <= shape.nic_gbps + 1e-9)

    def estimate_write_s(self, run: JobRun, model: int) -> float:
        """Checkpoint write time ``run`` would have on ``model`` (before it ever started), s."""
        j = run.spec
        nodes = -(-j.gpus // self.plan.models[model].per_node)
        if self.recovery == "memory":
            return checkpoint.memory_write_seconds(j.checkpoint_gb, j.gpus)
        bw = checkpoint.job_bandwidth_gb_s(gpus=j.gpus, nodes=nodes,
                                           tier_gb_s=self.central_write_gb_s,
                                           cluster_gpus=self.state.n_gpus)
        return checkpoint.write_seconds(j.checkpoint_gb, bw * self.storage_factor)

    def _capacity(self, level: str, model: int) -> int:
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

    def request(self, run: JobRun) -> Request:
        j = run.spec
        return Request(gpus=j.gpus, models=run.models, affinity=run.affinity,
                       cpu_per_gpu=j.cpu_per_gpu, ram_gb_per_gpu=j.ram_gb_per_gpu,
                       nic_gbps_per_gpu=j.nic_gbps_per_gpu)

    def _arrive(self, run: JobRun) -> None:
        if run.state == REJECTED:
            self.log("reject", f"{run.spec.name}: no accelerator of this cluster can hold "
                               f"{run.gpus} GPUs of {run.spec.requirement.describe()}")
            return
        run.state = QUEUED
        run.queued_since = self.now
        self.queue[run.idx] = run
        if run.spec.burstable and self.cloud.accepts(run.spec):
            self._push(self.now + run.spec.burst_after_s, BURST_CHECK, run.idx)
        self._dirty = True

    # ----------------------------------------------------------------- starting and stopping
    def place(self, req: Request):
        self.counters["placement_decisions"] += 1
        return self.placer.place(req)

    def start(self, run: JobRun, placement) -> None:
        j = run.spec
        run.gids = self.state.allocate(run.idx, placement, cpu_per_gpu=j.cpu_per_gpu,
                                       ram_gb_per_gpu=j.ram_gb_per_gpu,
                                       nic_gbps_per_gpu=j.nic_gbps_per_gpu)
        run.placement = placement
        run.model = placement.model
        run.rate = j.gpus * self.peak[run.model] * j.efficiency
        write_bw = checkpoint.job_bandwidth_gb_s(
            gpus=j.gpus, nodes=placement.nodes.size, tier_gb_s=self.central_write_gb_s,
            cluster_gpus=self.state.n_gpus)
        read_bw = checkpoint.job_bandwidth_gb_s(
            gpus=j.gpus, nodes=placement.nodes.size, tier_gb_s=self.central_read_gb_s,
            cluster_gpus=self.state.n_gpus)
        nodes = placement.nodes.size
        if self.recovery == "memory":
            run.write_s = checkpoint.memory_write_seconds(j.checkpoint_gb, j.gpus)
            restart = checkpoint.memory_restore_seconds(j.checkpoint_gb, nodes)
            if run.restore_from_disk:
                restart = checkpoint.restart_seconds(j.checkpoint_gb,
                                                     read_bw * self.storage_factor)
                run.restore_from_disk = False
        else:
            run.write_s = checkpoint.write_seconds(j.checkpoint_gb,
                                                   write_bw * self.storage_factor)
            restart = checkpoint.restart_seconds(j.checkpoint_gb, read_bw * self.storage_factor)
        if self.checkpoint_interval == "auto":
            mttf_s = 3600.0 / job_failure_rate(nodes, j.gpus)
            run.interval_s = checkpoint.daly_interval(run.write_s, mttf_s)
        elif self.checkpoint_interval is not None:
            run.interval_s = float(self.checkpoint_interval)
        run.slow_split = self.speed_split(run)
        run.slow = 1.0 - sum(f for _, f in run.slow_split)
        if run.first_start is None:
            run.first_start = self.now
            run.restart_s = 0.0
        else:
            run.restart_s = restart
            if run.lendings:
                self.lend_loss_gpu_s += run.restart_s * j.gpus
        run.wait_s += self.now - run.queued_since
        run.borrowed = not self.tenants.within_quota(run)
        run.seg_start = self.now
        run.version += 1
        run.state = RUNNING
        run.expected_end = self.now + segment_length(run.need_s(), run.restart_s,
                                                     run.interval_s, run.write_s)
        self._push(run.expected_end, FINISH, run.idx, run.version)
        self.queue.pop(run.idx, None)
        self.running[run.idx] = run
        self.tenants.add(run, +1)
        self.counters["placements"] += 1
        self._counts = None

    def book_segment(self, ledger: Ledger, run: JobRun, t: float, how: str,
                     lost_category: str = "preempted", disk_fallback: bool = False) -> float:
        """Book ``run``'s open segment up to ``t`` into ``ledger``; return compute kept (s).

        ``how``: ``finish``/``lend``/``end`` keep all compute, ``kill`` keeps what the last
        checkpoint covers and books the rest to ``lost_category``.
        """
        g, m = run.gpus, run.model
        if run.state == DRAINING:
            ledger.book("checkpoint_stall", m, g * (t - run.seg_start))
            return 0.0
        if run.state == DETECTING:
            ledger.book("recovery", m, g * (t - run.seg_start))
            return 0.0
        b = run.books_at(t)
        kept = b.saved_s if how == "kill" else b.computed_s
        if disk_fallback:
            # only what reached disk survives; persists run every DISK_PERSIST_S of compute
            kept = min(kept, checkpoint.disk_persisted_s(b.computed_s))
        kept = min(kept, run.need_s())
        lost = b.computed_s - kept
        ledger.book("productive", m, g * kept * run.slow,
                    achieved_flops=kept * run.rate * run.slow)
        for category, fraction in run.slow_split:
            ledger.book(category, m, g * kept * fraction)
        ledger.book(lost_category, m, g * lost)
        if lost_category == "lost_work":
            run.lost_gpu_s += g * lost
        ledger.book("recovery", m, g * b.recovery_s)
        if run.write_s > 0:
            ledger.checkpoint_gb += b.stall_s // run.write_s * run.spec.checkpoint_gb
        ledger.book("checkpoint_stall", m, g * b.stall_s)
        return kept

    def _close(self, run: JobRun, how: str, lost_category: str = "preempted",
               disk_fallback: bool = False) -> None:
        kept = self.book_segment(self.ledger, run, self.now, how, lost_category, disk_fallback)
        run.remaining_flops = max(0.0, run.remaining_flops - kept * run.rate * run.slow)
        run.kept_s += kept
        run.version += 1

    def release(self, run: JobRun) -> None:
        j = run.spec
        self.state.release(run.idx, run.gids, run.placement, cpu_per_gpu=j.cpu_per_gpu,
                           ram_gb_per_gpu=j.ram_gb_per_gpu, nic_gbps_per_gpu=j.nic_gbps_per_gpu)
        self.running.pop(run.idx, None)
        self.tenants.add(run, -1)
        run.gids = np.zeros(0, dtype=np.int64)
        self.changed()

    def requeue(self, run: JobRun) -> None:
        run.state = QUEUED
        run.queued_since = self.now
        self.queue[run.idx] = run
        self._dirty = True

    def _finish(self, run: JobRun) -> None:
        self._close(run, "finish")
        run.remaining_flops = 0.0
        self.release(run)
        run.state = DONE
        run.end_s = self.now

    def preempt(self, run: JobRun, *, reason: str, lost_category: str = "preempted") -> None:
        """Stop a running gang at once; work since its last checkpoint is lost."""
        self._close(run, "kill", lost_category)
        self.release(run)
        run.preemptions += 1
        self.counters["preemptions"] += 1
        self.log("preempt", f"{run.spec.name} ({run.gpus} GPUs) preempted: {reason}",
                 job=run.spec.name)
        self.requeue(run)

    def lend(self, run: JobRun) -> float:
        """Checkpoint ``run`` and hand its GPUs over when the write ends; return that time."""
        self._close(run, "lend")
        run.state = DRAINING
        run.seg_start = self.now
        run.lendings += 1
        done = self.now + run.write_s
        self._push(done, DRAIN_DONE, run.idx, run.version)
        self.log("lend", f"{run.spec.name} ({run.gpus} GPUs) checkpoints and lends its GPUs "
                         "to inference", job=run.spec.name)
        return done

    def _drain_done(self, run: JobRun) -> None:
        stall = self.now - run.seg_start
        self.ledger.book("checkpoint_stall", run.model, run.gpus * stall)
        self.lend_loss_gpu_s += run.gpus * stall
        run.version += 1
        self.release(run)
        self.requeue(run)
        self.fleet.on_lend_ready(run)

    # ----------------------------------------------------------------- speed
    def speed_split(self, run: JobRun) -> tuple[tuple[str, float], ...]:
        """Share of a placed gang's wall time lost, per ledger category (the rest computes)."""
        if self.physics is not None:
            return self.physics.split(run)
        return self.reliability.slow_split(run)

    def physics_refresh(self) -> None:
        """The fabric, cooling or storage changed: re-evaluate the physics now."""
        if self.physics is not None:
            self.physics.refresh()

    def rerate(self, run: JobRun, tolerance: float = 1e-9) -> bool:
        """Recompute a running gang's speed; start a new segment if it changed."""
        split = self.speed_split(run)
        slow = 1.0 - sum(f for _, f in split)
        if abs(slow - run.slow) <= tolerance:
            return False
        self._close(run, "lend")
        run.slow, run.slow_split = slow, split
        run.seg_start = self.now
        run.restart_s = 0.0
        run.expected_end = self.now + segment_length(run.need_s(), 0.0, run.interval_s,
                                                     run.write_s)
        self._push(run.expected_end, FINISH, run.idx, run.version)
        return True

    # ----------------------------------------------------------------- scheduling
    def _schedule(self) -> None:
        started = time.perf_counter()
        for _ in range(3):  # a pass that preempts frees GPUs: one more pass restarts the rest
            self._dirty = False
            SchedulingPass(self).run()
            if not self._dirty:
                break
        self.counters["passes"] += 1
        self.counters["scheduler_wall_s"] += time.perf_counter() - started

    # ----------------------------------------------------------------- figures
    def restart_estimate(self, run: JobRun) -> float:
        """Restart overhead a restart of ``run`` pays (relaunch plus restore), s."""
        j = run.spec
        nodes = run.placement.nodes.size if run.placement is not None else 1
        if self.recovery == "memory":
            return checkpoint.memory_restore_seconds(j.checkpoint_gb, nodes)
        bw = checkpoint.job_bandwidth_gb_s(gpus=j.gpus, nodes=nodes,
                                           tier_gb_s=self.central_read_gb_s,
                                           cluster_gpus=self.state.n_gpus)
        return checkpoint.restart_seconds(j.checkpoint_gb, bw * self.storage_factor)

    def training_runs(self):
        return (r for r in self.runs if r.state not in (PENDING, REJECTED))

    def horizon_ledger(self) -> Ledger:
        """The ledger with every open segment booked up to now (the engine is not changed)."""
        led = self.ledger.copy()
        for run in self.running.values():
            self.book_segment(led, run, self.now, "end")
        return led

    def ettr(self, run: JobRun, led_t: float | None = None) -> float | None:
        """Share of ``run``'s wall time since its first start that made kept progress."""
        if run.first_start is None or run.state == CLOUD or run.cloud_pool >= 0:
            return None
        t = run.end_s if run.end_s is not None else (led_t or self.now)
        wall = t - run.first_start
        if wall <= 0:
            return None
        kept = run.kept_s
        if run.state == RUNNING:
            kept += min(run.books_at(t).computed_s, run.need_s())
        return min(1.0, kept / wall)
