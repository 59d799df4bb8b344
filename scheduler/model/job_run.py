"""A training job's life in the engine: queued, running in segments, preempted, finished.

A run segment starts with a restart overhead (booked as recovery), then alternates ``I``
seconds of compute with a ``W``-second checkpoint stall (booked as checkpoint stall).  A
checkpoint becomes usable for a restart ``L`` seconds after its stall ends (``L = 0`` for a
synchronous write; the background persist of an asynchronous one; the replication of an
in-memory one).  The books of a segment follow in closed form from its elapsed time, so the
engine needs no event per checkpoint: an interrupted segment keeps the compute up to its last
usable checkpoint and loses the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scheduler.model.state import Placement
from scheduler.workload.jobs import TrainingJob

PENDING, QUEUED, RUNNING, DRAINING, DETECTING, CLOUD, DONE, REJECTED = (
    "pending", "queued", "running", "draining", "detecting", "cloud", "done", "rejected")
HELD, CANCELLED = "held", "cancelled"  # operator actions (scheduler.control.job_actions)

NO_GPUS = np.zeros(0, dtype=np.int64)
"""The GPUs of a run that holds none: one array shared by every such run (nothing writes into a
run's ``gids``; it is replaced whole), so a snapshot pickles it once, not once per job."""


@dataclass(frozen=True)
class SegmentBooks:
    """Seconds (wall time, per GPU) of one segment by what they were spent on."""

    recovery_s: float
    computed_s: float
    saved_s: float
    stall_s: float


def segment_books(elapsed_s: float, restart_s: float, interval_s: float,
                  write_s: float, lag_s: float = 0.0) -> SegmentBooks:
    """Split ``elapsed_s`` of a segment into recovery, compute and checkpoint stall.

    ``saved_s`` is the compute covered by a usable checkpoint: one whose stall ended at least
    ``lag_s`` ago (``lag_s`` at most one cycle, ``interval_s + write_s``).

    >>> b = segment_books(250.0, 10.0, 100.0, 20.0)  # 10 restart, 2 cycles of 120, 0 left
    >>> b.recovery_s, b.computed_s, b.saved_s, b.stall_s
    (10.0, 200.0, 200.0, 40.0)
    >>> segment_books(175.0, 0.0, 100.0, 20.0).saved_s  # 2nd checkpoint still being written
    100.0
    >>> segment_books(250.0, 0.0, 100.0, 5.0, lag_s=50.0).saved_s  # 2nd ended 40 s ago
    100.0
    """
    recovery = min(elapsed_s, restart_s)
    t = elapsed_s - recovery
    if t <= 0:
        return SegmentBooks(recovery, 0.0, 0.0, 0.0)
    cycle = interval_s + write_s
    c = math.floor(t / cycle)
    rem = t - c * cycle
    computed = c * interval_s + min(rem, interval_s)
    stall = c * write_s + max(0.0, rem - interval_s)
    usable = c if rem >= lag_s else max(0, c - 1)
    return SegmentBooks(recovery, computed, usable * interval_s, stall)


def segment_length(need_s: float, restart_s: float, interval_s: float, write_s: float) -> float:
    """Wall time for a segment to compute ``need_s``: no checkpoint after the last step.

    >>> segment_length(250.0, 10.0, 100.0, 20.0)
    300.0
    """
    checkpoints = max(0, math.ceil(need_s / interval_s - 1e-12) - 1)
    return restart_s + need_s + checkpoints * write_s


_OWN_SLOTS = frozenset(("idx", "models", "affinity", "sig", "event", "end_key", "gids",
                        "placement", "model"))
"""What a run carried over to another engine keeps of its own (:meth:`JobRun.take_history`)."""


class JobRun:
    """Mutable engine-side state of one training job (not shared with other engines).

    ``event`` is the handle of the one event the run waits for in its state (its finish,
    the end of its drain, its failure's detection, its cloud run's end); whoever moves the run
    out of that state cancels it.
    """

    __slots__ = (
        "idx", "spec", "state", "remaining_flops", "models", "affinity", "sig", "placement",
        "gids", "model", "rate", "seg_start", "restart_s", "write_s", "interval_s", "event",
        "first_start", "end_s", "queued_since", "wait_s", "preemptions", "lendings",
        "expected_end", "borrowed", "kept_s", "cloud_pool", "reserved_start", "slow",
        "slow_split", "interruptions", "lost_gpu_s", "detect_s", "restore_from_disk", "end_key",
        "gpus", "lag_s", "fresh", "rank", "last_start")

    def __init__(self, idx: int, spec: TrainingJob, models: tuple[int, ...], affinity: str):
        self.idx = idx
        self.spec = spec
        self.state = PENDING
        self.remaining_flops = float(spec.work_flops)
        self.models = models
        self.affinity = affinity
        self.sig = (models, affinity)
        self.placement: Placement | None = None
        self.gids = NO_GPUS
        self.model = -1
        self.rate = 0.0
        self.seg_start = 0.0
        self.restart_s = 0.0
        self.write_s = 0.0
        self.lag_s = 0.0  # a checkpoint is usable this long after its stall (persist, replica)
        self.interval_s = spec.checkpoint_interval_s
        self.event = None  # the run's own next event (a kernel Handle), cancelled if moot
        self.first_start: float | None = None
        self.last_start: float | None = None  # the start of its latest run on the cluster
        self.end_s: float | None = None
        self.queued_since = spec.submit_s
        self.wait_s = 0.0
        self.preemptions = 0
        self.lendings = 0
        self.expected_end = math.inf
        self.fresh = False  # its next start runs it from its beginning (a Slurm requeue)
        self.borrowed = False
        self.kept_s = 0.0
        self.cloud_pool = -1
        self.reserved_start: float | None = None
        self.slow = 1.0
        self.slow_split: tuple[tuple[str, float], ...] = ()
        self.interruptions = 0
        self.lost_gpu_s = 0.0
        self.detect_s = 0.0
        self.restore_from_disk = False
        self.end_key: tuple | None = None  # its entry in the lifecycle's index of ends
        self.gpus: int = spec.gpus  # the gang's size (read in every pass: a plain slot)
        # its class under a ranking policy (sjf, las), set as it joins the queue; () otherwise
        self.rank: tuple = ()

    def __reduce_ex__(self, protocol):
        """A run not submitted yet (``pending``) is its job and its admission, nothing more
        (a re-plan re-submits just its spec: :func:`scheduler.control.replan.replan`), so it is
        pickled and copied as its constructor's arguments and its arrival event: a busy
        preset holds a year of them, and their 41 slots each were most of a snapshot's time
        (noc-4k: 3.1 of 4.8 CPU s)."""
        if self.state != PENDING:
            return object.__reduce_ex__(self, protocol)
        return (JobRun, (self.idx, self.spec, self.models, self.affinity),
                (None, {"event": self.event}))

    def take_history(self, old: JobRun) -> None:
        """Take ``old``'s history (a run carried over from another engine): all but its index,
        the models it may use here and what ties it to the old cluster (its pending event,
        its entry in the index of ends, its GPUs, placement and model)."""
        for name in self.__slots__:
            if name not in _OWN_SLOTS:
                setattr(self, name, getattr(old, name))
        self.sig = (self.models, self.affinity)

    def need_s(self) -> float:
        """Compute seconds still to do at the current (possibly slowed) rate."""
        return self.remaining_flops / (self.rate * self.slow)

    def cancel_event(self) -> None:
        if self.event is not None:
            self.event.cancel()
            self.event = None

    def books_at(self, t: float) -> SegmentBooks:
        """Books of the open segment if it were closed at ``t``."""
        return segment_books(t - self.seg_start, self.restart_s, self.interval_s, self.write_s,
                             self.lag_s)
