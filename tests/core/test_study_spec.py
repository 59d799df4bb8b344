"""A study spec is checked whole before any run: every mistake is one line naming the line."""

import json
from pathlib import Path

import pytest

from scheduler.study.spec import SpecError, load_spec, load_spec_text

GOOD = """\
name: oversubscription
base:
  preset: dev-small
  days: 1
  fabric: fat-tree
seeds: 3
arms:
  - name: one-to-one
    set: {oversubscription: 1}
  - name: one-to-three
    set: {oversubscription: 3}
figures: [mfu, ettr]
"""


def error(text: str) -> str:
    with pytest.raises(SpecError) as exc:
        load_spec_text(text)
    return str(exc.value)


def test_a_good_spec_gives_its_arms_seeds_and_figures_baseline_first():
    spec = load_spec_text(GOOD.replace("seeds: 3", "seeds: 3\nbaseline: one-to-three"))
    assert [a.name for a in spec.arms] == ["one-to-three", "one-to-one"]
    assert spec.seeds == (0, 1, 2)
    assert spec.figures == ("mfu", "ettr")
    assert spec.arms[0].options["oversubscription"] == 3
    assert spec.arms[0].options["preset"] == "dev-small"
    assert len(spec.runs()) == 6


def test_json_is_read_as_well():
    data = {"name": "j", "base": {"preset": "dev-small", "days": 1}, "seeds": [4, 7],
            "arms": [{"name": "a"}, {"name": "b", "set": {"spares": 0.1}}]}
    spec = load_spec_text(json.dumps(data, indent=1))
    assert spec.seeds == (4, 7) and spec.arms[1].changes == {"spares": 0.1}


def test_an_unknown_field_is_named_with_its_line():
    msg = error(GOOD.replace("set: {oversubscription: 3}", "set: {oversubscripton: 3}"))
    assert msg.startswith("spec: line 11:") and "unknown field 'oversubscripton'" in msg


def test_an_unknown_top_level_field_is_refused():
    assert "line 13: unknown field 'colour'" in error(GOOD + "colour: red\n")


def test_an_arm_that_changes_nothing_is_refused():
    text = GOOD.replace("set: {oversubscription: 3}", "set: {oversubscription: 1}")
    assert "line 10: arm 'one-to-three' changes nothing from the baseline 'one-to-one'" \
        in error(text)
    text = GOOD.replace("set: {oversubscription: 3}", "set: {policy: default}") \
        .replace("    set: {oversubscription: 1}\n", "")
    assert "arm 'one-to-three' changes nothing from the baseline 'one-to-one'" in error(text)


def test_two_arms_running_the_same_scenario_are_refused():
    text = GOOD.replace("figures:", "  - name: again\n    set: {oversubscription: 3.0}\nfigures:")
    assert "arms 'one-to-three' and 'again' run the same scenario" in error(text)


def test_a_fabric_the_cluster_size_cannot_build_is_refused_before_any_run():
    text = GOOD.replace("set: {oversubscription: 3}", "set: {fabric: fat-tree, gpus: 100000}")
    msg = error(text)
    assert "line 10:" in msg and "at most 65536 endpoints" in msg


def test_a_value_out_of_its_bound_is_refused():
    msg = error(GOOD.replace("oversubscription: 3", "oversubscription: 0.5"))
    assert "line 11:" in msg and "oversubscription" in msg  # the field's own line


def test_seeds_are_at_least_two_and_not_set_in_the_base():
    assert "between 2 and" in error(GOOD.replace("seeds: 3", "seeds: 1"))
    assert "seed cannot be set in base" in error(GOOD.replace("  days: 1", "  days: 1\n  seed: 4"))
    assert "listed twice" in error(GOOD.replace("seeds: 3", "seeds: [1, 1]"))


def test_unknown_figures_and_baselines_are_refused():
    assert "unknown figure 'mfuu'" in error(GOOD.replace("[mfu, ettr]", "[mfuu]"))
    assert "baseline 'nope' is not an arm" in error(GOOD + "baseline: nope\n")


def test_energy_costs_need_a_price():
    assert "need energy_price_usd_per_mwh" in error(GOOD.replace("[mfu, ettr]", "[cost_usd]"))
    spec = load_spec_text(GOOD.replace("[mfu, ettr]", "[cost_usd]")
                          + "energy_price_usd_per_mwh: 80\n")
    assert spec.energy_price_usd_per_mwh == 80.0
    assert "cost_usd" not in load_spec_text(GOOD.replace("figures: [mfu, ettr]\n", "")).figures


def test_broken_yaml_names_its_line():
    msg = error(GOOD.replace("  days: 1", "  days: [1"))
    assert msg.startswith("spec: line") and "not valid YAML" in msg


def test_a_missing_file_and_an_empty_spec_are_one_line(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "missing.yaml")
    assert "empty" in error("")


def test_a_trace_is_read_relative_to_the_spec_file(tmp_path):
    (tmp_path / "t.csv").write_text("x")
    p = tmp_path / "s.yaml"
    p.write_text(GOOD.replace("  days: 1", "  days: 1\n  trace: t.csv")
                 .replace("oversubscription: 1", "policy: fifo")
                 .replace("oversubscription: 3", "policy: default"))
    spec = load_spec(p)
    assert spec.arms[0].options["trace"] == str(tmp_path / "t.csv")


def test_an_arms_key_changes_with_its_scenario_and_seed():
    spec = load_spec_text(GOOD)
    a, b = spec.arms
    assert a.key(0) != b.key(0) and a.key(0) != a.key(1) and a.key(0) == a.key(0)


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[2] / "docs" /
                                         "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_the_documented_example_specs_are_valid(path):
    spec = load_spec(path)
    assert len(spec.arms) >= 2 and len(spec.seeds) >= 2
