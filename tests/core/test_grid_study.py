"""A study on a grid (issue 30): placement by cost, by start and by data gravity tell apart on
the figures each one weighs, with paired intervals that exclude zero; same seed, same run;
region-loss arms meet the same losses; a bad grid spec names every mistake at its line."""

from __future__ import annotations

import json

import pytest

from scheduler.study.run import run_one
from scheduler.study.spec import SpecError, load_spec_text
from scheduler.study.summary import summarise

PLACEMENT = """\
name: grid placement
grid: grid
base: {days: 2}
seeds: 4
baseline: cost
arms:
  - name: cost
    set: {policy: cost}
  - name: start
    set: {policy: start}
  - name: gravity
    set: {policy: gravity}
figures: [grid.cost_usd, grid.wait_mean_h, grid.moved_gb, grid.data_move_h]
"""


@pytest.fixture(scope="module")
def placement():
    """The study's runs (as the study runner makes them, one ``run_one`` per arm and seed)
    and its summary."""
    spec = load_spec_text(PLACEMENT)
    runs = {(a.name, s): run_one(a.options, s, list(spec.figures), grid=spec.grid)
            for a, s in spec.runs()}
    return spec, runs, summarise(spec, {k: r["figures"] for k, r in runs.items()})


def paired(summary, arm, figure) -> dict:
    return next(p for p in summary["paired"] if p["arm"] == arm)["figures"][figure]


def test_cost_is_cheaper_than_start_and_start_waits_less_with_intervals_excluding_zero(
        placement):
    _, _, summary = placement
    cost = paired(summary, "start", "grid.cost_usd")   # start - cost, per seed
    assert cost["verdict"] == "worse" and cost["low"] > 0
    wait = paired(summary, "start", "grid.wait_mean_h")
    assert wait["verdict"] == "better" and wait["high"] < 0


def test_gravity_moves_fewer_bytes_than_cost_with_an_interval_excluding_zero(placement):
    _, _, summary = placement
    moved = paired(summary, "gravity", "grid.moved_gb")
    assert moved["verdict"] == "better" and moved["high"] < 0
    means = {a["name"]: a["figures"]["grid.moved_gb"]["mean"] for a in summary["arms"]}
    assert means["gravity"] < min(means["cost"], means["start"])


def test_a_run_stores_the_grid_report_with_one_site_per_place_and_its_figures(placement):
    spec, runs, _ = placement
    stored = runs[(spec.arms[1].name, 2)]
    report = json.loads(json.dumps(stored["report"]))  # JSON-safe, as the runner stores it
    assert [s["place"] for s in report["sites"]] == report["scenario"]["places"]
    assert report["scenario"]["policy"] == "start" and report["scenario"]["days"] == 2
    assert stored["figures"]["grid.cost_usd"] == report["summary"]["cost"]["total"]
    assert report["jobs"]["completed"] > 0 and 0 < report["mfu"]["achieved"] < 1


def test_same_seed_same_run_and_another_seed_another(placement):
    spec, runs, _ = placement
    arm = spec.arms[2]
    figures = list(spec.figures)
    stored = runs[(arm.name, 1)]
    again = run_one(arm.options, 1, figures)
    assert again["figures"] == stored["figures"]
    assert {k: v for k, v in again["report"].items() if k != "wall_seconds"} == \
        {k: v for k, v in stored["report"].items() if k != "wall_seconds"}
    assert run_one(arm.options, 3, figures)["figures"] != stored["figures"]


REPLICATION = """\
name: replication against region loss
grid: grid
base: {days: 1, region_loss_rate: 1, region_loss_h: 6}
seeds: [0, 1]
arms:
  - name: never
    set: {replication_s: never}
  - name: half-hourly
    set: {replication_s: 1800}
figures: [grid.lost_h100_gpu_hours, grid.replica_gb]
"""


