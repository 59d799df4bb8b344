"""Flow-level ECMP (:mod:`scheduler.fabric.ecmp`): hashed elephant flows collide on the uplinks
of a layer, a synchronous collective runs at the pace of its busiest link, and even spreading
(the default, today's behaviour) is untouched."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.fabric import dragonfly_plus, fat_tree
from scheduler.fabric.ecmp import expected_max_load
from scheduler.fabric.routing import Router
from scheduler.hardware.catalog import get
from scheduler.physics.step_time import step_breakdown
from scheduler.simulate import Scenario, ScenarioError, run_scenario
from scheduler.workload.jobs import Parallelism, TrainingJob

PORT = 400.0


def _spread_over_leaves(fabric, per_leaf: int, leaves: int) -> np.ndarray:
    """``per_leaf`` GPUs (the first ones) on each of the first ``leaves`` leaves."""
    hosts = fabric.params["hosts_per_leaf"]
    return np.array([leaf * hosts + i for leaf in range(leaves) for i in range(per_leaf)])


def _shares(fabric, gpus, stride, seeds, **kw) -> np.ndarray:
    """The gang's share under ECMP for each hash seed (one GPU per node, ring stride in
    GPUs: GPU ``i`` of a leaf sends to GPU ``i`` of the next leaf)."""
    return np.array([Router(fabric, gpus_per_node=1, balance="ecmp", hash_seed=s, **kw)
                     .update([gpus], PORT, ring_stride=[stride]).job_share[0] for s in seeds])


def test_the_same_seed_gives_the_same_paths_and_another_seed_others():
    f = fat_tree(8, oversubscription=3)
    jobs = [np.arange(0, 96), np.arange(96, 150)]
    loads = [Router(f, gpus_per_node=2, balance="ecmp", hash_seed=s).update(jobs, 200.0)
             for s in (5, 5, 6)]
    np.testing.assert_array_equal(loads[0].link_load_gbps, loads[1].link_load_gbps)
    np.testing.assert_array_equal(loads[0].job_share, loads[1].job_share)
    assert not np.array_equal(loads[0].link_load_gbps, loads[2].link_load_gbps)


def test_spread_is_todays_behaviour_exactly():
    f = fat_tree(8, oversubscription=3)   # 6 GPUs and 2 uplinks per leaf
    jobs = [np.arange(0, 48), np.arange(60, 100), np.arange(130, 140)]
    failed = np.zeros(f.link_a.size, bool)
    failed[[3, 40]] = True
    old = Router(f, gpus_per_node=2).update(jobs, PORT, failed_links=failed)
    new = Router(f, gpus_per_node=2, balance="spread").update(jobs, PORT, failed_links=failed)
    for field in ("link_load_gbps", "utilisation", "job_share", "job_rate_gbps"):
        np.testing.assert_array_equal(getattr(old, field), getattr(new, field))
    assert old.tier_utilisation == new.tier_utilisation
    # and it is the fluid split: a leaf's 6 line-rate flows over 2 uplinks get 2/6 each
    intact = Router(f, gpus_per_node=2, balance="spread").update([np.arange(48)], PORT,
                                                                 ring_stride=[3])
    assert intact.job_share[0] == pytest.approx(2 / 6)


def test_a_collective_across_an_oversubscribed_layer_is_slower_with_ecmp():
    f = fat_tree(16, oversubscription=3)   # 12 GPUs and 4 uplinks per leaf
    gpus = np.arange(192)                  # 16 leaves, 2 pods; 8 GPUs per node
    spread = Router(f, gpus_per_node=8).update([gpus], PORT, ring_stride=[2]).job_share[0]
    ecmp = [Router(f, gpus_per_node=8, balance="ecmp", hash_seed=s)
            .update([gpus], PORT, ring_stride=[2]).job_share[0] for s in range(5)]
    assert spread == pytest.approx(4 / 12)
    assert max(ecmp) < spread
    job = TrainingJob(0, "gpt", "t", 0.0, 192, 1e21, params_b=30.0,
                      parallelism=Parallelism(8, 2, 12))
    price = {share: step_breakdown(job, get("H100-SXM"), gpus_per_node=8, nodes=24,
                                   scaleout_share=share).total_s
             for share in (spread, float(np.mean(ecmp)))}
    assert price[float(np.mean(ecmp))] > price[spread]


def test_the_loss_grows_with_the_flows_crossing_the_layer():
    f = fat_tree(16, pods=1)               # non-blocking: 8 GPUs and 8 uplinks per leaf
    means = []
    for k in (1, 2, 4, 8):
        gpus = _spread_over_leaves(f, k, 4)
        spread = Router(f, gpus_per_node=1).update([gpus], PORT, ring_stride=[k]).job_share[0]
        assert spread == 1.0               # never congested when spread evenly
        means.append(_shares(f, gpus, k, range(40)).mean())
    assert means[0] == 1.0                 # one flow per leaf cannot collide
    assert means[0] > means[1] > means[2] > means[3]
    assert means[3] < 0.5


def test_the_busiest_uplink_follows_balls_into_bins():
    """K flows hashed over M uplinks: the mean busiest uplink is the exact expectation."""
    for ratio, (k, m) in ((1, (8, 8)), (3, (12, 4))):
        f = fat_tree(16, pods=1, oversubscription=ratio)
        assert (f.params["hosts_per_leaf"], f.params["leaf_uplinks"]) == (k, m)
        up = [np.flatnonzero((f.link_kind == 0) & (f.link_a == leaf)) for leaf in (0, 1)]
        busiest = []
        for seed in range(200):
            res = Router(f, gpus_per_node=1, balance="ecmp", hash_seed=seed).update(
                [np.arange(2 * k)], 1.0, ring_stride=[k])
            busiest += [res.link_load_gbps[u, 0].max() for u in up]
        se = np.std(busiest) / np.sqrt(len(busiest))
        assert np.mean(busiest) == pytest.approx(expected_max_load(k, m), abs=4 * se)


def test_a_gang_inside_one_leaf_is_not_changed_by_ecmp():
    f = fat_tree(16, oversubscription=3)
    inside = np.arange(12)                 # three 4-GPU nodes under leaf 0
    across = np.arange(12, 120)
    for jobs in ([inside], [inside, across]):
        spread = Router(f, gpus_per_node=4).update(jobs, PORT)
        ecmp = Router(f, gpus_per_node=4, balance="ecmp", hash_seed=2).update(jobs, PORT)
        assert spread.job_share[0] == ecmp.job_share[0] == 1.0
    alone = Router(f, gpus_per_node=4, balance="ecmp", hash_seed=2).update([inside], PORT)
    assert not alone.link_load_gbps.any()


def test_ecmp_avoids_failed_links_and_cuts_off_a_failed_leaf():
    f = fat_tree(8)
    gpus = np.arange(64)
    up0 = np.flatnonzero((f.link_kind == 0) & (f.link_a == 0))
    failed = np.zeros(f.link_a.size, bool)
    failed[up0[:3]] = True                 # leaf 0 keeps one of its four uplinks
    res = Router(f, gpus_per_node=2, balance="ecmp", hash_seed=1).update(
        [gpus], 100.0, failed_links=failed)
    assert not res.link_load_gbps[failed].any()
    assert res.link_load_gbps[up0[3], 0] > 0
    assert res.job_share[0] > 0
    dead = np.zeros(f.n_switches(), bool)
    dead[1] = True
    cut = Router(f, gpus_per_node=2, balance="ecmp", hash_seed=1).update(
        [gpus, np.arange(100, 128)], 100.0, failed_switches=dead)
    assert cut.job_share.tolist() == [0.0, 1.0]


def test_more_queue_pairs_per_connection_win_back_the_loss():
    f = fat_tree(16, pods=1)
    gpus = _spread_over_leaves(f, 8, 4)
    one = _shares(f, gpus, 8, range(10)).mean()
    sixteen = _shares(f, gpus, 8, range(10), subflows=16).mean()
    assert sixteen > one + 0.2


def test_ecmp_is_refused_where_it_is_not_modelled():
    with pytest.raises(ValueError, match="tree fabric"):
        Router(dragonfly_plus(4), balance="ecmp")
    with pytest.raises(ValueError, match="unknown load balance"):
        Router(fat_tree(4), balance="hash")
    with pytest.raises(ValueError, match="pattern='ring'"):
        Router(fat_tree(4), balance="ecmp").update([np.arange(8)], 10.0, pattern="all_to_all")
    for bad in ({"hash_seed": -1}, {"subflows": 0}, {"subflows": 2.5}):
        with pytest.raises(ValueError):
            Router(fat_tree(4), balance="ecmp", **bad)
    with pytest.raises(ScenarioError, match="load balance"):
        Scenario(preset="dev-small", days=1, load_balance="adaptive-ish")


def test_the_engine_feels_ecmp_through_the_fabric_shares():
    """A study arm's ``load_balance``: a 1:3 fat-tree placed without the topology loses more
    GPU-hours to exposed communication with ECMP, the same again for the same seed."""
    base = dict(preset="dev-small", days=0.5, seed=3, fabric="fat-tree", oversubscription=3,
                placement="random")
    _, spread = run_scenario(Scenario(**base))
    _, explicit = run_scenario(Scenario(**base, load_balance="spread"))
    _, ecmp = run_scenario(Scenario(**base, load_balance="ecmp"))
    _, again = run_scenario(Scenario(**base, load_balance="ecmp"))
    assert explicit["ledger_gpu_hours"] == spread["ledger_gpu_hours"]
    assert "load_balance" not in spread["scenario"]
    assert ecmp["scenario"]["load_balance"] == "ecmp"
    assert again["ledger_gpu_hours"] == ecmp["ledger_gpu_hours"]
    lost = {name: r["ledger_gpu_hours"]["exposed_communication"]
            for name, r in (("spread", spread), ("ecmp", ecmp))}
    assert lost["ecmp"] > 1.1 * lost["spread"]
