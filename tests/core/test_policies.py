"""Scheduling policies on literal clusters: who starts when, who is preempted, and the registry."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scheduler.hardware.cluster import NodeGroup
from scheduler.model.job_run import DONE, QUEUED, RUNNING
from scheduler.reliability.checkpoint import RESTART_FIXED_S
from scheduler.scheduling.policies import REGISTRY, get_policy, register
from scheduler.scheduling.policies.base import Policy, submit_order
from scheduler.workload.jobs import Requirement, Tenant
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


def test_gangs_arriving_together_all_start_while_they_fit():
    wl = workload(job(gpus=8, hours=1), job(gpus=16, hours=1), job(gpus=8, hours=1))
    e = run_engine(small_plan(4), wl, policy="fifo", until_h=0)
    assert [start_h(r) for r in e.runs] == [0.0, 0.0, 0.0]


def test_backfill_lets_a_short_small_job_pass_a_blocked_head():
    e = run_engine(small_plan(4), blocked_head(small_hours=1), policy="backfill", until_h=30)
    a, b, c = e.runs
    assert start_h(c) == 2.0  # ends at 3 h, before B's reserved start at 10 h
    assert b.reserved_start == 10 * HOUR
    assert start_h(b) == 10.0  # not delayed
    assert e.counters["backfilled"] == 1


# a quota above the cluster, so that fair-share ordering (within quota first) keeps FIFO order
AMPLE = (Tenant("research", 64),)


def test_backfill_works_the_same_under_the_default_policy_where_the_head_may_not_preempt():
    # the default policy first tries to preempt for the head (nobody has a lower priority)
    a, b, c = blocked_head(small_hours=1).jobs
    e = run_engine(small_plan(4), workload(a, b, c, tenants=AMPLE), policy="default",
                   until_h=3)
    a, b, c = e.runs
    assert start_h(c) == 2.0 and b.state == QUEUED
    assert e.counters["preemptions"] == 0 and e.counters["backfilled"] == 1


@pytest.mark.parametrize("policy", ["backfill", "default"])
def test_a_single_free_gpu_is_still_offered_to_a_one_gpu_job_behind_the_head(policy):
    # A (31 GPUs) leaves one GPU free; the head B (8) waits for A; C (1 GPU, 1 h) backfills
    wl = workload(job(gpus=31, hours=10), job(gpus=8, hours=2, submit_h=1),
                  job(gpus=1, hours=1, submit_h=2), tenants=AMPLE)
    e = run_engine(small_plan(4), wl, policy=policy, until_h=3)
    assert start_h(e.runs[2]) == 2.0 and e.counters["backfilled"] == 1


def test_a_gang_too_large_for_the_free_gpus_does_not_stop_backfill_behind_it():
    # A (24) leaves 8 free; B (32) waits for A; D (16) cannot fit in 8; C (8, 1 h) behind D can
    a, b, c = blocked_head(small_hours=1).jobs
    wl = workload(a, b, job(gpus=16, hours=1, submit_h=1.5, name="D"), c)
    e = run_engine(small_plan(4), wl, policy="backfill", until_h=3)
    assert e.runs[2].state == QUEUED and start_h(e.runs[3]) == 2.0


def test_backfill_goes_on_after_a_backfilled_job_leaves_a_single_gpu_free():
    # A (24) leaves 8 free; B (16) waits for A.  At 2 h X (7 GPUs, 1 h) backfills, which leaves
    # one GPU: C (1 GPU, 1 h) behind X backfills too
    wl = workload(job(gpus=24, hours=10), job(gpus=16, hours=2, submit_h=1),
                  job(gpus=7, hours=1, submit_h=2, name="X"),
                  job(gpus=1, hours=1, submit_h=2, name="C"))
    e = run_engine(small_plan(4), wl, policy="backfill", until_h=2.5)
    assert [start_h(r) for r in e.runs[2:]] == [2.0, 2.0]
    assert e.counters["backfilled"] == 2


@pytest.mark.parametrize("behind", [499, 500])
def test_backfill_tests_at_most_the_policys_depth_of_gangs_behind_the_head(behind):
    # Slurm's bf_max_job_test: the short job S, behind `behind` long 1-GPU jobs that would
    # delay the head, is tested (and starts) only if it is within the first 500
    depth = get_policy("backfill").backfill_depth
    assert depth == 500
    longs = [job(gpus=1, hours=20, submit_h=2) for _ in range(behind)]
    wl = workload(job(gpus=24, hours=10), job(gpus=32, hours=2, submit_h=1), *longs,
                  job(gpus=1, hours=1, submit_h=2, name="S"))
    e = run_engine(small_plan(4), wl, policy="backfill", until_h=2.5)
    s = e.runs[-1]
    if behind < depth:
        assert start_h(s) == 2.0 and e.counters["backfill_depth_stops"] == 0
    else:
        assert s.state == QUEUED and e.counters["backfill_depth_stops"] == 1
    assert all(r.state == QUEUED for r in e.runs[2:-1])


def test_a_gang_that_already_ran_is_estimated_with_its_restart_when_backfilling():
    # L (8, priority 0, 3 h of work) runs from 0; A (24, priority 5) ends at 4.025 h.  H
    # (priority 10) evicts L at 1 h (its checkpoint at 1 h is kept: 2 h of work left) and ends
    # at 2 h.  B (32, priority 1) waits for A.  L would end at 2 h + 180 s (relaunch) + 2 h =
    # 4.05 h, after B's reserved start: it must not backfill (without the restart it would)
    wl = workload(job(gpus=8, hours=3, name="L"),
                  job(gpus=24, hours=4.025, priority=5, submit_h=0.001, name="A"),
                  job(gpus=8, hours=1, submit_h=1, priority=10, name="H"),
                  job(gpus=32, hours=1, submit_h=1.5, priority=1, name="B"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=3)
    low, a, high, b = e.runs
    assert low.preemptions == 1 and start_h(high) == 1.0 and high.state == DONE
    assert low.state == QUEUED and b.state == QUEUED


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
    # an 8-GPU job gets all of the idle tier's 32 GB/s: each 4800 GB checkpoint stalls it
    # 150 s, so 7.9 h of compute take 7.9 h + 7 x 150 s = 8.19 h and, started at 2 h, end at
    # 10.19 h, past the head's 10 h reservation
    plan = small_plan(4, storage=central_storage(32.0))
    wl = workload(job(gpus=24, hours=10), job(gpus=32, hours=2, submit_h=1),
                  job(gpus=8, hours=7.9, submit_h=2, checkpoint_gb=4800.0,
                      checkpoint_interval_s=3600))
    e = run_engine(plan, wl, policy="backfill", until_h=30)
    a, head, c = e.runs
    assert c.write_s == pytest.approx(150.0)
    assert head.reserved_start == 10 * HOUR
    assert head.first_start <= head.reserved_start + 1e-6  # was 11.07 h: writes not estimated


def test_the_gpus_the_head_will_not_need_are_lent_to_one_long_job_not_to_every_one():
    # 48 GPUs: A (32) runs 0-10 h; the head B needs 40, so at 10 h it leaves 8 spare.  C and D
    # (8 GPUs, 20 h each) arrive at 2 h with 16 GPUs free: C takes the 8 spare ones, D would
    # take 8 of B's and must wait.  E (8 GPUs, 1 h), behind D, ends long before 10 h: it may
    # pass D and take the last 8
    wl = workload(job(gpus=32, hours=10), job(gpus=40, hours=2, submit_h=1),
                  job(gpus=8, hours=20, submit_h=2, name="C"),
                  job(gpus=8, hours=20, submit_h=2, name="D"),
                  job(gpus=8, hours=1, submit_h=2, name="E"))
    e = run_engine(small_plan(6), wl, policy="backfill", until_h=2.5)
    a, b, c, d, e_ = e.runs
    assert start_h(c) == 2.0 and d.state == QUEUED and start_h(e_) == 2.0
    assert e.counters["backfilled"] == 2
    e.run_until(11 * HOUR)
    assert start_h(b) == 10.0


def test_the_heads_reservation_counts_only_gpus_of_models_it_accepts():
    # H100 x 3 nodes and MI300X x 2.  A (16, NVIDIA) runs 0-10 h, X (16, AMD) ends before 3 h.
    # The head B (24, NVIDIA) can start only when A ends (10 h), whatever X does, so C
    # (8 GPUs, NVIDIA, 5 h) may backfill at 2 h: it ends at 7 h
    nvidia, amd = Requirement(vendors=("NVIDIA",)), Requirement(vendors=("AMD",))
    plan = small_plan(groups=(NodeGroup("H100-SXM", 3), NodeGroup("MI300X", 2)))
    wl = workload(job(gpus=16, hours=10, requirement=nvidia),
                  job(gpus=16, hours=3, requirement=amd, name="X"),
                  job(gpus=24, hours=2, submit_h=1, requirement=nvidia),
                  job(gpus=8, hours=5, submit_h=2, requirement=nvidia, name="C"))
    e = run_engine(plan, wl, policy="backfill", until_h=11)
    a, x, b, c = e.runs
    assert start_h(c) == 2.0 and e.counters["backfilled"] == 1
    assert start_h(b) == 10.0


def test_a_job_that_never_ran_is_estimated_without_a_restart_and_may_end_just_before_the_head():
    # C ends 60 s before the head's reserved start at 10 h; a job that has not started pays no
    # restart (relaunch alone is 180 s), so it backfills
    e = run_engine(small_plan(4), blocked_head(small_hours=8 - 60 / HOUR), policy="backfill",
                   until_h=3)
    a, b, c = e.runs
    assert start_h(c) == 2.0 and e.counters["backfilled"] == 1


def test_a_job_ending_exactly_at_the_heads_reserved_start_may_backfill():
    e = run_engine(small_plan(4), blocked_head(small_hours=8), policy="backfill", until_h=3)
    a, b, c = e.runs
    assert c.end_s is None and start_h(c) == 2.0


def test_every_job_that_backfills_is_counted():
    wl = workload(job(gpus=16, hours=10), job(gpus=32, hours=2, submit_h=1),
                  job(gpus=8, hours=1, submit_h=2), job(gpus=8, hours=1, submit_h=2.5))
    e = run_engine(small_plan(4), wl, policy="backfill", until_h=3)
    assert [start_h(r) for r in e.runs[2:]] == [2.0, 2.5]
    assert e.counters["backfilled"] == 2


def test_switching_policy_schedules_at_once_without_waiting_for_an_event():
    # FIFO keeps C (1 h) behind the blocked head; at 3 h nothing happens until A ends at
    # 10 h, but switching to backfill lets C start right away
    e = run_engine(small_plan(4), blocked_head(small_hours=1), policy="fifo", until_h=3)
    a, b, c = e.runs
    assert c.state == QUEUED
    e.command("set_policy", name="backfill")
    e.run_until(3.5 * HOUR)
    assert start_h(c) == 3.0


@pytest.mark.parametrize("policy", ["backfill", "topology-aware"])
def test_free_gpus_that_a_waiting_gang_cannot_use_for_their_shape_are_booked_fragmented(policy):
    # two nodes, each half taken by a 10-h gang; the other halves free up at 1 h.  h (8 GPUs,
    # a whole node) waits: the 8 free GPUs are fragmented, not idle.  With backfill, h2 (16)
    # and h3 (8, another tenant) have h's shape and are skipped once it failed: that must not
    # undo it; without backfill the pass stops at the blocked head
    wl = workload(job(gpus=4, hours=10, name="k0"), job(gpus=4, hours=1, submit_h=0.001),
                  job(gpus=4, hours=10, submit_h=0.002, name="k1"),
                  job(gpus=4, hours=1, submit_h=0.003),
                  job(gpus=8, hours=1, submit_h=0.5, name="h"),
                  job(gpus=16, hours=1, submit_h=0.6, name="h2"),
                  job(gpus=4, hours=1, submit_h=5, name="small"),
                  job(gpus=8, hours=1, submit_h=0.7, tenant="other", name="h3"))
    e = run_engine(small_plan(2), wl, policy=policy, until_h=5)
    assert [r.placement.nodes.tolist() for r in e.runs[:4]] == [[0], [0], [1], [1]]
    assert all(e.runs[i].state == QUEUED for i in (4, 5, 7))
    hours = e.ledger.gpu_hours()
    assert hours["fragmented"] == pytest.approx(8 * (5 - 1.003), abs=1e-6)
    # idle: while the four half-node gangs start (12, 8, 4 GPUs for 1 ms each) and while only
    # one half is free (4 GPUs from 1.001 h to 1.003 h): h does not fit in 4 GPUs at all
    assert hours["idle"] == pytest.approx((12 + 8 + 4) * 0.001 + 4 * 0.002, abs=1e-6)
    if policy == "backfill":
        # a later small job is still considered after the skipped h2: it fits in half a node
        e.run_until(5.5 * HOUR)
        assert start_h(e.runs[6]) == 5.0


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


def test_fair_share_serves_a_job_within_its_tenants_quota_before_one_beyond_it():
    # quotas: a 0, b 32.  b runs 24 GPUs (0-10 h) and 8 more until 1 h.  a1 (a has nothing
    # running: DRF share 0, and it was submitted first) and b2 (within b's quota) wait; at 1 h
    # 8 GPUs free up and b2 gets them
    tenants = (Tenant("a", 0), Tenant("b", 32))
    wl = workload(job(gpus=24, hours=10, tenant="b"), job(gpus=8, hours=1, tenant="b"),
                  job(gpus=8, hours=5, submit_h=0.5, tenant="a", name="a1"),
                  job(gpus=8, hours=5, submit_h=0.6, tenant="b", name="b2"),
                  tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="fair-share", until_h=1.5)
    a1, b2 = e.runs[2], e.runs[3]
    assert start_h(b2) == 1.0 and a1.state == QUEUED


@pytest.mark.parametrize("heavy", [{"cpu_per_gpu": 20.0}, {"ram_gb_per_gpu": 448.0}])
def test_fair_share_ranks_tenants_by_their_dominant_resource_not_only_gpus(heavy):
    # 32 GPUs, 448 cores, 8192 GB.  Node 0 holds "hungry" (4 GPUs, a GPU share of 0.125, but
    # 80 cores or 1792 GB: a share of 0.18 or 0.22) and "plain" (4 GPUs, 8 cores and 64 GB
    # each: 0.125).  Both have an 8-GPU job waiting when node 3 frees up: plain's dominant
    # share is the smaller, so its job goes first although hungry's was submitted earlier
    tenants = (Tenant("hungry", 1), Tenant("plain", 1))
    wl = workload(job(gpus=4, hours=10, tenant="hungry", **heavy),
                  job(gpus=4, hours=10, tenant="plain", submit_h=0.01),
                  job(gpus=16, hours=10, tenant="other", submit_h=0.02),
                  job(gpus=8, hours=1, tenant="other", submit_h=0.03),
                  job(gpus=8, hours=5, submit_h=0.5, tenant="hungry", name="hungry-2"),
                  job(gpus=8, hours=5, submit_h=0.6, tenant="plain", name="plain-2"),
                  tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="fair-share", until_h=1.5)
    assert [r.placement.nodes.tolist() for r in e.runs[:4]] == [[0], [0], [1, 2], [3]]
    hungry2, plain2 = e.runs[4], e.runs[5]
    assert start_h(plain2) == 1.03 and hungry2.state == QUEUED


def test_without_given_quotas_the_gpus_are_split_by_weight():
    # weights 1 and 3 on 32 GPUs: quotas 8 and 24.  a runs 16 (a1 within, a2 beyond: borrowed)
    # and b 16; b's next 8 GPUs are within its 24, so b2 reclaims a2's GPUs
    tenants = (Tenant("a", 0, 1.0), Tenant("b", 0, 3.0))
    wl = workload(job(gpus=8, hours=10, tenant="a", name="a1"),
                  job(gpus=8, hours=10, tenant="a", submit_h=0.01, name="a2"),
                  job(gpus=16, hours=10, tenant="b", submit_h=0.02, name="b1"),
                  job(gpus=8, hours=1, tenant="b", submit_h=1, name="b2"),
                  tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="fair-share", until_h=1.5)
    a1, a2, b1, b2 = e.runs
    assert (a1.preemptions, a2.preemptions, b1.preemptions) == (0, 1, 0)
    assert start_h(b2) == 1.0


def test_a_tenant_the_workload_does_not_list_weighs_one_in_the_split():
    # "a" is listed with weight 1, "b" is not: 16 GPUs each.  b runs 16 within its share and
    # 8 beyond it (borrowed); a's second 8 GPUs are within its 16 and reclaim them
    tenants = (Tenant("a", 0, 1.0),)
    wl = workload(job(gpus=16, hours=10, tenant="b", name="b1"),
                  job(gpus=8, hours=10, tenant="b", submit_h=0.01, name="b2"),
                  job(gpus=8, hours=10, tenant="a", submit_h=0.02, name="a1"),
                  job(gpus=8, hours=1, tenant="a", submit_h=1, name="a2"),
                  tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="fair-share", until_h=1.5)
    b1, b2, a1, a2 = e.runs
    assert (b1.preemptions, b2.preemptions, a1.preemptions) == (0, 1, 0)
    assert start_h(a2) == 1.0


def test_the_split_quotas_share_out_the_schedulable_gpus_not_the_hot_spares():
    # 4 nodes, one a hot spare: 24 schedulable GPUs, so two tenants of equal weight get 12
    # each.  b's 16-GPU job is beyond that (borrowed): a's next 4 GPUs (8 + 4 <= 12) are
    # within a's quota and reclaim it
    wl = workload(job(gpus=16, hours=10, tenant="b", name="b1"),
                  job(gpus=8, hours=10, tenant="a", submit_h=0.01, name="a1"),
                  job(gpus=4, hours=1, tenant="a", submit_h=1, name="a2"))
    e = run_engine(small_plan(4, spares=1), wl, policy="fair-share", until_h=1.5)
    b1, a1, a2 = e.runs
    assert b1.preemptions == 1 and start_h(a2) == 1.0


def test_a_tenant_without_a_quota_borrows_every_gpu_it_uses():
    # quotas given for "a" only: "x" has none, so even its 1-GPU gang is borrowed and a's job
    # within quota reclaims it
    tenants = (Tenant("a", 32),)
    wl = workload(job(gpus=1, hours=10, tenant="x", name="x1"),
                  job(gpus=24, hours=10, tenant="a", submit_h=0.01),
                  job(gpus=7, hours=10, tenant="a", submit_h=0.02),
                  job(gpus=1, hours=1, tenant="a", submit_h=1, name="a-last"),
                  tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="fair-share", until_h=1.5)
    assert e.runs[0].preemptions == 1 and start_h(e.runs[3]) == 1.0


def test_a_job_submitted_live_for_a_new_tenant_borrows_and_can_be_reclaimed():
    tenants = (Tenant("a", 16), Tenant("b", 16))
    wl = workload(job(gpus=16, hours=10, tenant="b"),
                  job(gpus=16, hours=1, submit_h=1, tenant="a", name="a1"), tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="fair-share", until_h=0.25)
    e.command("submit_job", job=job(gpus=16, hours=10, tenant="newcomer", name="new"))
    e.run_until(0.5 * HOUR)
    new = e.runs[2]
    assert new.spec.name == "new" and start_h(new) == 0.25
    e.run_until(1.5 * HOUR)
    assert new.preemptions == 1 and start_h(e.runs[1]) == 1.0


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
    assert e.runs[0].state == RUNNING and e.runs[1].state == QUEUED


@pytest.fixture
def compact(monkeypatch) -> str:
    """The name of a policy as ``default`` but compact (``Policy.compact``): a gang never
    starts across the domains its affinity names, and victims are sought within one."""
    monkeypatch.setitem(REGISTRY, "default-compact",
                        replace(REGISTRY["default"], name="default-compact", compact=True))
    return "default-compact"


def test_gangs_are_preempted_only_for_a_gang_that_then_runs(compact):
    # pods of two nodes: l1 (node 0, pod 0) and l2 (node 2, pod 1) are the lowest priority; a
    # 16-GPU gang that must stay in one pod (a compact policy) cannot use their two nodes
    wl = workload(job(gpus=8, hours=10, name="l1"),
                  job(gpus=8, hours=10, priority=5, name="m1", submit_h=0.01),
                  job(gpus=8, hours=10, name="l2", submit_h=0.02),
                  job(gpus=8, hours=10, priority=5, name="m2", submit_h=0.03),
                  job(gpus=16, hours=1, submit_h=1.5, priority=10, affinity="pod", name="h"))
    e = run_engine(small_plan(4), wl, policy=compact, until_h=0.05)
    assert [int(r.placement.nodes[0]) for r in e.runs[:4]] == [0, 1, 2, 3]
    e.run_until(2 * HOUR)
    l1, m1, l2, m2, high = e.runs
    # both pods hold priorities 0 and 5; pod 1's gangs are younger (less work lost since their
    # checkpoints), so l2 and m2 make room for h, which starts at once; m2 (priority 5) then
    # evicts l1 (priority 0) and restarts on its node, after that instant (a gang preempted
    # in an instant preempts nobody in it).  Evicting l1 and l2 (the two cheapest, but in
    # different pods) would have left h waiting.
    assert {r.spec.name: r.preemptions for r in e.runs} == {
        "l1": 1, "m1": 0, "l2": 1, "m2": 1, "h": 0}
    assert start_h(high) == 1.5 and pods_spanned(e.state, high.placement) == 1
    assert high.placement.nodes.tolist() == [2, 3]
    assert m2.state == RUNNING and m2.placement.nodes.tolist() == [0]
    assert l1.state == QUEUED and l2.state == QUEUED
    e.run_until(3 * HOUR)  # h is done: l1 and l2 return to pod 1, nobody else is evicted
    assert high.state == DONE and l1.state == RUNNING and l2.state == RUNNING
    assert e.counters["preemptions"] == 3


def test_a_pod_affine_high_priority_gang_preempts_lower_priority_gangs_of_one_pod(compact):
    # as above: l1 + l2 (priority 0) sit in different pods, but l1 + m1 or l2 + m2 (priority
    # 0 and 5) fill a pod, so h (priority 10) can run at 1.5 h instead of waiting until 10 h
    wl = workload(job(gpus=8, hours=10, name="l1"),
                  job(gpus=8, hours=10, priority=5, name="m1", submit_h=0.01),
                  job(gpus=8, hours=10, name="l2", submit_h=0.02),
                  job(gpus=8, hours=10, priority=5, name="m2", submit_h=0.03),
                  job(gpus=16, hours=1, submit_h=1.5, priority=10, affinity="pod", name="h"))
    e = run_engine(small_plan(4), wl, policy=compact, until_h=2)
    high = e.runs[4]
    assert start_h(high) == 1.5
    assert pods_spanned(e.state, high.placement) == 1


def test_the_default_policy_preempts_nobody_to_make_a_placement_compact():
    # the same gangs under the default policy: h takes the two priority-0 gangs, l1 and l2,
    # and starts across the two pods; the priority-5 gangs are not touched.  (Formerly it
    # evicted l2 and m2 for a compact placement, and m2 then evicted l1: three preemptions.)
    wl = workload(job(gpus=8, hours=10, name="l1"),
                  job(gpus=8, hours=10, priority=5, name="m1", submit_h=0.01),
                  job(gpus=8, hours=10, name="l2", submit_h=0.02),
                  job(gpus=8, hours=10, priority=5, name="m2", submit_h=0.03),
                  job(gpus=16, hours=1, submit_h=1.5, priority=10, affinity="pod", name="h"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=2)
    l1, m1, l2, m2, high = e.runs
    assert start_h(high) == 1.5 and pods_spanned(e.state, high.placement) == 2
    assert (l1.preemptions, m1.preemptions, l2.preemptions, m2.preemptions) == (1, 0, 1, 0)


def test_preemption_evicts_no_more_gangs_than_the_preemptor_needs():
    # v1 (8 GPUs) is younger than v2 (16 GPUs), so it is the first candidate; h needs 16:
    # once v2 is chosen v1 is unnecessary and must not be evicted (evicted, it would restart
    # at once beside h, so only its preemption count shows the difference)
    wl = workload(job(gpus=16, hours=10, name="v2"), job(gpus=8, hours=10, priority=5, name="m"),
                  job(gpus=8, hours=10, submit_h=0.1, name="v1"),
                  job(gpus=16, hours=1, submit_h=1, priority=10, name="h"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=1.5)
    v2, m, v1, high = e.runs
    assert high.state == RUNNING and start_h(high) == 1.0
    assert (v2.preemptions, v1.preemptions, m.preemptions) == (1, 0, 0)
    assert e.counters["preemptions"] == 1
    assert v1.state == RUNNING and v1.first_start == 0.1 * HOUR
    assert int(e.state.node_free.sum()) == 0


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


def test_a_registered_policy_is_selected_by_its_name():
    mine = Policy("test-lifo", "last come, first served", lambda run, ctx: (-run.spec.submit_s,))
    try:
        assert register(mine) is mine
        assert get_policy("test-lifo") is mine
        assert get_policy("test-lifo", placement="topology").placement == "topology"
    finally:
        REGISTRY.pop("test-lifo", None)


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


# ------------------------------------------------------------------ what a pass remembers
def test_free_gpus_behind_a_gang_that_cannot_use_them_are_booked_fragmented_from_its_arrival():
    # node 0: j0 (4 GPUs, 10 h) and j1 (4, 1 h); node 1: j2 (4, 10 h).  When j1 ends at 1 h,
    # 8 GPUs are free but on two nodes; the 8-GPU j3 arrives at 1.5 h and cannot use them.
    # Arriving changes no GPU, so only the pass's verdict tells the books: 8 GPUs x 1 h
    # fragmented by 2.5 h; idle: node 1's other 4 GPUs for the first hour, then 8 x 0.5 h
    wl = workload(job(gpus=4, hours=10), job(gpus=4, hours=1), job(gpus=4, hours=10),
                  job(gpus=8, hours=1, submit_h=1.5))
    e = run_engine(small_plan(2), wl, policy="fifo", until_h=2.5)
    assert e.runs[3].state == QUEUED
    led = e.horizon_ledger().gpu_hours()
    assert led["fragmented"] == pytest.approx(8.0, abs=1e-9)
    assert led["idle"] == pytest.approx(4.0 + 4.0, abs=1e-9)


def test_a_drill_that_moves_no_gpu_still_wakes_the_scheduler():
    e = run_engine(small_plan(2), workload(job(gpus=8, hours=5), job(gpus=16, hours=1)),
                   until_h=1)
    before = e.counters["passes"]
    e.command("drill", kind="storage_slowdown", factor=0.5, duration_s=600)
    assert e.counters["passes"] == before + 1
    e.command("drill", kind="storage_slowdown", factor=0.5, duration_s=600)
    assert e.counters["passes"] == before + 2


def test_a_queued_gangs_backfill_estimate_follows_a_storage_slowdown():
    from scheduler.scheduling.passes import SchedulingPass
    from tests.core.factories import central_storage
    # 64 GPUs alone on the central tier's 100 GB/s write (the running gang has no checkpoint),
    # so an 800 GB checkpoint takes 8 s, and 16 s at half the bandwidth; a 2 h job
    # checkpointing hourly writes once
    plan = small_plan(16, storage=central_storage(100.0))
    e = run_engine(plan, workload(job(gpus=128, hours=5),
                                  job(gpus=64, hours=2, checkpoint_gb=800.0,
                                      checkpoint_interval_s=3600.0, submit_h=0.1)),
                   policy="backfill", until_h=0.5)
    queued = e.runs[1]
    assert queued.state == QUEUED
    estimate = SchedulingPass(e.scheduler)._estimate_s
    assert estimate(queued) == pytest.approx(2 * 3600 + 8.0)
    e.jobs.costs.scale_storage(0.5)
    assert estimate(queued) == pytest.approx(2 * 3600 + 16.0)
