"""Issue 25: the per-job agreement of two schedulers' job logs, on cases worked by hand."""

from __future__ import annotations

import math

import pytest

from scheduler.study.agreement import Agreement, compare, read_job_log


def test_a_log_agrees_with_itself_perfectly():
    log = {1: 0.0, 2: 3.0, 3: 3.0, 4: 40.0}
    assert compare(log, dict(log)) == Agreement(jobs=4, median_abs_s=0.0, within_share=1.0,
                                                within_s=5.0, tau=1.0)


def test_the_median_share_and_tau_of_a_small_case():
    # differences 1, 0, 7, 4 s: median (1 + 4) / 2; three of four within 5 s;
    # of the 6 pairs only (3, 4) swaps order: tau = (5 - 1) / 6
    a = {1: 0, 2: 10, 3: 20, 4: 30}
    b = {1: 1, 2: 10, 3: 27, 4: 26}
    got = compare(a, b)
    assert (got.jobs, got.median_abs_s, got.within_share) == (4, 2.5, 0.75)
    assert got.tau == pytest.approx(2 / 3)


def test_within_is_inclusive_and_its_bound_is_a_parameter():
    a, b = {1: 0, 2: 0}, {1: 5, 2: 6}
    assert compare(a, b).within_share == 0.5
    assert compare(a, b, within_s=6).within_share == 1.0


def test_ties_count_as_tau_b_counts_them():
    # jobs 1 and 2 start in the same second in a, 5 s apart in b: that pair is neither
    # concordant nor discordant; (1, 3) and (2, 3) agree.  tau-b = 2 / sqrt((3 - 1) * 3)
    got = compare({1: 0, 2: 0, 3: 10}, {1: 0, 2: 5, 3: 10})
    assert got.tau == pytest.approx(2 / math.sqrt(6))
    # ties in both logs on the same pair are no disagreement
    assert compare({1: 0, 2: 0, 3: 10}, {1: 4, 2: 4, 3: 11}).tau == pytest.approx(1.0)


def test_a_reversed_order_has_tau_minus_one():
    assert compare({1: 0, 2: 1, 3: 2}, {1: 2, 2: 1, 3: 0}).tau == pytest.approx(-1.0)


def test_only_common_jobs_are_compared_and_the_others_are_named():
    got = compare({1: 0, 2: 5, 7: 9}, {1: 0, 2: 5, 8: 1})
    assert (got.jobs, got.only_a, got.only_b) == (2, (7,), (8,))
    with pytest.raises(ValueError, match="share no job id"):
        compare({1: 0}, {2: 0})


def test_all_starts_at_one_instant_agree_and_a_single_job_has_tau_one():
    assert compare({1: 3, 2: 3}, {1: 9, 2: 9}).tau == 1.0
    assert compare({1: 3}, {1: 4}).tau == 1.0


def test_the_line_reads_like_the_docs_table():
    assert compare({1: 0, 2: 10}, {1: 1, 2: 10}).line() == \
        "2 jobs, median |Δstart| 0.5 s, 100.0 % within 5 s, tau 1.000"


def test_a_job_log_is_read_by_its_header(tmp_path):
    good = tmp_path / "log.csv"
    good.write_text("job_id,submit_s,start_s,end_s,gpus,nodes\n3,0,4,10,8,1\n1,0,0.5,9,2,1\n")
    assert read_job_log(good) == {3: 4.0, 1: 0.5}
    bad = tmp_path / "bad.csv"
    bad.write_text("id,start\n1,2\n")
    with pytest.raises(ValueError, match="the header is 'id,start'"):
        read_job_log(bad)
    row = tmp_path / "row.csv"
    row.write_text("job_id,submit_s,start_s,end_s,gpus,nodes\n1,0,soon,9,2,1\n")
    with pytest.raises(ValueError, match="line 2"):
        read_job_log(row)
