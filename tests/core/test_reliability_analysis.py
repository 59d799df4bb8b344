"""Closed-form reliability (scheduler/reliability/analysis.py): against second models, the event
simulation, and published figures.

``test_regression_*`` tests reproduce figures the failure rates were fitted to (Llama 3 Table 5);
``test_validation_*`` tests compare with published figures used nowhere in calibration.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import lambertw

from scheduler.engine import Engine
from scheduler.reliability import analysis as ra
from scheduler.reliability.failures import MODES, FailureMode
from scheduler.report import build_report
from scheduler.workload.scenarios import scaled_preset, scenario_workload

HOUR = 3600.0
LLAMA_C_S = 2.92
"""The llama3-16k job's checkpoint write, s: 5,670 GB at its 1,939.4 GB/s share of 2 TB/s
(worked in ``test_failures.py``)."""


def _lambert_optimum(cost_s: float, mttf_s: float) -> float:
    """Second model: d/dtau of (e^((tau+C)/M) - 1)/tau = 0 gives e^((tau+C)/M) (1 - tau/M) = 1,
    i.e. tau = M (1 + W0(-e^(-1 - C/M))) with W0 the principal Lambert W branch."""
    return mttf_s * (1.0 + lambertw(-math.exp(-1.0 - cost_s / mttf_s)).real)


# ----------------------------------------------------------------------- intervals
@pytest.mark.parametrize("ratio", [1e-4, 3e-3, 0.05, 0.5, 1.9, 3.0, 10.0])
def test_daly_exact_is_the_lambert_w_minimum_of_dalys_wall_time(ratio):
    mttf = 10_000.0
    assert ra.daly_exact_interval(ratio * mttf, mttf) == pytest.approx(
        _lambert_optimum(ratio * mttf, mttf), rel=1e-6)


@pytest.mark.parametrize("ratio", [1e-6, 1e-3, 0.05, 0.5, 2.0, 10.0])
def test_daly_exact_is_the_numerical_minimum_of_dalys_wall_time(ratio):
    """Independent of the closed form: scipy's bounded minimiser on Daly's wall time."""
    from scipy.optimize import minimize_scalar
    mttf, cost = 10_000.0, ratio * 10_000.0
    res = minimize_scalar(lambda lt: ra.daly_wall_time(1.0, interval_s=math.exp(lt),
                                                        cost_s=cost, restart_s=0.0,
                                                        mttf_s=mttf),
                          bounds=(math.log(mttf * 1e-6), math.log(mttf * 2)),
                          method="bounded", options={"xatol": 1e-12})
    assert ra.daly_exact_interval(cost, mttf) == pytest.approx(math.exp(res.x), rel=1e-4)


@pytest.mark.parametrize("mttf_h, published_min", [(24, 117), (6, 57), (0.25, 9.1)])
def test_daly_2006_figures_3_to_5_optimum_intervals(mttf_h, published_min):
    """Daly, FGCS 22(3), 2006, Figs. 3-5: R = 10 min, delta = 5 min and M = 24 h, 6 h, 15 min;
    "the new model predicts tau_opt = 117, 57, 9.1 min".

    The higher-order estimate *is* Daly's formula, so its match (to the printed digit) checks
    the transcription, not the model.  Daly-exact (the numerical optimum of his wall-time
    model, not his series) is an independent check: within 1 % of each printed value; the
    series' own error is largest at M = 15 min, where C/M = 1/3.
    """
    cost, mttf = 300.0, mttf_h * HOUR
    digits = 1 if published_min < 10 else 0
    assert round(ra.daly_interval(cost, mttf) / 60, digits) == published_min
    assert ra.daly_exact_interval(cost, mttf) / 60 == pytest.approx(published_min, rel=0.01)


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 600.0), st.floats(0.5 * HOUR, 100 * HOUR), st.floats(1.1, 10.0))
def test_every_optimal_interval_grows_with_the_mttf(cost, mttf, factor):
    for rule in ra.INTERVAL_RULES:
        assert ra.interval(rule, cost_s=cost, mttf_s=mttf * factor) > \
            ra.interval(rule, cost_s=cost, mttf_s=mttf)


def test_dalys_optimum_approaches_youngs_as_the_cost_falls_against_the_mttf():
    """C/M -> 0: Daly's correction sqrt(C/2M)/3 + ... - C vanishes; both rules and the exact
    optimum meet Young's sqrt(2 C M) (ratio within 1e-3 at C/M = 1e-6, and closer each step)."""
    mttf = 10 * HOUR
    gaps = []
    for ratio in (1e-1, 1e-2, 1e-3, 1e-4, 1e-6):
        young = ra.young_interval(ratio * mttf, mttf)
        gaps.append(max(abs(ra.daly_interval(ratio * mttf, mttf) / young - 1),
                        abs(ra.daly_exact_interval(ratio * mttf, mttf) / young - 1)))
    assert all(a > b for a, b in zip(gaps, gaps[1:], strict=False))
    assert gaps[-1] < 1e-3 and gaps[0] > 0.05


