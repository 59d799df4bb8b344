"""Every command, drill and injected number is held to its documented bound, once, before anything
changes; an in-bound extreme runs; the inference fleet's arithmetic survives any demand."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from scheduler.control.storage_status import CENTRAL_DOWN_LEFT
from scheduler.limits.bounds import (
    CLUSTER_GPUS,
    DRILL_DURATION,
    DRILL_PARAMS,
    POWER_CAP,
    STORAGE_SLOWDOWN,
    SURGE_FACTOR,
    drill_params,
)
from scheduler.report import WALL_CLOCK_FIELDS, build_report
from scheduler.simulate import Scenario, ScenarioError
from scheduler.workload.traces import TraceError, read_trace
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
PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"
OPENB = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
         "deletion_time,scheduled_time\n")


def engine_at_one_hour():
    """8 H100 nodes with a central tier, the power model, a 2-replica service and two gangs."""
    plan = small_plan(8, storage=central_storage(64.0))
    wl = workload(job(0, gpus=16, hours=20, checkpoint_gb=80.0),
                  job(1, gpus=8, hours=20, submit_h=0.5),
                  services=(service(peak_replicas=2, trough_fraction=1.0, max_replicas=6),))
    return run_engine(plan, wl, until_h=1, physics=True, physics_tick_s=1800.0)


def state(e) -> str:
    """Everything a command could change, as one comparable string: the run report (less its
    wall-clock fields), the event log, GPU owners, node flags, surges and the pending events."""
    rep = build_report(e, scenario={"test": True}, wall_seconds=0.0)
    for *parents, leaf in WALL_CLOCK_FIELDS:
        node = rep
        for key in parents:
            node = node[key]
        node.pop(leaf)
    fleet = [(s.surge, s.surge_until, len(s.replicas)) for s in e.fleet.services]
    return json.dumps([rep, [str(ev) for ev in e.events], e.state.gpu_owner.tolist(),
                       e.state.node_up.tolist(), e.state.node_drained.tolist(), fleet,
                       e.reliability.storage_left, e.physics.power.caps_kw.tolist(),
                       e.peek()], sort_keys=True, default=str)


# ----------------------------------------------------------------- the core refuses
OUT_OF_BOUNDS = [
    # the finding: one staff request that bricked the engine
    ("drill", {"kind": "inference_surge", "target": "all", "factor": 1e308, "duration_s": 1e308},
     "factor must be at most 100, not 1e+308"),
    ("drill", {"kind": "inference_surge", "factor": 1e9, "duration_s": 1e12},
     "factor must be at most 100"),
    ("drill", {"kind": "inference_surge", "factor": 2.0, "duration_s": 1e12},
     "duration_s must be at most 2,592,000 s (30 days), not 1000000000000.0"),
    ("inference_surge", {"factor": 1e308, "duration_s": 3600.0}, "factor must be at most 100"),
    ("inference_surge", {"factor": 2.0, "duration_s": 30 * DAY + 1},
     "duration_s must be at most 2,592,000 s"),
    ("inference_surge", {"factor": math.inf, "duration_s": 3600.0},
     "factor must be a positive number in (0, 100], not inf"),
    ("inference_surge", {"factor": math.nan, "duration_s": 3600.0},
     "factor must be a positive number in (0, 100], not nan"),
    ("inference_surge", {"factor": True, "duration_s": 3600.0},
     "factor must be a positive number in (0, 100], not True"),
    ("inference_surge", {"factor": "2", "duration_s": 3600.0},
     "factor must be a positive number in (0, 100], not '2'"),
    ("inference_surge", {"factor": 2.0, "duration_s": -1.0},
     "duration_s must be a positive number in (0, 2,592,000] s, not -1.0"),
    # float("1e400") is inf: once the default replaced it; now it is refused
    ("drill", {"kind": "storage_slowdown", "factor": float("1e400")},
     "factor must be a positive number in [0.0001, 1], not inf"),
    ("drill", {"kind": "storage_slowdown", "factor": 1e-9},
     "factor must be at least 0.0001, not 1e-09"),
    ("drill", {"kind": "storage_slowdown", "factor": 0.5, "duration_s": 1e308},
     "duration_s must be at most 2,592,000 s"),
    ("drill", {"kind": "inference_surge", "factor": 2.0, "duraton_s": 60.0},
     "an inference_surge drill takes factor, duration_s; not duraton_s"),
    ("drill", {"kind": "power_cap", "target": "all", "fraction": 0.01},
     "fraction must be at least 0.1, not 0.01"),
    ("drill", {"kind": "power_cap", "target": 0, "fraction": np.float64("nan")},
     "fraction must be a positive number in [0.1, 1], not "),
    ("storage_degraded", {"tier": "central", "factor": 1e-300},
     "factor must be at least 0.0001, not 1e-300"),
    ("gpu_down", {"gpu": 0, "nic": "yes"}, "nic must be true or false, not 'yes'"),
    ("submit_job", {"job": job(9, name="no-checkpoints", checkpoint_interval_s=0.0)},
     "job 'no-checkpoints': checkpoint_interval_s must be a positive number in "
     "[60, 31,622,400] s, not 0.0"),
    ("submit_job", {"job": replace(job(9, name="huge"), gpus=10 ** 26)},
     "job 'huge': gpus must be at most 4,194,304 GPUs"),
    ("submit_job", {"job": job(9, name="later", submit_h=1e308 / HOUR)},
     "job 'later': submit_s must be below 10,000,000,000 s"),
]


@pytest.fixture(scope="module")
def engine():
    return engine_at_one_hour()


@pytest.mark.parametrize("command, params, message", OUT_OF_BOUNDS,
                         ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(OUT_OF_BOUNDS)])
def test_an_out_of_bound_parameter_is_refused_by_name_and_bound_and_changes_nothing(
        engine, command, params, message):
    before = state(engine)
    with pytest.raises(ValueError) as refused:
        engine.command(command, **params)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert state(engine) == before
    engine.run_until(engine.now + HOUR)  # and the engine still steps


@pytest.mark.parametrize("changes, message", [
    ({"jobs": [{"job": job(9, name="seen"), "done_fraction": math.inf}]},
     "job 'seen': done_fraction must be a number in [0, 1), not inf"),
    ({"jobs": [{"job": job(9, name="seen"), "done_fraction": 1.0}]},
     "done_fraction must be below 1, not 1.0"),
    ({"jobs": [{"job": job(9, name="seen", checkpoint_gb=1e308)}]},
     "checkpoint_gb must be at most 1,000,000 GB"),
    ({"jobs": [{"job": job(9, name="seen", cpu_per_gpu=math.nan)}]},
     "cpu_per_gpu must be a number in [0, 1,000,000,000), not nan"),
    ({"nodes": {0: {"drained": True}},
      "jobs": [{"job": job(9, name="seen", burst_after_s=math.inf)}]},
     "burst_after_s must be a number"),
])
def test_inject_refuses_an_out_of_bound_job_number_and_changes_nothing(engine, changes,
                                                                       message):
    before = state(engine)
    with pytest.raises(ValueError) as refused:
        engine.inject(**changes)
    assert message in str(refused.value)
    assert state(engine) == before


# ----------------------------------------------------------------- in-bound extremes run
def test_the_upper_bounds_themselves_run_a_day_of_engine():
    """Demand x100 for 30 days, storage left at 0.0001 for 30 days and racks capped at 0.1:
    a day later every figure of the report is finite and the service holds all the replicas
    it may (2 x 100 asks for more than ``max_replicas`` = 6)."""
    e = engine_at_one_hour()
    out = e.command("drill", kind="inference_surge", target="all",
                    factor=SURGE_FACTOR.high, duration_s=DRILL_DURATION.high)
    assert (out["factor"], out["until"]) == (100.0, HOUR + 30 * DAY)
    e.command("drill", kind="storage_slowdown", factor=STORAGE_SLOWDOWN.low,
              duration_s=DRILL_DURATION.high)
    e.command("drill", kind="power_cap", target="all", fraction=POWER_CAP.low)
    e.command("storage_degraded", tier="central", factor=CENTRAL_DOWN_LEFT)
    e.run_until(HOUR + DAY)
    rep = build_report(e, scenario={"test": True}, wall_seconds=0.0)
    json.dumps(rep, allow_nan=False)  # raises on any nan or inf
    assert len(e.fleet.services[0].replicas) == 6


def test_the_fleet_survives_an_infinite_demand_and_asks_for_its_most_replicas():
    """Bounds keep demand finite, but the fleet must not raise (``ceil(inf)`` did) if a
    surge reaches it some other way: it asks for ``max_replicas`` and serves what fits."""
    e = engine_at_one_hour()
    e.fleet.surge(math.inf, e.now + HOUR)
    e.run_until(e.now + 0.5 * HOUR)
    assert len(e.fleet.services[0].replicas) == 6
    e.run_until(e.now + HOUR)
    assert len(e.fleet.services[0].replicas) == 2  # the surge ended


# ----------------------------------------------------------------- one definition
def test_drill_params_checks_names_and_bounds_and_fills_defaults_only_when_asked():
    assert drill_params("storage_slowdown", {"factor": 0.25}) == {"factor": 0.25}
    assert drill_params("storage_slowdown", {}, defaults=True) == {"factor": 0.5,
                                                                  "duration_s": 3600.0}
    assert set(DRILL_PARAMS) == {"storage_slowdown", "inference_surge", "power_cap"}
    with pytest.raises(ValueError, match="a power_cap drill takes fraction; not factor"):
        drill_params("power_cap", {"factor": 0.5})


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, True, "3", None, [3]])
def test_a_value_that_is_no_finite_number_gets_one_message_naming_the_bound(value):
    with pytest.raises(ValueError) as refused:
        CLUSTER_GPUS.check("--gpus", value)
    assert str(refused.value) == (f"--gpus must be a positive integer in [1, 4,194,304] GPUs, "
                                  f"not {value!r}")


def test_the_central_tier_down_is_the_storage_floor():
    """One number: what "down" leaves is the least any drill or status may leave."""
    assert CENTRAL_DOWN_LEFT == STORAGE_SLOWDOWN.low == 1e-4


# ----------------------------------------------------------------- traces and scenarios
@pytest.mark.parametrize("text, message", [
    (PHILLY + "2017-10-01 00:00:00,1e308,2,0.0,a\n",
     "trace.csv line 2: duration must be at most 31,622,400 s (366 days), not 1e+308"),
    (PHILLY + "2017-10-01 00:00:00,10,1,10,a\n2017-10-01 00:00:01,10,"
     + "1" + "0" * 26 + ",0.0,a\n",
     "trace.csv line 3: num_gpus must be at most 4,194,304"),
    (OPENB + "p0,1000,1024,1,1000,,LS,Running,1e308,1e308,\n",
     "trace.csv line 2: creation_time must be below 10,000,000,000 s, not 1e+308"),
    (OPENB + "p0,1000,1024,1,1000,,LS,Running,0,40000000,\n",
     "trace.csv line 2: duration (deletion_time - creation_time) must be at most "
     "31,622,400 s"),
])
def test_a_trace_number_out_of_bounds_is_refused_with_file_and_line(tmp_path, text, message):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as refused:
        read_trace(path)
    assert message in str(refused.value)


@pytest.mark.parametrize("kw, message", [
    ({"gpus": 10 ** 12}, "gpus must be at most 4,194,304 GPUs"),
    ({"load": 1e308}, "load must be at most 100, not 1e+308"),
    ({"oversubscription": 1e308}, "oversubscription must be at most 100"),
    ({"checkpoint_interval": 1e-300}, "checkpoint interval must be at least 60 s, not 1e-300"),
])
def test_a_scenario_out_of_bounds_is_refused(kw, message):
    with pytest.raises(ScenarioError) as refused:
        Scenario(preset="dev-small", days=1, **kw)
    assert message in str(refused.value)
