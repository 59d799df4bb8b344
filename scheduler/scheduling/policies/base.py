"""The one narrow interface every scheduling policy fills.

A policy is an *ordering* of the queue plus a few switches: the placement strategy, EASY
backfill, preemption, and quota borrowing.  The engine does the mechanics (placement,
reservations, victims); a policy only says what to try first and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from scheduler.model.job_run import JobRun

BACKFILL_DEPTH = 500
"""Jobs a backfilling pass tests behind the head's reservation: Slurm's ``bf_max_job_test``
default (slurm.conf(5), SchedulerParameters)."""

BACKFILL_INTERVAL_S = 30.0
"""Seconds between backfill cycles: Slurm's ``bf_interval`` default (slurm.conf(5),
SchedulerParameters).  Between cycles a change runs only the main pass, which starts gangs in
order and stops at the first that cannot start (Slurm's event-triggered main scheduler)."""


class QueueContext(Protocol):
    """What an ordering may read of the cluster's current allocation."""

    def dominant_share(self, tenant: str) -> float:
        """Tenant's dominant resource share (DRF) divided by its weight."""

    def within_quota(self, run: JobRun) -> bool:
        """Whether starting ``run`` keeps its tenant within its guaranteed quota."""


OrderKey = Callable[[JobRun, QueueContext], tuple]


@dataclass(frozen=True)
class Policy:
    """A scheduling policy.

    Parameters
    ----------
    name : str
        Registry name (``simulate --policy NAME``).
    description : str
    order : callable
        ``order(run, ctx) -> tuple``: the queue is tried in ascending key order.
    placement : str
        ``"topology"``, ``"first-fit"`` or ``"random"`` (see :mod:`scheduler.scheduling.placement`).
    backfill : bool
        EASY backfill: later jobs may start if they do not delay the head's reservation.
        Without it the queue is strict: nothing passes a blocked head.
    preemption : bool
        A blocked job may evict lower-priority gangs, and a job within its quota may evict
        gangs running on borrowed quota.
    backfill_depth : int, optional
        Queued jobs a pass tests for backfill once the head has its reservation, like Slurm's
        ``bf_max_job_test`` (default there: 500); ``None`` tests them all.  The scheduler
        counts the passes the limit stopped (``backfill_depth_stops``).
    backfill_interval_s : float, optional
        Backfill behind a blocked head at most this often, like Slurm's ``bf_interval``
        (default there: 30 s): a later change schedules the next cycle instead of running it
        at once.  ``None`` backfills after every change.
    """

    name: str
    description: str
    order: OrderKey
    placement: str = "first-fit"
    backfill: bool = False
    preemption: bool = False
    backfill_depth: int | None = None
    backfill_interval_s: float | None = None


def submit_order(run: JobRun, ctx: QueueContext) -> tuple:
    """First come, first served (ties by job id)."""
    return (run.spec.submit_s, run.spec.job_id)
