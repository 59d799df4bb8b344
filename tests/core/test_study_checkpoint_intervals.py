"""A study comparing checkpoint modes says on which intervals: ``checkpoint_intervals: equal``
or ``optimum`` in the spec, checked before anything runs, and the line in the summary."""

from __future__ import annotations

import pytest

from scheduler.study.spec import SpecError, check_spec, load_spec_text
from scheduler.study.summary import summarise

ARMS = [{"name": "disk"}, {"name": "memory", "set": {"recovery": "memory"}}]


def _spec(base=None, arms=ARMS, **top):
    return {"name": "modes", "base": {"preset": "dev-small", "days": 1, **(base or {})},
            "seeds": 2, "arms": arms, "figures": ["ettr"], **top}


def test_equal_intervals_are_named_with_their_length_and_reach_the_summary():
    spec = check_spec(_spec({"checkpoint_interval": 1800}, checkpoint_intervals="equal"))
    assert spec.checkpoint_basis == "intervals: equal (30.0 min)"
    values = {(a, s): {"ettr": 0.9} for a in ("disk", "memory") for s in (0, 1)}
    assert summarise(spec, values)["checkpoint_intervals"] == "intervals: equal (30.0 min)"


def test_each_modes_optimum_is_the_default_auto_interval():
    asked = check_spec(_spec(checkpoint_intervals="optimum"))
    unasked = check_spec(_spec())
    assert asked.checkpoint_basis == unasked.checkpoint_basis == \
        "intervals: each mode's optimum (Daly)"


def test_arms_that_differ_in_recovery_and_interval_are_said_to_differ():
    arms = [{"name": "disk", "set": {"checkpoint_interval": 3600}},
            {"name": "memory", "set": {"recovery": "memory"}}]
    assert check_spec(_spec(arms=arms)).checkpoint_basis == \
        "intervals: differ between arms (disk 3600 s, memory auto)"


def test_a_study_that_does_not_compare_modes_gets_no_line():
    arms = [{"name": "a"}, {"name": "b", "set": {"policy": "fifo"}}]
    spec = check_spec(_spec(arms=arms))
    assert spec.checkpoint_basis is None
    assert "checkpoint_intervals" not in summarise(spec, {})


SPEC = """name: modes
base: {{preset: dev-small, days: 1{base}}}
seeds: 2
checkpoint_intervals: {basis}
arms:
  - name: disk
  - name: memory
    set: {{recovery: memory{arm}}}
"""


@pytest.mark.parametrize("basis, base, arm, message", [
    ("same", "", "", "checkpoint_intervals must be equal or optimum, not 'same'"),
    ("equal", "", "", "checkpoint_intervals: equal needs one checkpoint_interval in seconds "
                      "for every arm (set it in base); arm 'disk' has 'auto'"),
    ("equal", ", checkpoint_interval: 600", ", checkpoint_interval: 1200",
     "checkpoint_intervals: equal needs the same checkpoint_interval in every arm, not "
     "600, 1200 s"),
    ("optimum", ", checkpoint_interval: 600", "",
     "checkpoint_intervals: optimum runs each arm at its own (auto) interval; arm 'disk' "
     "sets checkpoint_interval 600"),
    ("optimum", ", checkpoint_interval: job", "",
     "checkpoint_intervals: optimum runs each arm at its own (auto) interval; arm 'disk' "
     "sets checkpoint_interval 'job'"),
])
def test_a_bad_basis_is_one_error_at_its_line(basis, base, arm, message):
    with pytest.raises(SpecError) as err:
        load_spec_text(SPEC.format(basis=basis, base=base, arm=arm), origin="modes.yaml")
    assert err.value.messages() == [f"line 4: {message}"]
    assert str(err.value) == f"modes.yaml: line 4: {message}"
