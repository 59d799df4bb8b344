"""The ``slurm`` policy's backfill pass in three cases the agreement runs against a real
slurmctld 22.05 turned up (``docs/validation.md``): when a cycle runs after a job's nodes
complete, how a preemptor's start is predicted, and a reservation's end as a start time.
Same cluster and helpers as :mod:`tests.core.test_policy_slurm`.
"""

from __future__ import annotations

import pytest

from scheduler.scheduling.slurm.preemption import KILL_S
from tests.core.test_policy_slurm import ONE_PARTITION, PREEMPT, QOS, job, run, starts


def test_a_node_that_completes_wakes_the_backfill_agent():
    """j9 holds three nodes for 200 s, j0 the fourth until 10.5 s.  j1 (all 32 GPUs) waits
    at the head of the queue, so the main scheduler starts nothing behind it.  j2 (8 GPUs,
    limit 60) fits j0's node before j1's reservation: the backfill cycle as j0 ends (10.5 s)
    sees the node still completing; the node's epilog complete (11 s) changes the node state,
    so the agent's next poll (11.5 s) runs a cycle that starts j2 (backfill.c ``_more_work``:
    ``last_node_update``), not one only when something else changes (j9's end)."""
    e = run(ONE_PARTITION, [job(9, 0, 200, 24, limit=300), job(0, 0, 10, 8, limit=60),
                            job(1, 1, 10, 32, limit=60), job(2, 5, 5, 8, limit=60)])
    assert starts(e)["j2"] == 11.5
    assert starts(e)["j1"] > 200


def test_a_preemptor_is_reserved_as_if_the_jobs_it_may_preempt_were_gone():
    """j0 (high) holds two nodes until its limit (120 s), jl (normal, preemptable by high) a
    third for 500 s; the fourth is free.  jg (high, all 32 GPUs) cannot start even by
    preempting jl; will-run with preemptee candidates (cons_common ``_will_run_test``)
    removes jl from the plan, so jg is reserved on every node at 120 s, not at jl's limit.
    jb (high, 8 GPUs, limit 180) would fit the free node now but would still run at 120 s:
    it waits behind jg instead of starting (and jl is never preempted for it)."""
    e = run(PREEMPT, [job(0, 0, 100, 16, limit=120, qos="high"),
                      job(5, 0, 500, 8, limit=600, qos="normal"),
                      job(1, 1, 10, 32, limit=60, qos="high"),
                      job(2, 5, 30, 8, limit=180, qos="high")], qos=QOS)
    assert e.jobs.runs[2].reserved_start == 120.0
    # j0 ends at 100.5 and completes at 101: jg preempts jl then and starts once it is gone
    assert starts(e)["j1"] == pytest.approx(101 + KILL_S)
    assert starts(e)["j2"] > starts(e)["j1"]
    assert e.scheduler.mechanics.counters["requeued"] == 1  # jl, by jg only


def test_a_reservation_that_ends_before_the_next_running_job_gives_the_earlier_start():
    """ja holds nodes 0-1 until its limit (120.5 s), jn node 2 until 300.5 s; node 3 is free.
    jg (24 GPUs) is reserved at 120 s on nodes 0, 1 and 3 for its 60-s limit.  jx (8 GPUs,
    limit 180) overlaps jg's reservation anywhere before 180 s; after the running jobs' next
    batch end it would start at 300 s, but backfill.c retries at the plan's next boundary
    (``TRY_LATER`` at ``later_start``): jg's reservation ends at 180 s, when nodes 0, 1 and 3
    are free: jx is reserved there."""
    e = run(ONE_PARTITION, [job(0, 0, 100, 16, limit=120), job(5, 0, 250, 8, limit=300),
                            job(1, 1, 10, 24, limit=60), job(2, 2, 10, 8, limit=180)],
            until=5.0)
    jg, jx = e.jobs.runs[2], e.jobs.runs[3]
    assert (jg.reserved_start, jx.reserved_start) == (120.0, 180.0)
