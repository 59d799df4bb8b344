"""What a gang's checkpoints and restarts cost when it starts, and when its costs move.

The lifecycle asks here on every start and re-cost; the answer is set on the run (its stall
``write_s``, usable-after lag ``lag_s``, interval ``interval_s``) and the gang's use of the
central tier is recorded in :attr:`CheckpointCosts.load
<scheduler.reliability.checkpoint.CheckpointCosts>`, so that the next gang to start shares the
tier with it.  The checkpoint interval is the job's own, a fixed one, or Young/Daly ("auto")
from the gang's failure rate and its checkpoint stall.
"""

from __future__ import annotations

from scheduler.model.job_run import JobRun
from scheduler.reliability.checkpoint import (
    DISK_PERSIST_S,
    CheckpointCosts,
    CheckpointPrice,
    daly_interval,
)
from scheduler.reliability.failures import MODES, job_failure_rate


def check_interval(interval) -> None:
    """Refuse an interval policy other than ``None`` (each job's own), ``"auto"`` or seconds."""
    if interval not in (None, "auto") and (
            isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0):
        raise ValueError("checkpoint_interval must be None, 'auto' or positive seconds")


def auto_interval(price: CheckpointPrice, *, nodes: int, gpus: int, modes=MODES) -> float:
    """Daly's optimum for the gang's checkpoint stall and MTTF, s, but never shorter than the
    time a checkpoint takes to become usable (persists and replications do not queue).

    >>> p = CheckpointPrice(stall_s=1.0, lag_s=500.0, busy_s=500.0)
    >>> auto_interval(p, nodes=2048, gpus=16384)  # Daly alone would give less
    500.0
    """
    mttf_s = 3600.0 / job_failure_rate(nodes, gpus, modes)
    return max(daly_interval(price.stall_s, mttf_s), price.lag_s)


class CheckpointPricing:
    """Prices gangs' checkpoints and restarts on one cluster.

    Parameters
    ----------
    costs : CheckpointCosts
        The cluster's checkpoint mode, storage and restart times.
    interval : None, "auto" or float
        Each job's own interval, Young/Daly per gang ("auto"), or seconds for every job.
    """

    def __init__(self, costs: CheckpointCosts, interval=None, modes: tuple | None = None):
        check_interval(interval)
        self.costs = costs
        self.interval = interval
        self.modes = MODES if modes is None else modes  # the profile "auto" intervals follow

    def price(self, run: JobRun, nodes: int) -> None:
        """Set ``run``'s stall, lag and interval for a gang on ``nodes`` nodes and record its
        use of the central tier."""
        j = run.spec
        p = self.costs.price(checkpoint_gb=j.checkpoint_gb, gpus=j.gpus, nodes=nodes,
                             key=run.idx)
        if self.interval == "auto":
            run.interval_s = auto_interval(p, nodes=nodes, gpus=j.gpus, modes=self.modes)
        elif self.interval is not None:
            run.interval_s = float(self.interval)
        run.write_s = p.stall_s
        cycle = run.interval_s + p.stall_s
        # a lag past one cycle would queue persists: the books count it as one cycle
        run.lag_s = min(p.lag_s, cycle)
        every = DISK_PERSIST_S if self.costs.recovery == "memory" else cycle
        self.costs.load.set(run.idx, min(1.0, p.busy_s / every) * nodes)

    def restart_s(self, run: JobRun, nodes: int) -> float:
        """Rescheduling, loading and warm-up of a restart of ``run`` on ``nodes`` nodes, s."""
        return self.costs.restart_s(checkpoint_gb=run.spec.checkpoint_gb, gpus=run.gpus,
                                    nodes=nodes, from_disk=run.restore_from_disk, key=run.idx)

    def release(self, run: JobRun) -> None:
        """``run``'s gang no longer writes checkpoints."""
        self.costs.load.drop(run.idx)

    def estimate_write_s(self, run: JobRun, nodes: int) -> float:
        """Checkpoint stall ``run`` would have on ``nodes`` nodes (before it ever started), s."""
        return self.costs.write_s(checkpoint_gb=run.spec.checkpoint_gb, gpus=run.gpus,
                                  nodes=nodes, key=run.idx)

    def restart_estimate(self, run: JobRun) -> float:
        """Restart overhead a restart of ``run`` pays (rescheduling, loading, warm-up), s."""
        nodes = run.placement.nodes.size if run.placement is not None else 1
        return self.costs.restart_s(checkpoint_gb=run.spec.checkpoint_gb, gpus=run.gpus,
                                    nodes=nodes, key=run.idx)