# ---------------------------------------------------------------------------- ETTR
@settings(max_examples=60, deadline=None)
@given(st.floats(0.1, 300.0), st.floats(1.1, 10.0), st.floats(0.5 * HOUR, 50 * HOUR),
       st.floats(0.0, 1800.0), st.sampled_from(["young", "daly", "daly-exact", 1800.0]))
def test_ettr_rises_as_checkpoints_get_cheaper(cost, factor, mttf, restart, rule):
    """At a fixed interval, and at each rule's own optimum."""
    def ettr(c):
        tau = rule if not isinstance(rule, str) else ra.interval(rule, cost_s=c, mttf_s=mttf)
        return ra.expected_ettr(interval_s=tau, cost_s=c, restart_s=restart, mttf_s=mttf)
    assert ettr(cost) > ettr(cost * factor)


def test_ettr_without_failures_is_the_checkpoint_duty_cycle_and_the_optimum_is_best():
    """By hand: no failures, tau = 600 s, C = 6 s: 600 / 606 = 0.990099.  With failures, the
    exact optimum beats half and twice it (Daly's T_w is convex in tau there)."""
    assert ra.expected_ettr(interval_s=600.0, cost_s=6.0, restart_s=0.0, mttf_s=1e15) == \
        pytest.approx(600 / 606, rel=1e-9)
    tau = ra.daly_exact_interval(60.0, 5 * HOUR)
    best = ra.expected_ettr(interval_s=tau, cost_s=60.0, restart_s=300.0, mttf_s=5 * HOUR)
    for other in (tau / 2, 2 * tau, tau * 1.05, tau / 1.05):
        assert best > ra.expected_ettr(interval_s=other, cost_s=60.0, restart_s=300.0,
                                       mttf_s=5 * HOUR)


def test_asynchronous_checkpoints_beat_synchronous_writes_of_the_same_copy():
    """A 1 s snapshot persisted in 100 s in the background against a 101 s blocking write,
    each at its own best interval: the stall shrinks 101x, the extra lag of 101 s per failure
    costs less.  By hand at tau = 1,800 s, M = 3 h, R = 300 s (first order): synchronous
    waste 101/1800 + 950.5/10800 + 300/10800 = 0.172; asynchronous 1/1800 + 900.5/10800 +
    401/10800 = 0.121."""
    m = 3 * HOUR
    sync = ra.expected_ettr(interval_s=1800.0, cost_s=101.0, restart_s=300.0, mttf_s=m)
    asyn = ra.expected_ettr(interval_s=1800.0, cost_s=1.0, persist_s=100.0, restart_s=300.0,
                            mttf_s=m)
    assert 1 - sync == pytest.approx(0.172, abs=0.02)
    assert 1 - asyn == pytest.approx(0.121, abs=0.015)
    best = {p: max(ra.expected_ettr(interval_s=t, cost_s=c, persist_s=p, restart_s=300.0,
                                    mttf_s=m) for t in np.geomspace(60, 4 * m, 400))
            for c, p in ((101.0, 0.0), (1.0, 100.0))}
    assert best[100.0] > best[0.0]
    # a persist slower than the interval holds the next snapshot back
    assert ra.expected_ettr(interval_s=60.0, cost_s=1.0, persist_s=600.0, restart_s=0.0,
                            mttf_s=1e15) == pytest.approx(60 / 601, rel=1e-9)


def test_planned_stops_cost_only_their_restart():
    """By hand: a profile of one planned mode, 1 per hour for the job, detection 0, restart
    180 s: 1 - 180/3600 = 0.95 of the duty cycle 600/603."""
    only = (FailureMode("maint", "job", 1.0, 0.0, 0.5, planned=True),)
    e = ra.job_ettr(only, gpus=8, nodes=1, cost_s=3.0, interval_s=600.0)
    assert e.ettr == pytest.approx(0.95 * 600 / 603, rel=1e-9)
    assert e.mttf_h == pytest.approx(1.0) and math.isinf(e.unplanned_mttf_h)


