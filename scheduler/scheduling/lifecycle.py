"""The job-lifecycle service: every training job's arrive, start, close, finish, preempt, lend
and requeue, and the booking of its run segments into the ledger.

This is the only code that moves a run between the queue, the running set and the end states
and the only code that books a training segment; the scheduler, the failure engine, recovery,
the physics, inference and cloud burst ask it through these methods.  Each move that leaves a
state with a pending event cancels that event's handle.

How fast a placed gang runs is the *speed model*'s answer (:meth:`JobLifecycle.use_speed_model`):
the fabric/storage/power physics when it is on, the failure engine's slowdowns when it is off.
What a closed segment books is :mod:`scheduler.scheduling.segments`; when gangs free their GPUs
and which moved are kept in :mod:`scheduler.scheduling.running_index`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from scheduler.model.job_run import (
    CANCELLED,
    DETECTING,
    DONE,
    DRAINING,
    HELD,
    NO_GPUS,
    PENDING,
    QUEUED,
    REJECTED,
    RUNNING,
    JobRun,
    segment_length,
)
from scheduler.model.ledger import Ledger
from scheduler.model.state import ClusterState, Placement
from scheduler.reliability.checkpoint import CheckpointCosts
from scheduler.scheduling.admission import Admission
from scheduler.scheduling.checkpoint_pricing import CheckpointPricing
from scheduler.scheduling.handover import Handover
from scheduler.scheduling.queue_index import QueueIndex
from scheduler.scheduling.running_index import EndIndex, MoveLog, RunningIndex
from scheduler.scheduling.segments import book_segment, run_ettr
from scheduler.scheduling.tenants import TenantBook
from scheduler.sim import Context, Kind
from scheduler.workload.jobs import TrainingJob


class JobLifecycle(Handover):
    """Owns the runs of all training jobs.

    Parameters
    ----------
    ctx : Context
        The kernel's narrow view.
    state : ClusterState
        Allocations are made and returned here.
    ledger : Ledger
        Where closed segments are booked.
    tenants : TenantBook
        Usage per tenant, updated on start and release.
    costs : CheckpointCosts
        Checkpoint write and restart times.
    admission : Admission
        Admits submitted jobs.
    peak_flops : numpy.ndarray
        Peak BF16 FLOP/s per accelerator model.
    checkpoint_interval : None, "auto" or float
        Each job's own interval, Young/Daly from the job's failure rate ("auto"), or seconds.
    failure_modes : tuple of FailureMode, optional
        The failure profile "auto" intervals follow (default: the Llama 3 one).
    """

    def __init__(self, ctx: Context, *, state: ClusterState, ledger: Ledger,
                 tenants: TenantBook, costs: CheckpointCosts, admission: Admission,
                 peak_flops: np.ndarray, checkpoint_interval=None,
                 failure_modes: tuple | None = None):
        self.pricing = CheckpointPricing(costs, checkpoint_interval, modes=failure_modes)
        self.ctx = ctx
        self.state = state
        self.ledger = ledger
        self.tenants = tenants
        self.costs = costs
        self.admission = admission
        self.peak = peak_flops
        self.checkpoint_interval = checkpoint_interval
        self.runs: list[JobRun] = []
        self.queue: dict[int, JobRun] = {}
        self.running: dict[int, JobRun] = {}
        self.queue_version = 0
        self.index = QueueIndex()
        self._ends = EndIndex(state.n_models)  # when each running or draining gang frees GPUs
        # running gangs by model and priority, borrowers by tenant: what preemption asks
        self.holders = RunningIndex()
        self._moved = MoveLog()  # what preemption's memo of a failed attempt reads
        self.counters = {"placements": 0, "preemptions": 0}
        self.lend_loss_gpu_s = 0.0
        self.speed_model = None
        self._arrival_watchers: list = []
        self._lend_watchers: list = []
        self._queue_watchers: list = []
        self.run_watchers: list = []  # on_start/on_release(run): a ranking policy's books
        ctx.on(Kind.ARRIVE, self._arrive)
        ctx.on(Kind.FINISH, self._finish)
        ctx.on(Kind.DRAIN_DONE, self._drain_done)

    # ----------------------------------------------------------------- wiring
    def use_speed_model(self, model) -> None:
        """``model.split(run)``: a placed gang's lost shares; ``model.refresh()``: re-evaluate."""
        self.speed_model = model

    def watch_arrivals(self, watcher) -> None:
        """``watcher.on_arrive(run)`` is called when a job joins the queue for the first time."""
        self._arrival_watchers.append(watcher)

    def watch_queue(self, watcher) -> None:
        """``watcher.on_queue(run, joined)`` whenever a run joins (``True``) or leaves
        (``False``) the queue."""
        self._queue_watchers.append(watcher)

    def watch_lending(self, watcher) -> None:
        """``watcher.on_lend_ready(run)`` when a lent gang's GPUs are free, and
        ``watcher.forget_lend(run)`` when it failed before handing them over."""
        self._lend_watchers.append(watcher)

    # ----------------------------------------------------------------- arrival
    def submit(self, job: TrainingJob) -> JobRun:
        """Admit ``job`` and have it arrive at its submit time (not before now)."""
        run = self.admission.admit(len(self.runs), job)
        self.runs.append(run)
        run.event = self.ctx.schedule(max(job.submit_s, self.ctx.now), Kind.ARRIVE, run)
        return run

    def enqueue_now(self, job: TrainingJob) -> JobRun:
        """Admit ``job`` and queue it at once (a job waiting in a mirrored cluster)."""
        run = self.admission.admit(len(self.runs), job)
        if run.state == REJECTED:
            raise ValueError(f"job {job.name!r}: no accelerator of this cluster can hold "
                             f"{job.gpus} GPUs of {job.requirement.describe()}")
        self.runs.append(run)
        self._arrive(run)
        return run

    def _arrive(self, run: JobRun) -> None:
        run.event = None
        if run.state == REJECTED:
            self.ctx.log("reject", f"{run.spec.name}: no accelerator of this cluster can hold "
                                   f"{run.gpus} GPUs of {run.spec.requirement.describe()}")
            return
        self.requeue(run)
        for w in self._arrival_watchers:
            w.on_arrive(run)

    def requeue(self, run: JobRun) -> None:
        """Back to the queue (after a preemption, an eviction or a lost cloud region)."""
        run.state = QUEUED
        run.queued_since = self.ctx.now
        self.queue[run.idx] = run
        self.index.add(run)
        self.queue_version += 1
        for w in self._queue_watchers:
            w.on_queue(run, True)

    def leave_queue(self, run: JobRun) -> None:
        """Take a queued run out of the queue (it runs elsewhere, e.g. in a cloud pool)."""
        if self.queue.pop(run.idx, None) is not None:
            self.index.remove(run)
            self.queue_version += 1
            for w in self._queue_watchers:
                w.on_queue(run, False)

    def hold(self, run: JobRun) -> None:
        """Keep a queued run out of every pass until :meth:`unhold` (Slurm's JobHeldUser)."""
        self.leave_queue(run)
        run.state = HELD

    def unhold(self, run: JobRun) -> None:
        """A held run back in the queue with its submit time, priority and wait so far."""
        since = run.queued_since
        self.requeue(run)
        run.queued_since = since

    def set_priority(self, run: JobRun, priority: int) -> None:
        """A queued or held run's new priority; a queued one takes its place in the queue."""
        queued = run.idx in self.queue
        self.leave_queue(run)
        run.spec = replace(run.spec, priority=priority)
        if queued:
            self.unhold(run)

    def cancel(self, run: JobRun) -> None:
        """End a queued, held or running run for good.  A running gang keeps the compute its
        last checkpoint covers; the rest is booked ``preempted`` (thrown away by a stop that is
        not a failure), as a preemption books it."""
        if run.state == RUNNING:
            self.close(run, "kill", "preempted")
            self.release(run)
        self.leave_queue(run)
        run.state = CANCELLED
        run.end_s = self.ctx.now
        self.counters["cancelled"] = self.counters.get("cancelled", 0) + 1

    # ----------------------------------------------------------------- starting
    def start(self, run: JobRun, placement: Placement) -> None:
        """Allocate ``placement`` to ``run`` and open a run segment."""
        j, now = run.spec, self.ctx.now
        run.gids = self.state.allocate(run.idx, placement, cpu_per_gpu=j.cpu_per_gpu,
                                       ram_gb_per_gpu=j.ram_gb_per_gpu,
                                       nic_gbps_per_gpu=j.nic_gbps_per_gpu)
        run.placement = placement
        run.model = placement.model
        # the physics prices the kernels (its step model's MFU); without it, the job's own figure
        kernel = getattr(self.speed_model, "kernel_efficiency", None)
        run.rate = j.gpus * self.peak[run.model] * (kernel(run) if kernel else j.efficiency)
        nodes = placement.nodes.size
        restart = self.pricing.restart_s(run, nodes)
        run.restore_from_disk = False
        self.pricing.price(run, nodes)
        run.slow_split = self.speed_model.split(run)
        run.slow = 1.0 - sum(f for _, f in run.slow_split)
        if run.first_start is None:
            run.first_start = now
            run.restart_s = 0.0
        elif getattr(run, "fresh", False):  # run again from its start: nothing to restore
            run.restart_s = 0.0
            run.fresh = False
        else:
            run.restart_s = restart
            if run.lendings:
                self.lend_loss_gpu_s += run.restart_s * j.gpus
        run.wait_s += now - run.queued_since
        run.last_start = now
        run.borrowed = not self.tenants.within_quota(run)
        run.state = RUNNING
        self._open_segment(run, run.restart_s)
        self.leave_queue(run)
        self.running[run.idx] = run
        self.holders.add(run)
        self.tenants.add(run, +1)
        self.counters["placements"] += 1
        self._moved.note(run)
        for w in self.run_watchers:
            w.on_start(run)

    def resume(self, run: JobRun, placement: Placement) -> None:
        """Restart an evicted gang on ``placement`` at once (hot spares): it waits for nothing."""
        run.queued_since = self.ctx.now
        self.start(run, placement)

    def _open_segment(self, run: JobRun, restart_s: float) -> None:
        now = self.ctx.now
        run.seg_start = now
        run.expected_end = now + segment_length(run.need_s(), restart_s, run.interval_s,
                                                run.write_s)
        run.event = self.ctx.schedule(run.expected_end, Kind.FINISH, run)
        self._ends.set(run, run.expected_end)

    def moved_mark(self) -> int:
        """A position in the log of running gangs that started or changed (for
        :meth:`moved_since`)."""
        return self._moved.mark()

    def moved_since(self, mark: int) -> list[JobRun] | None:
        """Running gangs that started or changed since ``mark``; ``None`` if forgotten."""
        return self._moved.since(mark)

    def lowest_running_priority(self) -> float:
        """The lowest priority of a gang holding GPUs (infinity if none does)."""
        return self.holders.lowest_priority()

    def borrowers_besides(self, tenant: str) -> int:
        """Gangs holding GPUs on borrowed quota that belong to other tenants than ``tenant``."""
        return self.holders.borrowers_besides(tenant)

    def ends(self, models) -> Iterator[tuple[float, int, int]]:
        """``(time, GPUs)`` at which running and draining gangs of ``models`` free their GPUs,
        earliest first (ties: fewest GPUs first); an iterator, merged lazily."""
        return self._ends.ends(models)

    def close(self, run: JobRun, how: str, lost_category: str = "preempted",
              disk_fallback: bool = False) -> None:
        """Book the open segment now and keep its progress
        (:func:`~scheduler.scheduling.segments.book_segment`)."""
        if disk_fallback:
            run.restore_from_disk = True  # its next start restores from disk
        kept = book_segment(self.ledger, run, self.ctx.now, how, lost_category, disk_fallback)
        run.remaining_flops = max(0.0, run.remaining_flops - kept * run.rate * run.slow)
        run.kept_s += kept
        run.cancel_event()

    def release(self, run: JobRun) -> None:
        """Return the gang's GPUs and host resources."""
        j = run.spec
        self.state.release(run.idx, run.gids, run.placement, cpu_per_gpu=j.cpu_per_gpu,
                           ram_gb_per_gpu=j.ram_gb_per_gpu, nic_gbps_per_gpu=j.nic_gbps_per_gpu)
        if self.running.pop(run.idx, None) is not None:
            self.holders.remove(run)
        self._ends.set(run, None)
        self.tenants.add(run, -1)
        self.pricing.release(run)
        run.gids = NO_GPUS
        for w in self.run_watchers:
            w.on_release(run)

    # ----------------------------------------------------------------- stopping
    def _finish(self, run: JobRun) -> None:
        run.event = None
        self.close(run, "finish")
        run.remaining_flops = 0.0
        self.release(run)
        run.state = DONE
        run.end_s = self.ctx.now

    def end_reported(self, run: JobRun, *, interrupted: bool) -> None:
        """A mirrored job ended in the real cluster (its GPUs and queue place given back)."""
        run.state = DONE
        run.end_s = self.ctx.now
        if interrupted:
            run.interruptions += 1

    def preempt(self, run: JobRun, *, reason: str, lost_category: str = "preempted",
                log: bool = True) -> None:
        """Stop a running gang at once; work since its last checkpoint is lost.  ``log``:
        log it (the scheduler logs a wave of preemptions as one line instead)."""
        self.close(run, "kill", lost_category)
        self.release(run)
        run.preemptions += 1
        self.counters["preemptions"] += 1
        if log:
            self.ctx.log("preempt", f"{run.spec.name} ({run.gpus} GPUs) preempted: {reason}",
                         job=run.spec.name)
        self.requeue(run)

    def restart_from_scratch(self, run: JobRun) -> None:
        """A preempted run's next start runs it from its beginning (Slurm's ``REQUEUE``: the
        batch script starts again), with no checkpoint to restore: all its work is to do."""
        run.remaining_flops = float(run.spec.work_flops)
        run.fresh = True
        self.index.stale(run)  # a queued run's estimate reads its work

    def lend(self, run: JobRun) -> float:
        """Checkpoint ``run`` and hand its GPUs over when the write ends; return that time."""
        self.close(run, "lend")
        now = self.ctx.now
        run.state = DRAINING
        run.seg_start = now
        run.lendings += 1
        self._moved.note(run)
        done = now + run.write_s + run.lag_s  # the GPUs go once the checkpoint is usable
        run.event = self.ctx.schedule(done, Kind.DRAIN_DONE, run)
        self._ends.set(run, done)
        self.ctx.log("lend", f"{run.spec.name} ({run.gpus} GPUs) checkpoints and lends its "
                             "GPUs to inference", job=run.spec.name)
        return done

    def _drain_done(self, run: JobRun) -> None:
        run.event = None
        stall = self.ctx.now - run.seg_start
        self.ledger.book("checkpoint_stall", run.model, run.gpus * stall)
        self.lend_loss_gpu_s += run.gpus * stall
        self.release(run)
        self.requeue(run)
        for w in self._lend_watchers:
            w.on_lend_ready(run)

    def abort_drain(self, run: JobRun) -> None:
        """A lending gang failed before its GPUs were handed over: book the stall so far."""
        self.ledger.book("checkpoint_stall", run.model, run.gpus * (self.ctx.now - run.seg_start))
        for w in self._lend_watchers:
            w.forget_lend(run)
        run.cancel_event()

    def hang(self, run: JobRun, *, detect_s: float) -> None:
        """The gang stopped on a failure and holds its GPUs until it is detected (a DETECT
        event ``detect_s`` from now)."""
        run.state = DETECTING
        self._moved.note(run)
        self._ends.set(run, None)
        run.seg_start = self.ctx.now
        run.detect_s = detect_s
        run.interruptions += 1
        run.event = self.ctx.schedule(self.ctx.now + detect_s, Kind.DETECT, run)

    def book_detection(self, run: JobRun) -> None:
        """The hang is over: book it as recovery."""
        run.event = None
        self.ledger.book("recovery", run.model, run.gpus * (self.ctx.now - run.seg_start))

    # ----------------------------------------------------------------- speed
    def rerate(self, run: JobRun, tolerance: float = 1e-9) -> bool:
        """Recompute a running gang's speed; start a new segment if it changed."""
        split = self.speed_model.split(run)
        slow = 1.0 - sum(f for _, f in split)
        if abs(slow - run.slow) <= tolerance:
            return False
        self.close(run, "lend")
        run.slow, run.slow_split = slow, split
        run.restart_s = 0.0
        self._open_segment(run, 0.0)
        self._moved.note(run)
        return True

    def rerate_all(self) -> list[int]:
        """Re-evaluate the speed model and re-rate every running gang; return those changed."""
        self.speed_model.refresh()
        return [run.idx for run in list(self.running.values())
                if run.state == RUNNING and self.rerate(run)]

    def recost_all(self) -> list[int]:
        """Checkpoint costs moved (an operator set a storage tier's status): every running gang
        writes its later checkpoints at the new cost; return those changed."""
        changed = []
        for run in [r for r in self.running.values() if r.state == RUNNING]:
            before = (run.write_s, run.lag_s, run.interval_s)
            self.pricing.price(run, run.placement.nodes.size)
            after = (run.write_s, run.lag_s, run.interval_s)
            if after == before:
                continue
            run.write_s, run.lag_s, run.interval_s = before  # close at the old cost
            self.close(run, "lend")
            run.write_s, run.lag_s, run.interval_s = after
            run.restart_s = 0.0
            self._open_segment(run, 0.0)
            self._moved.note(run)
            changed.append(run.idx)
        return changed

    # ----------------------------------------------------------------- figures
    def estimate_write_s(self, run: JobRun, model: int) -> float:
        """Checkpoint stall ``run`` would have on ``model`` (before it ever started), s."""
        return self.pricing.estimate_write_s(run, -(-run.gpus // self.state.models[model].per_node))

    def restart_estimate(self, run: JobRun) -> float:
        """Restart overhead a restart of ``run`` pays (rescheduling, loading, warm-up), s."""
        return self.pricing.restart_estimate(run)

    def training_runs(self):
        return (r for r in self.runs if r.state not in (PENDING, REJECTED))

    def horizon_ledger(self) -> Ledger:
        """The ledger with every open segment booked up to now (nothing is changed)."""
        led = self.ledger.copy()
        for run in self.running.values():
            book_segment(led, run, self.ctx.now, "end")
        return led

    def ettr(self, run: JobRun, led_t: float | None = None) -> float | None:
        """Share of ``run``'s wall time since its first start that made kept progress."""
        return run_ettr(run, led_t or self.ctx.now)
