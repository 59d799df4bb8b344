"""The checked parsers (scheduler.limits.checks): what each accepts, what it refuses and the one
line it refuses with; the scenario's table of checks; commands refuse parameters they do not
take or lack, while a bug inside a command is not disguised as a bad parameter (issue 24)."""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from scheduler.control.commands import COMMANDS, PARAMETERS
from scheduler.limits import checks
from scheduler.limits.bounds import CLUSTER_GPUS, POWER_CAP
from scheduler.simulate import _RULES, Scenario, ScenarioError
from tests.core.factories import job, run_engine, small_plan, workload

NAN, INF = float("nan"), float("inf")


def refusal(parse, *args, **kwargs) -> str:
    """The one line ``parse`` refuses with."""
    with pytest.raises(ValueError) as refused:
        parse(*args, **kwargs)
    message = str(refused.value)
    assert "\n" not in message
    return message


# ----------------------------------------------------------------- number
@pytest.mark.parametrize("value", [0, 2, 2.5, -1e308, np.int64(3), np.float32(0.5)])
def test_a_number_is_any_finite_int_or_float_and_comes_back_a_float(value):
    out = checks.number("x", value)
    assert out == value and type(out) is float


@pytest.mark.parametrize("value", [True, False, np.True_, NAN, INF, -INF, "2", None, [2],
                                   2 + 0j])
def test_a_number_refuses_bools_nan_infinity_strings_and_none(value):
    assert refusal(checks.number, "factor", value) == (
        f"factor must be a finite number, not {value!r}")


@pytest.mark.parametrize("value, message", [
    (0, "days must be a number > 0 and <= 366, not 0"),
    (366.5, "days must be a number > 0 and <= 366, not 366.5"),
    (NAN, "days must be a number > 0 and <= 366, not nan"),
])
def test_a_number_outside_its_limits_is_refused_with_the_limits(value, message):
    assert refusal(checks.number, "days", value, above=0, at_most=366.0) == message
    assert checks.number("days", 366, above=0, at_most=366.0) == 366.0


def test_each_limit_is_open_or_closed_as_named():
    assert checks.number("x", 1, at_least=1) == 1.0
    assert refusal(checks.number, "x", 1, above=1) == "x must be a number > 1, not 1"
    assert refusal(checks.number, "x", 1, below=1) == "x must be a number < 1, not 1"
    assert refusal(checks.number, "x", 0, above=0) == "x must be a positive number, not 0"


def test_a_number_keeps_the_callers_wording_and_then_checks_the_documented_bound():
    assert refusal(checks.number, "spares", 1, at_least=0, below=1,
                   expect="a fraction in [0, 1)") == "spares must be a fraction in [0, 1), not 1"
    assert refusal(checks.number, "cap", 0.05, above=0, bound=POWER_CAP) == (
        "cap must be at least 0.1, not 0.05")
    assert refusal(checks.number, "x", -1, at_least=0, given="got") == (
        "x must be a number >= 0, got -1")


@pytest.mark.parametrize("text, value", [("2", 2.0), (" 2.5 ", 2.5), ("1e3", 1000.0)])
def test_a_number_from_text_reads_what_float_reads(text, value):
    assert checks.number_from_text("--load", text, above=0) == value


@pytest.mark.parametrize("text", ["soon", "", "nan", "inf", "-1", "0", "1e400", None])
def test_a_number_from_text_is_refused_showing_the_text_as_typed(text):
    assert refusal(checks.number_from_text, "--load", text, above=0) == (
        f"--load must be a positive number, not {text!r}")


def test_text_that_is_no_number_at_all_may_get_its_own_wording():
    kw = {"expect": "finite and >= 0", "unparsable": "a number", "at_least": 0, "given": "got"}
    assert refusal(checks.number_from_text, "duration", "soon", **kw) == (
        "duration must be a number, got 'soon'")
    assert refusal(checks.number_from_text, "duration", "inf", **kw) == (
        "duration must be finite and >= 0, got 'inf'")


