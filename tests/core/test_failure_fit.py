"""Fitting a failure profile from a fleet's records (scheduler/reliability/fit.py): exact
Poisson intervals that cover the true rate at their stated coverage, narrow with exposure, and
bad CSV rows that give one clear line."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.reliability.fit import (
    _loglik,
    fit_counts,
    fit_csv,
    fit_job_sizes,
    poisson_interval,
    read_job_csv,
)
from scheduler.reliability.profiles import load_profile, profile_toml

GPUS, NODES, DAYS = 4096, 512, 60.0
TRUE = {"gpu": 2e-5, "host": 1e-4, "software": 5e-5}  # per unit-hour
UNITS = {"gpu": GPUS, "host": NODES, "software": NODES}


def _synthetic_csv(path, seed: int, days: float = DAYS) -> None:
    """A seeded record: Poisson failures of each component over the window, uniform times."""
    rng = np.random.default_rng(seed)
    hours = days * 24.0
    rows = []
    for comp, rate in TRUE.items():
        for t in rng.uniform(0, hours, rng.poisson(rate * UNITS[comp] * hours)):
            rows.append((float(t), comp, int(rng.integers(UNITS[comp]))))
    rows.sort()
    path.write_text("time,component,unit\n"
                    + "".join(f"{t:.4f},{c},{u}\n" for t, c, u in rows))


def test_poisson_interval_matches_the_published_garwood_table():
    """The exact (Garwood 1936) 95 % limits as commonly tabulated for k = 0, 1, 10 events:
    (0, 3.689), (0.0253, 5.572), (4.795, 18.39); tolerance 0.002 (the tables' rounding)."""
    for k, lo, hi in ((0, 0.0, 3.689), (1, 0.0253, 5.572), (10, 4.795, 18.39)):
        got = poisson_interval(k, 1.0)
        assert got == pytest.approx((lo, hi), abs=2e-3)


def test_fit_recovers_known_rates_within_the_interval(tmp_path):
    path = tmp_path / "fleet.csv"
    _synthetic_csv(path, seed=11)
    p = fit_csv(path, window_days=DAYS, gpus=GPUS, nodes=NODES, confidence=0.95)
    rates = {m.cause: m.per_hour for m in p.modes}
    assert set(rates) == set(TRUE)
    for comp, rate in TRUE.items():
        lo, hi = p.intervals[comp]
        assert lo <= rate <= hi, comp
        assert rates[comp] == pytest.approx(rate, rel=0.35)


def test_intervals_cover_the_true_rate_at_least_at_their_stated_coverage():
    """Over 400 seeded records of a rate giving ~8 failures each, the 90 % intervals hold the
    true rate in at least 90 % of records less 3 binomial sigma (exact intervals are
    conservative: their coverage is never below the stated one)."""
    rng = np.random.default_rng(3)
    rate, exposure, trials = 2e-5, 4e5, 400
    hits = 0
    for k in rng.poisson(rate * exposure, trials):
        lo, hi = poisson_interval(int(k), exposure, 0.90)
        hits += lo <= rate <= hi
    assert hits / trials >= 0.90 - 3 * np.sqrt(0.9 * 0.1 / trials)


def test_the_interval_narrows_with_more_exposure(tmp_path):
    widths = []
    for days in (15.0, 60.0, 240.0):
        path = tmp_path / f"fleet{days:g}.csv"
        _synthetic_csv(path, seed=5, days=days)
        p = fit_csv(path, window_days=days, gpus=GPUS, nodes=NODES)
        lo, hi = p.intervals["host"]
        widths.append((hi - lo) / TRUE["host"])
    assert widths[0] > widths[1] > widths[2]


def test_counts_fit_like_the_mirror_gives_them():
    """The mirror's measured interruptions (cause -> count) over unit-hours of exposure."""
    est = {e.cause: e for e in fit_counts({"faulty_gpu": 12, "node_fail": 0}, 1e6)}
    assert est["faulty_gpu"].component == "gpu" and est["faulty_gpu"].rate == 12e-6
    assert est["node_fail"].low == 0 and est["node_fail"].high > 0
    with pytest.raises(ValueError, match="count of 'x' must be an integer"):
        fit_counts({"x": -1}, 1.0)


def test_a_fitted_profile_file_loads_and_keeps_its_intervals(tmp_path):
    path = tmp_path / "fleet.csv"
    _synthetic_csv(path, seed=2)
    p = fit_csv(path, window_days=DAYS, gpus=GPUS, nodes=NODES, units={"leaf": 64})
    out = tmp_path / "fleet.toml"
    out.write_text(profile_toml(p))
    back = load_profile(out)
    assert back.modes == p.modes and back.intervals == p.intervals
    assert back.confidence == 0.95
    assert back.intervals["leaf"][0] == 0 and "fitted: 0 in" in next(
        m.source for m in back.modes if m.cause == "leaf")


@pytest.mark.parametrize("text, message", [
    ("when,component\n1,gpu\n", "fleet.csv: the header needs a 'time' column"),
    ("time,component\nsoon,gpu\n", "fleet.csv:2: field 'time' must be hours"),
    ("time,component\n1,gpu\n-2,gpu\n", "fleet.csv:3: field 'time' must be >= 0"),
    ("time,component\n1,toaster\n", "fleet.csv:2: field 'component' must be one of"),
    ("time,component,unit\n1,gpu,x\n", "fleet.csv:2: field 'unit' must be an integer"),
    ("time,component,unit\n1,gpu,99999\n", "fleet.csv:2: field 'unit' 99999 is not below"),
    ("time,component\n99999,gpu\n", "fleet.csv:2: field 'time' 99999 h is after"),
    ("time,component\n1,leaf\n", "fleet.csv:2: no unit count for component 'leaf'"),
])
def test_bad_csv_rows_give_one_clear_line(tmp_path, text, message):
    path = tmp_path / "fleet.csv"
    path.write_text(text)
    with pytest.raises(ValueError) as exc:
        fit_csv(path, window_days=DAYS, gpus=GPUS, nodes=NODES)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


# ------------------------------------------------------------------ by job size (issue 29)
SIZE_A, SIZE_B = 3e-4, 2e-3  # per node-hour (hardware), per job-hour (whatever the size)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _job_records(seed: int, per_size: int = 6) -> list[tuple[int, float, int]]:
    """Seeded jobs of nine sizes, 50-500 h each, failing at SIZE_A x nodes + SIZE_B."""
    rng = np.random.default_rng(seed)
    out = []
    for n in SIZES:
        for h in rng.uniform(50, 500, per_size):
            out.append((n, float(h), int(rng.poisson((SIZE_A * n + SIZE_B) * h))))
    return out


def test_size_fit_recovers_both_parts_and_tells_a_per_job_rate_from_zero():
    fit = fit_job_sizes(_job_records(0, per_size=20))
    assert fit.per_unit.low <= SIZE_A <= fit.per_unit.high
    assert fit.per_job.low <= SIZE_B <= fit.per_job.high
    assert fit.per_unit.rate == pytest.approx(SIZE_A, rel=0.15)
    assert fit.per_job.low > 0  # a per-job part is there and the data show it
    assert (fit.per_unit.component, fit.per_job.component) == ("host", "job")


def test_size_fit_finds_no_per_job_part_in_purely_per_node_data():
    rng = np.random.default_rng(1)
    recs = [(n, 300.0, int(rng.poisson(SIZE_A * n * 300.0))) for n in SIZES for _ in range(10)]
    fit = fit_job_sizes(recs)
    assert fit.per_job.low == 0.0 and fit.per_job.high < SIZE_B
    assert fit.per_unit.low <= SIZE_A <= fit.per_unit.high


def test_size_fit_profile_likelihood_intervals_cover_at_about_their_confidence():
    """60 seeded records: the 95 % intervals must cover the true a and b in at least 51 of
    them each (expected 57; 51 is about 3.5 binomial sigma below)."""
    cover_a = cover_b = 0
    for seed in range(60):
        fit = fit_job_sizes(_job_records(100 + seed))
        cover_a += fit.per_unit.low <= SIZE_A <= fit.per_unit.high
        cover_b += fit.per_job.low <= SIZE_B <= fit.per_job.high
    assert cover_a >= 51 and cover_b >= 51, (cover_a, cover_b)


def test_size_fit_intervals_narrow_with_more_jobs_and_the_ml_beats_its_neighbours():
    few, many = fit_job_sizes(_job_records(7, 3)), fit_job_sizes(_job_records(7, 30))
    width = lambda e: e.high - e.low  # noqa: E731
    assert width(many.per_unit) < width(few.per_unit) / 2
    assert width(many.per_job) < width(few.per_job)  # the few's is cut at 0
    recs = _job_records(7, 30)
    n, t, k = (np.array([r[i] for r in recs], dtype=float) for i in range(3))
    best = _loglik(many.per_unit.rate, many.per_job.rate, n, t, k)
    assert best == pytest.approx(many.loglik)
    for da, db in ((1.05, 1), (0.95, 1), (1, 1.05), (1, 0.95)):
        assert _loglik(many.per_unit.rate * da, many.per_job.rate * db, n, t, k) < best


def test_size_fit_refuses_one_size_and_bad_rows(tmp_path):
    with pytest.raises(ValueError, match="one size"):
        fit_job_sizes([(8, 100.0, 1), (8, 50.0, 0)])
    path = tmp_path / "jobs.csv"
    path.write_text("units,hours,failures\n8,100,1\n16,-3,0\n")
    with pytest.raises(ValueError, match=r"^jobs.csv:3: field 'hours' must be a number > 0"):
        read_job_csv(path)
    path.write_text("units,hours\n8,100\n")
    with pytest.raises(ValueError, match="needs a 'failures' column"):
        read_job_csv(path)
