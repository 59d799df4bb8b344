"""What if, from now (``scheduler.control.whatif``): fork, act on one copy, compare."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scheduler.control.whatif import whatif
from scheduler.engine import Engine
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.simulate import Scenario
from scheduler.workload.jobs import Requirement
from scheduler.workload.scenarios import frontier_job
from tests.core.factories import job, workload

ROOT = Path(__file__).resolve().parents[2]
DEV_SMALL = ("from scheduler.simulate import Scenario\n"
             "engine, _ = Scenario(preset='dev-small', days=2, seed=3).engine()\n"
             "engine.run_until(0.5 * 86400)\n")


def wide_job_cluster(*, physics: bool = False) -> Engine:
    """32 H100 nodes on a radix-16 fat-tree; a 128-GPU gang spans two pods (so it crosses
    their spines) and small gangs come and go; one hour in."""
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 32),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 16})
    wide = frontier_job(0, "wide", 128, params_b=7.0, tokens=2e12, tenant="a",
                        requirement=Requirement(), tp=8, pp=1)
    small = [job(i, gpus=8, hours=3, submit_h=0.5 * i, tenant="b") for i in range(1, 30)]
    engine = Engine(plan, workload(wide, *small), seed=1, failures=True, physics=physics)
    engine.run_until(3600.0)
    return engine


def spine_behind(engine: Engine, name: str) -> int:
    """The spine drill's unit id of a spine in a pod that gang ``name`` spans."""
    run = next(r for r in engine.runs if r.spec.name == name)
    pods = np.unique(engine.state.domain["pod"][run.placement.nodes])
    f = engine.plan.fabric
    above = np.flatnonzero(f.switch_tier > 0)
    return int(np.flatnonzero(np.isin(f.switch_pod[above], pods))[0])


def fingerprint(engine: Engine) -> dict:
    streams = engine.kernel.streams._gens
    return {"now": engine.now,
            "rng": {k: json.dumps(g.bit_generator.state) for k, g in streams.items()},
            "books": engine._ledger.gpu_s.copy(), "pending_capacity_s": engine._cap_s,
            "pickle": pickle.dumps(engine)}


# ------------------------------------------------------------------ the live engine
def test_a_whatif_leaves_the_engine_it_forks_from_exactly_as_it_was():
    engine = wide_job_cluster()
    before = fingerprint(engine)
    whatif(engine, {"kind": "spine_switch", "target": spine_behind(engine, "wide")},
           hours=3, seeds=[1, 2])
    whatif(engine, {"kind": "rack_power", "target": "random"}, hours=3, seeds=[4])
    after = fingerprint(engine)
    assert after["now"] == before["now"] == 3600.0
    assert after["rng"] == before["rng"]
    assert np.array_equal(after["books"], before["books"])
    assert after["pending_capacity_s"] == before["pending_capacity_s"]
    assert after["pickle"] == before["pickle"]


# ------------------------------------------------------------------ determinism
def test_the_same_engine_action_hours_and_seeds_give_the_same_report():
    engine = wide_job_cluster()
    action = {"kind": "node", "target": "random"}
    first = whatif(engine, action, hours=4, seeds=[5, 6])
    again = whatif(engine, action, hours=4, seeds=[5, 6])
    assert json.dumps(first, sort_keys=True) == json.dumps(again, sort_keys=True)


def test_the_report_is_the_same_in_another_process_with_another_hash_seed():
    code = DEV_SMALL + (
        "import json, sys\n"
        "from scheduler.control.whatif import whatif\n"
        "r = whatif(engine, {'kind': 'leaf_switch', 'target': 'random'}, hours=3, "
        "seeds=[1, 2])\n"
        "sys.stdout.write(json.dumps(r, sort_keys=True))\n")
    out = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                              capture_output=True, text=True, timeout=300)
        out.append(done.stdout)
    namespace: dict = {}
    exec(DEV_SMALL, namespace)  # noqa: S102 - our own literal, as the subprocesses ran it
    here = whatif(namespace["engine"], {"kind": "leaf_switch", "target": "random"}, hours=3,
                  seeds=[1, 2])
    assert out[0] == out[1] == json.dumps(here, sort_keys=True)


# ------------------------------------------------------------------ what it measures
def test_a_spine_drill_hits_the_gang_behind_that_spine_and_loses_gpu_hours():
    engine = wide_job_cluster()
    report = whatif(engine, {"kind": "spine_switch", "target": spine_behind(engine, "wide")},
                    hours=6, seeds=[1, 2, 3])
    for seed in report["per_seed"]:
        assert seed["jobs_hit"] == ["wide"]
        assert seed["delta"]["gpu_hours_lost"] > 1.0
        assert seed["delta"]["gpu_hours"]["exposed_communication"] > 0
        assert seed["action"]["mfu"] < seed["baseline"]["mfu"]
    lost = report["summary"]["gpu_hours_lost"]
    assert lost["delta_band"][0] <= lost["delta"] <= lost["delta_band"][1]
    assert report["band"] == "min-max across seeds"