# ----------------------------------------------------------------- integer
@pytest.mark.parametrize("value", [0, 7, -3, np.int64(7), np.uint8(7)])
def test_an_integer_is_a_python_or_numpy_int_and_comes_back_an_int(value):
    out = checks.integer("x", value)
    assert out == value and type(out) is int


@pytest.mark.parametrize("value", [True, False, 2.0, 2.5, NAN, INF, "2", None])
def test_an_integer_refuses_bools_floats_even_integral_ones_and_strings(value):
    assert refusal(checks.integer, "gpus", value, at_least=1) == (
        f"gpus must be a positive integer, not {value!r}")


@pytest.mark.parametrize("kw, value, message", [
    ({"at_least": 0}, -1, "seed must be an integer >= 0, not -1"),
    ({"at_least": 1}, 0, "seed must be a positive integer, not 0"),
    ({"at_least": 2, "at_most": 5}, 6, "seed must be an integer >= 2 and <= 5, not 6"),
    ({}, "x", "seed must be an integer, not 'x'"),
])
def test_an_integer_outside_its_limits_is_refused_with_the_limits(kw, value, message):
    assert refusal(checks.integer, "seed", value, **kw) == message


def test_an_integer_then_checks_the_documented_bound():
    assert refusal(checks.integer, "--gpus", 5_000_000, at_least=1, bound=CLUSTER_GPUS) == (
        "--gpus must be at most 4,194,304 GPUs, not 5000000")


@pytest.mark.parametrize("text, value", [("12", 12), (" +3 ", 3), ("0", 0)])
def test_an_integer_from_text_reads_what_int_reads(text, value):
    assert checks.integer_from_text("--gpus", text, at_least=0) == value


@pytest.mark.parametrize("text", ["12.5", "1e3", "x", "", "-1", None])
def test_an_integer_from_text_is_refused_showing_the_text_as_typed(text):
    assert refusal(checks.integer_from_text, "--seed", text, at_least=0) == (
        f"--seed must be an integer >= 0, not {text!r}")


def test_an_integer_from_text_that_is_no_integer_may_get_its_own_wording():
    assert refusal(checks.integer_from_text, "page", "two", at_least=1,
                   unparsable="an integer") == "page must be an integer, not 'two'"


# ----------------------------------------------------------------- bounds, None, choices
def test_within_is_the_documented_bound_and_its_message():
    assert checks.within("power cap", 0.5, POWER_CAP) == 0.5
    assert refusal(checks.within, "power cap", 1.5, POWER_CAP) == (
        "power cap must be at most 1, not 1.5")
    assert refusal(checks.within, "power cap", True, POWER_CAP).startswith(
        "power cap must be a positive number in [0.1, 1]")


def test_optional_lets_none_through_and_checks_anything_else():
    assert checks.optional(checks.number, "x", None, above=0) is None
    assert checks.optional(checks.number, "x", 2, above=0) == 2.0
    assert refusal(checks.optional, checks.number, "x", 0, above=0) == (
        "x must be a positive number, not 0")


def test_a_choice_is_one_of_the_known_names():
    assert checks.choice("policy", "fifo", {"fifo": 1, "default": 2}) == "fifo"
    assert refusal(checks.choice, "policy", "fastest", ("fifo", "default")) == (
        "unknown policy 'fastest'; choose one of: fifo, default")


@pytest.mark.parametrize("value", [[], {}, None, 1])
def test_a_choice_refuses_values_that_are_no_name_even_unhashable_ones(value):
    assert refusal(checks.choice, "preset", value, {"dev-small": 1}) == (
        f"unknown preset {value!r}; choose one of: dev-small")


def test_one_of_lists_the_names_after_must_be():
    assert checks.one_of("unit", "rack", ("rack", "spine")) == "rack"
    assert refusal(checks.one_of, "qos", "x", ("LS", "BE"), given="got") == (
        "qos must be one of LS, BE, got 'x'")


