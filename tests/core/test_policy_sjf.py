"""``sjf``, ``sjf-limit``, ``sjf-history``: shortest expected job first, on hand-derived cases.

Every case runs on one or two 8-GPU H100 nodes, failures and physics off, with 8-GPU jobs
(one node each) of whole hours of compute, so every start and end below is derived by hand
in the test's docstring."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.model.job_run import JobRun
from scheduler.scheduling.policies import REGISTRY, get_policy
from scheduler.scheduling.policies.base import ranked_order
from scheduler.scheduling.queue_index import QueueIndex
from tests.core.factories import HOUR, job, run_engine, small_plan, workload


def hours(t: float | None) -> float | None:
    return None if t is None else round(t / HOUR, 9)


def jct_h(run) -> float:
    return (run.end_s - run.spec.submit_s) / HOUR


def test_sjf_runs_the_shortest_job_first_and_cuts_the_mean_completion_time():
    """One node; A (3 h), B (2 h), C (1 h) all arrive at 0, each needs the whole node.

    FIFO: A 0-3, B 3-5, C 5-6; completion times 3, 5, 6: mean 14/3 h.
    SJF (exact compute time): C 0-1, B 1-3, A 3-6; completion times 1, 3, 6: mean 10/3 h.
    """
    wl = workload(job(hours=3), job(hours=2), job(hours=1))
    fifo = run_engine(small_plan(1), wl, policy="fifo", until_h=10)
    sjf = run_engine(small_plan(1), wl, policy="sjf", until_h=10)
    assert [(hours(r.first_start), hours(r.end_s)) for r in fifo.runs] == [
        (0.0, 3.0), (3.0, 5.0), (5.0, 6.0)]
    assert [(hours(r.first_start), hours(r.end_s)) for r in sjf.runs] == [
        (3.0, 6.0), (1.0, 3.0), (0.0, 1.0)]
    assert sum(map(jct_h, fifo.runs)) / 3 == pytest.approx(14 / 3)
    assert sum(map(jct_h, sjf.runs)) / 3 == pytest.approx(10 / 3)


def test_sjf_does_not_preempt_a_running_job_for_a_shorter_one():
    """One node; A (3 h) starts at 0; B (2 h) and C (1 h) arrive at 0.5 h.

    SJF is non-preemptive: A runs to 3 h; then C (shorter) 3-4, then B 4-6.  FIFO would run
    B 3-5 and C 5-6.
    """
    wl = workload(job(hours=3), job(hours=2, submit_h=0.5), job(hours=1, submit_h=0.5))
    e = run_engine(small_plan(1), wl, policy="sjf", until_h=10)
    a, b, c = e.runs
    assert (hours(a.end_s), a.preemptions) == (3.0, 0)
    assert (hours(c.first_start), hours(b.first_start), hours(b.end_s)) == (3.0, 4.0, 6.0)
    assert e.counters["preemptions"] == 0


def test_sjf_ranks_a_job_that_rejoins_the_queue_by_its_remaining_work():
    """One node; A (3 h) starts at 0, B (2.5 h) arrives at 0.5 h.  At 1 h A is preempted (an
    operator's stop): its checkpoint at 1 h leaves 2 h of compute.  Ranked by what is left
    (2 h < 2.5 h) A goes again first: it restarts at once, pays the 180 s relaunch and ends at
    3.05 h; B runs 3.05-5.55 h.  (Ranked by its size, 3 h, B would start at 1 h.)"""
    wl = workload(job(hours=3), job(hours=2.5, submit_h=0.5))
    e = run_engine(small_plan(1), wl, policy="sjf", until_h=1)
    a, b = e.runs
    e.jobs.preempt(a, reason="an operator's stop")
    e.kernel.end_instant()
    assert a.rank == pytest.approx((2 * HOUR,))
    e.run_until(10 * HOUR)
    assert (hours(a.end_s), hours(b.first_start), hours(b.end_s)) == pytest.approx(
        (3.05, 3.05, 5.55))


def test_sjf_limit_orders_by_the_time_limit_and_puts_jobs_without_one_last_fifo():
    """One node; five 1 h jobs arrive together: B (limit 3 h), A (limit 5 h), C and D without
    a limit (C submitted before D), E (limit 2 h).

    The order is by the limit, whatever the real compute: E 0-1, B 1-2, A 2-3; then the jobs
    without a limit, first come first served: C 3-4, D 4-5.
    """
    wl = workload(job(hours=1, time_limit_s=5 * HOUR, name="A"),
                  job(hours=1, time_limit_s=3 * HOUR, name="B"),
                  job(hours=1, name="C"),
                  job(hours=1, name="D", submit_h=1e-6),
                  job(hours=1, time_limit_s=2 * HOUR, name="E"))
    e = run_engine(small_plan(1), wl, policy="sjf-limit", until_h=10)
    starts = {r.spec.name: hours(r.first_start) for r in e.runs}
    assert starts == {"E": 0.0, "B": 1.0, "A": 2.0, "C": 3.0, "D": 4.0}


def test_sjf_history_orders_by_the_users_mean_finished_duration_and_a_newcomer_by_all_jobs():
    """Two nodes.  At 0: A (user "slow", 2 h) and B (user "fast", 1 h) start side by side;
    B finishes at 1 h, A at 2 h: the mean finished durations are fast 1 h, slow 2 h, and 1.5 h
    over all jobs.  Z (16 GPUs, 1 h) holds both nodes from 2.5 h to 3.5 h.  Meanwhile
    C (slow, 1 h) joins the queue at 2.6 h, D (fast, really 3 h) at 2.7 h and E (no user;
    tenant "newcomers" has no finished job) at 2.8 h: estimates 2 h, 1 h and the neutral 1.5 h.

    At 3.5 h the order is D, E, C: D and E start; C starts when E ends at 4.5 h.
    (FIFO would start C and D at 3.5 h and E at 4.5 h.)
    """
    wl = workload(job(hours=2, user="slow", name="A"),
                  job(hours=1, user="fast", name="B"),
                  job(gpus=16, hours=1, submit_h=2.5, user="z", name="Z"),
                  job(hours=1, submit_h=2.6, user="slow", name="C"),
                  job(hours=3, submit_h=2.7, user="fast", name="D"),
                  job(hours=1, submit_h=2.8, tenant="newcomers", name="E"))
    e = run_engine(small_plan(2), wl, policy="sjf-history", until_h=3)
    ranking = e.scheduler.ranking
    assert (ranking.mean_s("fast"), ranking.mean_s("slow")) == pytest.approx((HOUR, 2 * HOUR))
    assert ranking.mean_s("newcomers") is None
    assert {r.spec.name: r.rank[0] for r in e.queue.values()} == pytest.approx(
        {"C": 2 * HOUR, "D": HOUR, "E": 1.5 * HOUR})
    e.run_until(10 * HOUR)
    starts = {r.spec.name: hours(r.first_start) for r in e.runs}
    assert starts == {"A": 0.0, "B": 0.0, "Z": 2.5, "D": 3.5, "E": 3.5, "C": 4.5}
    fifo = run_engine(small_plan(2), wl, policy="fifo", until_h=10)
    assert {r.spec.name: hours(r.first_start) for r in fifo.runs}["E"] == 4.5


@pytest.mark.parametrize("name", ["sjf", "sjf-limit", "sjf-history"])
def test_the_sjf_policies_are_registered_non_preemptive_and_backfill_like_backfill(name):
    policy, backfill = get_policy(name), REGISTRY["backfill"]
    assert policy.order is ranked_order and policy.ranking is not None
    assert not policy.preemption and policy.backfill
    assert (policy.backfill_depth, policy.backfill_interval_s) == (
        backfill.backfill_depth, backfill.backfill_interval_s)
    assert get_policy(name, placement="topology").placement == "topology"


def test_the_queue_index_walks_ranked_runs_in_rank_order_and_rekeys_a_changed_rank():
    """Runs of one partition (same tenant, size, shape) ranked out of submission order: the
    walk follows ``ranked_order``, and a run ranked again moves to its new place."""
    runs = [JobRun(i, job(i, gpus=8, submit_h=i), (0,), "any") for i in range(5)]
    ranks = {0: (5.0,), 1: (1.0,), 2: (3.0,), 3: (1.0,), 4: (0.5,)}
    index = QueueIndex()
    index.ranker = lambda r: ranks[r.idx]
    for r in runs:
        index.add(r)
    walked = [r.idx for _, r in index.ordered(ranked_order, None, runs)]
    assert walked == [4, 1, 3, 2, 0] == [r.idx for r in sorted(runs, key=lambda r:
                                                               ranked_order(r, None))]
    ranks[0] = (0.1,)
    index.rekey(runs[0])
    assert [r.idx for _, r in index.ordered(ranked_order, None, runs)] == [0, 4, 1, 3, 2]
    index.rank_with(None, runs)  # no ranking: first come, first served, ranks cleared
    assert [r.idx for _, r in index.ordered(ranked_order, None, runs)] == [0, 1, 2, 3, 4]
    assert all(r.rank == () for r in runs)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("a", "b")), st.sampled_from((1, 8, 64)),
                          st.integers(0, 4), st.integers(0, 3)), min_size=1, max_size=30),
       st.lists(st.integers(0, 29), max_size=10))
def test_a_ranked_walk_is_the_sorted_order_after_any_rekeying(specs, moved):
    """Runs of mixed tenants, sizes and submit times with random ranks, some ranked again
    while queued: the partitioned walk is still exactly ``sorted(queue, key=ranked_order)``."""
    runs = [JobRun(i, job(i, gpus=g, submit_h=sub, tenant=t), (0,), "any")
            for i, (t, g, sub, _) in enumerate(specs)]
    ranks = {i: (float(r),) for i, (*_, r) in enumerate(specs)}
    index = QueueIndex()
    index.ranker = lambda r: ranks[r.idx]
    for r in runs:
        index.add(r)
    for k, i in enumerate(moved):
        if i < len(runs):
            ranks[i] = (float(-k),)
            index.rekey(runs[i])
    walked = [r.idx for _, r in index.ordered(ranked_order, None, runs)]
    assert walked == [r.idx for r in sorted(runs, key=lambda r: (ranked_order(r, None), r.idx))]
