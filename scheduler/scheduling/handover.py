"""Runs that change hands: a job already running when the twin starts following a real
cluster (:meth:`Handover.adopt`), and runs carried from one engine to its successor when the
inventory changes under a live twin (:meth:`Handover.carry`, :meth:`Handover.stop_for_replan`).

A part of :class:`~scheduler.scheduling.lifecycle.JobLifecycle` (its base class), kept apart so
the lifecycle's own moves read in one module; it uses the lifecycle's fields and methods.
"""

from __future__ import annotations

from scheduler.model.job_run import (
    CANCELLED,
    CLOUD,
    DETECTING,
    DONE,
    DRAINING,
    HELD,
    QUEUED,
    REJECTED,
    RUNNING,
    JobRun,
)
from scheduler.model.state import Placement
from scheduler.sim import Kind
from scheduler.workload.jobs import TrainingJob


class Handover:
    """Adopting and carrying runs (mixed into the lifecycle)."""

    def adopt(self, job: TrainingJob, placement: Placement, *,
              done_fraction: float = 0.0) -> JobRun:
        """Admit ``job`` as already running on ``placement`` with ``done_fraction`` of its
        work behind it (a job running in a mirrored cluster).  The caller checked that the
        placement's GPUs are free."""
        run = self.admission.admit(len(self.runs), job)
        run.models = tuple(dict.fromkeys(run.models + (placement.model,)))
        run.sig = (run.models, run.affinity)
        run.remaining_flops *= 1.0 - done_fraction
        run.state = QUEUED
        run.queued_since = self.ctx.now
        self.runs.append(run)
        self.start(run, placement)
        return run

    def carry(self, old: JobRun, placement: Placement | None = None, *,
              model: int = -1) -> JobRun:
        """Take over ``old``, a run of another engine (a re-plan onto a changed inventory),
        with its history: a finished, rejected or cloud run as it was (``model``: its model
        here), a queued one back in the queue (its wait goes on; rejected if this cluster can no
        longer hold it), a running one on ``placement`` (this engine's node ids) with its open
        segment, checkpoints and expected end kept: it does not notice the move."""
        run = self.admission.admit(len(self.runs), old.spec)
        fresh_state = run.state
        run.take_history(old)
        self.runs.append(run)
        if old.state in (DONE, REJECTED, CLOUD, CANCELLED, HELD):
            run.model = model
            return run
        if fresh_state == REJECTED:
            run.state = REJECTED
            self.ctx.log("reject", f"{run.spec.name}: after the inventory changed no accelerator "
                                   f"of this cluster can hold {run.gpus} GPUs", job=run.spec.name)
            return run
        if placement is None:
            self.requeue(run)
            run.queued_since = old.queued_since
            return run
        j = run.spec
        run.models = tuple(dict.fromkeys(run.models + (placement.model,)))
        run.sig = (run.models, run.affinity)
        run.gids = self.state.allocate(run.idx, placement, cpu_per_gpu=j.cpu_per_gpu,
                                       ram_gb_per_gpu=j.ram_gb_per_gpu,
                                       nic_gbps_per_gpu=j.nic_gbps_per_gpu)
        run.placement = placement
        run.model = placement.model
        run.event = self.ctx.schedule(run.expected_end, Kind.FINISH, run)
        self._ends.set(run, run.expected_end)
        self.running[run.idx] = run
        self.holders.add(run)
        self.tenants.add(run, +1)
        self._moved.note(run)
        return run

    def carry_counters(self, old: Handover) -> None:
        """Add ``old``'s counters and lending loss to these (a re-plan's successor)."""
        for key, value in old.counters.items():
            self.counters[key] += value
        self.lend_loss_gpu_s += old.lend_loss_gpu_s

    def stop_for_replan(self, run: JobRun) -> None:
        """Stop a gang whose nodes a re-plan changes: a running one loses the work since its
        last checkpoint (booked as preempted), a lending one books its stall, a hung one its
        hang; all go back to the queue, from which the successor engine carries them."""
        if run.state == RUNNING:
            self.preempt(run, reason="its nodes changed in the inventory (re-plan)")
            return
        if run.state == DRAINING:
            self.abort_drain(run)
        elif run.state == DETECTING:
            run.cancel_event()
            self.book_detection(run)
        self.release(run)
        self.requeue(run)
