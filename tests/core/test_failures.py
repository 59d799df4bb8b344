"""The failure engine: calibrated rates, blast radius, recovery modes, checkpoint policy.

Tests named ``test_regression_*`` compare the twin with the very figures its constants were
fitted to (they catch drift, they do not validate); validations against published figures the
twin was not fitted to are in ``tests/core/test_validation.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler.engine import Engine
from scheduler.hardware.cluster import NodeGroup, StorageSpec, plan_cluster
from scheduler.reliability import checkpoint
from scheduler.reliability.failures import (
    BY_CAUSE,
    LLAMA3_UP_HOURS,
    job_failure_rate,
    unit_counts,
)
from scheduler.report import WALL_CLOCK_FIELDS, build_report
from scheduler.workload.jobs import Requirement, TrainingJob, Workload
from scheduler.workload.scenarios import frontier_job, scaled_preset, scenario_workload

LLAMA3_UNEXPECTED = 419
LLAMA3_PLANNED = 47
LLAMA3_TOP = {"faulty_gpu": 148, "gpu_hbm3_memory": 72, "software_bug": 54,
              "network_cable": 33 + 2}  # 35 "network switch/cable": cables plus the leaves


def _strip(report):
    for path in WALL_CLOCK_FIELDS:
        d = report
        for key in path[:-1]:
            d = d[key]
        d.pop(path[-1], None)
    return report


def _report(engine) -> dict:
    return build_report(engine, scenario={}, wall_seconds=0.0)


def _ledger(engine) -> dict:
    """GPU-hours per category up to now (open segments booked)."""
    return _report(engine)["ledger_gpu_hours"]


def llama3_run(days: float, seed: int, **kw) -> dict:
    preset, f = scaled_preset("llama3-16k", None)
    plan = preset.plan()
    wl = scenario_workload("llama3-16k", plan, days=days, rng=np.random.default_rng(seed),
                           scale=f)
    kw.setdefault("checkpoint_interval", "auto")
    engine = Engine(plan, wl, seed=seed, failures=True, **kw)
    engine.run_until(days * 86400.0)
    return build_report(engine, scenario={"preset": "llama3-16k", "days": days},
                        wall_seconds=0.0)


@pytest.fixture(scope="module")
def llama3_54d():
    return llama3_run(54, seed=3)


def test_regression_llama3_54_days_interruption_count(llama3_54d):
    """Regression check, not validation.

    Fitted: every failure rate in ``scheduler/reliability/failures.py`` is a Llama 3 Table 5
    count divided by its units and the job's 1,268.05 up-hours of the 1,296 (419 unexpected,
    47 planned in 54 days on 16,384 H100), so reproducing these counts only shows the fit has
    not drifted.
    """
    inter = llama3_54d["interruptions"]
    # Poisson noise: 3 standard deviations
    assert abs(inter["unplanned"] - LLAMA3_UNEXPECTED) < 3 * math.sqrt(LLAMA3_UNEXPECTED)
    assert abs(inter["planned"] - LLAMA3_PLANNED) < 3 * math.sqrt(LLAMA3_PLANNED)


def test_regression_llama3_cause_mix(llama3_54d):
    """Regression check, not validation.

    Fitted: the per-cause rates are Llama 3 Table 5's per-cause counts (faulty GPU 148, HBM3
    72, software 54, switch/cable 35; GPU causes 268 of 419).
    """
    by_cause = llama3_54d["interruptions"]["by_cause"]
    for cause, published in LLAMA3_TOP.items():
        got = by_cause.get(cause, 0) + (by_cause.get("leaf_switch", 0)
                                        if cause == "network_cable" else 0)
        assert abs(got - published) < 3 * math.sqrt(published) + 1, cause
    gpu_share = sum(n for c, n in by_cause.items() if BY_CAUSE[c].component == "gpu")
    unplanned = llama3_54d["interruptions"]["unplanned"]
    assert 0.5 < gpu_share / unplanned < 0.75  # published: 268 of 419 (64 %)


def test_regression_llama3_job_mttf_and_the_ledger_covers_every_gpu_hour(llama3_54d):
    """Regression check, not validation: the job's MTTF against Llama 3's own 466
    interruptions in 54 days (Table 5, the counts the rates were fitted to).

    By hand: 54 d x 24 h = 1,296 h over 466 interruptions = 2.78 h between interruptions
    (the rates are per up-hour, so about 466 are observed in the 1,296 h).
    Poisson noise on 466 events, 3 sigma = +-65, gives 1,296/531 = 2.44 h to 1,296/401 =
    3.23 h.  (The job finishes its 15.6T tokens a little before day 54 when the physics is
    off, so its wall time is at most 1,296 h: the band's upper end is not affected.)
    """
    job = llama3_54d["largest_job"]
    assert job["gpus"] == 16384
    assert 2.44 <= job["mttf_hours"] <= 3.23
    led = llama3_54d["ledger_gpu_hours"]
    assert led["lost_work"] > 0 and led["recovery"] > 0 and led["down_for_repair"] > 0
    # 2,112 nodes x 8 GPUs = 16,896 GPUs for 1,296 h = 21,897,216 GPU-hours, every one booked
    assert sum(led.values()) == pytest.approx(21_897_216, rel=1e-9)


def test_job_failure_rates_by_hand_from_the_table_5_counts():
    """Regression check (the rates were fitted to Table 5), worked by hand, not by MODES.

    A gang's own causes: per GPU the GPU causes (148 + 72 + 19 + 17 + 6 + 6 = 268), NIC 7 and
    NIC-to-leaf cables 33, i.e. 308 per 16,384 GPUs; per node the host causes (32 + 3 + 3 + 2
    + 2 + 2 + 2 = 46), software (54 + 7 + 2 = 63) and planned maintenance (47), i.e. 156 per
    2,048 nodes; all over the job's 1,268.05 up-hours (issue 29: the counts are interruptions,
    seen only while the job was up).  One node of 8 GPUs therefore sees
    (8 x 308 / 16,384 + 156 / 2,048) / 1,268.05 = (308 + 156) / (2,048 x 1,268.05) per hour:
    an MTTF of 2,048 x 1,268.05 / 464 = 5,597.0 h, and 2,048 nodes see 464 in 1,268.05 h
    (Table 5's 466 less the 2 leaf switches, which are shared, not the job's own).
    """
    assert 1.0 / job_failure_rate(1, 8) == pytest.approx(5597.0, rel=1e-4)
    assert job_failure_rate(2048, 16384) * 1268.05 == pytest.approx(464, rel=1e-9)
    # a 1,024-GPU gang: 128 nodes, 464 / 16 = 29.0 interruptions in 1,268.05 up-hours
    assert job_failure_rate(128, 1024) * 1268.05 == pytest.approx(29.0, rel=1e-3)
    # the unit counts that scale the cluster-wide failures: 2,112 nodes against 256
    small, _ = scaled_preset("llama3-16k", 2048)
    big, _ = scaled_preset("llama3-16k", None)
    u_small, u_big = unit_counts(small.plan()), unit_counts(big.plan())
    assert (u_big["gpu"], u_small["gpu"]) == (16896, 2048)
    assert (u_big["host"], u_small["host"]) == (2112, 256)


def test_llama3_up_hours_by_hand_from_table_5_and_the_detection_times():
    """The exposure of Table 5's counts (a fit, issue 29): 1,296 h less the hang until
    detection of each of the 466 interruptions.  By hand from the table's counts and the
    twin's detection times: 262 GPU faults at 120 s (148 + 72 + 19 + 17 + 6), silent data
    corruption 6 at 3,600 s, host 46 (power supplies 3 at 60 s, the other 43 at 120 s), NIC 7,
    cables 34 and the leaf 1 at 120 s, software bug 54 and NCCL watchdog 7 at 600 s,
    dependency 2 at 300 s, planned 47 at 0 s:
    31,440 + 21,600 + 5,340 + 840 + 4,080 + 120 + 37,200 = 100,620 s = 27.95 h."""
    hang_s = (262 * 120 + 6 * 3600 + 3 * 60 + 43 * 120 + 7 * 120 + 35 * 120
              + 61 * 600 + 2 * 300)
    assert hang_s == 100_620
    assert LLAMA3_UP_HOURS == pytest.approx(1296 - hang_s / 3600, abs=1e-9)
    by_table = {"faulty_gpu": 148, "software_bug": 54, "planned_maintenance": 47}
    for cause, n in by_table.items():
        units = 16384 if BY_CAUSE[cause].component == "gpu" else 2048
        assert BY_CAUSE[cause].per_hour == pytest.approx(n / (units * 1268.05), rel=1e-12)


def test_regression_llama3_54_days_counts_over_four_seeds_and_hits_while_down_apart():
    """Regression (issue 29): 54-day runs observe about Table 5's 419 unexpected and 47
    planned interruptions; failures while the job hangs are counted apart (``while_down``),
    never as interruptions.  Four seeds and a Poisson band only (3 sigma of the four runs'
    sum, 3 sqrt(4 x 419) = 123, 7.3 %; 3 sqrt(4 x 47) = 41): too wide to tell per-up-hour
    from calendar rates (2.2 % apart), which the test above checks by hand; the 20-seed mean
    (413.8, -1.24 %: the job finishes its tokens about 9-14 h before day 54) is
    ``bench/llama3_interruptions.py``'s."""
    runs = [llama3_run(54, seed=s) for s in range(4)]
    unplanned = sum(r["interruptions"]["unplanned"] for r in runs)
    planned = sum(r["interruptions"]["planned"] for r in runs)
    assert abs(unplanned - 4 * LLAMA3_UNEXPECTED) <= 3 * math.sqrt(4 * LLAMA3_UNEXPECTED)
    assert abs(planned - 4 * LLAMA3_PLANNED) <= 3 * math.sqrt(4 * LLAMA3_PLANNED)
    down = [sum(r["failures"]["while_down"].values()) for r in runs]
    assert all(d > 0 for d in down)  # hits on a hung job exist and are not interruptions
    for r in runs:
        assert sum(r["interruptions"]["by_cause"].values()) == (
            r["interruptions"]["unplanned"] + r["interruptions"]["planned"])