@pytest.mark.parametrize("value", [True, False, np.True_])
def test_a_flag_is_true_or_false(value):
    assert checks.flag("nic", value) is bool(value)


@pytest.mark.parametrize("value", [1, 0, "yes", "true", None])
def test_a_flag_is_never_a_number_or_a_word(value):
    assert refusal(checks.flag, "nic", value) == f"nic must be true or false, not {value!r}"


def test_a_flag_may_refuse_numpy_bools_and_name_its_words():
    assert refusal(checks.flag, "physics", np.True_, expect="on or off", numpy_bool=False) == (
        "physics must be on or off, not np.True_")


@pytest.mark.parametrize("value", [0.5, 1e-4, np.float64(0.9999)])
def test_a_fraction_left_is_strictly_between_0_and_1_and_at_least_the_floor(value):
    assert checks.fraction("factor", value) == float(value)


@pytest.mark.parametrize("value, message", [
    (1, "factor must be a number between 0 and 1 (exclusive), not 1"),
    (0, "factor must be a number between 0 and 1 (exclusive), not 0"),
    (True, "factor must be a number between 0 and 1 (exclusive), not True"),
    (NAN, "factor must be a number between 0 and 1 (exclusive), not nan"),
    ("0.5", "factor must be a number between 0 and 1 (exclusive), not '0.5'"),
    (1e-9, "factor must be at least 0.0001, not 1e-09"),
])
def test_a_fraction_left_out_of_range_is_refused(value, message):
    assert refusal(checks.fraction, "factor", value) == message


# ----------------------------------------------------------------- ids
@pytest.mark.parametrize("value", [0, 3, np.int32(3)])
def test_an_id_is_an_integer_in_0_to_count_minus_1(value):
    assert checks.unit_id("node", value, 4) == int(value)


@pytest.mark.parametrize("value, message", [
    (4, "node 4 does not exist (ids 0 .. 3)"),
    (-1, "node -1 does not exist (ids 0 .. 3)"),
    (True, "node must be an integer id, not True"),
    (1.0, "node must be an integer id, not 1.0"),
    ("1", "node must be an integer id, not '1'"),
    (None, "node must be an integer id, not None"),
])
def test_an_id_outside_the_units_or_of_another_kind_is_refused(value, message):
    assert refusal(checks.unit_id, "node", value, 4) == message


def test_an_id_typed_as_digits_is_read_only_when_asked_and_any_integer_without_a_count():
    assert checks.unit_id("target", " 12 ", from_text=True) == 12
    assert checks.unit_id("target", -5) == -5
    assert refusal(checks.unit_id, "target", "-1", from_text=True) == (
        "target must be an integer id, not '-1'")


# ----------------------------------------------------------------- parameter names
def test_names_not_taken_are_refused_before_names_missing():
    checks.keys("gpu_down", {"gpu": 1}, ("gpu", "nic"), required=("gpu",))
    assert refusal(checks.keys, "gpu_down", {"gpus": 1}, ("gpu", "nic"), required=("gpu",)) == (
        "gpu_down takes gpu, nic; not gpus")
    assert refusal(checks.keys, "gpu_down", {}, ("gpu", "nic"), required=("gpu",)) == (
        "gpu_down needs gpu")
    assert refusal(checks.keys, "a none action", {"x": 1}, ()) == (
        "a none action takes nothing; not x")
    checks.keys("drill", {"kind": "node", "factor": 2}, ("kind",), required=("kind",), more=True)


def test_the_checks_import_only_the_standard_library_numpy_and_the_bounds():
    import scheduler.limits.checks as module
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    ours = {m for m in imported if m.split(".")[0] == "scheduler"}
    assert ours == {"scheduler.limits.bounds"}
    assert imported - ours <= {"__future__", "math", "collections.abc", "numpy"}


# ----------------------------------------------------------------- the scenario's table
def test_every_scenario_field_is_checked_by_the_table():
    assert set(_RULES) == {f.name for f in dataclasses.fields(Scenario)}


