"""``sjf``, ``sjf-limit``, ``sjf-history``: shortest expected job first.

The queue is ordered by an estimate of each job's duration, shortest first, then by submission
(jobs with equal estimates go first come, first served).  The three policies differ only in the
estimate, fixed as the job joins the queue (at arrival, and again after a preemption):

``sjf`` (exact)
    the job's real remaining compute time on its preferred (first accepted) model: remaining
    work over the gang's peak FLOP/s at the job's kernel efficiency.  An oracle: the bound
    the other estimates are compared with.
``sjf-limit``
    the job's time limit (:attr:`TrainingJob.time_limit_s`, Slurm's ``--time``); jobs without
    one go after all jobs with one, first come, first served among themselves.
``sjf-history``
    the mean duration (first start to finish, s) of the same user's jobs that finished
    before this one joined the queue (:attr:`TrainingJob.user`, else the tenant).  A user
    with no finished job yet gets the mean of all finished jobs (none yet: 0 s, so every job
    ties and the order is FIFO) — a *neutral* estimate, not the exact one: giving newcomers
    the oracle's answer would mix perfect knowledge into a policy meant to show what history
    alone achieves, and would favour newcomers' short jobs over every known user's.

Scheduling is non-preemptive (a running job is never stopped for a shorter one: that is SRPT,
not SJF) with EASY backfill behind the head, at the depth and interval of the ``backfill``
policy, so ``sjf`` and ``backfill`` differ only in the order.  Backfill itself plans with the
twin's exact runtime estimates, whatever the ordering estimate (see :mod:`passes`).
Placement is first-fit; ``--placement`` overrides it as for every policy.
"""

from __future__ import annotations

from functools import partial

from scheduler.model.job_run import JobRun
from scheduler.scheduling.policies.base import (
    BACKFILL_DEPTH,
    BACKFILL_INTERVAL_S,
    Policy,
    ranked_order,
)

ESTIMATES = ("exact", "limit", "history")
"""What ``sjf`` orders by: the exact remaining compute, the time limit, the user's history."""


class SjfRanking:
    """The rank of a queued job under shortest-job-first: ``(estimate_s,)``.

    Parameters
    ----------
    scheduler : Scheduler
        Its ``jobs`` (peak FLOP/s per model; the gangs that finish, for ``history``) and
        ``ctx`` (the clock).
    estimate : {"exact", "limit", "history"}
    """

    evicts = False  # non-preemptive: priority and quota keep their (unused) say

    def __init__(self, scheduler, estimate: str = "exact"):
        if estimate not in ESTIMATES:
            raise ValueError(f"unknown sjf estimate {estimate!r}; choose one of: "
                             f"{', '.join(ESTIMATES)}")
        self.estimate = estimate
        self.jobs = scheduler.jobs
        self.ctx = scheduler.ctx
        # user -> (finished jobs, their summed durations, s); the same over all users
        self.history: dict[str, tuple[int, float]] = {}
        self.overall = (0, 0.0)
        if estimate == "history":
            self.jobs.run_watchers.append(self)

    @staticmethod
    def user(run: JobRun) -> str:
        """Whose history a job's estimate reads: its user, else its tenant."""
        return run.spec.user or run.spec.tenant

    def rank(self, run: JobRun) -> tuple:
        if self.estimate == "exact":
            j = run.spec
            return (float(run.remaining_flops / (run.gpus * self.jobs.peak[run.models[0]]
                                                 * j.efficiency)),)
        if self.estimate == "limit":
            limit = run.spec.time_limit_s
            return (1, 0.0) if limit is None else (0, float(limit))
        n, total = self.history.get(self.user(run), self.overall)
        return (total / n if n else 0.0,)

    def mean_s(self, user: str) -> float | None:
        """The mean duration of ``user``'s finished jobs so far, s (``None`` if none)."""
        n, total = self.history.get(user, (0, 0.0))
        return total / n if n else None

    # the lifecycle's run watcher (history only)
    def on_start(self, run: JobRun) -> None:
        pass

    def on_release(self, run: JobRun) -> None:
        if run.remaining_flops == 0.0 and run.first_start is not None:  # it finished
            took = self.ctx.now - run.first_start
            n, total = self.history.get(self.user(run), (0, 0.0))
            self.history[self.user(run)] = (n + 1, total + took)
            self.overall = (self.overall[0] + 1, self.overall[1] + took)

    def detach(self) -> None:
        if self in self.jobs.run_watchers:
            self.jobs.run_watchers.remove(self)

    def on_timer(self, payload) -> None:
        pass  # it schedules none


def _sjf(name: str, estimate: str, what: str) -> Policy:
    return Policy(name, f"shortest job first by {what}, EASY backfill, first-fit", ranked_order,
                  backfill=True, backfill_depth=BACKFILL_DEPTH,
                  backfill_interval_s=BACKFILL_INTERVAL_S,
                  ranking=partial(SjfRanking, estimate=estimate))


POLICIES = (
    _sjf("sjf", "exact", "exact remaining compute"),
    _sjf("sjf-limit", "limit", "time limit (none: last)"),
    _sjf("sjf-history", "history", "the user's mean finished duration"),
)
