"""reliability ettr --modes: checkpoint modes compared at equal intervals and at each mode's
optimum, every table saying which; a bad flag is one line and exit 2, nothing written."""

import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

GEMINI = ("ettr", "--gpus", "4480", "--checkpoint-s", "2520", "--load-s", "2520",
          "--checkpoint-gb", "6300")
"""Gemini's MT-NLG case: 42 min to write to (and read from) remote storage at 20 Gbps."""


def _run(capsys, *args) -> tuple[str, dict]:
    call_command("reliability", *args, "--json", "-")
    cap = capsys.readouterr()
    return cap.err, json.loads(cap.out[cap.out.index("{"):])


def test_both_bases_by_default_each_table_named_and_the_gemini_case_async_at_42_min(capsys):
    table, r = _run(capsys, *GEMINI, "--modes", "sync,async,in-memory", "--interval", "2520")
    lines = table.splitlines()
    assert "intervals: equal (42.0 min)" in lines
    assert "intervals: each mode's optimum (Daly)" in lines
    equal, optimum = r["comparisons"]
    assert (equal["basis"], equal["interval_s"]) == ("equal", 2520.0)
    assert (optimum["basis"], optimum["rule"]) == ("optimum", "daly")
    eq = {x["mode"]: x for x in equal["rows"]}
    assert [x["mode"] for x in equal["rows"]] == ["disk", "async", "memory"]
    assert {x["interval_s"] for x in equal["rows"]} == {2520.0}
    assert eq["async"]["waste_per_failure_s"] / 60 == pytest.approx(105, rel=0.05)
    assert eq["disk"]["waste_per_failure_s"] / 60 < 80  # the write booked as a stall
    opt = {x["mode"]: x["interval_s"] for x in optimum["rows"]}
    assert opt["memory"] < opt["async"] < opt["disk"]
    assert eq["memory"]["waste_ratio"] == pytest.approx(
        eq["disk"]["waste_per_failure_s"] / eq["memory"]["waste_per_failure_s"])


def test_one_basis_asked_is_the_only_one_shown_and_a_rule_names_its_reference(capsys):
    table, r = _run(capsys, *GEMINI, "--modes", "async,memory", "--intervals", "equal",
                    "--interval", "daly")
    [c] = r["comparisons"]
    assert c["basis"] == "equal" and c["reference"] == "async" and c["rule"] == "daly"
    assert f"intervals: equal ({c['interval_s'] / 60:,.1f} min, Daly for async (disk))" \
        in table.splitlines()
    assert "optimum" not in table
    table, r = _run(capsys, *GEMINI, "--modes", "async,memory", "--intervals", "optimum",
                    "--interval", "young")
    assert [c["line"] for c in r["comparisons"]] == ["intervals: each mode's optimum (Young)"]


def test_explicit_times_replace_those_from_the_checkpoint_size(capsys):
    _, r = _run(capsys, "ettr", "--gpus", "1024", "--checkpoint-s", "60", "--modes", "memory",
                "--snapshot-s", "2", "--replicate-s", "7", "--memory-load-s", "3",
                "--intervals", "equal", "--interval", "600")
    [row] = r["comparisons"][0]["rows"]
    assert (row["stall_s"], row["lag_s"], row["load_s"]) == (2.0, 7.0, 3.0)


@pytest.mark.parametrize("extra, message", [
    (("--modes", "sync,tape"), "--modes: unknown checkpoint mode 'tape'"),
    (("--modes", "sync,disk"), "--modes names disk twice"),
    (("--modes", "sync", "--intervals", "weekly"),
     "--intervals must be equal, optimum or both, not 'weekly'"),
    (("--modes", "sync", "--intervals", "optimum", "--interval", "600"),
     "--intervals optimum takes each mode's interval from a rule"),
    (("--intervals", "equal"), "--intervals goes with --modes"),
    (("--checkpoint-gb", "10"), "--checkpoint-gb goes with --modes"),
    (("--modes", "async"), "--modes async needs --snapshot-s"),
    (("--modes", "memory", "--snapshot-s", "1"),
     "--modes memory needs --replicate-s and --memory-load-s"),
    (("--modes", "async", "--checkpoint-gb", "-5"), "--checkpoint-gb must be"),
    (("--modes", "async", "--checkpoint-gb", "10", "--persist-s", "30"),
     "--persist-s is for one asynchronous job"),
    (("--modes", "async", "--snapshot-s", "0", "--intervals", "optimum"),
     "a rule needs a checkpoint stall > 0 s; async has none"),
])
def test_bad_comparison_flags_are_one_line_exit_2_and_write_nothing(tmp_path, extra, message):
    target = tmp_path / "out.json"
    with pytest.raises(CommandError) as err:
        call_command("reliability", "ettr", "--gpus", "1024", "--checkpoint-s", "60", *extra,
                     "--json", str(target))
    assert err.value.returncode == 2 and "\n" not in str(err.value)
    assert message in str(err.value)
    assert not target.exists()


def test_on_the_command_line_a_bad_mode_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "manage.py", "reliability", "ettr", "--gpus", "64",
                           "--checkpoint-s", "5", "--modes", "tape"],
                          capture_output=True, text=True, timeout=120,
                          env={"DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
                               "CLUSTERTWIN_INSECURE_DEMO": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "unknown checkpoint mode 'tape'" in proc.stderr and proc.stdout == ""


def test_a_study_report_says_on_what_basis_its_checkpoint_modes_were_compared():
    from twin.management.commands.study import verdict_lines
    summary = {"figures": [{"name": "ettr", "label": "ETTR", "unit": "fraction"}],
               "paired": [{"arm": "memory", "figures": {"ettr": {
                   "mean": 0.01, "low": 0.005, "high": 0.015, "verdict": "better"}}}]}
    assert not any(line.startswith("checkpoint") for line in verdict_lines(summary))
    said = verdict_lines({**summary, "checkpoint_intervals": "intervals: equal (42.0 min)"})
    assert said[-1] == "checkpoint intervals: equal (42.0 min)"
