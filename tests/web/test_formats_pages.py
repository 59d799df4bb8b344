"""The one time and number style on the what-if, study and overview pages: no raw simulated
seconds ("t = 12346 s"), durations as "2 h 14 min", fractions as percentages, counts and
figures of four or more digits with thousands separators (``twin/pages/formats.py``)."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

from scheduler.control.whatif import METRICS
from scheduler.study.figures import figure
from scheduler.study.summary import summarise_values
from twin import models as m
from twin.pages import formats

RAW_T = re.compile(r"\bt\s*=\s*[\d,.]+\s*s\b")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?")
UNSEPARATED = re.compile(r"(?<![\d,.#])\d{4,}")


def visible(page: str, element_id: str) -> str:
    """The text of the element with ``element_id`` (tags dropped, entities read), without
    dates: what the reader sees of it."""
    found = re.search(rf'<(\w+)[^>]*\bid="{element_id}"[^>]*>(.*?)</\1>', page, re.S)
    assert found, f"#{element_id} is not on the page"
    return DATE.sub("", html.unescape(re.sub(r"<[^>]+>", " ", found.group(2))))


def unseparated(text: str) -> list[str]:
    return UNSEPARATED.findall(text)


def test_the_checks_catch_what_they_name():
    assert RAW_T.search("Forked at t = 12346 s") and RAW_T.search("t=12,346 s")
    assert unseparated("12345.678 GPU-h, 4096 GPUs") == ["12345", "4096"]
    assert unseparated("12,346 · 4,096 · 36.46 % · #12345 · day 3, 05:18 · 999") == []


@pytest.mark.parametrize("value, unit, text, delta", [
    (0.3646, "fraction", "36.46 %", "+36.46 pp"), (-0.0123, "fraction", "-1.23 %", "-1.23 pp"),
    (2.2333, "h", "2 h 14 min", "+2 h 14 min"), (-0.5, "h", "-30 min", "-30 min"),
    (12345.678, "GPU-h", "12,346", "+12,346"), (12.0, "count", "12", "+12"),
    (12.345, "jobs", "12.35", "+12.35"), (0.012345, "MWh", "0.0123", "+0.0123"),
    (0, "count", "0", "0"), (None, "h", "–", "–"), (float("nan"), "fraction", "–", "–")])
def test_a_figure_is_written_by_its_unit(value, unit, text, delta):
    assert formats.figure(value, unit) == text
    assert formats.figure_delta(value, unit) == delta


# ------------------------------------------------------------------ what-if pages
T_FORK = 12345.678  # simulated seconds: a raw "t = 12346 s" would have four digits and more
BIG = 12345.678  # GPU-hours of a busy fleet's day


def _summary(rng: np.random.Generator) -> dict:
    out = {}
    for name in METRICS:
        scale = (BIG if "gpu_hours" in name else 0.4 if name in ("mfu", "ettr")
                 else 3.5 if name.endswith("_h") else 2500.0)
        base, act = scale * rng.uniform(0.9, 1.1, 2)
        out[name] = {"baseline": base, "action": act, "delta": act - base,
                     "delta_band": sorted([(act - base) * 0.5, (act - base) * 1.5])}
    return out


@pytest.fixture
def whatif_row(db):
    rng = np.random.default_rng(27)
    result = {"from": {"preset": "noc-4k", "t_sim": T_FORK}, "seeds": [1, 2], "band": "min-max",
              "action": {"kind": "storage_slowdown", "factor": 0.5, "duration_s": 8040.0},
              "hours": 24.0, "summary": _summary(rng),
              "per_seed": [{"seed": s, "jobs_hit": ["pretrain-70b"],
                            "delta": {"gpu_hours": {"productive": -BIG}}} for s in (1, 2)]}
    m.LiveState.objects.create(pk=m.LiveState.SINGLETON_PK, health="ok", t_sim=T_FORK + 3600)
    return m.WhatIf.objects.create(
        status="done", t_sim=T_FORK, seq=4321, result=result,
        params={"action": result["action"], "hours": 24.0, "seeds": [1, 2],
                "snapshot": {"age_s": 8040.0, "behind_live_sim_s": 5400.0}})


def test_the_whatif_result_dates_its_fork_and_writes_figures_by_their_unit(login, whatif_row):
    page = login("operator").get(f"/whatif/{whatif_row.pk}/").content.decode()
    text = DATE.sub("", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    assert not RAW_T.search(text), RAW_T.search(text)
    forked = visible(page, "whatif-forked")
    assert formats.sim_time(T_FORK) in page and str(round(T_FORK)) not in forked
    assert '<time class="wall"' in re.search(r'id="whatif-forked".*?</span>', page, re.S).group()
    for said in ("2 h 14 min before the request", "1 h 30 min of simulated time behind",
                 "1 d of simulated time forward", "for 2 h 14 min"):
        assert said in text, said
    table = visible(page, "whatif-table")
    assert unseparated(table) == [], unseparated(table)
    summary = whatif_row.result["summary"]
    assert formats.figure(summary["mfu"]["baseline"], "fraction") in table  # "36.46 %"
    assert formats.figure_delta(summary["mfu"]["delta"], "fraction") in table  # "pp"
    assert formats.duration_h(summary["queue_wait_mean_h"]["action"]) in table
    assert formats.number(summary["productive_gpu_hours"]["baseline"]) in table  # "12,3xx"


def test_the_whatif_list_says_span_and_fork_time_not_seconds(login, whatif_row):
    page = login("operator").get("/whatif/").content.decode()
    listed = visible(page, "whatif-list")
    assert not RAW_T.search(listed) and unseparated(listed) == [], listed
    assert "1 d" in listed and f"{round(T_FORK)} s" not in listed
    assert formats.sim_time(T_FORK) in page


# ------------------------------------------------------------------ a study's page
FIGS = [figure(n) for n in ("mfu", "wait_mean_h", "lost_gpu_hours", "jobs_completed")]


@pytest.fixture
def study(db):
    rng = np.random.default_rng(5)
    scale = {"mfu": 0.35, "wait_mean_h": 2.2, "lost_gpu_hours": BIG, "jobs_completed": 4100.0}
    values = {(arm, seed): {f.name: scale[f.name] * rng.uniform(0.8, 1.2) for f in FIGS}
              for arm in ("default", "fifo") for seed in range(3)}
    summary = summarise_values([("default", {}), ("fifo", {"policy": "fifo"})], range(3), FIGS,
                               values)
    row = m.Study.objects.create(name="policy", status="done", total_runs=1200,
                                 done_runs=1150, failed_runs=50, summary=summary)
    m.StudyRun.objects.create(study=row, arm="default", seed=0, status="done", wall_s=8040.0)
    return row


def test_a_study_writes_percentages_durations_and_separated_figures(login, study):
    page = login("operator").get(f"/studies/{study.pk}/").content.decode()
    arms, paired = visible(page, "study-arms"), visible(page, "study-paired")
    for text in (arms, paired, visible(page, "study-count"), visible(page, "study-runs")):
        assert unseparated(text) == [], (unseparated(text), text)
    assert "1,150 of 1,200 runs done, 50 failed" in visible(page, "study-count")
    assert "2 h 14 min" in visible(page, "study-runs")  # a run's wall time
    fig = {a["name"]: a["figures"] for a in study.summary["arms"]}["default"]
    assert formats.percent(fig["mfu"]["mean"]) in arms
    assert formats.duration_h(fig["wait_mean_h"]["mean"]) in arms
    assert formats.number(fig["lost_gpu_hours"]["mean"]) in arms
    assert "(fraction)" not in arms and "(h)" not in arms and "(GPU-h)" in arms
    diff = study.summary["paired"][0]["figures"]["mfu"]["mean"]
    assert formats.figure_delta(diff, "fraction") in paired and " pp" in paired


# ------------------------------------------------------------------ the overview's inventory
def test_the_overview_storage_table_separates_thousands(login, small_cluster):
    m.StorageSystem.objects.create(cluster=small_cluster, name="node-nvme", tier="nvme",
                                   capacity_tb=15728.64, read_gb_s=12800.0, write_gb_s=6144.0)
    page = login("operator").get("/").content.decode()
    storage = visible(page, "storage-table")
    assert unseparated(storage) == [], storage
    assert all(formats.thousands(v) in storage for v in (15728.64, 12800.0, 6144.0)), storage
