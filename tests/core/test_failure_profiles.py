"""Failure profiles as data (scheduler/reliability/profiles): loading, sources, bad files, the
Llama 3 regression, job-level modes, failures on gangs already down, and one validation of
another fleet's profile against a published figure it was not fitted to (docs/failures.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.engine import Engine
from scheduler.reliability.analysis import job_ettr
from scheduler.reliability.failures import MODES, UNITS, FailureMode, job_failure_rate
from scheduler.reliability.profiles import PROFILES, load_profile, profile_toml
from scheduler.report import WALL_CLOCK_FIELDS, build_report
from scheduler.simulate import Scenario, ScenarioError, run_scenario
from scheduler.workload.scenarios import scaled_preset, scenario_workload
from tests.core.factories import HOUR, job, run_engine, small_plan, workload

GOOD = """name = "t"
fleet = "a test fleet"
source = "a test"

[[mode]]
cause = "gpu_fault"
component = "gpu"
unit = "gpu"
per_hour = 1e-4
detect_s = 120
repair_h = 4
source = "assumed"
"""


def _write(tmp_path, text, name="fleet.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------ shipped profiles
@pytest.mark.parametrize("name", PROFILES)
def test_each_shipped_profile_loads_and_cites_a_source_for_every_rate(name):
    p = load_profile(name)
    assert p.name == name and p.fleet and p.source
    assert p.modes and all(isinstance(m, FailureMode) for m in p.modes)
    for m in p.modes:
        assert m.source.strip(), m.cause
        assert m.per_hour >= 0 and m.repair_h > 0 and m.detect_s >= 0


def test_three_profiles_from_three_fleets_are_shipped():
    assert {"llama3", "rsc1", "alibaba-hpn"} <= set(PROFILES)
    fleets = {load_profile(n).fleet for n in PROFILES}
    assert len(fleets) == len(PROFILES)


def test_regression_the_llama3_profile_is_todays_modes_number_for_number():
    """Regression (the profile file was written from failures.MODES): same causes, rates,
    detection and repair times and sources, bit for bit."""
    assert load_profile("llama3").modes == MODES


def _strip(report):
    for path in WALL_CLOCK_FIELDS:
        d = report
        for key in path[:-1]:
            d = d[key]
        d.pop(path[-1], None)
    return report


def test_regression_the_llama3_profile_reproduces_todays_engine_results_exactly():
    """Regression: a seeded llama3-16k run with the profile's modes gives the very report of
    the engine's built-in default (MODES); another profile gives another one."""
    def run(modes):
        preset, f = scaled_preset("llama3-16k", None)
        plan = preset.plan()
        wl = scenario_workload("llama3-16k", plan, days=3, rng=np.random.default_rng(5), scale=f)
        e = Engine(plan, wl, seed=5, failures=True, failure_modes=modes)
        e.run_until(3 * 86400.0)
        return _strip(build_report(e, scenario={}, wall_seconds=0.0))

    default = run(None)
    assert default["failures"]["total"] > 0
    assert run(load_profile("llama3").modes) == default
    assert run(load_profile("rsc1").modes)["failures"] != default["failures"]


def test_a_profile_written_out_reads_back_equal(tmp_path):
    p = load_profile("rsc1")
    back = load_profile(_write(tmp_path, profile_toml(p)))
    assert back.modes == p.modes and (back.name, back.fleet, back.source) == (
        p.name, p.fleet, p.source)


# ------------------------------------------------------------------ bad files
@pytest.mark.parametrize("change, field", [
    (lambda t: t.replace('source = "assumed"\n', ""), "source"),
    (lambda t: t.replace('component = "gpu"', 'component = "toaster"'), "component"),
    (lambda t: t.replace('unit = "gpu"', 'unit = "node"'), "unit"),
    (lambda t: t.replace("per_hour = 1e-4", "per_hour = -1.0"), "per_hour"),
    (lambda t: t.replace("per_hour = 1e-4", "per_hour = 1e-4\nper_day = 1.0"), "per_day"),
    (lambda t: t.replace("repair_h = 4", "repair_h = 0"), "repair_h"),
    (lambda t: t.replace("detect_s = 120", "detect_s = \"soon\""), "detect_s"),
    (lambda t: t.replace("repair_h = 4", "repair_h = 4\nrate = 3"), "rate"),
    (lambda t: t.replace('fleet = "a test fleet"\n', ""), "fleet"),
    (lambda t: t + t[t.index("[[mode]]"):], "cause"),
])
def test_a_bad_profile_file_gives_one_line_naming_the_file_and_the_field(tmp_path, change, field):
    path = _write(tmp_path, change(GOOD))
    with pytest.raises(ValueError) as exc:
        load_profile(path)
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith("fleet.toml") and f"'{field}'" in message or (
        field in ("per_day",) and "exactly one of" in message), message


