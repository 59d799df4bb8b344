"""Dashboard pages: login required, navigation by role, everything served from our own host."""

import re

import pytest

from twin import models as m

PAGES = ["/", "/topology/", "/jobs/", "/failures/", "/events/"]
PLOTLY = "/static/vendor/plotly/plotly.min.js"


@pytest.mark.parametrize("path", PAGES + ["/drills/"])
def test_anonymous_visitors_are_sent_to_login(client, db, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("path", PAGES)
def test_operator_opens_every_page(login, small_cluster, path):
    page = login("operator").get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="stale-banner"' in html and "Live data stale — reconnecting…" in html
    assert "/static/js/twin-live.js" in html


@pytest.mark.parametrize("path", PAGES)
def test_pages_work_before_any_cluster_is_built(login, path):
    assert login("operator").get(path).status_code == 200


def test_operator_sees_no_drills_link_and_no_engine_controls(login, small_cluster):
    html = login("operator").get("/").content.decode()
    assert 'href="/drills/"' not in html
    assert 'id="engine-controls"' not in html
    assert 'href="/admin/"' not in html
    for label in ("Overview", "Topology", "Jobs", "Failures"):
        assert f">{label}</a>" in html


@pytest.mark.parametrize("username", ["staff", "admin"])
def test_staff_with_the_drill_permission_see_the_drills_link_and_engine_controls(
        login, small_cluster, username):
    html = login(username).get("/").content.decode()
    assert 'href="/drills/"' in html
    assert 'id="engine-controls"' in html
    assert 'href="/admin/"' in html


def test_staff_without_the_drill_permission_see_no_drills_link(login, demo_users, small_cluster):
    demo_users["staff"].user_permissions.clear()
    client = login("staff")
    assert 'href="/drills/"' not in client.get("/").content.decode()
    assert client.get("/drills/").status_code == 403


def test_operator_is_forbidden_from_the_drills_page(login, small_cluster):
    response = login("operator").get("/drills/")
    assert response.status_code == 403
    assert b"twin.run_drill" in response.content


@pytest.mark.parametrize("path", PAGES + ["/drills/"])
def test_pages_link_nothing_outside_this_host(login, small_cluster, path):
    html = login("staff").get(path).content.decode()
    assert "http://" not in html and "https://" not in html
    assert re.findall(r'<script src="([^"]+)"', html)
    for src in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert src.startswith("/"), src


@pytest.mark.parametrize("path", [p for p in PAGES if p != "/events/"])  # a table, no chart
def test_charting_pages_load_plotly_from_our_static_files(login, small_cluster, path):
    html = login("operator").get(path).content.decode()
    assert f'<script src="{PLOTLY}" defer></script>' in html


@pytest.mark.parametrize("path", [PLOTLY, "/static/js/twin-live.js", "/static/js/twin-panels.js",
                                  "/static/js/overview.js", "/static/js/topology.js",
                                  "/static/js/jobs.js", "/static/js/failures.js",
                                  "/static/js/drills.js", "/static/css/twin.css"])
def test_static_assets_are_served(client, db, path):
    response = client.get(path)
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert len(body) > 100


def test_the_websocket_client_follows_the_page_host_and_reconnects(client, db):
    response = client.get("/static/js/twin-live.js")
    js = b"".join(response.streaming_content).decode()
    assert "location.host" in js and "/ws/twin/" in js
    assert "ws://" not in js and "localhost" not in js and "127.0.0.1" not in js
    assert '"wss"' in js  # https pages use wss
    assert "resync" in js and "BACKOFF_MAX_MS = 30000" in js


def test_topology_page_maps_every_rack_to_its_floor_cell(login, small_cluster):
    page = login("operator").get("/topology/")
    rack_map = page.context["rack_map"]
    racks = m.Rack.objects.filter(hall__site__cluster=small_cluster).order_by("pk")
    assert len(rack_map["racks"]) == racks.count() > 0
    for (y, x), rack in zip(rack_map["racks"], racks, strict=True):
        assert x == rack.column and y % rack_map["rows_per_hall"] == rack.row
    assert b'id="rack-map"' in page.content


@pytest.mark.parametrize("path, ids", [
    ("/", ["gpus-allocated", "gpus-idle", "gpus-down", "jobs-queued", "jobs-running",
           "interruptions", "mfu", "goodput", "it-mw", "series-chart", "mfu-waterfall",
           "event-log", "gpus"]),
    ("/topology/", ["link-heatmaps", "rack-status", "rack-power", "rack-temp", "rack-detail",
                    "storage-chart"]),
    ("/jobs/", ["queue-rows", "running-rows", "tenant-rows", "tenant-chart"]),
    ("/failures/", ["interruptions-chart", "mttf-rows", "spares-free", "repairs-pending",
                    "lemon-nodes"]),
])
def test_pages_carry_the_element_ids_their_scripts_fill(login, small_cluster, path, ids):
    html = login("operator").get(path).content.decode()
    for element_id in ids:
        assert f'id="{element_id}"' in html, element_id


def test_the_repairs_pending_counter_leads_to_the_incidents(login, small_cluster):
    """Issue 27: '5 repairs pending' on Failures was not a link."""
    html = login("operator").get("/failures/").content.decode()
    assert '<a href="/incidents/" id="repairs-pending-link">repairs pending</a>' in html
    assert login("operator").get("/incidents/").status_code == 200
