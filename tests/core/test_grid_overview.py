"""A running federation's overview (issue 30, scheduler/grid/overview_of.py): each place's row
agrees with its own engine's state, the WAN rows with the WAN's transfers, and the totals are
the sums; a region loss shows as that place down; the document passes check_overview."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.grid.federation import Grid
from scheduler.grid.overview import check_overview, totals
from scheduler.grid.overview_of import overview_of
from scheduler.grid.presets import grid_workload
from scheduler.grid.run import grid_preset
from scheduler.model.job_run import PENDING, QUEUED


@pytest.fixture(scope="module")
def grid():
    spec, plans = grid_preset()
    g = Grid(spec, plans, grid_workload(2, 3), seed=3)
    g.region_loss("eu-west", 20_000.0, None)
    g.wan_cut("eu-north", "us-east", 10_000.0, None)
    g.run_until(30_000.0)
    return g


@pytest.fixture(scope="module")
def doc(grid):
    return overview_of(grid, "grid")


def test_the_document_is_an_overview(doc):
    assert check_overview(doc) is doc
    assert doc["source"] == "simulated" and doc["t_s"] == 30_000.0
    assert [r["place"] for r in doc["places"]] == ["eu-north", "eu-west", "us-east",
                                                   "aws/eu-central-1", "gcp/us-central1"]


def test_place_rows_agree_with_each_engine(grid, doc):
    busy_somewhere = False
    for row in doc["places"]:
        engine = grid.places[row["place"]].engine
        held = sum(r.gpus for r in engine.running.values())
        assert row["allocated"] == held
        busy_somewhere |= held > 0
        assert row["gpus"] == engine.plan.n_gpus
        queued = [r for r in engine.runs if r.state in (QUEUED, PENDING)]
        inbound = [js for js in grid.jobs.values()
                   if js.state == "moving" and js.place == row["place"]]
        assert row["queued_jobs"] == len(queued) + len(inbound)
        assert row["wan_in_gb"] == pytest.approx(grid.wan.bytes_in[row["place"]], abs=0.05)
        assert row["wan_out_gb"] == pytest.approx(grid.wan.bytes_out[row["place"]], abs=0.05)
        mfu = engine.horizon_ledger().mfu()["achieved"]
        assert row["mfu"] == pytest.approx(mfu)
    assert busy_somewhere


def test_a_lost_region_is_down_with_all_its_gpus_and_costs_nothing(doc):
    rows = {r["place"]: r for r in doc["places"]}
    lost = rows["eu-west"]
    assert lost["health"] == "down" and lost["down"] == lost["gpus"] > 0
    assert lost["allocated"] == 0 and lost["cost_per_hour"] == 0.0
    assert all(r["health"] == "ok" and r["down"] == 0 for p, r in rows.items() if p != "eu-west")


def test_cost_per_hour_follows_the_allocation(grid, doc):
    rows = {r["place"]: r for r in doc["places"]}
    for name in ("aws/eu-central-1", "gcp/us-central1"):
        place = grid.places[name]
        assert rows[name]["cost_per_hour"] == pytest.approx(
            rows[name]["allocated"] * place.spec.on_demand_per_gpu_hour)
    site = grid.places["eu-north"]
    busy = rows["eu-north"]["allocated"]
    price = site.price_per_gpu_hour(0)  # one model at eu-north: a busy GPU-hour's energy
    assert rows["eu-north"]["cost_per_hour"] > busy * price * 0.999  # plus idle GPUs' draw
    assert rows["eu-north"]["cost_per_hour"] < rows["eu-north"]["gpus"] * price


def test_links_show_cuts_and_loads_within_capacity(grid, doc):
    links = {(lk["a"], lk["b"]): lk for lk in doc["links"]}
    assert links[("eu-north", "us-east")]["up"] is False
    assert sum(not lk["up"] for lk in doc["links"]) == 1
    for lk in doc["links"]:
        assert 0.0 <= lk["load_gbps"] <= lk["gbps"] + 1e-6
    moving = [t for t in grid.wan.transfers.values() if t.rate_gbps > 0]
    assert (sum(lk["load_gbps"] for lk in doc["links"]) > 0) == bool(moving)


def test_moves_list_transfers_under_way_then_the_latest_landed(grid, doc):
    under_way = [m for m in doc["moves"] if m["done_s"] is None]
    assert len(under_way) == len(grid.wan.transfers)
    landed = [m for m in doc["moves"] if m["done_s"] is not None]
    assert landed and len(landed) <= 20
    assert [m["done_s"] for m in landed] == sorted((m["done_s"] for m in landed), reverse=True)
    assert landed[0]["done_s"] == grid.wan.done[-1].done_s
    assert {m["why"] for m in doc["moves"]} <= {"dataset", "checkpoint", "replica"}


def test_totals_are_the_sums_of_the_rows(doc):
    t = totals(doc)
    for key in ("gpus", "allocated", "down", "queued_jobs", "queued_gpus"):
        assert t[key] == sum(r[key] for r in doc["places"])
    assert t["gpus"] == 768
    # every GB that left a place reached one
    assert t["wan_in_gb"] == pytest.approx(t["wan_out_gb"], abs=0.5)


def test_same_seed_same_overview():
    spec, plans = grid_preset()
    docs = []
    for _ in range(2):
        g = Grid(spec, plans, grid_workload(1, 5), seed=5)
        g.run_until(20_000.0)
        docs.append(overview_of(g, "grid"))
    assert docs[0] == docs[1]
    assert np.isfinite([r["cost_per_hour"] for r in docs[0]["places"]]).all()