def test_region_loss_arms_meet_the_same_losses_and_replication_saves_work():
    spec = load_spec_text(REPLICATION)
    figures = list(spec.figures)
    runs = {(a.name, s): run_one(a.options, s, figures) for a, s in spec.runs()}
    losses = {k: r["report"]["scenario"]["region_loss"] for k, r in runs.items()}
    for seed in spec.seeds:
        assert losses[("never", seed)] == losses[("half-hourly", seed)] != []
        never = runs[("never", seed)]["figures"]
        half = runs[("half-hourly", seed)]["figures"]
        assert never["grid.replica_gb"] == 0 < half["grid.replica_gb"]
        assert half["grid.lost_h100_gpu_hours"] < never["grid.lost_h100_gpu_hours"]
    assert losses[("never", 0)] != losses[("never", 1)]


def test_a_bad_grid_spec_names_every_mistake_at_its_line():
    text = """\
name: bad grid
grid: grid
base: {days: 0, fabric: rail}
seeds: 1
arms:
  - name: cost
    set: {policy: cheapest}
  - name: start
    set: {policy: {start: -1}, replication_s: 0}
  - name: cost
    set: {region_loss_rate: 99}
figures: [grid.cost_usd, mfu]
energy_price_usd_per_mwh: 80
"""
    with pytest.raises(SpecError) as err:
        load_spec_text(text, origin="bad.yaml")
    got = [(p.line, p.message) for p in err.value.problems]
    expect = [
        (3, "unknown field 'fabric' in base"), (3, "base: days must be a number > 0"),
        (4, "seeds must be between 2 and 1000"), (7, "arm 'cost': unknown grid policy "
                                                     "'cheapest'"),
        (9, "arm 'start': policy weight start must be a number >= 0, not -1"),
        (9, "arm 'start': replication_s must be seconds > 0"),
        (10, "arm name 'cost' is used twice"),
        (11, "region_loss_rate must be losses per place per day in [0, 24], not 99"),
        (12, "unknown grid figure 'mfu'"),
        (13, "unknown field 'energy_price_usd_per_mwh' in a grid study")]
    assert len(got) == len(expect), got
    for (line, message), (want_line, want) in zip(got, expect, strict=True):
        assert line == want_line and want in message, (line, message)
    assert str(err.value).startswith("bad.yaml: 10 errors: line 3:")


@pytest.mark.parametrize("change, message", [
    ("grid: grid", "grid: elsewhere"),
    ("{policy: gravity}", "{policy: cost}"),
])
def test_an_unknown_grid_or_a_repeated_arm_is_refused_before_any_run(change, message):
    text = PLACEMENT.replace(change, message)
    with pytest.raises(SpecError) as err:
        load_spec_text(text)
    [problem] = err.value.problems
    assert problem.line == (2 if "grid:" in change else 11)
    assert ("grid 'elsewhere' is no grid preset (grid)" in problem.message
            or "arm 'gravity' changes nothing from the baseline 'cost'" in problem.message)


def test_arm_options_are_plain_values_and_their_key_is_stable():
    a, b = load_spec_text(PLACEMENT), load_spec_text(PLACEMENT)
    for arm, same in zip(a.arms, b.arms, strict=True):
        assert json.loads(json.dumps(arm.options)) == arm.options
        assert arm.key(0) == same.key(0) != arm.key(1)
    assert a.arms[0].options == {"grid": "grid", "source": "preset", "days": 2.0,
                                 "policy": "cost", "replication_s": 3600.0,
                                 "region_loss_rate": 0.0, "region_loss_h": 6.0, "load": 1.0,
                                 "spot": False}
    assert a.grid is None


def test_weights_left_out_are_zero_and_weights_are_checked_as_policies_are():
    spec = load_spec_text(PLACEMENT.replace("{policy: gravity}", "{policy: {gravity: 2}}"))
    assert spec.arms[2].options["policy"] == {"cost": 0.0, "start": 0.0, "gravity": 2.0}
    with pytest.raises(SpecError, match="line 12: arm 'gravity': placement weights .* not all "
                                        "zero"):
        load_spec_text(PLACEMENT.replace("{policy: gravity}", "{policy: {gravity: 0}}"))