def test_not_toml_and_unknown_names_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match=r"^fleet.toml: not valid TOML"):
        load_profile(_write(tmp_path, "name = [unclosed"))
    with pytest.raises(ValueError, match=r"unknown failure profile 'nope'.*llama3"):
        load_profile("nope")


def test_the_scenario_refuses_an_unknown_profile_and_takes_a_file(tmp_path):
    with pytest.raises(ScenarioError, match="unknown failure profile 'nope'"):
        Scenario(preset="dev-small", days=1, failure_profile="nope")
    with pytest.raises(ScenarioError, match="fleet.toml: mode 1"):
        Scenario(preset="dev-small", days=1,
                 failure_profile=str(_write(tmp_path, GOOD.replace("repair_h = 4", ""))))
    path = _write(tmp_path, GOOD.replace("1e-4", "0.05"), "busy.toml")
    engine, _ = run_scenario(Scenario(preset="dev-small", days=0.25, seed=2,
                                      failure_profile=str(path)))
    assert engine.reliability.modes == load_profile(path).modes
    assert set(engine.reliability.failures) == {"gpu_fault"}


# ------------------------------------------------------------------ job-level modes
def _one_mode(component: str, per_hour: float) -> tuple[FailureMode, ...]:
    return (FailureMode("fault", component, per_hour, 60, 0.1, source="test"),)


def _interruptions_by_size(modes) -> tuple[int, int]:
    """Interruptions of an 8-GPU and a 24-GPU gang running side by side for 600 h."""
    plan = small_plan(4)
    wl = workload(job(gpus=8, hours=1e5), job(gpus=24, hours=1e5))
    e = run_engine(plan, wl, until_h=600, failures=True, failure_modes=modes,
                   checkpoint_interval=600.0)
    small, big = e.runs
    return small.interruptions, big.interruptions


def test_a_job_level_mode_hits_small_and_large_gangs_alike_where_a_per_gpu_mode_does_not():
    """A job-level rate (0.1 per job-hour) interrupts a 24-GPU gang about as often as an 8-GPU
    one; a per-node rate giving the 8-GPU gang the same 0.1 per hour hits the 24-GPU (3-node)
    gang about 3 times as often (expected ~55 for the small gang at 600 h; bands about 2.5
    sigma).  Software faults stand for the per-node modes: they quarantine no lemon nodes."""
    small, big = _interruptions_by_size(_one_mode("job", 0.1))
    assert 30 <= small <= 90 and 0.6 <= big / small <= 1.6
    small, big = _interruptions_by_size(_one_mode("software", 0.1))
    assert 30 <= small <= 90 and big / small >= 2.0


def test_a_job_level_fault_leaves_the_gangs_nodes_up():
    e = run_engine(small_plan(4), workload(job(gpus=16, hours=1e5)), until_h=1,
                   failures=False)
    hit = e.reliability.inject(_one_mode("job", 1.0)[0], 0, rng=np.random.default_rng(0))
    assert hit["jobs"] == ["j0"] and e.runs[0].interruptions == 1
    assert e.state.node_up.all()


def test_the_job_mttf_closed_form_does_not_grow_a_job_level_rate_with_size():
    modes = MODES + _one_mode("job", 0.01)
    extra_small = job_failure_rate(1, 8, modes) - job_failure_rate(1, 8)
    extra_big = job_failure_rate(1024, 8192, modes) - job_failure_rate(1024, 8192)
    assert extra_small == pytest.approx(0.01) and extra_big == pytest.approx(0.01)


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 20_000), k=st.integers(2, 16),
       name=st.sampled_from(PROFILES))
def test_property_mttf_scales_as_one_over_size_for_size_proportional_modes(nodes, k, name):
    """With only per-GPU and per-node modes, k times the gang has k times the rate (MTTF / k);
    a job-level mode makes it grow less than k times."""
    modes = tuple(m for m in load_profile(name).modes if m.component != "job")
    one = job_failure_rate(nodes, 8 * nodes, modes)
    assert job_failure_rate(k * nodes, 8 * k * nodes, modes) == pytest.approx(k * one)
    with_job = modes + _one_mode("job", one)
    assert job_failure_rate(k * nodes, 8 * k * nodes, with_job) < k * 2 * one


