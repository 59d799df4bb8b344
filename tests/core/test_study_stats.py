"""A study's intervals cover the truth as often as they say, and paired differences decide."""

import numpy as np
import pytest
from scipy import stats as sps

from scheduler.stats import mean_ci, paired, verdict
from scheduler.study.figures import Figure
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


def test_the_interval_is_scipys_t_interval_of_the_mean():
    """An independent implementation: scipy.stats.t.interval with the standard error."""
    for x in ([1.0, 2.0], [3.0, 1.0, 4.0, 1.5, 9.0], list(np.linspace(0, 1, 12))):
        i = mean_ci(x)
        low, high = sps.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=sps.sem(x))
        assert (i.n, i.low, i.high) == (len(x), pytest.approx(low), pytest.approx(high))
        assert i.sd == pytest.approx(np.std(x, ddof=1))
    assert mean_ci([]) == mean_ci([None]) and mean_ci([]).n == 0


def test_a_difference_touching_zero_is_not_distinguishable_and_neutral_figures_read_lower():
    from scheduler.stats import Interval

    assert verdict(Interval(3, 1.0, 0.0, 2.0, 1.0), "higher") == "not distinguishable"
    assert verdict(Interval(3, -1.0, -2.0, 0.0, 1.0), "lower") == "not distinguishable"
    assert verdict(Interval(3, -1.0, -2.0, -0.5, 1.0), None) == "lower"
    assert verdict(Interval(3, -1.0, -2.0, -0.5, 1.0), "lower") == "better"


def test_the_summary_reads_as_documented():
    figs = [Figure("x", "X", "h", "lower", lambda r: r["x"]),
            Figure("z", "Z", "count", None, lambda r: r["z"])]
    values = {("b", 0): {"x": 1.0, "z": 0.0}, ("b", 1): {"x": 3.0, "z": 0.0},
              ("a", 0): {"x": 2.0, "z": 1.0}, ("a", 1): {"x": 4.0, "z": None}}
    out = summarise_values([("b", {}), ("a", {"k": 1})], [0, 1], figs, values)
    assert out["level"] == 0.95 and out["baseline"] == "b"
    assert out["figures"] == [{"name": "x", "label": "X", "unit": "h", "better": "lower"},
                              {"name": "z", "label": "Z", "unit": "count", "better": None}]
    assert [(a["name"], a["changes"], a["runs"]) for a in out["arms"]] == [
        ("b", {}, 2), ("a", {"k": 1}, 2)]
    assert out["arms"][1]["figures"]["x"]["mean"] == 3.0
    d = out["paired"][0]["figures"]
    assert d["x"]["mean"] == 1.0 and d["x"]["relative"] == 0.5
    assert d["z"]["n"] == 1 and d["z"]["relative"] is None  # baseline mean 0: no ratio
    assert d["z"]["verdict"] == "too few seeds"


def test_a_specs_summary_takes_its_arms_in_order_and_its_figures():
    from scheduler.study.spec import check_spec
    from scheduler.study.summary import summarise

    spec = check_spec({"name": "s", "base": {"preset": "dev-small", "days": 1}, "seeds": 2,
                       "baseline": "fifo", "figures": ["mfu"],
                       "arms": [{"name": "default"}, {"name": "fifo",
                                                      "set": {"policy": "fifo"}}]})
    values = {(a, s): {"mfu": 0.1 * s + (0.05 if a == "default" else 0.0)}
              for a in ("default", "fifo") for s in (0, 1)}
    out = summarise(spec, values)
    assert out["baseline"] == "fifo" and [a["name"] for a in out["arms"]] == ["fifo", "default"]
    assert [f["name"] for f in out["figures"]] == ["mfu"]
    assert out["paired"][0]["figures"]["mfu"]["mean"] == pytest.approx(0.05)
