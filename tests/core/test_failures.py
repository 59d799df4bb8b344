"""The failure engine: calibrated rates, blast radius, recovery modes, checkpoint policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler.engine import Engine
from scheduler.hardware.cluster import NodeGroup, StorageSpec, plan_cluster
from scheduler.reliability import checkpoint
from scheduler.reliability.failures import BY_CAUSE, MODES, job_failure_rate, unit_counts
from scheduler.report import WALL_CLOCK_FIELDS, build_report
from scheduler.workload.jobs import Requirement, TrainingJob, Workload
from scheduler.workload.scenarios import frontier_job, scaled_preset, scenario_workload

LLAMA3_UNEXPECTED = 419
LLAMA3_PLANNED = 47
LLAMA3_TOP = {"faulty_gpu": 148, "gpu_hbm3_memory": 72, "software_bug": 54,
              "network_cable": 34 + 1}  # 35 "network switch/cable": cables plus the leaf


def _strip(report):
    for path in WALL_CLOCK_FIELDS:
        d = report
        for key in path[:-1]:
            d = d[key]
        d.pop(path[-1], None)
    return report


def llama3_run(days: float, seed: int, **kw) -> dict:
    preset, f = scaled_preset("llama3-16k", None)
    plan = preset.plan()
    wl = scenario_workload("llama3-16k", plan, days=days, rng=np.random.default_rng(seed),
                           scale=f)
    engine = Engine(plan, wl, seed=seed, failures=True, checkpoint_interval="auto", **kw)
    engine.run_until(days * 86400.0)
    return build_report(engine, scenario={"preset": "llama3-16k", "days": days},
                        wall_seconds=0.0)


@pytest.fixture(scope="module")
def llama3_54d():
    return llama3_run(54, seed=3)


def test_llama3_54_days_reproduces_the_published_interruption_count(llama3_54d):
    inter = llama3_54d["interruptions"]
    # Poisson noise: 3 standard deviations
    assert abs(inter["unplanned"] - LLAMA3_UNEXPECTED) < 3 * math.sqrt(LLAMA3_UNEXPECTED)
    assert abs(inter["planned"] - LLAMA3_PLANNED) < 3 * math.sqrt(LLAMA3_PLANNED)


def test_llama3_cause_mix_matches_the_published_table(llama3_54d):
    by_cause = llama3_54d["interruptions"]["by_cause"]
    for cause, published in LLAMA3_TOP.items():
        got = by_cause.get(cause, 0) + (by_cause.get("leaf_switch", 0)
                                        if cause == "network_cable" else 0)
        assert abs(got - published) < 3 * math.sqrt(published) + 1, cause
    gpu_share = sum(n for c, n in by_cause.items() if BY_CAUSE[c].component == "gpu")
    unplanned = llama3_54d["interruptions"]["unplanned"]
    assert 0.5 < gpu_share / unplanned < 0.75  # published: 268 of 419 (64 %)


def test_llama3_keeps_effective_training_time_above_90_percent(llama3_54d):
    job = llama3_54d["largest_job"]
    assert job["gpus"] == 16384
    assert job["ettr"] > 0.90
    assert job["mttf_hours"] == pytest.approx(54 * 24 / job["interruptions"], rel=0.01)
    led = llama3_54d["ledger_gpu_hours"]
    assert led["lost_work"] > 0 and led["recovery"] > 0 and led["down_for_repair"] > 0
    assert sum(led.values()) == pytest.approx(16896 * 54 * 24, rel=1e-9)


def test_expected_failures_scale_with_component_counts():
    small, _ = scaled_preset("llama3-16k", 2048)
    big, _ = scaled_preset("llama3-16k", None)
    u_small, u_big = unit_counts(small.plan()), unit_counts(big.plan())
    assert u_big["gpu"] / u_small["gpu"] == pytest.approx(8.25, rel=0.01)
    rate = {c: sum(m.per_hour for m in MODES if m.component == c) for c in ("gpu", "host")}
    expect_small = sum(rate[c] * u_small[c] for c in rate)
    expect_big = sum(rate[c] * u_big[c] for c in rate)
    assert expect_big / expect_small == pytest.approx(u_big["gpu"] / u_small["gpu"], rel=0.01)
    assert job_failure_rate(2048, 16384) == pytest.approx(8 * job_failure_rate(256, 2048))


def test_young_daly_interval_matches_the_closed_form():
    c, m = 30.0, 3 * 3600.0
    assert checkpoint.young_interval(c, m) == pytest.approx(math.sqrt(2 * c * m))
    x = c / (2 * m)
    daly = math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c
    assert checkpoint.daly_interval(c, m) == pytest.approx(daly)
    assert checkpoint.daly_interval(3 * m, m) == m


def test_auto_checkpoint_interval_is_daly_for_the_jobs_size(llama3_54d):
    job = llama3_54d["largest_job"]
    mttf_s = 3600.0 / job_failure_rate(2048, 16384)
    assert job["checkpoint_interval_s"] == pytest.approx(
        checkpoint.daly_interval(job["checkpoint_write_s"], mttf_s), rel=0.005)  # write_s rounded


def test_memory_recovery_loses_less_than_disk_on_the_same_seed():
    disk = llama3_run(10, seed=5, recovery="disk")
    memory = llama3_run(10, seed=5, recovery="memory")
    assert disk["interruptions"] == memory["interruptions"]
    lost = lambda r: r["ledger_gpu_hours"]["lost_work"] + r["ledger_gpu_hours"]["recovery"]  # noqa: E731
    assert lost(memory) < lost(disk)
    assert memory["largest_job"]["restart_s"] < disk["largest_job"]["restart_s"]


def _cluster_two_jobs():
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 32),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 16})
    wide = frontier_job(0, "wide", 128, params_b=7.0, tokens=2e12, tenant="a",
                        requirement=Requirement(), tp=8, pp=1)
    return plan, Workload(jobs=(wide,))


def test_a_spine_failure_slows_but_does_not_kill_the_jobs_that_cross_it():
    plan, wl = _cluster_two_jobs()
    engine = Engine(plan, wl, seed=1)
    engine.run_until(3600.0)
    run = engine.runs[0]
    assert run.state == "running"
    pods = np.unique(engine.state.domain["pod"][run.placement.nodes])
    spines = np.flatnonzero(plan.fabric.switch_tier > 0)
    unit = int(np.flatnonzero(np.isin(plan.fabric.switch_pod[spines], pods))[0])
    hit = engine.command("drill", kind="spine_switch", target=unit)
    assert hit["jobs"] == ["wide"]
    assert run.state == "running" and run.interruptions == 0 and run.slow < 1.0
    engine.run_until(7200.0)
    led = engine.horizon_ledger().gpu_hours()
    assert led["exposed_communication"] > 0 and led["lost_work"] == 0


def test_a_node_drill_interrupts_its_job_which_resumes_on_a_hot_spare():
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 10, spares=2),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 16})
    job = TrainingJob(0, "j", "a", 0.0, 64, 64 * 989e12 * 0.4 * 10 * 3600,
                      checkpoint_gb=100.0, checkpoint_interval_s=1800.0)
    engine = Engine(plan, Workload(jobs=(job,)), seed=2)
    engine.run_until(3000.0)
    run = engine.runs[0]
    node = int(run.placement.nodes[0])
    engine.command("drill", kind="node", target=node)
    assert run.state == "detecting"
    engine.run_until(3000.0 + 121.0)
    assert run.state == "running" and node not in run.placement.nodes.tolist()
    assert np.any(plan.node_spare[run.placement.nodes])
    led = engine.horizon_ledger().gpu_hours()
    # 1,200 s of compute since the checkpoint at 1,800 s is lost on 64 GPUs
    assert led["lost_work"] == pytest.approx(64 * (3000.0 - 1800.0 - run.write_s) / 3600,
                                             rel=0.01)
    assert led["recovery"] > 64 * 120 / 3600


def test_a_drill_on_a_missing_target_is_refused_and_changes_nothing():
    plan, wl = _cluster_two_jobs()
    engine = Engine(plan, wl, seed=1)
    engine.run_until(600.0)
    before = engine.snapshot()
    for bad in ({"kind": "node", "target": 10_000}, {"kind": "leaf_switch", "target": -1},
                {"kind": "warp_core"}, {"kind": "supply_cut", "target": "TPUv9"},
                {"kind": "storage_slowdown", "factor": 3}):
        with pytest.raises(ValueError):
            engine.command("drill", **bad)
    after = engine.snapshot()
    assert after["allocated"] == before["allocated"] and after["events"] == before["events"]


def test_failures_are_deterministic_per_seed_and_off_gives_the_baseline():
    a = _strip(llama3_run(3, seed=11))
    b = _strip(llama3_run(3, seed=11))
    assert a == b
    preset, f = scaled_preset("llama3-16k", 1024)
    plan = preset.plan()
    wl = scenario_workload("llama3-16k", plan, days=3, rng=np.random.default_rng(1), scale=f)
    off = Engine(plan, wl, seed=11, failures=False)
    off.run_until(3 * 86400.0)
    led = off.horizon_ledger().gpu_hours()
    assert led["lost_work"] == 0 and led["down_for_repair"] == 0


def _memory_engine():
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 12, nodes_per_rack=2),),
                        fabric_kind="fat-tree", fabric_kw={"radix": 16},
                        storage=(StorageSpec("pfs", "central", 1000.0, 10.0, 5.0),))
    job = TrainingJob(0, "j", "a", 0.0, 64, 64 * 989e12 * 0.4 * 10 * 3600,
                      checkpoint_gb=100.0, checkpoint_interval_s=600.0)
    engine = Engine(plan, Workload(jobs=(job,)), seed=2, recovery="memory")
    engine.run_until(2.5 * 3600.0)
    return engine, engine.runs[0]


def test_memory_recovery_loses_little_when_one_node_of_a_replica_group_fails():
    engine, run = _memory_engine()
    engine.command("drill", kind="node", target=int(run.placement.nodes[0]))
    led = engine.horizon_ledger().gpu_hours()
    assert led["lost_work"] < 64 * 600 / 3600  # at most one in-memory interval
    assert engine.reliability.memory_fallbacks == 0


def test_memory_recovery_falls_back_to_disk_when_a_whole_replica_group_is_lost():
    engine, run = _memory_engine()
    rack = int(engine.plan.node_rack[run.placement.nodes[0]])  # a rack holds ranks 0 and 1
    assert set(np.flatnonzero(engine.plan.node_rack == rack)) == set(run.placement.nodes[:2])
    engine.command("drill", kind="rack_power", target=rack)
    led = engine.horizon_ledger().gpu_hours()
    # nothing reached disk in 2.5 h (persisted every 3 h): all compute so far is lost
    assert engine.reliability.memory_fallbacks == 1
    assert led["lost_work"] == pytest.approx(64 * (2.5 * 3600 - engine.runs[0].write_s * 14)
                                             / 3600, rel=0.02)
    engine.run_until(3 * 3600.0)
    assert run.state == "running"
    # the restore reads the disk checkpoint (10 GB/s tier, this gang's share), not a peer
    bw = checkpoint.job_bandwidth_gb_s(gpus=64, nodes=8, tier_gb_s=10.0, cluster_gpus=96)
    assert run.restart_s == pytest.approx(checkpoint.restart_seconds(100.0, bw))
    assert run.restart_s > checkpoint.memory_restore_seconds(100.0, 8)


def test_inventory_edits_reach_the_engine_as_commands():
    plan, wl = _cluster_two_jobs()
    engine = Engine(plan, wl, seed=1)
    engine.run_until(3600.0)
    node = int(engine.runs[0].placement.nodes[0])
    out = engine.command("node_down", node=node)
    assert out["jobs"] == ["wide"] and not engine.state.node_up[node]
    engine.command("node_up", node=node)
    assert engine.state.node_up[node]
    spine = int(np.flatnonzero(plan.fabric.switch_tier == 1)[0])
    engine.command("switch_down", switch=spine)
    assert engine.reliability.failed_switches[spine] == 1
    engine.command("switch_up", switch=spine)
    assert engine.reliability.failed_switches[spine] == 0
    with pytest.raises(ValueError, match="does not exist"):
        engine.command("switch_down", switch=10**6)
