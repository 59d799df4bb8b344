"""The structures that keep a pass's work proportional to what changed, checked against the
plain computations they replace."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.model.job_run import JobRun
from scheduler.model.state import ClusterState, Placement
from scheduler.scheduling.policies import REGISTRY
from scheduler.scheduling.queue_index import QueueIndex
from scheduler.scheduling.tenants import TenantBook
from scheduler.simulate import Scenario, ScenarioError
from scheduler.workload.jobs import Tenant, TrainingJob, Workload
from tests.core.factories import job, run_engine, small_plan, workload

TENANTS = ("a", "b", "c")


@st.composite
def queues(draw):
    n = draw(st.integers(1, 40))
    jobs = []
    for i in range(n):
        jobs.append(TrainingJob(
            job_id=draw(st.integers(0, 5)) if draw(st.booleans()) else 100 + i,
            name=f"j{i}", tenant=draw(st.sampled_from(TENANTS)),
            submit_s=float(draw(st.integers(0, 6))), gpus=draw(st.sampled_from((1, 8, 16, 64))),
            work_flops=1.0, priority=draw(st.sampled_from((0, 5, 20)))))
    usage = [draw(st.integers(0, 64)) for _ in TENANTS]
    return jobs, usage


@settings(max_examples=150, deadline=None)
@given(queues(), st.sampled_from(sorted(REGISTRY)))
def test_the_partitioned_walk_is_the_policys_sorted_order(q, name):
    jobs, usage = q
    plan = small_plan(8)
    state = ClusterState(plan)
    book = TenantBook(state, Workload(jobs=tuple(jobs), services=(), source="t",
                                      tenants=tuple(Tenant(t, 32, 1.0 + k)
                                                    for k, t in enumerate(TENANTS))))
    for t, u in zip(TENANTS, usage, strict=True):
        book.add_raw(t, u, 1.0, 1.0, 1.0, +1)
    runs = [JobRun(i, j, (0,), "any") for i, j in enumerate(jobs)]
    index = QueueIndex()
    for r in runs:
        index.add(r)
    order = REGISTRY[name].order
    walked = [r.idx for _, r in index.ordered(order, book, runs)]
    expected = [r.idx for r in sorted(runs, key=lambda r: (order(r, book), r.idx))]
    assert walked == expected


def test_runs_leaving_during_a_walk_are_not_lost_nor_repeated():
    runs = [JobRun(i, job(i, gpus=8, submit_h=i), (0,), "any") for i in range(6)]
    index = QueueIndex()
    for r in runs:
        index.add(r)
    seen = []
    fifo = REGISTRY["fifo"].order
    for _, r in index.ordered(fifo, None, runs):
        seen.append(r.idx)
        index.remove(r)  # it started
        if r.idx == 1:
            index.remove(runs[3])  # and another left the queue meanwhile
    assert seen == [0, 1, 2, 4, 5] and len(index) == 0


def test_a_dropped_partition_is_skipped_for_the_rest_of_the_walk():
    runs = [JobRun(i, job(i, gpus=g, submit_h=i), (0,), "any")
            for i, g in enumerate((8, 1, 8, 1, 8))]
    index = QueueIndex()
    for r in runs:
        index.add(r)
    walk = index.ordered(REGISTRY["fifo"].order, None, runs)
    seen = []
    for key, r in walk:
        seen.append(r.idx)
        if r.gpus == 8:
            walk.drop(key)
    assert seen == [0, 1, 3]


def test_freed_capacity_is_visible_inside_the_block_and_restored_exactly_after():
    state = ClusterState(small_plan(4))
    p = Placement(np.array([0, 1]), np.array([8, 3]), 0)
    gids = state.allocate(7, p, cpu_per_gpu=2.5, ram_gb_per_gpu=10.0, nic_gbps_per_gpu=50.0)
    before = [a.copy() for a in (state.node_free, state.node_free_cpu, state.node_free_ram,
                                 state.node_free_nic, state.gpu_owner)]
    version = state.version
    with state.freed([(p, 2.5, 10.0, 50.0)]):
        assert state.node_free[:2].tolist() == [8, 8]
        assert state.node_free_cpu[1] == before[1][1] + 7.5
    after = (state.node_free, state.node_free_cpu, state.node_free_ram, state.node_free_nic,
             state.gpu_owner)
    for a, b in zip(after, before, strict=True):
        np.testing.assert_array_equal(a, b)
    assert state.version == version and (state.gpu_owner[gids] == 7).all()


def test_the_index_of_ends_gives_what_sorting_the_running_gangs_gave():
    jobs = [job(i, gpus=8, hours=1 + i) for i in range(5)]
    e = run_engine(small_plan(4), workload(*jobs), until_h=0.5)
    expected = sorted((r.expected_end, r.gpus) for r in e.running.values())
    assert [(t, g) for t, g, _ in e.jobs.ends((0,))] == expected
    e.run_until(2.5 * 3600)
    expected = sorted((r.expected_end, r.gpus) for r in e.running.values())
    assert [(t, g) for t, g, _ in e.jobs.ends((0,))] == expected


def test_load_multiplies_the_preset_arrival_rates():
    def submitted(load):
        e, _ = Scenario(preset="dev-small", days=2, seed=4, load=load, failures=False,
                        physics=False).engine()
        return len(e.runs)
    base, triple = submitted(1.0), submitted(3.0)
    assert 2.5 < triple / base < 3.5  # Poisson counts of about 340 and 1,020


@pytest.mark.parametrize("kw, message", [
    ({"load": 0}, "load must be a positive number"),
    ({"load": "x"}, "load must be a positive number"),
    ({"load": 2.0, "trace": "tests/fixtures/traces/philly_sample.csv"}, "a trace is replayed"),
])
def test_a_bad_load_is_refused(kw, message):
    with pytest.raises(ScenarioError, match=message):
        Scenario(preset="dev-small", days=1, **kw)


def backfill_queue(depth):
    """24 GPUs; a 16-GPU gang runs 10 h; the 24-GPU head waits for it; four 1-GPU jobs of 20 h
    cannot backfill (they would delay the head) and a 1-GPU job of 1 h, fifth, can."""
    from dataclasses import replace as dc_replace
    jobs = [job(0, gpus=16, hours=10), job(1, gpus=24, hours=1, submit_h=0.01)]
    jobs += [job(2 + k, gpus=1, hours=20, submit_h=0.02 + 0.001 * k) for k in range(4)]
    jobs.append(job(6, gpus=1, hours=1, submit_h=0.03))
    e = run_engine(small_plan(3), workload(*jobs), policy="backfill")
    e.scheduler.policy = dc_replace(e.scheduler.policy, backfill_depth=depth)
    e.run_until(0.5 * 3600)
    return e


def test_backfill_tests_only_its_depth_of_jobs_behind_the_reservation_and_counts_the_stops():
    unbounded, shallow = backfill_queue(None), backfill_queue(2)
    assert unbounded.runs[6].state == "running"
    assert unbounded.counters["backfill_depth_stops"] == 0
    assert shallow.runs[6].state == "queued"
    assert shallow.counters["backfill_depth_stops"] >= 1
    assert all(e.runs[k].state == "queued" for e in (unbounded, shallow) for k in range(1, 6))


def physics_engine(max_tick_s):
    from scheduler.engine import Engine
    e = Engine(small_plan(4), workload(job(0, gpus=8, hours=20)), physics=True,
               physics_tick_s=1800.0, physics_max_tick_s=max_tick_s)
    return e


def test_the_physics_tick_doubles_while_no_speed_moves_up_to_its_longest():
    fixed, adaptive = physics_engine(None), physics_engine(7200.0)
    for e in (fixed, adaptive):
        e.run_until(10 * 3600)
    assert fixed.physics.ticks == 20
    # ticks at 0.5 h, then 1 h, 2 h, 2 h, 2 h later: 0.5, 1.5, 3.5, 5.5, 7.5, 9.5 h
    assert adaptive.physics.ticks == 6
    from scheduler.sim import Kind
    assert [h.time for h in adaptive.kernel.pending(Kind.TICK)] == [11.5 * 3600]


def test_a_tick_that_moves_a_speed_brings_the_tick_back_to_its_base():
    e = physics_engine(7200.0)
    e.run_until(3.6 * 3600)  # quiet ticks at 0.5, 1.5, 3.5 h: the next is 2 h away
    e.physics.tolerance = -1.0  # every gang counts as moved at the next refresh
    e.run_until(5.6 * 3600)
    from scheduler.sim import Kind
    assert [h.time for h in e.kernel.pending(Kind.TICK)] == [5.5 * 3600 + 1800.0]
