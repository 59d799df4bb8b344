"""Checkpoint modes compared on a stated basis (scheduler/reliability/mode_comparison.py), the
loss per failure in closed form (checkpoint.expected_lost_s), and the published checkpointing
cases of docs/reliability.md, each with the mode and interval policy that corresponds to it.

Gemini (Wang et al., SOSP 2023, sec. 2): checkpointing MT-NLG's model states to remote
storage at 20 Gbps takes 42 minutes, so checkpoints can be taken at most every 42 minutes;
its waste model ``t_ckpt + 1/(2f) + t_rtvl`` then gives 42 + 21 + 42 = 105 minutes a failure.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from scheduler.engine import Engine
from scheduler.reliability.analysis import Restart
from scheduler.reliability.checkpoint import (
    RestartTimes,
    expected_lost_s,
    gemini_wasted_s,
    mode_price,
    waste_per_failure_s,
)
from scheduler.reliability.failures import MODES, FailureMode
from scheduler.reliability.mode_comparison import compare_modes
from scheduler.report import build_report
from scheduler.workload.jobs import TrainingJob, Workload
from scheduler.workload.scenarios import scaled_preset

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
MIN = 60.0
GEMINI_WRITE_S = 42 * MIN
"""MT-NLG's model states to remote storage at 20 Gbps (Gemini, sec. 2); the retrieval is taken
at the same bandwidth (Gemini's 105 minutes is 42 + 21 + 42)."""
GEMINI_PUBLISHED_MIN = 105.0
MTNLG_GPUS, MTNLG_NODES = 4480, 560
"""MT-NLG's training ran on 560 DGX A100 nodes (Smith et al. 2022)."""
SNAPSHOT_S, REPLICATE_S, MEMORY_LOAD_S = 0.06, 0.5, 0.03
"""6.3 TB over 4,480 GPUs at 25 GB/s, over 560 nodes at 50 and 400 GB/s (checkpoint.py)."""


def _mtnlg(basis: str, interval, modes=MODES):
    prices = {m: mode_price(m, write_s=GEMINI_WRITE_S, snapshot_s=SNAPSHOT_S,
                            replicate_s=REPLICATE_S) for m in ("disk", "async", "memory")}
    loads = {"disk": GEMINI_WRITE_S, "async": GEMINI_WRITE_S, "memory": MEMORY_LOAD_S}
    return compare_modes(modes, gpus=MTNLG_GPUS, nodes=MTNLG_NODES, prices=prices,
                         loads=loads, basis=basis, interval_s=interval)


# ------------------------------------------------------------------ the loss per failure
@pytest.mark.parametrize("tau, stall, lag, mttf", [
    (2520.0, 0.0, 2520.0, 20 * 3600.0), (2520.0, 2520.0, 0.0, 20 * 3600.0),
    (600.0, 30.0, 200.0, 3600.0), (3600.0, 5.0, 0.0, 1800.0), (100.0, 1.0, 500.0, 5000.0)])
def test_loss_per_failure_is_the_mean_of_a_drawn_failure_on_the_cycle(tau, stall, lag, mttf):
    """Second model: failures drawn from the exponential, each one's loss read off the cycle
    (compute since the last checkpoint taken, plus a whole interval when that checkpoint was
    not usable yet).  Within 4 standard errors of 400,000 draws."""
    rng = np.random.default_rng(3)
    t = rng.exponential(mttf, 400_000)
    p = tau + stall
    k, u = np.floor(t / p), np.mod(t, p)
    lost = np.minimum(u, tau) + np.where((k >= 1) & (u < min(lag, p)), tau, 0.0)
    se = lost.std() / math.sqrt(lost.size)
    assert expected_lost_s(interval_s=tau, stall_s=stall, lag_s=lag, mttf_s=mttf) == \
        pytest.approx(lost.mean(), abs=4 * se)


def test_without_failures_the_loss_is_geminis_model_when_nothing_stalls():
    for tau, lag in ((2520.0, 2520.0), (3 * 3600.0, 400.0), (600.0, 0.0)):
        assert waste_per_failure_s(interval_s=tau, stall_s=0.0, lag_s=lag, retrieve_s=120.0) \
            == pytest.approx(gemini_wasted_s(checkpoint_s=lag, interval_s=tau,
                                             retrieve_s=120.0))
        assert expected_lost_s(interval_s=tau, stall_s=0.0, lag_s=lag, mttf_s=1e7) < \
            expected_lost_s(interval_s=tau, stall_s=0.0, lag_s=lag)


# ------------------------------------------------------------------ Gemini's MT-NLG case
def test_validation_gemini_mtnlg_105_minutes_a_failure_only_async_at_the_write_time():
    """Gemini (SOSP 2023, sec. 2), MT-NLG: about 105 minutes wasted a failure.

    The mode and interval it corresponds to (docs/reliability.md): ``async`` (the checkpoint
    being written is of no use until complete; training does not stall for it) at a fixed
    interval equal to the 42-minute write (back-to-back checkpoints, the most the storage
    allows; also async's own optimum, as persists do not queue).  Not fitted: nothing in the
    twin was set from this figure.  Twin: the closed form at MT-NLG's size (4,480 GPUs) under
    the default profile; Gemini's model leaves out that with exponential failures the loss
    since the last checkpoint is a little under half an interval.  Tolerance: 5 % (the
    paper's "about", and that correction, 2-3 % at this MTTF).  The synchronous mode at the
    same interval books the write as a stall, not waste (about 73 min); in-memory wastes far
    less; async at a 3 h interval (BLOOM's) far more: none of them is the published case.
    """
    equal = {r.mode: r for r in _mtnlg("equal", GEMINI_WRITE_S).rows}
    optimum = {r.mode: r for r in _mtnlg("optimum", "daly").rows}
    twin = equal["async"].waste_per_failure_s / MIN
    assert twin == pytest.approx(GEMINI_PUBLISHED_MIN, rel=0.05)
    assert optimum["async"].interval_s == pytest.approx(GEMINI_WRITE_S)
    others = [equal["disk"], equal["memory"], optimum["disk"], optimum["memory"],
              _mtnlg("equal", 3 * 3600.0).rows[1]]
    for row in others:
        assert abs(row.waste_per_failure_s / MIN / GEMINI_PUBLISHED_MIN - 1) > 0.25, row
    assert equal["disk"].waste_per_failure_s / MIN == pytest.approx(73, abs=3)


def _engine_waste_min(mode: str, interval_s: float) -> tuple[float, int]:
    """The engine's waste per unplanned failure of a 2,048-GPU job writing 6,300 GB to a
    2.5 GB/s tier (20 Gbps: 42 min each way), 366 days: lost work from the ledger plus the
    checkpoint's retrieval (the restart less its fixed part)."""
    preset, _ = scaled_preset("llama3-16k", 2112)
    from dataclasses import replace
    plan = replace(preset, central_write_gb_s=2.5, central_read_gb_s=2.5).plan()
    job = TrainingJob(0, "mt-nlg", "t", 0.0, 2048, 2048 * 989e12 * 0.4 * 400 * 86400,
                      checkpoint_gb=6300.0, checkpoint_interval_s=interval_s)
    e = Engine(plan, Workload(jobs=(job,)), seed=11, failures=True, recovery=mode,
               checkpoint_interval=interval_s)
    e.run_until(366 * 86400.0)
    r = build_report(e, scenario={}, wall_seconds=0.0)
    run = e.jobs.runs[0]
    unplanned = r["interruptions"]["unplanned"]
    lost_s = r["ledger_gpu_hours"]["lost_work"] * 3600 / 2048 / unplanned
    retrieve_s = e.jobs.restart_estimate(run) - RestartTimes().fixed_s
    return (lost_s + retrieve_s) / MIN, unplanned


def test_validation_gemini_mtnlg_in_the_engine_async_at_42_minutes_not_sync():
    """The same case in the event simulation: async at the 42-minute interval within 10 % of
    105 (noise of about 300 failures, 2 %, plus the exponential correction); the default
    synchronous mode at the same interval well below it (the write is a stall)."""
    asyn, n = _engine_waste_min("async", GEMINI_WRITE_S)
    sync, _ = _engine_waste_min("disk", GEMINI_WRITE_S)
    assert n > 200
    assert asyn == pytest.approx(GEMINI_PUBLISHED_MIN, rel=0.10)
    assert sync < 0.8 * GEMINI_PUBLISHED_MIN


# ------------------------------------------------------------------ comparing on a basis
def test_the_in_memory_advantage_depends_on_the_basis_and_the_comparison_says_which():
    """MT-NLG's case, async against in-memory: a few times less waste at equal intervals;
    at each mode's Daly optimum (in-memory every couple of minutes) tens of times less."""
    equal = _mtnlg("equal", GEMINI_WRITE_S)
    optimum = _mtnlg("optimum", "daly")
    assert equal.line == "intervals: equal (42.0 min)"
    assert optimum.line == "intervals: each mode's optimum (Daly)"
    assert {r.interval_s for r in equal.rows} == {GEMINI_WRITE_S}
    at = {r.mode: r.interval_s for r in optimum.rows}
    assert at["memory"] < at["async"] < at["disk"]

    def ratio(c):
        w = {r.mode: r.waste_per_failure_s for r in c.rows}
        return w["async"] / w["memory"]

    assert 2 < ratio(equal) < 10
    assert ratio(optimum) > 10 * ratio(equal)


def test_equal_intervals_from_a_rule_take_the_first_modes_and_say_so():
    c = _mtnlg("equal", "daly")
    first = c.rows[0]
    assert first.mode == "disk" and {r.interval_s for r in c.rows} == {first.interval_s}
    assert c.line == f"intervals: equal ({first.interval_s / 60:,.1f} min, Daly for sync (disk))"


def test_in_memory_never_wastes_more_than_async_at_equal_intervals():
    """Same interval, same restart: a lag of seconds (replication) against the write, a
    restore from peers' memory against the tier; for any interval and failure rate."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        tau = float(rng.uniform(60, 20000))
        day = (FailureMode("any", "job", float(rng.uniform(0.01, 2)), 0.0, 1.0),)
        c = _mtnlg("equal", tau, modes=day)
        w = {r.mode: r for r in c.rows}
        assert w["memory"].waste_per_failure_s <= w["async"].waste_per_failure_s
        assert w["memory"].ettr >= w["async"].ettr - 1e-12


@pytest.mark.parametrize("kw, message", [
    ({"basis": "same"}, "intervals must be one of equal, optimum, not 'same'"),
    ({"basis": "optimum", "interval_s": 3600.0}, "each mode's optimum comes from a rule"),
    ({"interval_s": "weekly"}, "interval rule must be one of: young, daly, daly-exact"),
    ({"prices": {"tape": mode_price("disk", write_s=1.0)}}, "checkpoint mode must be one of"),
    ({"prices": {"sync": mode_price("disk", write_s=1.0),
                 "disk": mode_price("disk", write_s=1.0)}}, "a checkpoint mode is named twice"),
    ({"loads": {}}, "no restore time for disk"),
    ({"prices": {"disk": mode_price("disk", write_s=0.0)}, "loads": {"disk": 0.0}},
     "a rule needs a checkpoint stall > 0 s; disk has none"),
])
def test_bad_comparison_values_are_one_clear_line(kw, message):
    args = {"gpus": 64, "nodes": 8, "prices": {"disk": mode_price("disk", write_s=60.0)},
            "loads": {"disk": 10.0}, "basis": "optimum", "interval_s": "daly",
            "restart": Restart()}
    with pytest.raises(ValueError) as err:
        compare_modes(**{**args, **kw})
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


# ------------------------------------------------------------------ the docs' cases
def _published_cases() -> list[dict]:
    text = DOCS.read_text()
    start = text.index("## Published checkpointing cases")
    lines = text[start:].splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    table = []
    for ln in lines[first:]:
        if not ln.startswith("|"):
            break
        table.append(ln)
    head = [c.strip() for c in table[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")), strict=True))
            for ln in table[2:]]


def test_every_published_checkpointing_case_in_the_docs_names_its_mode_and_interval_policy():
    cases = _published_cases()
    assert len(cases) >= 5
    for case in cases:
        assert re.search(r"`(disk|async|memory)`", case["mode"]), case
        assert re.search(r"fixed|Young|Daly|each mode's optimum", case["interval policy"]), case
    gemini = next(c for c in cases if "MT-NLG" in c["case"])
    assert "`async`" in gemini["mode"] and "fixed" in gemini["interval policy"]
    assert "105" in gemini["published"]