# ---------------------------------------------------------------------------- MTTF
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 2048), st.integers(2, 64), st.sampled_from([4, 8]))
def test_mttf_scales_as_one_over_size_for_size_proportional_modes(nodes, k, per_node):
    size_modes = tuple(m for m in MODES if m.component in ra.PER_GPU + ra.PER_NIC + ra.PER_NODE)
    small = ra.job_mttf_h(size_modes, gpus=nodes * per_node, nodes=nodes)
    big = ra.job_mttf_h(size_modes, gpus=k * nodes * per_node, nodes=k * nodes)
    assert big * k == pytest.approx(small, rel=1e-9)


def test_job_level_modes_do_not_scale_with_size_and_shared_parts_are_left_out():
    """A job-level fault (1 per 100 h per job) caps the MTTF at 100 h however small the job;
    switches, PDUs, cooling and storage do not count against one job."""
    job_fault = FailureMode("user_error", "job", 0.01, 60.0, 0.0, source="assumed")
    with_job = ra.job_rates(MODES + (job_fault,), gpus=8, nodes=1)
    alone = ra.job_rates(MODES, gpus=8, nodes=1)
    assert with_job.unplanned_per_h - alone.unplanned_per_h == pytest.approx(0.01)
    assert ra.job_mttf_h(MODES + (job_fault,), gpus=8, nodes=1) < 100.0
    shared = tuple(m for m in MODES if m.component in ra.SHARED)
    assert shared and ra.job_rates(shared, gpus=16384, nodes=2048).per_h == 0.0
    with pytest.raises(ValueError, match="'tape'"):
        ra.job_rates((replace(MODES[0], component="tape"),), gpus=8, nodes=1)
    with pytest.raises(ValueError, match="nodes <= gpus"):
        ra.job_rates(MODES, gpus=8, nodes=9)


def test_regression_llama3_interruptions_in_54_days_and_mttf():
    """Regression check, not validation: the rates are Table 5's counts over the hours the
    job was up in the 54 days (``LLAMA3_UP_HOURS``) on 16,384 GPUs (2,048 nodes), so over
    those hours the closed form returns 466 less the 2 leaf-switch events booked on shared
    parts (464), 47 of them planned; MTTF = up-hours / 464."""
    from scheduler.reliability.failures import LLAMA3_UP_HOURS

    r = ra.job_rates(gpus=16384, nodes=2048)
    assert r.per_h * LLAMA3_UP_HOURS == pytest.approx(464, abs=1e-6)
    assert r.planned_per_h * LLAMA3_UP_HOURS == pytest.approx(47, abs=1e-6)
    assert ra.job_mttf_h(gpus=16384, nodes=2048) == pytest.approx(LLAMA3_UP_HOURS / 464,
                                                                  rel=1e-9)


def test_validation_llama3_effective_training_time_above_90_percent():
    """Closed form vs Llama 3 sec. 3.3.4: "effective training time above 90 %".

    Not fitted: the rates come from Table 5, but no restart or checkpoint figure was tuned to
    the 90 %.  The job's write is 2.92 s, its restart the modes' detection plus the assumed
    180 s relaunch plus a 2.92 s restore; at Daly's interval ETTR = 0.939.  Hourly
    checkpoints (the preset job's own interval, issue 15) give 0.81, below the report.
    Tolerance: the published bound itself.
    """
    kw = {"gpus": 16384, "nodes": 2048, "cost_s": LLAMA_C_S,
          "restart": ra.Restart(load_s=LLAMA_C_S)}
    assert ra.job_ettr(**kw, interval_s="daly").ettr > 0.90
    assert ra.job_ettr(**kw, interval_s=HOUR).ettr < 0.90


def test_validation_megascale_over_100_restarts_above_90_percent_in_several_weeks():
    """Closed form vs MegaScale (NSDI 2024): a production run on 12,288 GPUs had over 100
    restarts and kept more than 90 % effective training time over "several weeks".

    Not fitted: MegaScale's figures were used nowhere.  MegaScale checkpoints asynchronously
    (the GPU only blocks for the copy to host memory, then HDFS in the background; as
    summarised at glennklockwood.com/garden/checkpointing).  Assumed: a 1 s snapshot and a
    300 s persist (below the persist time the snapshot waits, so the interval is at least
    300 s).  Published bounds: > 100 restarts within 2-6 weeks, ETTR > 0.90.  The closed
    form: 100 restarts after 15.5 days; ETTR 0.939 at Daly's interval.
    """
    e = ra.job_ettr(gpus=12288, nodes=1536, cost_s=1.0, persist_s=300.0, interval_s="daly")
    days_to_100 = 100 * e.mttf_h / 24
    assert 14 <= days_to_100 <= 42
    assert e.ettr > 0.90


@pytest.mark.xfail(strict=True, reason="Llama 3 rates give 44.6 h at 1,024 GPUs (5.6x RSC's "
                                       "7.9 h) and 238 days at 8 GPUs (5x RSC's 47.7)")
