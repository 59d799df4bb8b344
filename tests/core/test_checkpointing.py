"""Checkpoint modes (sync, async, in-memory), the restart split, and checkpoint bandwidth from
the storage tier (docs/checkpointing.md).

Validation tests name the published source, the figure and the tolerance; a figure a constant
was set from is a regression check and says so.
"""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.engine import Engine
from scheduler.physics.storage import NODE_STORAGE_GB_S
from scheduler.reliability.checkpoint import CheckpointCosts, RestartTimes, gemini_wasted_s
from scheduler.report import build_report
from scheduler.simulate import Scenario, ScenarioError, run_scenario
from scheduler.workload.jobs import TrainingJob, Workload
from scheduler.workload.scenarios import scaled_preset

H100_FLOPS = 989e12


def _job(gpus: int, days: float, *, checkpoint_gb: float, interval_s: float = 3600.0,
         idx: int = 0) -> TrainingJob:
    return TrainingJob(idx, f"j{idx}", "t", 0.0, gpus, gpus * H100_FLOPS * 0.4 * days * 86400,
                       checkpoint_gb=checkpoint_gb, checkpoint_interval_s=interval_s)


def _llama_plan(gpus: int, write_gb_s: float | None = None):
    preset, _ = scaled_preset("llama3-16k", gpus)
    if write_gb_s is not None:
        from dataclasses import replace
        preset = replace(preset, central_write_gb_s=write_gb_s, central_read_gb_s=write_gb_s)
    return preset.plan()


def _run(plan, jobs, days: float, **kw) -> dict:
    e = Engine(plan, Workload(jobs=tuple(jobs)), seed=kw.pop("seed", 7), failures=True, **kw)
    e.run_until(days * 86400.0)
    return build_report(e, scenario={}, wall_seconds=0.0)


def _waste_per_failure_s(r: dict) -> float:
    """Lost work per unplanned interruption, s (a planned stop checkpoints first)."""
    job = r["largest_job"]
    return r["ledger_gpu_hours"]["lost_work"] * 3600 / job["gpus"] / r["interruptions"][
        "unplanned"]


# ----------------------------------------------------------------- validation


def test_validation_gemini_waste_per_failure_matches_the_papers_model():
    """Simulated waste per failure vs Gemini's (SOSP 2023, sec. 2) model of it:
    ``t_ckpt + 1 / (2 f) + t_rtvl``: half an interval lost on average, plus the checkpoint in
    flight (useless until complete), plus its retrieval.

    The case: a checkpoint every 3 h (``1 / f``; BLOOM-176B's cadence, which Gemini cites)
    persisted in the background (``async``: the model's assumption that the in-flight one
    cannot be used), t_ckpt = the persist time of 8 TB to a 20 GB/s tier (remote storage much
    slower than the training network, Gemini's premise; 400 s), a 2,048-GPU
    job on the Llama 3 failure rates (MTTF about 21 h) for 366 days; per unplanned failure
    (planned stops checkpoint first and lose nothing).  Not fitted: nothing in the
    engine's segment books is taken from Gemini's formula; this checks the books against an
    independent closed form.  The paper's own worked figure (MT-NLG, about 105 min per
    failure: async at a 42-minute interval) is asserted in ``test_checkpoint_comparison.py``.
    Tolerance: 10 %: the noise of about 300 failures (sd of a uniform loss over 3 h /
    sqrt(300), 3 %) plus what the model leaves out: with exponential failures the loss since
    the last checkpoint averages I/2 - I^2 / 12 M (2 % less), and failures during a restart
    lose no compute.
    """
    plan = _llama_plan(2112, write_gb_s=20.0)
    job = _job(2048, 400, checkpoint_gb=8000.0, interval_s=3 * 3600.0)
    e = Engine(plan, Workload(jobs=(job,)), seed=11, failures=True, recovery="async")
    e.run_until(366 * 86400.0)
    r = build_report(e, scenario={}, wall_seconds=0.0)
    run = e.jobs.runs[0]
    assert r["interruptions"]["unplanned"] > 250
    retrieve_s = e.jobs.restart_estimate(run) - RestartTimes().fixed_s
    wasted = _waste_per_failure_s(r) + retrieve_s
    model = gemini_wasted_s(checkpoint_s=run.lag_s, interval_s=run.interval_s,
                            retrieve_s=retrieve_s)
    assert run.lag_s == pytest.approx(400.0)
    assert wasted == pytest.approx(model, rel=0.10)


def test_validation_llama3_preset_ettr_above_90_percent_with_its_default_interval():
    """The ``llama3-16k`` preset run as ``simulate`` runs it (default interval, now auto)
    vs Llama 3 (sec. 3.3.4): effective training time above 90 % over 54 days.

    Regression where calibrated: the interruption rates are Table 5's counts; the restart's
    fixed part (rescheduling 120 s + warm-up 60 s) is assumed; the interval is Daly's.  Before
    issue 15 the preset's job checkpointed hourly and this gave 0.80.  Tolerance: the published
    bound (> 0.90).
    """
    _, r = run_scenario(Scenario(preset="llama3-16k", days=54, seed=3, physics=False))
    job = r["largest_job"]
    assert job["gpus"] == 16384 and job["interruptions"] > 400
    assert 0.90 < job["ettr"] < 0.97


