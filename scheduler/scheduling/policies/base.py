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
        gangs running on borrowed quota (bounded: :mod:`scheduler.scheduling.preemption`).
    compact : bool
        Never place a gang across the domains its affinity names, and preempt to make room
        within one.  Off (the default), a blocked gang that fits only across domains starts
        there: nobody is preempted to make a placement compact, and victims are sought
        anywhere (Slurm's ``--switches`` wait, with no wait).
    backfill_depth : int, optional
        Queued jobs a pass tests for backfill once the head has its reservation, like Slurm's
        ``bf_max_job_test`` (default there: 500); ``None`` tests them all.  The scheduler
        counts the passes the limit stopped (``backfill_depth_stops``).
    backfill_interval_s : float, optional
        Backfill behind a blocked head at most this often, like Slurm's ``bf_interval``
        (default there: 30 s): a later change schedules the next cycle instead of running it
        at once.  ``None`` backfills after every change.
    ranking : callable, optional
        ``ranking(scheduler) -> Ranking``: the component a *ranking* policy (``sjf``, ``las``)
        adds to the scheduler when it is set.  It ranks each run as it joins the queue
        (:attr:`JobRun.rank`, the middle of the order key: see :func:`ranked_order`), keeps
        what the rank needs (estimates, attained service) and may decide who may be preempted
        (:class:`Ranking`); ``None`` for a policy whose order reads only the run and the
        tenants.
    mechanics : str, optional
        The name of mechanics of its own that replace the twin's passes (``"slurm"``:
        :mod:`scheduler.scheduling.slurm`); ``None`` for a policy of order and switches.
    """

    name: str
    description: str
    order: OrderKey
    placement: str = "first-fit"
    backfill: bool = False
    preemption: bool = False
    compact: bool = False
    backfill_depth: int | None = None
    backfill_interval_s: float | None = None
    mechanics: str | None = None
    ranking: Callable | None = None


def submit_order(run: JobRun, ctx: QueueContext) -> tuple:
    """First come, first served (ties by job id)."""
    return (run.spec.submit_s, run.spec.job_id)


def ranked_order(run: JobRun, ctx: QueueContext) -> tuple:
    """A ranking policy's order: the run's rank (given by the policy's ranking as it joined the
    queue), then first come, first served."""
    return run.rank + (run.spec.submit_s, run.spec.job_id)


class Ranking(Protocol):
    """What a ranking policy's component offers the scheduler (:attr:`Policy.ranking`).

    ``rank(run)`` is the run's class as it joins the queue (it may also start timers);
    ``evicts`` says whether the ranking, not priority and quota, decides who may be preempted,
    and then ``may_evict(run, other)``, ``evictable(run)`` (the gangs holding GPUs of the models
    ``run`` accepts that it may evict) and ``victim_order(other)`` (a sort key, first evicted
    first) say how;
    ``detach()`` is called when another policy replaces it; ``on_timer(payload)`` handles the
    timers it scheduled (``Kind.BACKFILL`` events whose payload starts with ``"rank"``).
    """

    evicts: bool

    def rank(self, run: JobRun) -> tuple:
        """The rank of ``run`` as it joins the queue."""

    def detach(self) -> None:
        """Another policy replaces this one: cancel timers, stop watching."""


def attach_ranking(scheduler, policy: Policy):
    """The ranking ``policy`` adds to ``scheduler`` (:attr:`Policy.ranking`; ``None`` if it
    adds none), after detaching the scheduler's current one; the queue is ranked again with it
    (or with none)."""
    old = scheduler.ranking
    if old is not None:
        old.detach()
    new = policy.ranking(scheduler) if policy.ranking is not None else None
    if old is not None or new is not None:
        scheduler.jobs.index.rank_with(new.rank if new is not None else None,
                                       scheduler.jobs.queue.values())
    return new
