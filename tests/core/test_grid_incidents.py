"""The grid's incidents in its overview (issue 30, item 4: "the ledger and the incidents show
the effect"): a region loss, a WAN cut and a supply cut each appear as an open incident naming
what they hit, with the jobs hit, the GB their restarts moved and the work lost, then as
resolved once over; check_overview takes a document without incidents and refuses a bad row
in one message."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from scheduler.grid.federation import Grid
from scheduler.grid.jobs import GridJob
from scheduler.grid.overview import check_overview
from scheduler.grid.overview_of import overview_of
from scheduler.grid.places import plans_from_spec
from scheduler.hardware.cluster import NodeGroup
from scheduler.hardware.grid_spec import CloudRegionSpec, GridSpec, SiteSpec
from scheduler.workload.jobs import Requirement
from tests.core.grid_factories import HOUR, gjob, grid, link, site


def incidents(g):
    return overview_of(g, "t")["incidents"]


def test_a_region_loss_is_open_with_its_jobs_moves_and_lost_work_then_resolved():
    # j0 (8 GPUs, 10 h, data 100 GB at c) goes to the cheapest site a (80 s to move its data);
    # a is lost at 1 h for 2 h: j0 restarts at b from scratch (no replication), moving its
    # 100 GB again, and has lost its (3600 - 80) s of computing on 8 GPUs.
    g = grid([site("a", price=0.05), site("b", price=0.08), site("c", price=0.2)],
             [link("a", "b"), link("a", "c"), link("b", "c")],
             [gjob(0, hours=10, dataset="d", data_site="c", dataset_gb=100.0)],
             replication_s=None)
    g.region_loss("a", HOUR, 2 * HOUR)
    g.run_until(2 * HOUR)
    (inc,) = incidents(g)
    assert (inc["kind"], inc["target"], inc["since_s"], inc["until_s"]) == \
        ("region_loss", "a", HOUR, None)
    assert inc["jobs_hit"] == 1 and g.jobs["j0"].place == "b"
    assert inc["moved_gb"] == 100.0
    assert inc["lost_gpu_hours"] == pytest.approx(8 * (HOUR - 80.0) / HOUR, abs=0.01)
    g.run_until(4 * HOUR)
    (done,) = incidents(g)
    assert done["until_s"] == 3 * HOUR
    assert {k: done[k] for k in ("jobs_hit", "moved_gb")} == {"jobs_hit": 1, "moved_gb": 100.0}


def test_a_wan_cut_names_its_link_and_the_jobs_moving_over_it():
    # j0's 5000 GB cross a-b at 10 Gb/s (4000 s); the link is cut at 600 s for an hour.
    g = grid([site("a", price=0.05), site("b", price=0.08)], [link("a", "b")],
             [gjob(0, hours=10, dataset="d", data_site="b", dataset_gb=5000.0)],
             replication_s=None)
    g.wan_cut("a", "b", 600.0, HOUR)
    g.run_until(1200.0)
    (inc,) = incidents(g)
    assert (inc["kind"], inc["target"], inc["until_s"], inc["jobs_hit"]) == \
        ("wan_cut", "a-b", None, 1)
    assert inc["lost_gpu_hours"] == 0.0
    g.run_until(2 * HOUR)
    (done,) = incidents(g)
    assert done["since_s"] == 600.0 and done["until_s"] == 600.0 + HOUR


def test_a_wan_cut_with_nothing_over_it_hits_no_job():
    g = grid([site("a"), site("b"), site("c")], [link("a", "b"), link("b", "c")],
             [gjob(0, hours=10, dataset="d", data_site="b", dataset_gb=5000.0)],
             replication_s=None)
    g.wan_cut("b", "c", 600.0)
    g.run_until(1200.0)
    (inc,) = incidents(g)
    assert inc["target"] == "b-c" and inc["jobs_hit"] == 0


def _site(name, model, nodes, spares=0, price=0.05):
    return SiteSpec(name, name, "EU", (NodeGroup(model, nodes, spares),), "fat-tree",
                    {"radix": 8}, power_price_per_kwh=price)


def test_a_supply_cut_names_its_model_and_the_jobs_it_held():
    # The cloud's 64 H100s are frozen at the 32 j0 holds; j2 (32 H100s, at 2 h) has nowhere
    # to go until the cut ends at 5 h (sites have 16 H100s each).
    sites = (_site("h1", "H100-SXM", 3, 1), _site("h2", "H100-SXM", 3, 1, 0.06))
    clouds = (CloudRegionSpec("aws", "x", "EU", "H100-SXM", 64, 4.0),)
    spec = GridSpec("supply", sites, clouds,
                    (link("h1", "h2"), link("h1", "aws/x"), link("h2", "aws/x")))

    def needs(k, submit_h):
        g = gjob(k, gpus=32, hours=10.0, submit_h=submit_h)
        return GridJob(replace(g.job, requirement=Requirement(models=("H100-SXM",))))

    g = Grid(spec, plans_from_spec(spec), [needs(0, 0.0), needs(2, 2.0)], policy="start",
             replication_s=None)
    g.supply_cut("H100-SXM", HOUR, 4 * HOUR)
    g.run_until(3 * HOUR)
    (inc,) = incidents(g)
    assert (inc["kind"], inc["target"], inc["since_s"], inc["until_s"]) == \
        ("supply_cut", "H100-SXM", HOUR, None)
    assert inc["jobs_hit"] == 1 and g.jobs["j2"].state == "held"
    assert "aws/x" in inc["note"]
    g.run_until(6 * HOUR)
    (done,) = incidents(g)
    assert done["until_s"] == 5 * HOUR and done["jobs_hit"] == 1


def test_open_incidents_come_first_then_the_resolved_newest_first():
    g = grid([site("a"), site("b"), site("c")], [link("a", "b"), link("b", "c")])
    g.region_loss("a", 100.0, 100.0)
    g.region_loss("c", 300.0, 100.0)
    g.wan_cut("a", "b", 50.0)
    g.run_until(1000.0)
    assert [(i["kind"], i["target"]) for i in incidents(g)] == [
        ("wan_cut", "a-b"), ("region_loss", "c"), ("region_loss", "a")]
    assert overview_of(g, "t")["incidents"] == incidents(g)


def _bare():
    g = grid([site("a"), site("b")], [link("a", "b")])
    g.region_loss("a", 10.0)
    g.run_until(20.0)
    return overview_of(g, "t")


def test_a_document_without_incidents_stays_valid():
    doc = _bare()
    del doc["incidents"]
    assert check_overview(doc) is doc


@pytest.mark.parametrize("change, message", [
    ({"kind": "meteor"}, "incidents[0]: kind must be one of"),
    ({"jobs_hit": "3"}, "incidents[0]: jobs_hit has the wrong type"),
    ({"until_s": 1.0}, "incidents[0]: until_s comes before since_s"),
    ({"moved_gb": -1.0}, "incidents[0]: jobs_hit, moved_gb and lost_gpu_hours must be >= 0"),
])
def test_a_bad_incident_row_is_refused_in_one_message(change, message):
    doc = _bare()
    good = copy.deepcopy(doc)
    doc["incidents"][0].update(change)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_overview(doc)
    del doc["incidents"][0]["note"]
    with pytest.raises(ValueError, match=r"incidents\[0\]: missing note"):
        check_overview(doc)
    assert check_overview(good) is good
