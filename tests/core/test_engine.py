"""The engine: seeded determinism, the stepping API, the books, and the mechanisms end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from scheduler.control.commands import COMMANDS
from scheduler.engine import Engine
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import CloudPoolSpec
from scheduler.model.job_run import CLOUD, DONE, QUEUED, REJECTED, RUNNING
from scheduler.model.ledger import CATEGORIES
from scheduler.report import WALL_CLOCK_FIELDS, build_report
from scheduler.workload.jobs import Requirement
from scheduler.workload.scenarios import scaled_preset, scenario_workload
from tests.core.factories import (
    HOUR,
    central_storage,
    job,
    run_engine,
    service,
    small_plan,
    workload,
)

DAY = 86400.0


def preset_engine(name: str, days: float, seed: int, *, gpus: int | None = None,
                  **kw) -> Engine:
    preset, f = scaled_preset(name, gpus)
    plan = preset.plan()
    wl = scenario_workload(name, plan, days=days, rng=np.random.default_rng(seed), scale=f)
    e = Engine(plan, wl, seed=seed, **kw)
    e.run_until(days * DAY)
    return e


def report(e: Engine) -> dict:
    """The run report without its wall-clock fields (the only ones that may differ)."""
    rep = build_report(e, scenario={"test": True}, wall_seconds=0.0)
    for path in WALL_CLOCK_FIELDS:
        d = rep
        for key in path[:-1]:
            d = d[key]
        d.pop(path[-1])
    return rep


# ------------------------------------------------------------------ determinism
def test_the_same_seed_gives_the_identical_report():
    a = report(preset_engine("dev-small", 0.5, seed=7))
    b = report(preset_engine("dev-small", 0.5, seed=7))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_the_same_seed_gives_the_identical_report_with_failures_on():
    a = preset_engine("dev-small", 0.5, seed=3, failures=True)
    b = preset_engine("dev-small", 0.5, seed=3, failures=True)
    assert report(a) == report(b)
    assert list(a.events) == list(b.events)


def test_a_different_seed_gives_a_different_report():
    assert report(preset_engine("dev-small", 0.5, seed=7)) != report(
        preset_engine("dev-small", 0.5, seed=8))


def test_random_placement_draws_from_the_engines_seed():
    wl = workload(*[job(gpus=8, hours=1) for _ in range(4)])
    nodes = {seed: [r.placement.nodes.tolist() for r in run_engine(
        small_plan(16), wl, seed=seed, policy="fifo", placement="random", until_h=0).runs]
        for seed in range(4)}
    again = [r.placement.nodes.tolist() for r in run_engine(
        small_plan(16), wl, seed=2, policy="fifo", placement="random", until_h=0).runs]
    assert again == nodes[2]
    assert len({str(v) for v in nodes.values()}) > 1


# ------------------------------------------------------------------ stepping API
def two_jobs() -> Engine:
    return run_engine(small_plan(2), workload(job(gpus=8, hours=1),
                                              job(gpus=8, hours=2, submit_h=0.5)))


def test_peek_returns_the_time_of_the_next_event_and_step_advances_to_it():
    e = two_jobs()
    assert e.now == 0.0 and e.peek() == 0.0
    assert e.step() is True
    assert e.now == 0.0 and e.runs[0].state == RUNNING
    assert e.peek() == 0.5 * HOUR
    e.step()
    assert e.now == 0.5 * HOUR and e.runs[1].state == RUNNING
    assert e.peek() == pytest.approx(1.0 * HOUR)  # the first job's end


def test_step_returns_false_when_no_event_is_left():
    e = two_jobs()
    while e.step():
        pass
    assert e.peek() is None
    assert e.now == 2.5 * HOUR
    assert all(r.state == DONE for r in e.runs)
    assert e.step() is False


def test_run_until_handles_events_at_t_and_stops_with_the_clock_at_t():
    e = two_jobs()
    e.run_until(0.5 * HOUR)
    assert e.now == 0.5 * HOUR and e.runs[1].state == RUNNING
    e.run_until(0.75 * HOUR)
    assert e.now == 0.75 * HOUR
    assert e.peek() == pytest.approx(1.0 * HOUR)
    e.run_until(10 * HOUR)
    assert e.now == 10 * HOUR and e.peek() is None


def test_time_cannot_go_back():
    e = two_jobs()
    e.run_until(HOUR)
    with pytest.raises(ValueError, match="cannot go back"):
        e.run_until(0.5 * HOUR)


def test_run_until_calls_progress_with_the_clock():
    seen = []
    e = two_jobs()
    e.run_until(3 * HOUR, progress=seen.append)
    assert seen and seen[-1] == 3 * HOUR


def test_the_snapshot_is_json_serialisable_and_its_ledger_sums_to_gpus_times_t():
    e = preset_engine("dev-small", 0.3, seed=1)
    snap = json.loads(json.dumps(e.snapshot()))
    assert snap["t"] == 0.3 * DAY
    assert set(snap["ledger_gpu_hours"]) == set(CATEGORIES)
    hours = sum(snap["ledger_gpu_hours"].values())
    util = snap["util"]
    assert hours == pytest.approx(util["gpus"] * 0.3 * 24, abs=1e-4)
    assert util["allocated"] + util["idle"] + util["spare"] + util["down"] == util["gpus"]
    assert snap["inference"]["serving_gpus"] > 0


# ------------------------------------------------------------------ the books
@pytest.mark.parametrize("name,gpus", [("dev-small", None), ("mixed-vendor", None),
                                       ("llama3-16k", 512)])
def test_ledger_categories_sum_to_gpus_times_hours_for_each_preset(name, gpus):
    e = preset_engine(name, 1.0, seed=2, gpus=gpus)
    rep = build_report(e, scenario={}, wall_seconds=0.0)
    hours = rep["ledger_gpu_hours"]
    assert all(v >= 0 for v in hours.values())
    assert sum(hours.values()) == pytest.approx(e.state.n_gpus * 24, abs=1e-4)
    assert rep["ledger_total_gpu_hours"] == pytest.approx(e.state.n_gpus * 24, rel=1e-9)
    assert hours["productive"] > 0


def test_a_job_runs_faster_on_a_faster_accelerator_by_the_tflops_ratio():
    ends = {}
    for model in ("H100-SXM", "B200"):
        e = run_engine(small_plan(2, model), workload(job(gpus=16, hours=3)), until_h=10)
        ends[model] = e.runs[0].end_s
    assert ends["H100-SXM"] == pytest.approx(3 * HOUR)
    ratio = get("B200").bf16_tflops / get("H100-SXM").bf16_tflops
    assert ends["H100-SXM"] / ends["B200"] == pytest.approx(ratio, rel=1e-9)


@pytest.mark.parametrize("hours,checkpoints", [(5.5, 5), (5.0, 4), (0.5, 0)])
def test_checkpoint_stall_is_one_write_per_finished_interval_except_after_the_last_step(
        hours, checkpoints):
    # 16 GPUs own the whole 10 GB/s tier: a 600 GB checkpoint takes 60 s to write
    plan = small_plan(2, storage=central_storage(10.0))
    wl = workload(job(gpus=16, hours=hours, checkpoint_gb=600.0, checkpoint_interval_s=3600))
    e = run_engine(plan, wl, until_h=10)
    run = e.runs[0]
    assert run.write_s == pytest.approx(60.0)
    assert run.end_s == pytest.approx(hours * HOUR + checkpoints * 60.0)
    led = e.horizon_ledger().gpu_hours()
    assert led["checkpoint_stall"] == pytest.approx(checkpoints * 60.0 * 16 / HOUR, abs=1e-6)
    assert led["productive"] == pytest.approx(16 * hours, abs=1e-6)


def test_an_open_segment_is_booked_up_to_now_in_the_horizon_ledger():
    plan = small_plan(2, storage=central_storage(10.0))
    wl = workload(job(gpus=16, hours=5.5, checkpoint_gb=600.0, checkpoint_interval_s=3600))
    e = run_engine(plan, wl, until_h=2.5)
    led = e.horizon_ledger().gpu_hours()
    # 2.5 h = two cycles of 3600 s compute + 60 s write, then 1680 s of compute
    assert led["checkpoint_stall"] == pytest.approx(16 * 120 / HOUR, abs=1e-6)
    assert led["productive"] == pytest.approx(16 * (2 * 3600 + 1680) / HOUR, abs=1e-6)
    assert e.ledger.total_gpu_s() == 0.0  # the engine's own books wait for the segment to close


# ------------------------------------------------------------------ elastic inference
def test_inference_beyond_free_capacity_borrows_from_the_lowest_priority_job_and_gives_back():
    # 32 GPUs: one 8-GPU replica at the trough plus two training gangs fill the cluster; demand
    # passes one replica between about 4.7 h and 19.3 h, so a second replica needs 8 GPUs
    wl = workload(job(gpus=8, hours=8, priority=0, name="low"),
                  job(gpus=16, hours=100, priority=10, name="high"),
                  services=(service(peak_replicas=2, trough_fraction=0.25, peak_hour=12,
                                    min_replicas=1),))
    e = run_engine(small_plan(4), wl, until_h=24)
    low, high = e.runs
    inf = build_report(e, scenario={}, wall_seconds=0.0)["inference"]
    assert inf["borrowed_gpu_hours"] > 0
    assert inf["lent_training_jobs"] >= 1
    assert low.lendings == 1 and high.lendings == 0
    assert high.state == RUNNING and high.preemptions == 0
    # given back when demand falls: the lent job restarts and completes its 8 h of compute
    assert low.state == DONE
    lent_at = next(ev["t"] for ev in e.events if ev["kind"] == "lend")
    assert 4.5 * HOUR < lent_at < 5 * HOUR
    assert low.end_s - low.first_start == pytest.approx(8 * HOUR + low.wait_s + low.restart_s)
    assert inf["slo_attainment"] == pytest.approx(1.0)


def replica_nodes(e) -> set[int]:
    return {int(n) for s in e.fleet.services for r in s.replicas for n in r.placement.nodes}


def test_a_node_that_goes_down_takes_its_inference_replicas_with_it_and_they_move():
    # two replicas on a 4-node cluster with nothing else: marking a replica's node failed
    # frees nothing there (a down node holds no work) and the replica comes back elsewhere
    wl = workload(services=(service(peak_replicas=2, trough_fraction=1.0, min_replicas=2),))
    e = run_engine(small_plan(4), wl, until_h=1)
    before = replica_nodes(e)
    assert len(before) == 2
    node = min(before)
    e.command("node_down", node=node)
    s = e.state
    assert not s.node_up[node]
    first = int(s.node_first_gpu[node])
    assert (s.gpu_owner[first:first + int(s.node_gpus[node])] < 0).all()
    assert node not in replica_nodes(e) and len(replica_nodes(e)) == 2
    assert int(e.fleet.serving_by_model.sum()) == 16
    # what the counters say: 8 GPUs down, 16 serving, none of them on the down node
    free, spare, down = e.free_counts()
    assert int(down.sum()) == 8


# ------------------------------------------------------------------ cloud burst
def test_a_burstable_job_blocked_past_its_patience_runs_in_the_cloud_pool():
    pool = CloudPoolSpec("aws", "us-test-1", "B200", 64, 4.0, 600)
    plan = small_plan(2, cloud_pools=(pool,))
    wl = workload(job(gpus=16, hours=10), job(gpus=16, hours=3, burstable=True,
                                               burst_after_s=3600))
    e = run_engine(plan, wl, until_h=24)
    blocker, burst = e.runs
    assert burst.state == DONE and burst.first_start == pytest.approx(3600)
    runtime = 3 * HOUR * get("H100-SXM").bf16_tflops / get("B200").bf16_tflops
    assert burst.end_s == pytest.approx(3600 + 600 + runtime)
    cloud = build_report(e, scenario={}, wall_seconds=0.0)["cloud"]
    gpu_hours = 16 * (600 + runtime) / HOUR
    assert cloud["jobs"] == 1
    assert cloud["gpu_hours"] == pytest.approx(gpu_hours, abs=1e-3)
    assert cloud["cost"] == pytest.approx(gpu_hours * 4.0, abs=0.01)
    # the on-premises books do not carry cloud time
    assert e.horizon_ledger().gpu_hours()["productive"] == pytest.approx(16 * 10)


def test_a_burstable_job_that_starts_before_its_patience_runs_out_stays_on_premises():
    plan = small_plan(2, cloud_pools=(CloudPoolSpec("aws", "r", "H100-SXM", 64, 4.0, 600),))
    wl = workload(job(gpus=16, hours=0.5), job(gpus=16, hours=1, burstable=True,
                                                burst_after_s=3600))
    e = run_engine(plan, wl, until_h=3)
    assert e.runs[1].first_start == pytest.approx(0.5 * HOUR) and e.runs[1].cloud_pool == -1
    assert e.cloud.report([], e.now)["jobs"] == 0


def test_a_job_in_the_cloud_counts_as_in_cloud_until_it_ends():
    plan = small_plan(2, cloud_pools=(CloudPoolSpec("aws", "r", "H100-SXM", 64, 4.0, 600),))
    wl = workload(job(gpus=16, hours=10), job(gpus=16, hours=3, burstable=True,
                                               burst_after_s=3600))
    e = run_engine(plan, wl, until_h=2)
    assert e.runs[1].state == CLOUD
    assert build_report(e, scenario={}, wall_seconds=0.0)["jobs"]["in_cloud_at_end"] == 1


# ------------------------------------------------------------------ admission
def test_a_job_larger_than_any_accepted_model_is_rejected_and_counted():
    wl = workload(job(gpus=40, hours=1), job(gpus=8, requirement=Requirement(vendors=("AMD",))),
                  job(gpus=8, hours=1))
    e = run_engine(small_plan(4), wl, until_h=5)
    too_big, wrong_vendor, fine = e.runs
    assert too_big.state == REJECTED and wrong_vendor.state == REJECTED
    assert fine.state == DONE
    jobs = build_report(e, scenario={}, wall_seconds=0.0)["jobs"]
    assert jobs["rejected"] == 2 and jobs["completed"] == 1
    assert [ev["kind"] for ev in e.events] == ["reject", "reject"]


def test_a_gang_no_node_shape_can_host_is_rejected_and_does_not_block_the_queue():
    # 8 GPUs x 15 cores = 120 cores on one node; an H100 node has 112
    wl = workload(job(gpus=8, hours=1, cpu_per_gpu=15.0), job(gpus=8, hours=1, submit_h=0.5))
    e = run_engine(small_plan(4), wl, policy="fifo", until_h=100)
    never, fine = e.runs
    assert fine.state == DONE
    assert never.state == REJECTED


def test_a_tight_affinity_that_no_domain_can_hold_is_relaxed_not_rejected():
    e = run_engine(small_plan(4), workload(job(gpus=32, hours=1, affinity="nvlink")), until_h=0)
    assert e.runs[0].affinity == "any" and e.runs[0].state == RUNNING


# ------------------------------------------------------------------ commands
def test_draining_a_node_that_does_not_exist_raises_and_changes_nothing():
    e = two_jobs()
    e.run_until(HOUR)
    before = json.dumps(e.snapshot(), sort_keys=True)
    for node in (99, -1, "3", True):
        with pytest.raises(ValueError, match="node"):
            e.command("drain_node", node=node)
    assert json.dumps(e.snapshot(), sort_keys=True) == before
    assert not e.state.node_drained.any()


def test_an_unknown_command_raises_listing_the_known_ones():
    e = two_jobs()
    with pytest.raises(ValueError) as err:
        e.command("reboot_cluster")
    for name in COMMANDS:
        assert name in str(err.value)


def test_a_command_with_a_missing_parameter_raises_value_error():
    with pytest.raises(ValueError, match="drain_node"):
        two_jobs().command("drain_node")


def test_a_drained_node_takes_no_new_gang():
    wl = workload(job(gpus=8, hours=1), job(gpus=8, hours=1))
    e = run_engine(small_plan(2), wl)
    e.command("drain_node", node=0)
    e.run_until(0.0)
    assert e.runs[0].placement.nodes.tolist() == [1]
    assert e.runs[1].state == QUEUED
    assert math.isclose(e.free_counts()[2].sum(), 8)  # its free GPUs count as down