def test_young_interval_by_hand():
    """Young (1974): sqrt(2 C M).  C = 30 s, M = 3 h = 10,800 s: sqrt(648,000) = 804.98 s;
    C = 100 s, M = 20,000 s: sqrt(4,000,000) = 2,000 s."""
    assert checkpoint.young_interval(30.0, 10_800.0) == pytest.approx(804.98, abs=0.01)
    assert checkpoint.young_interval(100.0, 20_000.0) == pytest.approx(2000.0)


def _dalys_exact_optimum(cost_s: float, mttf_s: float) -> float:
    """Minimise Daly's (2006) expected wall time numerically, on a fine grid.

    Daly, FGCS 22(3), eq. for the total wall time of a job of solve time T_s checkpointing
    every tau with dump time delta and restart R under exponential failures of mean M:
    T_w(tau) = M e^(R/M) (e^((tau + delta)/M) - 1) T_s / tau.  Only
    (e^((tau + delta)/M) - 1) / tau depends on tau.
    """
    tau = np.geomspace(1e-4 * mttf_s, 20 * mttf_s, 2_000_001)
    return float(tau[np.argmin(np.expm1((tau + cost_s) / mttf_s) / tau)])


@pytest.mark.parametrize("ratio, tolerance", [
    (30 / 10_800, 1e-3), (0.05, 1e-3), (0.2, 3e-3), (0.5, 1e-2), (1.0, 3e-2), (1.9, 7e-2),
    (3.0, 3e-2),
])
def test_daly_interval_is_the_optimum_of_dalys_wall_time_model(ratio, tolerance):
    """Cross-model: the closed form (a series expansion) against the numerical minimum of
    the model it approximates.  Daly's estimate is good to a few percent up to C = 2M (and
    the tolerance grows with C/M, as the expansion's error does); past 2M he gives tau = M.
    Young's first-order form is always further off."""
    mttf = 3600.0
    cost = ratio * mttf
    exact = _dalys_exact_optimum(cost, mttf)
    daly = checkpoint.daly_interval(cost, mttf)
    assert daly == pytest.approx(exact, rel=tolerance)
    assert abs(checkpoint.young_interval(cost, mttf) - exact) > abs(daly - exact)


