"""A supply cut at grid level (issue 30, item 4): no more parts of an accelerator model.

The hand-built grid: sites ``h1`` and ``h2`` (2 H100 nodes + 1 hot spare each), ``m`` (4
MI300X nodes), and a cloud region ``aws/x`` of 64 H100s (8 nodes), all joined at 10 Gb/s.
Job ``c`` (H100 only, 32 GPUs, 10 h) runs in the cloud from the start (no site has 32 H100s);
``e`` (MI300X only, 32 GPUs, 20 h) fills ``m``.  The cut of H100 lasts from 1 h to 5 h.
"""

import json
from dataclasses import replace

import numpy as np
import pytest

from scheduler.grid.federation import Grid
from scheduler.grid.jobs import GridJob
from scheduler.grid.overview_of import overview_of
from scheduler.grid.places import plans_from_spec
from scheduler.grid.run import run_grid
from scheduler.hardware.cluster import NodeGroup
from scheduler.hardware.grid_spec import CloudRegionSpec, GridSpec, SiteSpec
from scheduler.sim import Kind
from scheduler.workload.jobs import Requirement
from tests.core.grid_factories import HOUR, gjob, link

H100, MI300 = "H100-SXM", "MI300X"
CLOUD = "aws/x"
CUT_AT, CUT_FOR = 1 * HOUR, 4 * HOUR


def _site(name, model, nodes, spares=0, price=0.05):
    return SiteSpec(name, name, "EU", (NodeGroup(model, nodes, spares),), "fat-tree",
                    {"radix": 8}, power_price_per_kwh=price)


def spec():
    sites = (_site("h1", H100, 3, 1), _site("h2", H100, 3, 1, 0.06), _site("m", MI300, 4))
    clouds = (CloudRegionSpec("aws", "x", "EU", H100, 64, 4.0),)
    places = [s.name for s in sites] + [CLOUD]
    links = tuple(link(a, b) for i, a in enumerate(places) for b in places[i + 1:])
    return GridSpec("supply", sites, clouds, links)


def needs(k, models, *, gpus=32, hours=1.0, submit_h=0.0):
    g = gjob(k, gpus=gpus, hours=hours, submit_h=submit_h)
    return GridJob(replace(g.job, requirement=Requirement(models=models)))


def base_jobs():
    return [needs(0, (H100,), hours=10.0), needs(1, (MI300,), hours=20.0)]


def drill(jobs=(), *, cut=True, policy="start", end=True):
    s = spec()
    g = Grid(s, plans_from_spec(s), [*base_jobs(), *jobs], policy=policy, replication_s=None)
    if cut:
        g.supply_cut(H100, CUT_AT, CUT_FOR if end else None)
    return g


def test_every_site_with_the_model_freezes_its_spares_and_only_those():
    g = drill()
    g.run_until(2 * HOUR)
    for name in ("h1", "h2", CLOUD):
        engine = g.places[name].engine
        assert engine.spares.cut_models == {0}, name
        assert any(e["kind"] == "drill" and "supply_cut" in e["text"] for e in engine.events)
    assert g.places["m"].engine.spares.cut_models == set()
    assert g.places["h1"].supply[H100]["spares_frozen"] == 1
    g.run_until(6 * HOUR)
    assert all(not p.engine.spares.cut_models for p in g.places.values())


def test_a_cloud_regions_quota_is_frozen_at_its_allocation_while_the_cut_lasts():
    """``c`` holds 4 of the cloud's 8 nodes: the other 4 are drained; an H100-only gang of
    32 arriving at 2 h (no site has 32 H100s) waits at the grid with the cut as reason."""
    g = drill([needs(2, (H100,), submit_h=2.0)])
    g.run_until(3 * HOUR)
    cloud = g.places[CLOUD]
    st = cloud.engine.state
    assert int(st.node_drained.sum()) == 4
    assert not (st.node_drained & (st.node_free < st.node_gpus)).any()  # c's nodes stay
    assert cloud.supply[H100]["frozen_gpus"] == 32
    js = g.jobs["j2"]
    assert js.state == "held" and js.place is None
    assert "supply cut: no new H100-SXM capacity" in js.reason
    assert "frozen at the 32 GPUs allocated" in js.reason
    assert g.places[CLOUD].engine.runs[0].state == "running"  # c runs on


