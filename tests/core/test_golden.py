"""Golden runs: seeded scenarios whose key figures are kept in ``tests/core/golden/*.json``.

A change that moves any of these figures changes the simulation's results; if it is meant to,
regenerate the files and review the diff::

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/core/test_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from scheduler.engine import Engine
from scheduler.report import build_report
from scheduler.workload.scenarios import scaled_preset, scenario_workload
from tests.core.factories import HOUR, job, run_engine, small_plan, workload

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def key_figures(e: Engine) -> dict:
    rep = build_report(e, scenario={}, wall_seconds=0.0)
    return {
        "ledger_gpu_hours": {k: round(v, 3) for k, v in rep["ledger_gpu_hours"].items()},
        "jobs_completed": rep["jobs"]["completed"],
        "wait_hours_mean": rep["jobs"]["wait_hours"]["mean"],
    }


def flat(figures: dict) -> dict:
    out = {}
    for k, v in figures.items():
        if isinstance(v, dict):
            out.update({f"{k}.{kk}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def check_golden(name: str, figures: dict) -> None:
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    if not path.exists():
        pytest.fail(f"{path} is missing: generate it with UPDATE_GOLDEN=1")
    expected = json.loads(path.read_text())
    assert flat(figures) == pytest.approx(flat(expected), abs=1e-3)


# ------------------------------------------------------------------ dev-small
def dev_small(days: float = 0.5, seed: int = 7) -> Engine:
    """The preset's cluster and workload; the workload draws from ``default_rng(seed)``."""
    preset, scale = scaled_preset("dev-small", None)
    plan = preset.plan()
    wl = scenario_workload("dev-small", plan, days=days, rng=np.random.default_rng(seed),
                           scale=scale)
    e = Engine(plan, wl, seed=seed, policy="default")
    e.run_until(days * 86400.0)
    return e


def test_dev_small_half_a_day_seed_7_matches_its_golden_figures():
    e = dev_small()
    figures = key_figures(e)
    # plausibility before the golden comparison: the books cover 512 GPUs x 12 h with the two
    # hot-spare nodes held all along; the night-to-noon half day starts empty, so a quarter or
    # so of the GPU-time trains, serving (48 GPUs at peak) holds less than 48 x 12, and the
    # checkpoint stall is a few percent of the training time
    led = figures["ledger_gpu_hours"]
    assert sum(led.values()) == pytest.approx(512 * 12, abs=0.01)
    assert led["hot_spare"] == pytest.approx(2 * 8 * 12, abs=1e-3)
    assert 0.2 * 512 * 12 < led["productive"] < 0.6 * 512 * 12
    assert 0 < led["inference"] <= 48 * 12
    assert 0 < led["checkpoint_stall"] < 0.05 * led["productive"]
    assert figures["jobs_completed"] > 10
    check_golden("dev_small_0.5d_seed7_default", figures)


# ------------------------------------------------------------------ literal FIFO
def literal_fifo() -> Engine:
    """4 nodes (32 GPUs), strict FIFO with first-fit placement, no checkpoint writes.

    Worked by hand (h)::

        job  GPUs  compute  submit  start  end   wait   why it waits
        j0   16    2        0       0      2     0
        j1    8    3        0       0      3     0
        j2   16    1        0.5     2      3     1.5    8 free until j0 ends at 2
        j3    4    1        1       2      3     1.0    strict FIFO: behind j2
        j4   32    1        1.5     3      4     1.5    needs the whole cluster: 3 h
        j5    8    0.5      2.5     4      4.5   1.5    strict FIFO: behind j4

    Mean wait 5.5 / 6 = 0.917 h.  Productive 16x2 + 8x3 + 16 + 4 + 32 + 8x0.5 = 112 GPU-h;
    free 8 GPUs for 2 h, 4 for 1 h, 24 for 0.5 h and 32 for 1.5 h: 80 GPU-h idle (the head never
    fits the free GPUs, so none of it is fragmentation).  32 x 6 = 192 GPU-h in all.
    """
    wl = workload(job(gpus=16, hours=2), job(gpus=8, hours=3),
                  job(gpus=16, hours=1, submit_h=0.5), job(gpus=4, hours=1, submit_h=1),
                  job(gpus=32, hours=1, submit_h=1.5), job(gpus=8, hours=0.5, submit_h=2.5))
    return run_engine(small_plan(4), wl, policy="fifo", until_h=6)


def test_literal_fifo_waits_match_the_hand_computed_schedule():
    e = literal_fifo()
    assert [round(r.first_start / HOUR, 9) for r in e.runs] == [0, 0, 2, 2, 3, 4]
    assert [round(r.end_s / HOUR, 9) for r in e.runs] == [2, 3, 3, 3, 4, 4.5]
    assert [round(r.wait_s / HOUR, 9) for r in e.runs] == [0, 0, 1.5, 1, 1.5, 1.5]
    led = e.horizon_ledger().gpu_hours()
    assert led["productive"] == pytest.approx(112)
    assert led["idle"] == pytest.approx(80)
    assert sum(led.values()) == pytest.approx(192)


def test_literal_fifo_matches_its_golden_figures():
    figures = key_figures(literal_fifo())
    assert figures["wait_hours_mean"] == 0.917
    assert figures["jobs_completed"] == 6
    check_golden("literal_fifo_4_nodes_6_jobs", figures)