def test_auto_checkpoint_interval_is_youngs_by_hand_for_the_llama3_job(llama3_54d):
    """By hand: a 405B checkpoint of 14 bytes per parameter is 5,670 GB; alone on the
    2,000 GB/s tier (its 2,048 nodes could drive 204,800) a write takes 2.835 s.  The
    job's MTTF is 1,268.05 up-hours / 464 = 2.733 h = 9,838 s (rates per up-hour).  Young:
    sqrt(2 x 2.835 x 9,838) = 236.2 s; Daly's correction lowers it by about C (1 %)."""
    job = llama3_54d["largest_job"]
    assert job["checkpoint_write_s"] == pytest.approx(2.835, abs=0.01)
    assert job["checkpoint_interval_s"] == pytest.approx(236.2, rel=0.02)


def test_the_auto_interval_beats_half_and_twice_it_in_the_simulation():
    """Cross-model: the interval chosen from the closed form must also be the better one in
    the event simulation.  Same seed, so the same failures hit all three runs; the waste is
    work lost since the last checkpoint plus the checkpoint stalls.  First order (Young):
    at tau* both are equal, at tau*/2 or 2 tau* the sum grows by a quarter."""
    waste, ettr = {}, {}
    for interval in ("auto", 120.0, 480.0):  # tau* = 240 s (test above)
        r = llama3_run(20, seed=3, checkpoint_interval=interval)
        led = r["ledger_gpu_hours"]
        waste[interval] = led["lost_work"] + led["checkpoint_stall"]
        ettr[interval] = r["largest_job"]["ettr"]
    assert waste["auto"] < 0.9 * min(waste[120.0], waste[480.0])
    assert ettr["auto"] > max(ettr[120.0], ettr[480.0])


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
    assert run.state == "running" and run.interruptions == 0
    engine.run_until(7200.0)
    led = _ledger(engine)
    assert led["exposed_communication"] > 0 and led["lost_work"] == 0
    assert _report(engine)["largest_job"]["interruptions"] == 0


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
    led = _ledger(engine)
    # by hand: no storage tier, so checkpoints cost nothing and the last one was at 1,800 s;
    # the 1,200 s computed since then are lost on 64 GPUs: 64 x 1,200 / 3,600 = 21.33 GPU-h
    assert led["lost_work"] == pytest.approx(21.333, abs=1e-3)
    assert led["recovery"] > 64 * 120 / 3600


