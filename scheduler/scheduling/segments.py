"""A training run's segments in the books: what a closed segment books into the ledger, and the
run's effective training time ratio (ETTR).

A *segment* is a run's stretch on one placement at one speed, from a start, a re-rate or a
re-cost to its close.  Closing it books its GPU-seconds to the ledger's categories (productive,
the speed model's slowdowns, lost work, recovery, checkpoint stalls) and returns the compute it
kept; :class:`~scheduler.scheduling.lifecycle.JobLifecycle` is the only caller that changes a
run with what this books.
"""

from __future__ import annotations

from scheduler.model.job_run import CLOUD, DETECTING, DRAINING, RUNNING, JobRun
from scheduler.model.ledger import Ledger
from scheduler.reliability.checkpoint import disk_persisted_s


def book_segment(ledger: Ledger, run: JobRun, t: float, how: str,
                 lost_category: str = "preempted", disk_fallback: bool = False) -> float:
    """Book ``run``'s open segment up to ``t`` (s) into ``ledger``; return compute kept (s).

    ``how``: ``finish``/``lend``/``end`` keep all compute, ``kill`` keeps what the last
    checkpoint covers and books the rest to ``lost_category``.  ``disk_fallback``: only what
    reached disk survives (an in-memory checkpoint lost with its replica group).  A draining
    gang books its stall, a hung one its recovery, and neither keeps compute.
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
        kept = min(kept, disk_persisted_s(b.computed_s))
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
        ledger.book_checkpoint_gb(b.stall_s // run.write_s * run.spec.checkpoint_gb)
    ledger.book("checkpoint_stall", m, g * b.stall_s)
    return kept


def run_ettr(run: JobRun, now: float) -> float | None:
    """Share of ``run``'s wall time since its first start that made kept progress, at ``now``
    (s) or at its end; ``None`` before it started and for a run in the cloud."""
    if run.first_start is None or run.state == CLOUD or run.cloud_pool >= 0:
        return None
    t = run.end_s if run.end_s is not None else now
    wall = t - run.first_start
    if wall <= 0:
        return None
    kept = run.kept_s
    if run.state == RUNNING:
        kept += min(run.books_at(t).computed_s, run.need_s())
    return min(1.0, kept / wall)