def test_validation_hpn_checkpoint_stall_share_at_2_to_4_hour_intervals_is_within_5_percent():
    """Alibaba HPN (SIGCOMM 2024): about 30 GB per GPU per checkpoint, about 100 s each,
    intervals of 2-4 h, still about 5 % overhead.

    Regression where calibrated: the tier's write bandwidth is set so that 30 GB per GPU takes
    100 s (0.3 GB/s per GPU: HPN's own figure, by construction).  Checked, not fitted: the
    synchronous stall at HPN's intervals is a fraction of HPN's 5 % (1.4 % at 2 h, 0.7 % at
    4 h), the rest being failures; asynchronous persistence cuts the stall by over 10x.
    Tolerance: the stall share below the published 5 %, and above 0.5 %.
    """
    gpus = 1024
    plan = _llama_plan(gpus + 32, write_gb_s=0.3 * gpus)
    for interval in (7200.0, 14400.0):
        shares = {}
        for mode in ("disk", "async"):
            e = Engine(plan, Workload(jobs=(_job(gpus, 10, checkpoint_gb=30.0 * gpus,
                                                 interval_s=interval),)), seed=1,
                       recovery=mode)
            e.run_until(5 * 86400.0)
            run = e.jobs.runs[0]
            if mode == "disk":
                assert run.write_s == pytest.approx(100.0, rel=0.02)
            led = e.jobs.horizon_ledger().gpu_hours()
            shares[mode] = led["checkpoint_stall"] / sum(led.values())
        assert 0.005 < shares["disk"] < 0.05
        assert shares["async"] < shares["disk"] / 10


# ----------------------------------------------------------------- properties


@pytest.mark.parametrize("mode", ["disk", "async", "memory"])
def test_ettr_rises_as_checkpoints_get_cheaper(mode):
    """Same seed, same failures, auto interval: a smaller checkpoint never lowers ETTR."""
    plan = _llama_plan(4224)
    ettr = []
    for gb in (400_000.0, 100_000.0, 20_000.0, 2_000.0):
        r = _run(plan, [_job(4096, 60, checkpoint_gb=gb)], 20, checkpoint_interval="auto",
                 recovery=mode)
        ettr.append(r["largest_job"]["ettr"])
    assert all(b >= a - 1e-9 for a, b in zip(ettr, ettr[1:], strict=False))
    if mode == "disk":
        assert ettr[-1] > ettr[0] + 0.02