@pytest.mark.parametrize("kw, message", [
    ({"days": 0}, "days must be a finite number > 0 and <= 366, not 0"),
    ({"seed": 1.5}, "seed must be an integer >= 0, not 1.5"),
    ({"gpus": True}, "gpus must be a positive integer, not True"),
    ({"gpus": 5_000_000}, "gpus must be at most 4,194,304 GPUs"),
    ({"physics": 1}, "physics must be on or off, not 1"),
    ({"checkpoint_interval": "never"}, "checkpoint interval must be 'auto', 'job' or a "
                                       "positive number of seconds, not 'never'"),
    ({"checkpoint_interval": 30}, "checkpoint interval must be at least 60 s"),
    ({"spares": 1.0}, "spares must be a fraction in [0, 1), not 1.0"),
    ({"oversubscription": 0.5}, "oversubscription must be a number >= 1, not 0.5"),
    ({"physics_max_tick_s": 60}, "physics max tick must be a number >= 1800 s, not 60"),
    ({"warmup_s": math.nan}, "warmup_s must be a number in [0, 86,400] s, not nan"),
    ({"power_cap": 2}, "power cap must be at most 1, not 2"),
    ({"policy": ["fifo"]}, "unknown policy ['fifo']; choose one of:"),
    ({"trace": 5}, "trace must be a file's path, not 5"),
    ({"power_cap": 0.5, "physics": False}, "a power cap needs the power model (physics on)"),
])
def test_a_bad_scenario_field_is_one_scenario_error_line_naming_it(kw, message):
    with pytest.raises(ScenarioError) as refused:
        Scenario(**{"preset": "dev-small", "days": 1, **kw})
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_the_scenario_accepts_its_defaults_and_the_named_intervals():
    for interval in ("auto", "job", None, 3600):
        Scenario(preset="dev-small", days=1, checkpoint_interval=interval)


# ----------------------------------------------------------------- commands
@pytest.fixture
def engine():
    return run_engine(small_plan(2), workload(job(gpus=8, hours=4, name="j")), until_h=0.5)


@pytest.mark.parametrize("command, params, message", [
    ("drain_node", {"nodes": 0}, "drain_node takes node; not nodes"),
    ("drain_node", {}, "drain_node needs node"),
    ("gpu_down", {"gpu": 0, "nic": False, "why": "x"}, "gpu_down takes gpu, nic; not why"),
    ("storage_degraded", {"tier": "central"}, "storage_degraded needs factor"),
    ("drill", {"target": 0}, "drill needs kind"),
    ("drill", {"kind": "node", "factor": 2}, "a node drill takes no parameters; not factor"),
    ("warp", {}, "unknown command 'warp'; known: drain_node"),
])
def test_parameters_a_command_does_not_take_or_lacks_are_refused_in_one_line(
        engine, command, params, message):
    version = engine.state.version
    assert refusal(engine.command, command, **params).startswith(message)
    assert engine.state.version == version


def test_each_commands_parameters_come_from_its_signature():
    assert PARAMETERS["gpu_down"] == (("gpu",), ("gpu", "nic"), False)
    assert PARAMETERS["drill"] == (("kind",), ("kind", "target"), True)
    assert set(PARAMETERS) == set(COMMANDS)


def test_a_type_error_inside_a_command_is_a_bug_and_propagates(engine, monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("set_node_flags() got an unexpected keyword argument 'drained'")

    monkeypatch.setattr(engine.state, "set_node_flags", broken)
    with pytest.raises(TypeError, match="unexpected keyword argument 'drained'"):
        engine.command("drain_node", node=0)


def test_a_bad_value_of_an_allowed_parameter_is_still_a_value_error(engine):
    assert refusal(engine.command, "set_policy", name={"x": 1}).startswith(
        "unknown policy {'x': 1}; choose one of:")
    assert refusal(engine.command, "gpu_down", gpu=0, nic="yes") == (
        "nic must be true or false, not 'yes'")