def test_without_the_cut_the_same_job_starts_in_the_cloud_at_once():
    g = drill([needs(2, (H100,), submit_h=2.0)], cut=False)
    g.run_until(3 * HOUR)
    assert g.jobs["j2"].history == [CLOUD]
    assert g.jobs["j2"].first_start_s == pytest.approx(2 * HOUR + 600.0)


def test_a_job_that_accepts_another_model_goes_there_one_that_does_not_waits():
    either, only = needs(2, (H100, MI300), submit_h=2.0), needs(3, (H100,), submit_h=2.0)
    cut = drill([either, only])
    cut.run_until(3 * HOUR)
    assert cut.jobs["j2"].history == ["m"]          # queued behind e, not in the dark cloud
    assert cut.jobs["j3"].state == "held"
    free = drill([either, only], cut=False)
    free.run_until(3 * HOUR)
    assert free.jobs["j2"].history == [CLOUD]       # quickest start: the cloud, without a cut
    assert cut.cut_delayed == {"j3"}


def test_when_the_cut_ends_capacity_comes_back_and_the_waiting_job_starts():
    g = drill([needs(2, (H100,), submit_h=2.0)])
    g.run_until(8 * HOUR)
    cloud = g.places[CLOUD]
    assert not cloud.engine.state.node_drained.any() and cloud.supply == {}
    js = g.jobs["j2"]
    assert js.history == [CLOUD]
    assert js.first_start_s == pytest.approx(CUT_AT + CUT_FOR + 600.0)
    assert [e["kind"] for e in g.log if e["kind"].startswith("supply")] == [
        "supply_cut", "supply_back"]


def test_a_cut_for_good_never_gives_the_capacity_back():
    g = drill([needs(2, (H100,), submit_h=2.0)], end=False)
    g.run_until(12 * HOUR)  # c ended at 10 h: its nodes stay in the region's frozen quota
    assert g.jobs["j2"].state == "held"
    assert g.places[CLOUD].supply[H100]["frozen_gpus"] == 32


def test_a_node_repaired_during_the_cut_waits_for_parts_until_it_ends():
    s = spec()
    g = Grid(s, plans_from_spec(s), base_jobs(), replication_s=None)
    g.supply_cut(H100, CUT_AT, 48 * HOUR)
    g.run_until(2 * HOUR)
    engine = g.places["h1"].engine
    engine.command("drill", kind="node", target=0)
    (repair,) = [h.time for h in engine.kernel.pending(Kind.REPAIR)]
    assert repair < CUT_AT + 48 * HOUR
    g.run_until(repair + 60.0)  # repaired, but no parts: parked, out of service
    assert not engine.state.node_up[0]
    g.run_until(CUT_AT + 48 * HOUR + 60.0)
    assert engine.state.node_up[0]


def test_the_report_books_hours_refused_capacity_and_delayed_jobs():
    s = spec()
    _, rep = run_grid(s, plans_from_spec(s), [*base_jobs(), needs(2, (H100,), submit_h=2.0)],
                      days=0.5, policy="start", replication_s=None,
                      supply_cuts=[(H100, CUT_AT, CUT_FOR)])
    by = {p["place"]: p["supply_cut"] for p in rep["sites"]}
    assert by[CLOUD] == {"hours": 4.0, "capacity_refused_gpu_hours": 32 * 4.0, "cut_now": []}
    assert by["h1"]["capacity_refused_gpu_hours"] == 8 * 4.0  # its one spare node, frozen
    assert by["m"] == {"hours": 0.0, "capacity_refused_gpu_hours": 0.0, "cut_now": []}
    assert rep["summary"]["supply_cut"] == {"jobs_delayed": 1, "jobs_waiting": 0}
    assert rep["scenario"]["supply_cuts"] == [[H100, CUT_AT, CUT_FOR]]