@pytest.mark.parametrize("action", [None, {"kind": "none"}, {"kind": "policy", "name": "default"}])
def test_a_no_op_action_gives_zero_delta_on_every_figure(action):
    engine = wide_job_cluster()
    report = whatif(engine, action, hours=6, seeds=[1, 2])
    for seed in report["per_seed"]:
        assert seed["jobs_hit"] == []
        numbers = {k: v for k, v in seed["delta"].items() if k != "gpu_hours"}
        assert set(numbers.values()) <= {0, None}
        assert set(seed["delta"]["gpu_hours"].values()) == {0.0}
        assert seed["baseline"] == seed["action"]


def test_a_spine_drained_for_maintenance_slows_the_gang_that_crosses_it_all_window():
    engine = wide_job_cluster(physics=True)
    report = whatif(engine, {"kind": "drain", "unit": "spine",
                             "target": spine_behind(engine, "wide")}, hours=6, seeds=[1])
    seed = report["per_seed"][0]
    assert seed["applied"]["tier"] == "spine" and seed["jobs_hit"] == ["wide"]
    assert seed["delta"]["gpu_hours_lost"] > 0
    assert "delta_band" not in report["summary"]["gpu_hours_lost"]
    assert report["band"] == "none (one seed)"


def test_a_rack_drained_for_maintenance_takes_no_new_work_but_keeps_its_running_gangs():
    engine = wide_job_cluster()
    report = whatif(engine, {"kind": "drain", "unit": "rack", "target": 0}, hours=6,
                    seeds=[1])
    seed = report["per_seed"][0]
    assert seed["applied"] == {"rack": 0, "nodes_drained": 4, "jobs": []}
    assert seed["delta"]["interruptions"] == 0
    assert not engine.state.node_drained.any()  # the original's rack is not drained


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("action,hours,seeds,message", [
    ({"kind": "meteor"}, 1, [1], "unknown action kind 'meteor'"),
    ("spine_switch", 1, [1], 'a JSON object with a "kind"'),
    ({"kind": "spine_switch", "target": 10**6}, 1, [1], "does not exist"),
    ({"kind": "spine_switch", "target": 1.5}, 1, [1], "target must be"),
    ({"kind": "node", "factor": 2}, 1, [1], "takes no parameters; not factor"),
    ({"kind": "storage_slowdown", "factor": 0}, 1, [1],
     "factor must be a positive number in [0.0001, 1]"),
    ({"kind": "power_cap", "fraction": 0.5}, 1, [1], "needs the power model"),
    ({"kind": "policy", "name": "nope"}, 1, [1], "unknown policy 'nope'"),
    ({"kind": "policy", "name": "fifo", "placement": "best"}, 1, [1], "unknown placement"),
    ({"kind": "drain", "unit": "rack", "target": 99}, 1, [1], "rack 99 does not exist"),
    ({"kind": "drain", "unit": "spine"}, 1, [1], "target must be an integer id"),
    ({"kind": "drain", "unit": "rack", "target": 0, "now": True}, 1, [1], "takes unit, target"),
    (None, 0, [1], "hours must be a positive number"),
    (None, 721, [1], "hours must be at most 720 h (30 days)"),
    (None, float("nan"), [1], "hours must be a positive number"),
    (None, 1, [], "number of seeds must be a positive integer in [1, 32]"),
    (None, 1, [1, 1], "seeds must be distinct"),
    (None, 1, [-1], "seed must be at least 0"),
    (None, 1, "12", "seeds must be a list"),
])
def test_a_bad_action_hours_or_seeds_is_refused_in_one_line_and_changes_nothing(
        action, hours, seeds, message):
    engine = wide_job_cluster()
    before = pickle.dumps(engine)
    with pytest.raises(ValueError) as err:
        whatif(engine, action, hours=hours, seeds=seeds)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert pickle.dumps(engine) == before


def test_a_fresh_preset_engine_runs_a_whatif_from_time_zero():
    engine, _ = Scenario(preset="dev-small", days=1, seed=0).engine()
    report = whatif(engine, {"kind": "node", "target": 0}, hours=2, seeds=[1])
    assert report["from"]["t_sim"] == 0.0 and report["from"]["preset"] == "dev-small"
    assert report["per_seed"][0]["applied"]["target"] == 0