def test_validation_meta_rsc_job_mttf_at_8_and_1024_gpus():
    """Closed form vs Kokolis et al., "Revisiting Reliability in Large-Scale Machine Learning
    Research Clusters" (HPCA 2025, arXiv 2410.21680): measured MTTF of 47.7 days for 8-GPU
    jobs and 7.9 h for 1,024-GPU jobs on Meta's A100 RSC clusters (figures as quoted by two
    public summaries of the paper; the 16,384 and 131,072 points, 1.8 h and 0.23 h, are the
    paper's projections and are only printed in docs/reliability.md).

    Not fitted: the default profile is Llama 3's H100 run.  Tolerance: +-30 % (the paper's
    fleet mixes job kinds and A100 hardware).  Fails: research-cluster jobs see 5x the
    interruptions per GPU of Llama's production run; a fleet profile for RSC belongs in
    ``scheduler/reliability/profiles``.
    """
    assert ra.job_mttf_h(gpus=1024, nodes=128) == pytest.approx(7.9, rel=0.3)
    assert ra.job_mttf_h(gpus=8, nodes=1) / 24 == pytest.approx(47.7, rel=0.3)


# ----------------------------------------------------------- against the simulation
SIM_DAYS, SIM_SEEDS = 20, range(8)


@pytest.fixture(scope="module")
def llama_plan():
    spec, scale = scaled_preset("llama3-16k", None)
    plan = spec.plan()
    wl = scenario_workload("llama3-16k", plan, days=SIM_DAYS, rng=np.random.default_rng(0),
                           scale=scale)
    assert len(wl.jobs) == 1 and wl.jobs[0].gpus == 16384
    return plan, wl


def _compound_poisson_sd(tau: float, restart_s: float, days: float) -> float:
    """Standard deviation of one run's ETTR: the loss is a sum over N ~ Poisson(lambda T)
    unplanned failures of (U tau + R_i) / T with U uniform; Var = lambda T E[(U tau + R)^2]
    / T^2, R_i each mode's detection plus ``restart_s``.  Planned stops lose only R."""
    t = days * 86400.0
    var = 0.0
    for m in MODES:
        lam = m.per_hour / HOUR * (16384 if m.component in ra.PER_GPU + ra.PER_NIC else
                                   2048 if m.component in ra.PER_NODE else 0)
        r = m.detect_s + restart_s
        second = r * r if m.planned else tau * tau / 3 + tau * r + r * r
        var += lam * t * second
    return math.sqrt(var) / t


@pytest.mark.parametrize("tau", [600.0, HOUR])
def test_simulated_ettr_and_interruptions_match_the_closed_form(llama_plan, tau):
    """Cross-model: the event engine (llama3-16k, its one 16,384-GPU job, fixed interval,
    failures on, 8 seeds x 20 days) against Daly's closed form with the same rates and costs.

    Tolerances, statistical: the mean ETTR within 3 standard errors of the compound-Poisson
    spread (``_compound_poisson_sd`` / sqrt(8): 0.0023 at 600 s, 0.0055 at 1 h), and the
    interruptions of all seeds within 3 sqrt(n) of the Poisson mean (8 x 20 x 24 / 2.787 =
    1,378 +- 111).  Dropping the restart from the closed form (R/M = 4 %) or halving the
    rework would each miss by more than 5 standard errors.
    """
    plan, wl = llama_plan
    ettrs, count = [], 0
    for seed in SIM_SEEDS:
        e = Engine(plan, wl, seed=seed, failures=True, checkpoint_interval=tau)
        e.run_until(SIM_DAYS * 86400.0)
        job = build_report(e, scenario={}, wall_seconds=0.0)["largest_job"]
        ettrs.append(job["ettr"])
        count += job["interruptions"]
    # the engine's own costs are the closed form's inputs: its write and its restart after
    # detection (relaunch plus restore); detection comes from the modes in both
    cost, after = job["checkpoint_write_s"], job["restart_s"]
    assert 1.0 < cost < 10.0 and 100.0 < after < 600.0
    closed = ra.job_ettr(gpus=16384, nodes=2048, cost_s=cost, interval_s=tau,
                         restart=ra.Restart(reschedule_s=after))
    n = len(SIM_SEEDS)
    se = _compound_poisson_sd(tau, after, SIM_DAYS) / math.sqrt(n)
    assert np.mean(ettrs) == pytest.approx(closed.ettr, abs=3 * se)
    expected = n * closed.interruptions(SIM_DAYS)
    assert abs(count - expected) <= 3 * math.sqrt(expected)