def test_rsc1_keeps_hardware_per_node_apart_from_a_per_job_rate_that_does_not_grow():
    """Issue 29: rsc1's hardware is per node (r_f) and its user/software/data causes are per
    job: what a job of any size sees beyond nodes x r_f is the same per-job rate."""
    modes = load_profile("rsc1").modes
    comps = {m.cause: m.component for m in modes}
    assert comps["node_hardware"] == "host" and comps["job_software_user_data"] == "job"
    assert not any(c == "software" for c in comps.values())  # no per-node software rate
    r_f = 6.50 / 24000
    for nodes in (1, 128, 2048, 16384):
        beyond = job_failure_rate(nodes, 8 * nodes, modes) - nodes * r_f
        assert beyond == pytest.approx(6.03e-4, rel=1e-9)


# ------------------------------------------------------------------ failures while down
def test_a_failure_on_a_gang_already_down_is_counted_not_dropped():
    e = run_engine(small_plan(4), workload(job(gpus=16, hours=1e5)), until_h=1,
                   failures=False)
    run = e.runs[0]
    first, second = (int(e.state.node_first_gpu[n]) for n in run.placement.nodes[:2])
    gpu = next(m for m in MODES if m.component == "gpu")
    rng = np.random.default_rng(0)
    e.reliability.inject(gpu, first, rng=rng)
    assert run.interruptions == 1 and run.state == "detecting"
    e.reliability.inject(gpu, second, rng=rng)  # the gang hangs, not yet evicted
    rep = e.reliability.report()
    assert run.interruptions == 1 and rep["while_down"] == {gpu.cause: 1}
    assert rep["by_cause"] == {gpu.cause: 2}
    e.run_until(e.now + 2 * HOUR)
    assert e.reliability.report()["while_down"] == {gpu.cause: 1}


# ------------------------------------------------------------------ another fleet: RSC-1
# Kokolis et al., "Revisiting Reliability in Large-Scale Machine Learning Research Clusters"
# (arXiv 2410.21680, HPCA 2025), RSC-1, as quoted by public summaries (docs/failures.md).
RSC1_R_F_PER_NODE_H = 6.50 / 24000  # 6.50 failures per 1,000 node-days
RSC1_MTTF_1024_H = 7.9
RSC1_MTTF_8_DAYS = 47.7
RSC1_PROJECTED_H = {16384: 1.8, 131072: 0.23}


