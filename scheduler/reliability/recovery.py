"""What happens to a gang when a failure hits it: hang, detection, eviction, spare swap, restart.

A failure stops the gang at once (its collectives hang), but its GPUs stay held until the
failure is detected (booked as recovery).  Then the gang is evicted; if hot spares of its model
can replace exactly its failed nodes (same pod first) it restarts on its old healthy nodes plus
the spares without waiting in the queue, else it requeues.  Its restart (rescheduling, loading
the last usable checkpoint, warm-up) is booked as recovery by the lifecycle when it starts
again.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from scheduler.model.job_run import DRAINING, JobRun
from scheduler.model.state import ClusterState, Placement
from scheduler.reliability import checkpoint
from scheduler.reliability.spares import SparePool
from scheduler.sim import Context, Kind


class Jobs(Protocol):
    """The job lifecycle as reliability asks it (scheduling's
    :class:`~scheduler.scheduling.lifecycle.JobLifecycle`); reliability sits below scheduling,
    so it names the methods it calls, not the class."""

    costs: checkpoint.CheckpointCosts
    runs: list[JobRun]
    running: dict[int, JobRun]

    def abort_drain(self, run: JobRun) -> None: ...
    def close(self, run: JobRun, how: str, lost_category: str = "preempted",
              disk_fallback: bool = False) -> None: ...
    def hang(self, run: JobRun, *, detect_s: float) -> None: ...
    def book_detection(self, run: JobRun) -> None: ...
    def release(self, run: JobRun) -> None: ...
    def resume(self, run: JobRun, placement: Placement) -> None: ...
    def requeue(self, run: JobRun) -> None: ...
    def rerate_all(self) -> list[int]: ...


class Recovery:
    """Interrupts gangs and handles their failures' detection (``DETECT`` events)."""

    def __init__(self, ctx: Context, *, state: ClusterState, jobs: Jobs,
                 spares: SparePool, recovery: str):
        self.ctx = ctx
        self.state = state
        self.jobs = jobs
        self.spares = spares
        self.mode = recovery
        self.memory_fallbacks = 0
        ctx.on(Kind.DETECT, self.on_detected)

    def interrupt(self, run: JobRun, *, cause: str, detect_s: float, planned: bool,
                  failed_nodes: np.ndarray | None = None) -> None:
        """A failure stops ``run``: it hangs until detected, then is evicted and restarts.

        A planned stop checkpoints first (nothing lost); an unplanned one loses the compute
        since the last checkpoint (booked as lost work).  With in-memory checkpoints, a failure
        that takes down every node of one replica group loses the in-memory copy: the gang
        falls back to its last checkpoint persisted to disk and restores from there.
        A configured detection time (:class:`~scheduler.reliability.checkpoint.RestartTimes`)
        replaces the failure mode's own ``detect_s``.
        """
        override = self.jobs.costs.restart.detect_s
        if override is not None:
            detect_s = override
        if run.state == DRAINING:
            self.jobs.abort_drain(run)
        else:
            fallback = (not planned and self.mode == "memory" and failed_nodes is not None
                        and checkpoint.replica_group_lost(run.placement.nodes, failed_nodes))
            if fallback:
                self.memory_fallbacks += 1
            self.jobs.close(run, "lend" if planned else "kill", "lost_work",
                            disk_fallback=fallback)
        self.jobs.hang(run, detect_s=detect_s)
        self.ctx.log("interrupt", f"{run.spec.name} ({run.gpus} GPUs) interrupted by {cause}",
                     job=run.spec.name, cause=cause)

    def on_detected(self, run: JobRun) -> None:
        """Evict the gang; swap hot spares in for its failed nodes, else requeue it."""
        self.jobs.book_detection(run)
        old = run.placement
        s = self.state
        bad = ~s.node_up[old.nodes] | s.node_drained[old.nodes]
        swap = self.spares.swap(old, bad)
        self.jobs.release(run)
        if swap is not None:
            s.set_node_flags(swap.nodes, spare=False)
            self.jobs.resume(run, swap)
            self.ctx.log("recover", f"{run.spec.name} resumes on {int(bad.sum())} hot spare(s)",
                         job=run.spec.name)
        else:
            self.jobs.requeue(run)
