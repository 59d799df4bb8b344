"""Per-entity figures (:mod:`scheduler.physics.entity_figures`): every node's, rack's,
switch's and job's value equals what the engine's own columns say, recomputed here by plain
loops; without the physics model power, temperature and switch load are absent, never 0."""

import numpy as np
import pytest

from scheduler.model.job_run import RUNNING
from scheduler.model.state import REPLICA_BASE
from scheduler.physics.entity_figures import KINDS, METRICS, entity_sample
from scheduler.simulate import Scenario, run_scenario


@pytest.fixture(scope="module")
def busy():
    engine, _ = run_scenario(Scenario(preset="noc-4k", days=0.5, seed=3, failures=True,
                                      physics=True))
    assert engine.physics.last_load is not None, "gangs across leaves load the fabric"
    return engine


def test_every_kind_has_one_value_per_entity_and_only_its_own_figures(busy):
    s = entity_sample(busy)
    plan = busy.plan
    assert set(s.kinds) == set(KINDS) and s.t == busy.now
    sizes = {"node": plan.n_nodes, "rack": plan.n_racks, "switch": plan.fabric.n_switches()}
    for kind, n in sizes.items():
        assert set(s.kinds[kind].columns) == set(METRICS[kind])
        assert all(v.shape == (n,) for v in s.kinds[kind].columns.values())


def test_node_allocation_and_job_gpus_are_the_gpu_owners(busy):
    s = entity_sample(busy)
    owner, gpu_node = busy.state.gpu_owner, busy.state.gpu_node
    nodes = s.kinds["node"].columns
    for n in range(busy.plan.n_nodes):
        mine = owner[gpu_node == n]
        assert nodes["alloc_pct"][n] == pytest.approx(100.0 * np.mean(mine >= 0))
    jobs = s.kinds["job"]
    running = {r.spec.name: r for r in busy.running.values()}
    assert set(jobs.ids) == {name for name, r in running.items()
                             if np.any(owner == r.idx)}
    assert jobs.ids, "the scenario should have gangs running"
    for k, name in enumerate(jobs.ids):
        r = running[name]
        assert jobs.columns["gpus"][k] == r.gpus
        busy_share = r.slow if r.state == RUNNING else 0.0
        assert jobs.columns["util_pct"][k] == pytest.approx(100.0 * busy_share)
    replicas = owner >= REPLICA_BASE
    util = nodes["util_pct"]
    assert np.all((util >= 0) & (util <= 100.0))
    if replicas.any():  # a node serving inference computes
        assert util[np.unique(gpu_node[replicas])].min() > 0


def test_nodes_add_up_to_their_rack_s_power_and_read_its_outlet(busy):
    s = entity_sample(busy)
    power = busy.physics.last_power
    nodes, racks = s.kinds["node"].columns, s.kinds["rack"].columns
    per_rack = np.bincount(busy.plan.node_rack, weights=nodes["power_kw"],
                           minlength=busy.plan.n_racks)
    assert per_rack == pytest.approx(power.rack_kw)
    assert racks["power_kw"] == pytest.approx(power.rack_kw)
    assert nodes["temp_c"] == pytest.approx(power.outlet_c[busy.plan.node_rack])
    assert np.all(nodes["power_kw"] > 0)  # idle GPUs and hosts draw too


def test_a_switch_s_load_is_the_mean_and_peak_of_its_links(busy):
    s = entity_sample(busy)
    f = busy.plan.fabric
    util = busy.physics.last_load.utilisation
    load = s.kinds["switch"].columns
    for sw in range(f.n_switches()):
        mine = util[(f.link_a == sw) | (f.link_b == sw)]
        if mine.size:
            assert load["load_pct"][sw] == pytest.approx(100.0 * mine.mean())
            assert load["load_max_pct"][sw] == pytest.approx(100.0 * mine.max())
        else:
            assert np.isnan(load["load_pct"][sw])


def test_without_the_physics_model_power_temperature_and_load_are_absent():
    engine, _ = run_scenario(Scenario(preset="dev-small", days=0.05, seed=3, physics=False))
    s = entity_sample(engine)
    assert set(s.kinds["node"].columns) == {"util_pct", "alloc_pct"}
    assert set(s.kinds["rack"].columns) == {"util_pct", "alloc_pct"}
    assert s.kinds["switch"].columns == {}


def test_before_any_gang_crosses_a_leaf_the_switches_carry_no_load():
    engine, _ = run_scenario(Scenario(preset="dev-small", days=0.05, seed=3, physics=True))
    assert engine.physics.last_load is None
    load = entity_sample(engine).kinds["switch"].columns
    linked = ~np.isnan(load["load_pct"])
    assert linked.any() and np.all(load["load_pct"][linked] == 0.0)