def test_async_never_stalls_longer_than_sync_and_persists_in_the_time_sync_stalls():
    """For any checkpoint size, gang and tier: the async stall (snapshot) <= the sync stall;
    the async checkpoint is usable after exactly the sync write time."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        gb, gpus = float(rng.uniform(1, 1e5)), int(rng.integers(1, 20000))
        nodes = max(1, gpus // 8)
        tier = float(rng.uniform(1, 5000))
        sync = CheckpointCosts("disk", write_gb_s=tier, read_gb_s=tier, cluster_gpus=20000)
        asyn = CheckpointCosts("async", write_gb_s=tier, read_gb_s=tier, cluster_gpus=20000)
        ps = sync.price(checkpoint_gb=gb, gpus=gpus, nodes=nodes)
        pa = asyn.price(checkpoint_gb=gb, gpus=gpus, nodes=nodes)
        assert pa.stall_s <= ps.stall_s + 1e-12
        assert pa.lag_s == pytest.approx(ps.stall_s)


def test_in_memory_loses_less_work_per_failure_than_disk_at_the_same_interval():
    """Same seed, a fixed 1 h interval, a 20-minute write (60 TB at 50 GB/s), 366 days: peers'
    memory (usable once replicated, seconds) loses less than sync disk (a failure during the
    write loses the interval), which loses less than async disk (usable only once persisted).
    Each mode's loss per unplanned failure matches the closed form
    (``checkpoint.expected_lost_s`` at the job's unplanned MTTF) within 10 %: about 300
    failures give a standard error near 4 %.  (At 40 days and a fast tier, as this test was
    before, the three differ by less than the noise of 35 failures.)"""
    from scheduler.reliability.analysis import job_rates
    from scheduler.reliability.checkpoint import expected_lost_s

    plan = _llama_plan(2560, write_gb_s=50.0)
    mttf_s = 3600.0 / job_rates(gpus=2048, nodes=256).unplanned_per_h
    lost = {}
    for mode in ("disk", "async", "memory"):
        e = Engine(plan, Workload(jobs=(_job(2048, 400, checkpoint_gb=60_000.0),)), seed=7,
                   failures=True, recovery=mode, checkpoint_interval=3600.0)
        e.run_until(366 * 86400.0)
        r = build_report(e, scenario={}, wall_seconds=0.0)
        run = e.jobs.runs[0]
        assert r["interruptions"]["unplanned"] > 200
        lost[mode] = _waste_per_failure_s(r)
        assert lost[mode] == pytest.approx(expected_lost_s(
            interval_s=run.interval_s, stall_s=run.write_s, lag_s=run.lag_s, mttf_s=mttf_s),
            rel=0.10), mode
    assert lost["memory"] < lost["disk"] < lost["async"]


# ----------------------------------------------------------------- storage bandwidth


def test_an_idle_tier_serves_one_job_at_the_node_or_tier_limit_not_its_gpu_share():
    """A 64-GPU job alone on a 2,000 GB/s tier shared by 16,896 GPUs: its 8 nodes' NICs
    (8 x 100 GB/s), not its GPU share (7.6 GB/s); a job larger than the tier gets the tier."""
    c = CheckpointCosts("disk", write_gb_s=2000.0, read_gb_s=2000.0, cluster_gpus=16896)
    assert c.write_s(checkpoint_gb=800.0, gpus=64, nodes=8) == pytest.approx(
        800.0 / (8 * NODE_STORAGE_GB_S))
    assert c.write_s(checkpoint_gb=8000.0, gpus=16384, nodes=2048) == pytest.approx(4.0)


def test_jobs_writing_at_once_share_the_tier_in_the_engine():
    """Two equal jobs that checkpoint all the time (tiny interval, huge checkpoints): the one
    that starts second writes at about half the tier; started alone, at all of it."""
    plan = _llama_plan(2112, write_gb_s=200.0)
    a = _job(1024, 5, checkpoint_gb=200_000.0, interval_s=60.0, idx=0)
    b = _job(1024, 5, checkpoint_gb=200_000.0, interval_s=60.0, idx=1)
    alone = Engine(plan, Workload(jobs=(a,)), seed=0)
    alone.run_until(60.0)
    both = Engine(plan, Workload(jobs=(a, b)), seed=0)
    both.run_until(60.0)
    w_alone = alone.jobs.runs[0].write_s
    w_second = max(r.write_s for r in both.jobs.runs)
    assert w_alone == pytest.approx(1000.0)
    assert w_second == pytest.approx(2 * w_alone, rel=0.05)


# ----------------------------------------------------------------- restart split


def test_restart_is_rescheduling_plus_loading_plus_warmup():
    """Restart = rescheduling + checkpoint / read bandwidth + warm-up; each part moves it."""
    c = CheckpointCosts("disk", write_gb_s=100.0, read_gb_s=100.0, cluster_gpus=64,
                        restart=RestartTimes(reschedule_s=30.0, warmup_s=10.0))
    assert c.restart_s(checkpoint_gb=1000.0, gpus=64, nodes=8) == pytest.approx(30 + 10 + 10)
    m = CheckpointCosts("memory", write_gb_s=100.0, read_gb_s=100.0, cluster_gpus=64)
    assert m.restart_s(checkpoint_gb=1000.0, gpus=64, nodes=8) < c.restart_s(
        checkpoint_gb=1000.0, gpus=64, nodes=8) + 180
    assert m.restart_s(checkpoint_gb=1000.0, gpus=64, nodes=8, from_disk=True) == \
        pytest.approx(120 + 60 + 10)


def test_a_configured_detection_time_replaces_each_failure_modes_own():
    """Same seed and failures: detection at 1 h books far more recovery than at 0 s."""
    rec = {}
    for d in (0.0, 3600.0):
        _, r = run_scenario(Scenario(preset="llama3-16k", days=5, seed=2, physics=False,
                                     detect_s=d))
        rec[d] = r["ledger_gpu_hours"]["recovery"]
    assert rec[3600.0] > rec[0.0] * 3


@pytest.mark.parametrize("field, value, message", [
    ("detect_s", -1.0, "detect_s must be at least 0 s, not -1.0"),
    ("reschedule_s", 1e9, "reschedule_s must be at most 86,400 s (a day), not 1000000000.0"),
    ("warmup_s", float("nan"), "warmup_s must be a number in [0, 86,400] s, not nan"),
    ("checkpoint_interval", "weekly", "checkpoint interval must be 'auto', 'job' or a "),
    ("recovery", "tape", "unknown recovery 'tape'; choose one of: disk, async, memory"),
])
def test_bad_checkpoint_options_get_one_clear_line(field, value, message):
    with pytest.raises(ScenarioError) as exc:
        Scenario(preset="dev-small", days=1, **{field: value})
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_job_interval_keeps_each_jobs_own():
    """``checkpoint_interval="job"``: the preset's job keeps its own hourly interval."""
    e, _ = run_scenario(Scenario(preset="llama3-16k", days=0.2, seed=0, physics=False,
                                 checkpoint_interval="job"))
    assert e.jobs.runs[0].interval_s == 3600.0