def test_a_drill_on_a_missing_target_is_refused_and_changes_nothing():
    plan, wl = _cluster_two_jobs()
    engine = Engine(plan, wl, seed=1)
    engine.run_until(600.0)
    before, owner = _strip(_report(engine)), engine.state.gpu_owner.copy()
    for bad in ({"kind": "node", "target": 10_000}, {"kind": "leaf_switch", "target": -1},
                {"kind": "warp_core"}, {"kind": "supply_cut", "target": "TPUv9"},
                {"kind": "storage_slowdown", "factor": 3}):
        with pytest.raises(ValueError):
            engine.command("drill", **bad)
    assert _strip(_report(engine)) == before
    assert np.array_equal(engine.state.gpu_owner, owner)


def test_failures_are_deterministic_per_seed_and_off_gives_the_baseline():
    a = _strip(llama3_run(3, seed=11))
    b = _strip(llama3_run(3, seed=11))
    assert a == b
    preset, f = scaled_preset("llama3-16k", 1024)
    plan = preset.plan()
    wl = scenario_workload("llama3-16k", plan, days=3, rng=np.random.default_rng(1), scale=f)
    off = Engine(plan, wl, seed=11, failures=False)
    off.run_until(3 * 86400.0)
    led = _ledger(off)
    assert led["lost_work"] == 0 and led["down_for_repair"] == 0
    assert off.reliability.unplanned == off.reliability.planned == 0


