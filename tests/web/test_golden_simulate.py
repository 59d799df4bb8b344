"""Golden runs of ``manage.py simulate`` itself, failures and physics on, and its determinism
across separate processes.

Each run's key figures (GPU-hours by ledger category, jobs completed, interruptions by cause,
failures, MFU achieved, goodput) are kept in ``tests/web/golden/<name>.json``.  A change that
moves any of them changes the simulation's results.  When that is meant (the engine's
redesign, a new workload or failure random stream, a recalibration), regenerate every file
with one command, review the diff and commit it::

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/web/test_golden_simulate.py

Without ``UPDATE_GOLDEN`` a missing file fails the test and names that command.  The
determinism tests need no golden file: two ``simulate --json -`` processes of one seed (one of
them with another ``PYTHONHASHSEED``) must print the same report apart from
:data:`scheduler.report.WALL_CLOCK_FIELDS`.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from scheduler.report import WALL_CLOCK_FIELDS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

RUNS = {
    # a week of the dashboard's cluster: over a thousand jobs, a failure or so
    "dev_small_7d_seed3": ("--preset", "dev-small", "--days", "7", "--seed", "3"),
    # a frontier gang on 4,096 GPUs for three days: interruptions of several causes
    "llama3_4096gpus_3d_seed5": ("--preset", "llama3-16k", "--gpus", "4096", "--days", "3",
                                 "--seed", "5"),
}
ON = ("--failures", "on", "--physics", "on")
TOLERANCE = {"ledger_gpu_hours": 0.02, "mfu_achieved": 2e-4, "goodput": 2e-4}
"""Absolute tolerance of the rounded floats (a last-digit flip of the rounding); counts are
compared exactly."""


def key_figures(report: dict) -> dict:
    return {
        "ledger_gpu_hours": {k: round(v, 2) for k, v in report["ledger_gpu_hours"].items()},
        "jobs_submitted": report["jobs"]["submitted"],
        "jobs_completed": report["jobs"]["completed"],
        "preemptions": report["jobs"]["preemptions"],
        "interruptions_by_cause": report["interruptions"]["by_cause"],
        "interruptions_unplanned": report["interruptions"]["unplanned"],
        "interruptions_planned": report["interruptions"]["planned"],
        "failures_total": report["failures"]["total"],
        "mfu_achieved": round(report["mfu"]["achieved"], 4),
        "goodput": round(report["goodput"], 4),
    }


def without_wall_clock(report: dict) -> dict:
    out = copy.deepcopy(report)
    for *parents, leaf in WALL_CLOCK_FIELDS:
        node = out
        for key in parents:
            node = node[key]
        node.pop(leaf)
    return out


def check_golden(name: str, figures: dict) -> None:
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    if not path.exists():
        pytest.fail(f"{path} is missing: regenerate with UPDATE_GOLDEN=1 .venv/bin/python -m "
                    "pytest -q tests/web/test_golden_simulate.py")
    expected = json.loads(path.read_text())
    assert set(figures) == set(expected), "the key figures changed: regenerate the files"
    for key, want in expected.items():
        got = figures[key]
        if key in TOLERANCE:
            approx = (pytest.approx(want, abs=TOLERANCE[key]) if not isinstance(want, dict)
                      else {k: pytest.approx(v, abs=TOLERANCE[key]) for k, v in want.items()})
            assert got == approx, f"{name}: {key}"
        else:
            assert got == want, f"{name}: {key}"


def simulate(tmp_path, name: str) -> dict:
    path = tmp_path / f"{name}.json"
    call_command("simulate", *RUNS[name], *ON, "--json", str(path))
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", list(RUNS))
def test_simulate_matches_its_golden_figures(tmp_path, name, capsys):
    report = simulate(tmp_path, name)
    sc = report["scenario"]
    assert report["recovery"]["failures"] is True and report["power"] is not None
    assert "model" not in report["network"]  # the physics ran
    # what holds whatever the random streams: every GPU-second booked once, MFU a fraction
    total = sum(report["ledger_gpu_hours"].values())
    assert total == pytest.approx(sc["gpus"] * sc["days"] * 24, rel=1e-6)
    assert 0 < report["mfu"]["achieved"] < 1
    assert sum(report["interruptions"]["by_cause"].values()) == (
        report["interruptions"]["unplanned"] + report["interruptions"]["planned"])
    check_golden(name, key_figures(report))
    assert "GPU-hours by category" in capsys.readouterr().out


def test_the_golden_runs_exercise_failures():
    """The files are worth keeping only if a run was interrupted (checked on the files, so a
    regeneration that loses every interruption fails here, for a person to choose new seeds)."""
    figures = [json.loads((GOLDEN / f"{name}.json").read_text()) for name in RUNS
               if (GOLDEN / f"{name}.json").exists()]
    if len(figures) < len(RUNS):
        pytest.skip("golden files missing (see test_simulate_matches_its_golden_figures)")
    assert any(f["interruptions_by_cause"] for f in figures)
    assert any(len(f["interruptions_by_cause"]) >= 2 for f in figures)


# ----------------------------------------------------------------- separate processes
def run_process(tmp_path, hashseed: str, tag: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": hashseed,
           "DATABASE_URL": f"sqlite:///{tmp_path / f'{tag}.sqlite3'}"}
    env.pop("UPDATE_GOLDEN", None)
    return subprocess.Popen(
        [sys.executable, "manage.py", "simulate", *RUNS["dev_small_7d_seed3"], *ON,
         "--json", "-"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def test_separate_processes_and_hash_seeds_print_the_same_report(tmp_path):
    procs = [run_process(tmp_path, seed, tag)
             for seed, tag in (("0", "a"), ("0", "b"), ("4242", "c"))]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        reports.append(json.loads(out))
    first, second, other_hash = (without_wall_clock(r) for r in reports)
    assert first == second
    assert first == other_hash
    # and the command line gives what the in-process command gives
    in_process = simulate(tmp_path, "dev_small_7d_seed3")
    assert without_wall_clock(in_process) == first
    assert first["scenario"]["seed"] == 3 and first["jobs"]["completed"] > 0
