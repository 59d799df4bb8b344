"""``/api/heatmap`` and the topology page's names: a zoom serves one pod, block of switches or
hall at full resolution, named from the inventory; bad parameters are one clear 400; anonymous
users are refused; the fleet view keeps a single hot link visible at 100,000 GPUs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scheduler.frames import LINK_SCALE, OUTLET_SCALE, link_detail, link_heatmaps
from scheduler.live import live_frame, live_placement
from scheduler.presets import get_preset
from tests import frames
from tests.core.factories import job, run_engine, workload
from twin import models as m
from twin.inventory.adapter import cluster_plan_write
from twin.live import services

pytestmark = pytest.mark.django_db


def as_json(value):
    return json.loads(json.dumps(value))


def _publish(frame: dict, placement: dict) -> None:
    services.live_state_write(seq=3, t_sim=frame["t"], frame=frame, health="ok",
                              last_error="", speed=60.0, paused=False, placement=placement)


@pytest.fixture
def small_live(small_plan):
    """The tiny inventory, and a live engine on the same plan with a job crossing leaves and
    one leaf uplink failed."""
    cluster = cluster_plan_write(small_plan)
    engine = run_engine(small_plan, workload(job(gpus=48, hours=10)), physics=True,
                        physics_tick_s=600.0, until_h=1)
    engine.command("link_down", link=1)
    engine.run_until(engine.now + 700.0)
    _publish(as_json(live_frame(engine)), as_json(live_placement(engine)))
    return cluster, engine


def test_a_pod_zoom_names_every_leaf_and_shows_each_links_own_utilisation(small_live, login):
    cluster, engine = small_live
    f = engine.plan.fabric
    pod = int(f.switch_pod[f.link_a[0]])
    body = login("operator").get(f"/api/heatmap?tier=leaf-spine&pod={pod}").json()
    leaves = np.unique(f.link_a[(f.link_kind == 0) & (f.switch_pod[f.link_a] == pod)])
    assert body["ids"] == leaves.tolist()
    names = dict(m.Switch.objects.filter(cluster=cluster).values_list("index", "name"))
    assert body["names"] == [names[i] for i in leaves.tolist()]
    assert all(n.startswith("tiny-leaf") or "leaf" in n for n in body["names"])
    util = engine.physics.last_load.utilisation
    first = np.flatnonzero((f.link_a == leaves[0]) & (f.link_kind == 0))
    for slot, link in enumerate(first.tolist()):
        expected = 0.0 if link == 1 else round(float(util[link]), 4)
        assert body["z"][0][slot] == pytest.approx(expected, abs=1e-4)
    assert body["scale"] == LINK_SCALE


def test_a_failed_link_is_marked_in_the_zoom(small_live, login):
    _, engine = small_live
    f = engine.plan.fabric
    leaf = int(f.link_a[1])
    body = login("operator").get(f"/api/heatmap?tier=leaf-spine&first={leaf}&last={leaf}").json()
    slot = int(np.searchsorted(np.flatnonzero((f.link_a == leaf) & (f.link_kind == 0)), 1))
    assert body["down"] == [[int(s == slot) for s in range(len(body["z"][0]))]]
    assert body["links_down"] == 1


def test_a_hall_zoom_names_its_racks_on_the_models_temperature_scale(small_live, login):
    cluster, engine = small_live
    body = login("operator").get("/api/heatmap?tier=outlet_c&hall=0").json()
    racks = list(m.Rack.objects.filter(hall__site__cluster=cluster).order_by("pk")
                 .values_list("name", flat=True))
    plan = engine.plan
    in_hall = np.flatnonzero(plan.rack_hall == 0)
    for r in in_hall.tolist():
        y, x = int(plan.rack_row[r]), int(plan.rack_col[r])
        assert body["ids"][y][x] == r and body["names"][y][x] == racks[r]
        assert body["z"][y][x] == pytest.approx(engine.physics.last_power.outlet_c[r], abs=0.01)
    assert body["scale"] == OUTLET_SCALE
    assert body["hall"] == m.DataHall.objects.filter(site__cluster=cluster).order_by("pk")[0].name


@pytest.mark.parametrize("query, message", [
    ("", "tier is required"),
    ("tier=leaf-spine", "needs pod, or first and last"),
    ("tier=leaf-spine&pod=x", "pod must be a non-negative integer"),
    ("tier=leaf-spine&pod=-1", "pod must be a non-negative integer"),
    ("tier=leaf-spine&pod=1e3", "pod must be a non-negative integer"),
    ("tier=leaf-spine&pod=9999", "pod 9999 has no leaf-spine switches"),
    ("tier=leaf-spine&first=5&last=2", "before first"),
    ("tier=global&pod=0", "unknown tier"),
    ("tier=outlet_c", "needs hall"),
    ("tier=outlet_c&hall=7", "hall 7 does not exist"),
])
def test_bad_parameters_are_one_clear_400(small_live, login, query, message):
    before = m.LiveState.objects.get().placement
    response = login("operator").get("/api/heatmap?" + query)
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert m.LiveState.objects.get().placement == before  # nothing changed


def test_anonymous_users_are_refused_and_posts_are_not_allowed(small_live, client, login):
    assert client.get("/api/heatmap?tier=leaf-spine&pod=0").status_code == 401
    assert login("operator").post("/api/heatmap?tier=leaf-spine&pod=0").status_code in (403, 405)


def test_without_a_frame_or_full_resolution_values_the_api_says_why(db, login, small_plan):
    cluster_plan_write(small_plan)
    assert login("operator").get("/api/heatmap?tier=leaf-spine&pod=0").status_code == 503
    _publish(frames.frame(t=1.0), frames.placement(t=1.0, heat=None))  # an older engine's
    response = login("operator").get("/api/heatmap?tier=leaf-spine&pod=0")
    assert response.status_code == 404 and "full-resolution" in response.json()["error"]


def test_the_topology_page_carries_switch_rack_and_hall_names(small_live, login):
    cluster, _ = small_live
    html = login("operator").get("/topology/").content.decode()
    start = html.index('id="heatmap-names"')
    names = json.loads(html[html.index(">", start) + 1:html.index("</script>", start)])
    switches = dict(m.Switch.objects.filter(cluster=cluster).values_list("index", "name"))
    assert names["switches"] == [switches[i] for i in range(len(switches))]
    assert names["racks"] == list(m.Rack.objects.filter(hall__site__cluster=cluster)
                                  .order_by("pk").values_list("name", flat=True))


def test_at_100k_gpus_one_hot_link_tops_its_fleet_cell_and_the_zoom_names_it(login):
    plan = get_preset("hyperscale-100k").plan()
    assert plan.node_gpus.sum() >= 100_000
    cluster = cluster_plan_write(plan)
    f = plan.fabric
    link = int(np.flatnonzero(f.link_kind == 0)[70_000])
    leaf, pod = int(f.link_a[link]), int(f.switch_pod[f.link_a[link]])
    util = np.full(f.link_a.size, 0.03)
    util[link] = 1.0
    fleet = next(fr for fr in link_heatmaps(f, util) if fr["tier"] == "leaf-spine")
    _publish(frames.frame(**as_json({"t": 10.0, "heatmaps": {"links": [fleet]}})),
             frames.placement(**as_json({"t": 10.0,
                                         "heat": {"links": link_detail(f, util), "racks": {}}})))
    operator = login("operator")
    state = operator.get("/api/state").json()["frame"]["heatmaps"]["links"][0]
    row = next(i for i, (a, b) in enumerate(state["rows"]) if a <= leaf <= b)
    assert state["rows_per_cell"] > 1 and max(state["z"][row]) >= 1.0
    body = operator.get(f"/api/heatmap?tier=leaf-spine&pod={pod}").json()
    name = m.Switch.objects.get(cluster=cluster, index=leaf).name
    y = body["names"].index(name)
    assert body["ids"][y] == leaf
    hot = [(body["names"][r], c) for r, cells in enumerate(body["z"])
           for c, v in enumerate(cells) if v == 1.0]
    slot = int(np.searchsorted(np.flatnonzero((f.link_a == leaf) & (f.link_kind == 0)), link))
    assert hot == [(name, slot)]