def _memory_engine():
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 12, nodes_per_rack=2),),
                        fabric_kind="fat-tree", fabric_kw={"radix": 16},
                        storage=(StorageSpec("pfs", "central", 1000.0, 10.0, 5.0),))
    job = TrainingJob(0, "j", "a", 0.0, 64, 64 * 989e12 * 0.4 * 10 * 3600,
                      checkpoint_gb=100.0, checkpoint_interval_s=600.0)
    engine = Engine(plan, Workload(jobs=(job,)), seed=2, recovery="memory")
    engine.run_until(2.5 * 3600.0)
    return plan, engine, engine.runs[0]


def _fallbacks(engine) -> int:
    return engine.reliability.report()["memory_fallbacks_to_disk"]


def test_memory_recovery_loses_little_when_one_node_of_a_replica_group_fails():
    _, engine, run = _memory_engine()
    engine.command("drill", kind="node", target=int(run.placement.nodes[0]))
    led = _ledger(engine)
    assert led["lost_work"] < 64 * 600 / 3600  # at most one in-memory interval
    assert _fallbacks(engine) == 0


def test_memory_recovery_falls_back_to_disk_when_a_whole_replica_group_is_lost():
    plan, engine, run = _memory_engine()
    rack = int(plan.node_rack[run.placement.nodes[0]])  # a rack holds ranks 0 and 1
    assert set(np.flatnonzero(plan.node_rack == rack)) == set(run.placement.nodes[:2])
    engine.command("drill", kind="rack_power", target=rack)
    led = _ledger(engine)
    # nothing reached disk in 2.5 h (persisted every 3 h): all compute so far is lost.  By
    # hand: 64 GPUs x 2.5 h = 160 GPU-h, less 14 in-memory copies of 100 GB / 64 GPUs at
    # 25 GB/s (0.0625 s each): 159.98 GPU-h
    assert _fallbacks(engine) == 1
    assert led["lost_work"] == pytest.approx(159.98, abs=0.02)
    engine.run_until(3 * 3600.0)
    assert run.state == "running"
    # the restore reads the disk checkpoint, not a peer.  By hand: alone on the 10 GB/s tier,
    # 100 GB take 10 s, after rescheduling (120 s) and warm-up (60 s): 190 s (a peer restore
    # would take 180 + 100 / 8 nodes / 400 GB/s = 180.03 s)
    assert run.restart_s == pytest.approx(190.0)


def test_inventory_edits_reach_the_engine_as_commands():
    plan, wl = _cluster_two_jobs()
    engine = Engine(plan, wl, seed=1)
    engine.run_until(3600.0)
    node = int(engine.runs[0].placement.nodes[0])
    out = engine.command("node_down", node=node)
    assert out["jobs"] == ["wide"] and not engine.state.node_up[node]
    engine.command("node_up", node=node)
    assert engine.state.node_up[node]
    # a leaf taken down takes its nodes with it; a spine only removes links
    leaf = int(plan.fabric.endpoint_leaf[8 * 31])   # the leaf of the last node
    down = engine.command("switch_down", switch=leaf)
    assert down["nodes_down"] >= 1 and not engine.state.node_up[31]
    engine.command("switch_up", switch=leaf)
    assert engine.state.node_up[31]
    spine = int(np.flatnonzero(plan.fabric.switch_tier == 1)[0])
    assert engine.command("switch_down", switch=spine) == {
        "switch": spine, "tier": "spine", "nodes_down": 0, "gpus_down": 0, "jobs": []}
    assert engine.command("switch_up", switch=spine) == {"switch": spine, "tier": "spine"}
    with pytest.raises(ValueError, match="does not exist"):
        engine.command("switch_down", switch=10**6)
