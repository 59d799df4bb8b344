"""A study's intervals cover the truth as often as they say, and paired differences decide."""

import numpy as np
from scipy import stats as sps

from scheduler.study.figures import Figure
from scheduler.study.stats import mean_ci, paired, verdict
from scheduler.study.summary import summarise_values


def test_95_percent_intervals_cover_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(2024)
    trials, n, mu = 600, 8, 3.5
    hits = sum(1 for _ in range(trials)
               if (i := mean_ci(rng.normal(mu, 2.0, n))).low <= mu <= i.high)
    # 600 Bernoulli(0.95) trials: 99.9 % of outcomes lie in this range; a z interval
    # (1.96 instead of t's 2.36 for n=8) covers only ~0.91 and fails it
    lo, hi = sps.binom.ppf([0.0005, 0.9995], trials, 0.95)
    assert lo <= hits <= hi


def test_intervals_widen_with_spread_and_narrow_with_seeds():
    rng = np.random.default_rng(1)
    a = rng.normal(0, 1, 8)
    assert (mean_ci(a * 3).high - mean_ci(a * 3).low) > (mean_ci(a).high - mean_ci(a).low)
    b = rng.normal(0, 1, 64)
    assert (mean_ci(b).high - mean_ci(b).low) < (mean_ci(b[:8]).high - mean_ci(b[:8]).low)


def test_missing_values_are_dropped_and_one_value_has_no_interval():
    i = mean_ci([1.0, None, 3.0])
    assert i.n == 2 and i.mean == 2.0
    assert mean_ci([2.0]).low is None and mean_ci([]).mean is None


def test_pairing_on_common_seeds_sees_a_shift_the_side_by_side_intervals_hide():
    rng = np.random.default_rng(7)
    workload = rng.normal(100.0, 10.0, 8)        # each seed's jobs: shared by both arms
    base = {s: float(workload[s] + rng.normal(0, 0.1)) for s in range(8)}
    arm = {s: float(workload[s] + 1.0 + rng.normal(0, 0.1)) for s in range(8)}
    a, b = mean_ci(arm.values()), mean_ci(base.values())
    assert a.low < b.high  # the arms' own intervals overlap ...
    d = paired(arm, base)
    assert d.low > 0.5 and d.high < 1.5  # ... the paired difference is clear
    assert verdict(d, "higher") == "better" and verdict(d, "lower") == "worse"
    assert verdict(d, None) == "higher"


def test_pairs_use_only_seeds_both_arms_finished():
    d = paired({0: 1.0, 1: 2.0, 2: 9.0}, {0: 0.0, 1: 1.0, 3: 5.0})
    assert d.n == 2 and d.mean == 1.0


def test_no_difference_is_not_distinguishable():
    rng = np.random.default_rng(3)
    base = {s: float(v) for s, v in enumerate(rng.normal(0, 1, 8))}
    arm = {s: float(v) for s, v in enumerate(rng.normal(0, 1, 8))}
    assert verdict(paired(arm, base), "higher") == "not distinguishable"
    assert verdict(paired({0: 1.0}, {0: 0.0}), "higher") == "too few seeds"


def test_the_summary_compares_every_arm_with_the_baseline_on_every_figure():
    figs = [Figure("x", "X", "count", "lower", lambda r: r["x"])]
    values = {("b", s): {"x": 10.0 + s} for s in range(4)}
    values |= {("worse", s): {"x": 12.0 + s + 0.01 * s * s} for s in range(4)}
    values |= {("same", s): {"x": 10.0 + s + (0.3 if s % 2 else -0.3)} for s in range(4)}
    out = summarise_values([("b", {}), ("worse", {"k": 1}), ("same", {"k": 2})], range(4),
                           figs, values)
    assert out["baseline"] == "b" and [a["runs"] for a in out["arms"]] == [4, 4, 4]
    verdicts = {p["arm"]: p["figures"]["x"]["verdict"] for p in out["paired"]}
    assert verdicts == {"worse": "worse", "same": "not distinguishable"}
    assert abs(out["paired"][0]["figures"]["x"]["relative"] - 2.035 / 11.5) < 1e-9
