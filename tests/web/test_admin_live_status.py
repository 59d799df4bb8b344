"""The admin shows what the running engine last reported about each row ("live (engine)")
beside the status the operator set ("status (operator)"), read once per page."""

import re
from dataclasses import replace

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests import frames
from tests.web.test_driver import drivers  # noqa: F401  (the fixture)
from twin import models as m
from twin.control import edits as inventory_services
from twin.inventory.adapter import EngineIds, cluster_plan_write
from twin.live import services as live_services


@pytest.fixture
def clusters(db, small_plan, settings):
    """Another cluster, then the live one ("tiny", CLUSTERTWIN_CLUSTER): 12 nodes, 4 per
    rack, node 11 spare."""
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "CLUSTER": small_plan.name}
    other = cluster_plan_write(replace(small_plan, name="other"))
    return other, cluster_plan_write(small_plan)


def nodes_of(cluster):
    return list(m.Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id"))


def placement(**runs):
    """A placement as the engine writes it, at t = 1 h; ``runs`` override its node runs."""
    return frames.placement(**{
        "t": 3600.0, "spare": [[11, 11]],
        "jobs": {"llm": {"gpus": 16, "nodes": [[2, 3]], "gpu_runs": [[16, 31]]}}, **runs})


def engine_wrote(value: dict) -> None:
    live_services.live_state_write(seq=1, t_sim=value["t"], frame=frames.frame(t=value["t"]),
                                   health="ok", last_error="", speed=1.0, paused=False,
                                   placement=value)


def cells(html: str, pk: int, *fields: str) -> tuple[str, ...]:
    """The text of ``fields``' cells in the changelist row of ``pk``."""
    row = next(r for r in re.findall(r"<tr>.*?</tr>", html, re.S)
               if f'value="{pk}" class="action-select"' in r)
    return tuple(re.search(rf'class="field-{f}[^"]*">(?:<a [^>]*>)?(.*?)(?:</a>)?</t[dh]>',
                           row, re.S).group(1).strip() for f in fields)


def test_without_a_live_engine_the_column_says_so(clusters, admin_client):
    _, live = clusters
    html = admin_client.get("/admin/twin/node/").content.decode()
    assert "Status (operator)</a>" in html and "Live (engine)</span>" in html
    assert "<h2>live (engine): no live engine has reported yet</h2>" in html
    assert cells(html, nodes_of(live)[0].pk, "operator_status", "live_engine") == (
        "ready", "no live engine")


def test_the_node_list_shows_the_engines_live_status_beside_the_operators(
        clusters, admin_client):
    other, live = clusters
    nodes = nodes_of(live)
    inventory_services.nodes_drain(nodes=m.Node.objects.filter(pk=nodes[5].pk))  # operator only
    # the engine took node 1 down (a failure) and drained node 4 (a lemon) by itself
    engine_wrote(placement(down=[[1, 1]], drained=[[4, 4]]))
    html = admin_client.get("/admin/twin/node/").content.decode()
    assert "<h2>live (engine): the running engine at t = 1.00 h (simulated)" in html
    assert cells(html, nodes[1].pk, "operator_status", "live_engine") == ("ready", "down")
    assert cells(html, nodes[4].pk, "operator_status", "live_engine") == (
        "ready", "drained")
    assert cells(html, nodes[5].pk, "operator_status", "live_engine") == (
        "drained", "in service")  # the drain has not reached the engine (yet)
    assert cells(html, nodes[3].pk, "live_engine") == ("in service; jobs: llm",)
    assert cells(html, nodes[11].pk, "live_engine") == ("spare",)
    assert cells(html, nodes_of(other)[1].pk, "live_engine") == ("not in the live engine",)


def test_the_node_form_shows_the_live_status_with_its_time(clusters, admin_client):
    _, live = clusters
    engine_wrote(placement())
    node = nodes_of(live)[2]
    html = admin_client.get(f"/admin/twin/node/{node.pk}/change/").content.decode()
    assert re.search(r"<label>Live \(engine\):</label>\s*<div class=\"readonly\">"
                     r"in service; jobs: llm \(at t = 1.00 h \(simulated\)\)</div>", html)


def test_the_rack_list_counts_the_live_statuses_of_its_nodes(clusters, admin_client):
    _, live = clusters
    engine_wrote(placement(down=[[1, 1]], drained=[[2, 2]]))
    racks = list(m.Rack.objects.filter(hall__site__cluster=live).order_by("id"))
    html = admin_client.get("/admin/twin/rack/").content.decode()
    assert cells(html, racks[0].pk, "live_engine") == (
        "2 of 4 in service, 1 down, 1 drained; jobs: llm",)
    assert cells(html, racks[2].pk, "live_engine") == ("3 of 4 in service, 1 spare",)


def test_switch_and_link_lists_show_what_the_engine_reports_out(small_cluster, admin_client):
    live = small_cluster
    ids = EngineIds(live)
    spine = m.Switch.objects.filter(cluster=live, tier="spine").order_by("index").first()
    uplinks = list(m.Link.objects.filter(cluster=live, peer_switch__isnull=False)
                   .order_by("id"))
    nic = m.Link.objects.get(cluster=live, node=nodes_of(live)[0], node_port=1)
    engine_wrote(placement(switches_down=[[spine.index, spine.index]],
                           links_down=[[ids.link(uplinks[3].pk)] * 2], gpus_down=[[1, 1]]))
    html = admin_client.get("/admin/twin/switch/", {"tier": "spine"}).content.decode()
    assert cells(html, spine.pk, "operator_status", "live_engine") == ("up", "down")
    html = admin_client.get("/admin/twin/link/", {"o": "1"}).content.decode()  # by id: cables
    assert cells(html, uplinks[3].pk, "live_engine") == ("down",)
    assert cells(html, uplinks[4].pk, "live_engine") == ("up",)
    html = admin_client.get("/admin/twin/link/", {"q": nic.node.hostname}).content.decode()
    assert cells(html, nic.pk, "operator_status", "live_engine") == (
        "up", "down, its GPU is out")


def test_a_placement_from_before_switches_were_reported_says_so(clusters, admin_client):
    # an older engine's placement, raw: only the keys every version wrote
    engine_wrote({"t": 0.0, "jobs": {}, "down": [], "drained": [], "spare": []})
    html = admin_client.get("/admin/twin/switch/").content.decode()
    assert "not reported by the live engine" in html


@pytest.mark.parametrize("path", ["node", "rack", "switch", "link"])
def test_the_live_column_reads_the_placement_once_per_page(clusters, admin_client, small_plan,
                                                           path, settings):
    engine_wrote(placement(down=[[0, 5]]))
    with CaptureQueriesContext(connection) as small:
        assert admin_client.get(f"/admin/twin/{path}/").status_code == 200
    cluster_plan_write(replace(small_plan, name="tiny3"))  # more rows; now the live cluster
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "CLUSTER": "tiny3"}
    with CaptureQueriesContext(connection) as bigger:
        assert admin_client.get(f"/admin/twin/{path}/").status_code == 200
    assert len(bigger) == len(small)
    assert sum("twin_livestate" in q["sql"] for q in bigger.captured_queries) == 1