def _rsc1_mttf_h(gpus: int) -> float:
    return 1.0 / job_failure_rate(gpus // 8, gpus, load_profile("rsc1").modes)


def test_regression_rsc1_reproduces_the_8_gpu_mttf_it_was_calibrated_on():
    """Regression (by construction): the per-job rate is the 8-GPU jobs' measured MTTF, 47.7
    days, less r_f: 1/(47.7 x 24) - 6.50/24,000 = 6.03e-4 per job-hour (3 significant
    figures in the file)."""
    assert _rsc1_mttf_h(8) / 24 == pytest.approx(RSC1_MTTF_8_DAYS, rel=0.001)


@pytest.mark.parametrize("gpus", sorted(RSC1_PROJECTED_H))
def test_validation_rsc1_projected_mttf_of_large_jobs(gpus):
    """Held out: the paper's projected MTTF at 16,384 GPUs (1.8 h) and 131,072 GPUs (0.23 h).
    Weak as validation: the paper projects from r_f, which the profile takes as its hardware
    rate; what is tested is that the per-job part (fitted at 8 GPUs) does not grow with size
    (the old per-node software rate gave 0.49 h and 0.062 h).  Ours: 1.80 h, 0.225 h.
    Tolerance: 25 %."""
    assert _rsc1_mttf_h(gpus) == pytest.approx(RSC1_PROJECTED_H[gpus], rel=0.25)


@pytest.mark.parametrize("gpus, ours", [(2048, 0.948), (4096, 0.907)])
def test_validation_rsc1_ettr_of_2k_to_4k_gpu_jobs_with_hourly_checkpoints(gpus, ours):
    """Held out: the paper's ETTR above 0.9 for 2,048-4,096-GPU jobs checkpointing hourly.
    Closed form (analysis.job_ettr): interval 3,600 s, a 30 s synchronous stall (assumed: the
    paper's write time was not found), restart = the modes' detection + the engine's default
    180 s.  Ours 0.948 and 0.907 (0.915 at 4,096 with a free checkpoint, 0.899 at a 60 s
    stall).  Tolerance: the bound less 0.02 (>= 0.88)."""
    e = job_ettr(load_profile("rsc1").modes, gpus=gpus, nodes=gpus // 8, cost_s=30.0,
                 interval_s=3600.0)
    assert e.ettr >= 0.90 - 0.02
    assert e.ettr == pytest.approx(ours, abs=0.001)


@pytest.mark.xfail(strict=True, reason=(
    "rsc1 gives 28.4 h for 1,024-GPU jobs (+259 %): with hardware at r_f, the measured 7.9 h "
    "needs 0.092 failures per job-hour beyond r_f at 128 nodes, which would put the 4,096-GPU "
    "ETTR at 0.86 and the 8-GPU MTTF at 10.8 h; the published figures disagree (docs/"
    "failures.md)"))
def test_validation_rsc1_measured_mttf_of_1024_gpu_jobs():
    """Held out: the measured MTTF of 1,024-GPU jobs, 7.9 h.  Tolerance: 25 %."""
    assert _rsc1_mttf_h(1024) == pytest.approx(RSC1_MTTF_1024_H, rel=0.25)


def test_the_engine_draws_a_profile_at_its_rates_rsc1_at_992_gpus():
    """The engine follows the profile, not only the closed form: the llama3-16k preset scaled
    to 1,024 GPUs (a 992-GPU, 124-node gang) under rsc1 for 90 days has an MTTF (wall time over
    interruptions, downtime included) near 1/(124 x 2.708e-4 + 6.03e-4 per h) = 29.3 h, the
    per-job mode drawn once for the gang.  Band: +-35 % (about 3 sigma for ~74
    interruptions)."""
    _, rep = run_scenario(Scenario(preset="llama3-16k", gpus=1024, days=90, seed=1,
                                   physics=False, failure_profile="rsc1"))
    big = rep["largest_job"]
    expected = 1.0 / job_failure_rate(big["gpus"] // 8, big["gpus"], load_profile("rsc1").modes)
    assert expected == pytest.approx(29.25, rel=0.01)
    assert big["mttf_hours"] == pytest.approx(expected, rel=0.35)


def test_every_unit_named_in_a_profile_is_the_components_unit():
    for name in PROFILES:
        for m in load_profile(name).modes:
            assert m.component in UNITS


def test_failure_modes_survive_a_replan_settings_copy():
    e = run_engine(small_plan(4), workload(job(gpus=8, hours=10)), failures=True,
                   failure_modes=load_profile("rsc1").modes)
    assert e.settings["failure_modes"] == load_profile("rsc1").modes
    again = Engine(e.plan, e.workload, seed=0, **e.settings)
    assert again.reliability.modes == load_profile("rsc1").modes
    assert dataclasses.is_dataclass(again.reliability.modes[0])



def test_auto_checkpoint_intervals_and_the_live_mttf_follow_the_engines_profile():
    """A fleet that fails more often checkpoints more often: Daly's interval grows with the
    job's MTTF, so the profile with the shorter MTTF gives the shorter interval; the live
    page's predicted MTTF is the profile's too."""
    from scheduler.live import live_frame
    intervals, mttf_h = {}, {}
    for name in ("llama3", "rsc1"):
        e, _ = Scenario(preset="llama3-16k", gpus=1024, days=0.2, seed=0, failures=False,
                        failure_profile=name).engine()
        e.run_until(1800.0)
        run = max((r for r in e.runs if r.first_start is not None), key=lambda r: r.gpus)
        nodes = int(run.placement.nodes.size)
        intervals[name] = run.interval_s
        mttf_h[name] = 1.0 / job_failure_rate(nodes, run.gpus, load_profile(name).modes)
        bucket = next(b for b in live_frame(e)["failures"]["mttf_by_size"]
                      if b["gpus"] == "512-4095")
        assert bucket["predicted_mttf_hours"] == pytest.approx(mttf_h[name], rel=0.05)
    assert mttf_h["rsc1"] < mttf_h["llama3"] and intervals["rsc1"] < intervals["llama3"]