def test_the_overview_notes_a_place_whose_supply_is_cut():
    g = drill()
    g.run_until(2 * HOUR)
    rows = {r["place"]: r for r in overview_of(g, "supply")["places"]}
    assert rows[CLOUD]["note"] == f"supply of {H100} cut since t={CUT_AT:.0f} s"
    assert rows["m"]["note"] == ""
    g.run_until(6 * HOUR)
    assert all(r["note"] == "" for r in overview_of(g, "supply")["places"])


@pytest.mark.parametrize("model, vendor, message", [
    ("B200", None, "no place of grid supply has accelerator model 'B200'"),
    (None, None, "a supply cut names an accelerator model"),
    (H100, "AMD", "H100-SXM is a NVIDIA accelerator, not AMD's"),
    (None, "Intel", "no place of grid supply has a Intel accelerator"),
])
def test_a_bad_model_is_refused_in_one_line_and_nothing_is_scheduled(model, vendor, message):
    g = drill(cut=False)
    heap = list(g._heap)
    with pytest.raises(ValueError, match=message):
        g.supply_cut(model, CUT_AT, CUT_FOR, vendor=vendor)
    assert g._heap == heap


@pytest.mark.parametrize("at_s, duration_s", [(-1.0, None), (0.0, 0.0), (float("nan"), 1.0)])
def test_a_bad_window_is_refused(at_s, duration_s):
    g = drill(cut=False)
    with pytest.raises(ValueError, match="supply cut"):
        g.supply_cut(H100, at_s, duration_s)
    assert g._heap[-1][2] != "supply_cut"


def test_a_vendor_cut_covers_every_model_of_that_vendor():
    g = drill(cut=False)
    assert g.supply_cut(None, CUT_AT, vendor="amd") == (MI300,)
    g.run_until(2 * HOUR)
    assert list(g.places["m"].supply) == [MI300] and g.places["h1"].supply == {}


def test_same_seed_same_report():
    def once():
        _, rep = run_grid(days=0.5, seed=3, supply_cuts=[(H100, 2 * HOUR, 3 * HOUR)])
        rep.pop("wall_seconds")
        return json.dumps(rep, sort_keys=True)
    first = once()
    assert first == once()
    assert np.any([p["supply_cut"]["hours"] for p in json.loads(first)["sites"]])


STUDY = """\
name: supply
grid: grid
base: {days: 0.5}
seeds: 2
arms:
  - name: calm
    set: {policy: cost}
  - name: cut
    set: {policy: cost, supply_cut: "h100-sxm@1+4"}
figures: [grid.cost_usd, grid.wait_mean_h]
"""


def test_a_study_arm_cuts_a_models_supply_and_the_baseline_does_not():
    from scheduler.study.run import run_one
    from scheduler.study.spec import load_spec_text
    spec = load_spec_text(STUDY)
    runs = {a.name: run_one(a.options, s, list(spec.figures), grid=spec.grid)
            for a, s in spec.runs() if s == spec.seeds[0]}
    hours = {name: sum(p["supply_cut"]["hours"] for p in r["report"]["sites"])
             for name, r in runs.items()}
    assert hours["calm"] == 0.0 and hours["cut"] > 0.0
    assert spec.arms[1].options["supply_cut"] == [H100, HOUR, 4 * HOUR]


@pytest.mark.parametrize("value, message", [
    ('"B200X@1"', "unknown accelerator model 'B200X'"),
    ('"H100-SXM"', "supply_cut must be MODEL@HOURS"),
    ('"TPUv5p@1"', "no place of grid grid has TPUv5p"),
    ('"H100-SXM@13"', "supply_cut starts after the run ends"),
])
def test_a_bad_supply_cut_in_a_study_is_named(value, message):
    from scheduler.study.spec import SpecError, load_spec_text
    with pytest.raises(SpecError, match=message):
        load_spec_text(STUDY.replace('"h100-sxm@1+4"', value))