# ----------------------------------------------------------------- with a running engine
def _stored_storage(cluster) -> None:
    m.StorageSystem.objects.create(cluster=cluster, name="pfs", tier="central", capacity_tb=1e3,
                                   read_gb_s=200.0, write_gb_s=100.0, gpudirect=True,
                                   status="degraded", degraded_factor=0.25)


def _admin_page(path: str) -> str:
    from django.contrib.auth import get_user_model
    admin, _ = get_user_model().objects.get_or_create(username="admin", is_staff=True,
                                                      is_superuser=True)
    client = Client()
    client.force_login(admin)
    return client.get(path).content.decode()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_running_engine_starts_degraded_and_its_placement_shows_in_the_admin(
        drivers, small_plan):  # noqa: F811
    cluster = await database_sync_to_async(cluster_plan_write)(small_plan)
    await database_sync_to_async(_stored_storage)(cluster)
    driver = await drivers(speed=3600.0)
    assert driver.engine.costs.storage_factor == 0.25  # a fresh engine starts degraded
    driver.engine.command("drain_node", node=6)  # the engine's own change, not the operator's
    driver.clock.now += 2.0
    await driver.step_once()
    html = await database_sync_to_async(_admin_page)("/admin/twin/storagesystem/")
    pfs = await database_sync_to_async(m.StorageSystem.objects.get)(name="pfs")
    assert cells(html, pfs.pk, "operator_status", "live_engine") == (
        "degraded", "degraded, 25% of its bandwidth left")
    node = (await database_sync_to_async(nodes_of)(cluster))[6]
    html = await database_sync_to_async(_admin_page)(f"/admin/twin/node/?q={node.hostname}")
    operator, engine = cells(html, node.pk, "operator_status", "live_engine")
    assert operator == "ready" and engine.startswith("drained")
    assert f"t = {driver.engine.now / 3600:.2f} h" in html
