"""Scheduling policies on literal clusters: who starts when, who is preempted, and the registry."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.model.job_run import DONE, QUEUED, RUNNING
from scheduler.reliability.checkpoint import RESTART_FIXED_S
from scheduler.scheduling.policies import REGISTRY, get_policy, register
from scheduler.scheduling.policies.base import Policy, submit_order
from scheduler.workload.jobs import Tenant
from tests.core.factories import (
    HOUR,
    central_storage,
    job,
    pods_spanned,
    run_engine,
    small_plan,
    workload,
)


def start_h(run) -> float | None:
    """Start time in hours, to the nanosecond (work is stored as FLOPs, so times carry
    floating-point residue)."""
    return None if run.first_start is None else round(run.first_start / HOUR, 9)


# ------------------------------------------------------------------ FIFO and EASY backfill
def blocked_head(small_hours: float):
    """4 nodes: A (24 GPUs) runs 0-10 h; B (32 GPUs, 1 h) is blocked behind it; then C (8)."""
    return workload(job(gpus=24, hours=10),
                    job(gpus=32, hours=2, submit_h=1),
                    job(gpus=8, hours=small_hours, submit_h=2))


def test_fifo_is_strict_a_blocked_head_blocks_a_later_small_job():
    e = run_engine(small_plan(4), blocked_head(small_hours=1), policy="fifo", until_h=30)
    a, b, c = e.runs
    assert [start_h(a), start_h(b), start_h(c)] == [0.0, 10.0, 12.0]
    assert e.counters["backfilled"] == 0


def test_backfill_lets_a_short_small_job_pass_a_blocked_head():
    e = run_engine(small_plan(4), blocked_head(small_hours=1), policy="backfill", until_h=30)
    a, b, c = e.runs
    assert start_h(c) == 2.0  # ends at 3 h, before B's reserved start at 10 h
    assert b.reserved_start == 10 * HOUR
    assert start_h(b) == 10.0  # not delayed
    assert e.counters["backfilled"] == 1


def test_backfill_does_not_let_a_long_job_pass_when_it_would_delay_the_head():
    e = run_engine(small_plan(4), blocked_head(small_hours=20), policy="backfill", until_h=40)
    a, b, c = e.runs
    assert start_h(b) == 10.0
    assert start_h(c) == 12.0  # after B, not at 2 h: it would have held 8 of B's 32 GPUs
    assert e.counters["backfilled"] == 0


def test_backfill_lets_a_long_job_use_gpus_the_head_will_not_need():
    # B needs only 24 of the 32 GPUs free at 10 h: an 8-GPU job of any length fits beside it
    wl = workload(job(gpus=24, hours=10), job(gpus=24, hours=2, submit_h=1),
                  job(gpus=8, hours=20, submit_h=2))
    e = run_engine(small_plan(4), wl, policy="backfill", until_h=2)
    a, b, c = e.runs
    assert b.state == QUEUED and b.reserved_start == 10 * HOUR
    assert start_h(c) == 2.0 and e.counters["backfilled"] == 1


def test_backfill_counts_the_checkpoint_writes_of_a_job_that_has_not_started_yet():
    # an 8-GPU job gets 8 of the tier's 32 GB/s: each 4800 GB checkpoint stalls it 600 s, so
    # 7.9 h of compute take 7.9 h + 7 x 600 s = 9.07 h and, started at 2 h, end at 11.07 h
    plan = small_plan(4, storage=central_storage(32.0))
    wl = workload(job(gpus=24, hours=10), job(gpus=32, hours=2, submit_h=1),
                  job(gpus=8, hours=7.9, submit_h=2, checkpoint_gb=4800.0,
                      checkpoint_interval_s=3600))
    e = run_engine(plan, wl, policy="backfill", until_h=30)
    a, head, c = e.runs
    assert c.write_s == pytest.approx(600.0)
    assert head.reserved_start == 10 * HOUR
    assert head.first_start <= head.reserved_start + 1e-6  # was 11.07 h: writes not estimated


# ------------------------------------------------------------------ fair share
def fair_share_run(heavy_weight: float):
    """6 nodes (48 GPUs); heavy holds 24 GPUs, light 16 plus 8 that free up at 2 h.

    Both tenants have a token quota of 1 GPU, so both borrow and only the weighted dominant
    share orders them.  Heavy submitted first (1 h) and light second (1.5 h).
    """
    tenants = (Tenant("heavy", 1, heavy_weight), Tenant("light", 1, 1.0))
    wl = workload(job(gpus=24, hours=100, tenant="heavy"),
                  job(gpus=16, hours=100, tenant="light"),
                  job(gpus=8, hours=2, tenant="light"),
                  job(gpus=8, hours=5, submit_h=1.0, tenant="heavy", name="heavy-2"),
                  job(gpus=8, hours=5, submit_h=1.5, tenant="light", name="light-2"),
                  tenants=tenants)
    e = run_engine(small_plan(6), wl, policy="fair-share", until_h=3)
    return e, e.runs[3], e.runs[4]


def test_fair_share_starts_the_light_tenants_job_before_the_heavy_users():
    e, heavy, light = fair_share_run(heavy_weight=1.0)
    # dominant shares at 2 h: heavy 24/48 = 0.5, light 16/48 = 0.33
    assert start_h(light) == 2.0
    assert heavy.state == QUEUED


def test_fair_share_divides_the_dominant_share_by_the_tenants_weight():
    e, heavy, light = fair_share_run(heavy_weight=2.0)
    # heavy 0.5 / 2 = 0.25 < light 0.33: heavy goes first despite using more GPUs
    assert start_h(heavy) == 2.0
    assert light.state == QUEUED


def test_fifo_on_the_same_workload_serves_the_earlier_submission():
    tenants = (Tenant("heavy", 1, 1.0), Tenant("light", 1, 1.0))
    wl = workload(job(gpus=24, hours=100, tenant="heavy"), job(gpus=16, hours=100, tenant="light"),
                  job(gpus=8, hours=2, tenant="light"),
                  job(gpus=8, hours=5, submit_h=1.0, tenant="heavy"),
                  job(gpus=8, hours=5, submit_h=1.5, tenant="light"), tenants=tenants)
    e = run_engine(small_plan(6), wl, policy="fifo", until_h=3)
    assert start_h(e.runs[3]) == 2.0 and e.runs[4].state == QUEUED


# ------------------------------------------------------------------ preemption
def test_a_high_priority_job_preempts_a_lower_priority_gang_which_resumes_from_its_checkpoint():
    # L: 32 GPUs, 10 h of compute, a checkpoint every hour (writes take no time here)
    # H: 16 GPUs, 1 h, priority 10, arrives at 2.5 h: L loses the 0.5 h since its checkpoint
    wl = workload(job(gpus=32, hours=10, priority=0, name="low"),
                  job(gpus=16, hours=1, submit_h=2.5, priority=10, name="high"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=20)
    low, high = e.runs
    assert start_h(high) == 2.5
    assert low.preemptions == 1 and e.counters["preemptions"] == 1
    led = e.horizon_ledger().gpu_hours()
    assert led["preempted"] == pytest.approx(32 * 0.5)
    # restarts when H ends, pays the relaunch, and computes only the 8 h not checkpointed
    assert low.state == DONE
    assert low.end_s == pytest.approx(3.5 * HOUR + RESTART_FIXED_S + 8 * HOUR)
    assert led["recovery"] == pytest.approx(32 * RESTART_FIXED_S / HOUR)
    assert led["productive"] == pytest.approx(32 * 10 + 16 * 1)


def test_a_job_of_equal_priority_does_not_preempt():
    wl = workload(job(gpus=32, hours=10), job(gpus=16, hours=1, submit_h=2.5))
    e = run_engine(small_plan(4), wl, policy="default", until_h=5)
    assert e.counters["preemptions"] == 0
    assert e.runs[1].state == QUEUED


def test_a_gang_younger_than_ten_minutes_is_not_preempted():
    wl = workload(job(gpus=32, hours=10), job(gpus=16, hours=1, submit_h=0.1, priority=10))
    e = run_engine(small_plan(4), wl, policy="default", until_h=0.12)
    assert e.counters["preemptions"] == 0


def test_gangs_are_preempted_only_for_a_gang_that_then_runs():
    # pods of two nodes: l1 (node 0, pod 0) and l2 (node 2, pod 1) are the lowest priority; a
    # 16-GPU gang that must stay in one pod cannot use their two nodes
    wl = workload(job(gpus=8, hours=10, name="l1"),
                  job(gpus=8, hours=10, priority=5, name="m1", submit_h=0.01),
                  job(gpus=8, hours=10, name="l2", submit_h=0.02),
                  job(gpus=8, hours=10, priority=5, name="m2", submit_h=0.03),
                  job(gpus=16, hours=1, submit_h=1.5, priority=10, affinity="pod", name="h"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=0.05)
    assert [int(r.placement.nodes[0]) for r in e.runs[:4]] == [0, 1, 2, 3]
    e.run_until(3 * HOUR)
    high = e.runs[4]
    preempted = [r.spec.name for r in e.runs if r.preemptions]
    # with l1 and m1 (pod 0) gone h runs at once; m1 (priority 5) then evicts l2 (priority 0)
    assert not preempted or high.first_start == pytest.approx(1.5 * HOUR), \
        f"{preempted} evicted for a job that waits"
    assert e.free_counts()[0].sum() == 0 or not e.queue


def test_a_pod_affine_high_priority_gang_preempts_lower_priority_gangs_of_one_pod():
    # as above: l1 + l2 (priority 0) sit in different pods, but l1 + m1 (priority 0 and 5)
    # fill pod 0, so h (priority 10) can run at 1.5 h instead of waiting until 10 h
    wl = workload(job(gpus=8, hours=10, name="l1"),
                  job(gpus=8, hours=10, priority=5, name="m1", submit_h=0.01),
                  job(gpus=8, hours=10, name="l2", submit_h=0.02),
                  job(gpus=8, hours=10, priority=5, name="m2", submit_h=0.03),
                  job(gpus=16, hours=1, submit_h=1.5, priority=10, affinity="pod", name="h"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=2)
    high = e.runs[4]
    assert start_h(high) == 1.5
    assert pods_spanned(e.state, high.placement) == 1


def test_preemption_evicts_no_more_gangs_than_the_preemptor_needs():
    # v1 (8 GPUs) is younger than v2 (16 GPUs); h needs 16: evicting v2 alone is enough
    wl = workload(job(gpus=16, hours=10, name="v2"), job(gpus=8, hours=10, priority=5, name="m"),
                  job(gpus=8, hours=10, submit_h=0.1, name="v1"),
                  job(gpus=16, hours=1, submit_h=1, priority=10, name="h"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=1.5)
    v2, m, v1, high = e.runs
    assert high.state == RUNNING and v2.preemptions == 1
    assert v1.state == RUNNING  # was evicted too, then queued beside 8 idle GPUs till 2 h
    assert e.free_counts()[0].sum() == 0


def quota_run(reclaimer_gpus: int):
    tenants = (Tenant("a", 16), Tenant("b", 16))
    wl = workload(job(gpus=32, hours=10, tenant="b", name="borrower"),
                  job(gpus=reclaimer_gpus, hours=1, submit_h=1, tenant="a", name="owner"),
                  tenants=tenants)
    return run_engine(small_plan(4), wl, policy="fair-share", until_h=1.5)


def test_a_job_within_its_quota_reclaims_gpus_from_another_tenants_borrower():
    e = quota_run(reclaimer_gpus=16)
    borrower, owner = e.runs
    assert borrower.borrowed is True
    assert borrower.preemptions == 1 and borrower.state == QUEUED
    assert start_h(owner) == 1.0 and owner.borrowed is False


def test_a_job_beyond_its_quota_does_not_reclaim():
    e = quota_run(reclaimer_gpus=24)
    borrower, owner = e.runs
    assert borrower.preemptions == 0 and borrower.state == RUNNING
    assert owner.state == QUEUED


# ------------------------------------------------------------------ registry
def test_the_registry_refuses_a_duplicate_name():
    before = dict(REGISTRY)
    with pytest.raises(ValueError, match="already registered"):
        register(Policy("fifo", "an impostor", submit_order))
    assert REGISTRY == before
    assert REGISTRY["fifo"].description != "an impostor"


def test_an_unknown_policy_name_gives_an_error_listing_the_names():
    with pytest.raises(ValueError) as err:
        get_policy("round-robin")
    msg = str(err.value)
    assert "round-robin" in msg
    for name in ("default", "fifo", "backfill", "fair-share", "topology-aware"):
        assert name in msg


def test_every_registered_policy_names_a_known_placement_strategy():
    from scheduler.scheduling.placement import STRATEGIES
    assert set(REGISTRY) >= {"default", "fifo", "backfill", "fair-share", "topology-aware"}
    for name, policy in REGISTRY.items():
        assert policy.name == name
        assert policy.placement in STRATEGIES


# ------------------------------------------------------------------ topology-aware
def fragmented():
    """16 nodes in pods of 2.  Nodes 0, 4, 8, 12 stay busy; the other 12 free up at 1 h; then
    four 16-GPU gangs arrive: 4 pods are wholly free, the other 4 keep one free node each."""
    first = [job(gpus=8, hours=10 if n % 4 == 0 else 1) for n in range(16)]
    gangs = [job(gpus=16, hours=2, submit_h=1) for _ in range(4)]
    return workload(*first, *gangs)


def gang_spans(policy: str) -> list[int]:
    e = run_engine(small_plan(16), fragmented(), policy=policy, until_h=1)
    gangs = e.runs[16:]
    assert all(r.state == RUNNING for r in gangs)
    long_nodes = sorted(int(r.placement.nodes[0]) for r in e.runs[:16] if r.state == RUNNING)
    assert long_nodes == [0, 4, 8, 12]
    return [pods_spanned(e.state, r.placement) for r in gangs]


def test_topology_aware_beats_first_fit_on_mean_pod_span_in_a_fragmented_cluster():
    topo, naive = gang_spans("topology-aware"), gang_spans("fifo")
    assert topo == [1, 1, 1, 1]
    assert naive == [2, 2, 1, 2]  # first fit: {1,2}, {3,5}, {6,7}, {9,10}
    assert np.mean(topo) < np.mean(naive)
