"""Fabric, storage and power set each job's speed: placement and topology change MFU."""

import numpy as np
import pytest

from scheduler.engine import Engine
from scheduler.hardware.cluster import NodeGroup, StorageSpec, plan_cluster
from scheduler.simulate import Scenario, run_scenario
from scheduler.workload.jobs import Parallelism, TrainingJob, Workload

H100_PEAK = 989e12


def dp_job(i: int, gpus: int, hours: float) -> TrainingJob:
    """A data-parallel 7B job whose gradient all-reduce crosses the fabric."""
    return TrainingJob(i, f"dp-{i}", "t", 0.0, gpus, gpus * H100_PEAK * 0.4 * hours * 3600,
                       affinity="any", parallelism=Parallelism(tp=8, pp=1, dp=gpus // 8),
                       params_b=7.0, tokens=1e12, checkpoint_gb=98.0)


def island_cluster(placement: str) -> Engine:
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 64),), fabric_kind="island",
                        fabric_kw={"radix": 16, "oversubscription": 7.0},
                        storage=(StorageSpec("pfs", "central", 1000.0, 400.0, 200.0),))
    jobs = tuple(dp_job(i, 64, 6.0) for i in range(7))
    return Engine(plan, Workload(jobs=jobs), seed=4, placement=placement, physics=True,
                  physics_tick_s=600.0)


def test_topology_aware_placement_gives_higher_mfu_than_random_on_the_same_seed():
    results = {}
    for placement in ("topology", "random"):
        engine = island_cluster(placement)
        engine.run_until(4 * 3600.0)
        led = engine.horizon_ledger()
        results[placement] = (led.mfu()["achieved"], led.gpu_hours()["exposed_communication"])
    assert results["topology"][0] > results["random"][0]
    assert results["topology"][1] < results["random"][1]


def test_the_same_workload_on_other_fabrics_gives_other_mfu():
    mfu = {}
    for name, kw in {"non-blocking fat-tree": {"fabric": "fat-tree"},
                     "fat-tree 1:4": {"fabric": "fat-tree", "oversubscription": 4.0},
                     "dragonfly+": {"fabric": "dragonfly+"}}.items():
        _, report = run_scenario(Scenario(preset="hyperscale-100k", gpus=8192, days=0.5,
                                          seed=3, failures=False, **kw))
        mfu[name] = report["mfu"]["achieved"]
        assert report["network"]["link_utilisation"]
    assert mfu["non-blocking fat-tree"] > mfu["fat-tree 1:4"]
    assert mfu["non-blocking fat-tree"] > mfu["dragonfly+"]


def test_a_spine_failure_lowers_the_fabric_share_of_the_jobs_crossing_it():
    engine = island_cluster("topology")
    engine.run_until(1200.0)
    wide = [r for r in engine.running.values() if engine.physics.share.get(r.idx)]
    assert wide
    before = {r.idx: engine.physics.share[r.idx] for r in wide}
    for unit in range(engine.reliability.units["spine"]):
        engine.command("drill", kind="spine_switch", target=unit)
    after = {i: engine.physics.share.get(i, 1.0) for i in before}
    assert any(after[i] < before[i] for i in before)
    assert all(r.state == "running" for r in wide)


def test_a_power_cap_drill_throttles_and_is_booked_as_throttled():
    engine = island_cluster("topology")
    engine.run_until(1200.0)
    result = engine.command("drill", kind="power_cap", target="all", fraction=0.5)
    assert result["jobs"] and result["gpus"] > 0
    engine.run_until(3600.0)
    books = engine.horizon_ledger()
    assert books.gpu_hours()["throttled"] > 0
    # every GPU-second is booked once (unrounded: gpu_hours() rounds each line to 1e-6 h)
    assert books.gpu_s.sum() / 3600.0 == pytest.approx(engine.state.n_gpus * 1.0, rel=1e-9)


def test_power_cap_without_the_power_model_is_refused():
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})
    engine = Engine(plan, Workload(jobs=()), seed=1)
    with pytest.raises(ValueError, match="power model"):
        engine.command("drill", kind="power_cap", fraction=0.5)


def test_physics_reports_network_storage_and_power():
    _, report = run_scenario(Scenario(preset="dev-small", days=0.25, seed=2))
    assert report["power"]["it_mw"]["peak"] >= report["power"]["it_mw"]["mean"] > 0
    assert report["power"]["facility_mw"]["mean"] == pytest.approx(
        report["power"]["it_mw"]["mean"] * 1.2, abs=1e-3)  # rounded to 4 places
    assert set(report["storage"]["tiers_mean"]) >= {"central_read", "central_write", "nvme_read"}
    assert report["storage"]["checkpoint_gb_written"] > 0
    total = sum(report["ledger_gpu_hours"].values())
    assert total == pytest.approx(512 * 6.0, rel=1e-9)
    assert np.isfinite(report["mfu"]["achieved"])
