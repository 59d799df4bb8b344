"""Incidents on the web: ``/api/incidents`` and the pages name components, nodes and jobs (not
engine ids), filter and search, refuse bad filters, and let only staff acknowledge (CSRF).

The frame is a real engine's, on the cluster the test database holds (dev-small), after a leaf
switch drill and a node drill; the names are checked against the inventory's rows."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from scheduler.control.drills import run_drill
from scheduler.live import live_frame
from scheduler.simulate import Scenario
from tests import frames
from twin import models as m
from twin.inventory.adapter import cluster_plan_read
from twin.live import services

pytestmark = pytest.mark.django_db
RUN = "run-incidents"
HOUR = 3600.0


@pytest.fixture
def scene(build):
    build("--preset", "dev-small")
    cluster = m.Cluster.objects.get()
    engine, _ = Scenario(preset="dev-small", days=1, seed=3).engine(cluster_plan_read(
        cluster=cluster))
    engine.run_until(6 * HOUR)
    rel = engine.reliability
    leaf = next(u for u in range(rel.units["leaf"])
                if rel._training_owners(rel.nodes_of("leaf", u)))
    leaf_hit = run_drill(engine, "leaf_switch", leaf, drill_id=5)
    other = int(next(n for n in range(engine.plan.n_nodes)
                     if n not in rel.nodes_of("leaf", leaf)))
    run_drill(engine, "node", other, drill_id=6)
    engine.run_until(engine.now + 60.0)
    frame = json.loads(json.dumps(live_frame(engine)))
    services.live_state_write(seq=1, t_sim=frame["t"], frame=frames.frame(**frame),
                              health="ok", last_error="", speed=60.0, paused=False,
                              inventory=RUN)
    services.engine_events_store(inventory=RUN, first_seq=0, events=list(engine.events))
    return {"engine": engine, "leaf": leaf, "leaf_hit": leaf_hit, "node": other,
            "frame": frame}


def _leaf_name(leaf: int) -> str:
    # the failure engine's leaf unit is the leaf's position among the switches (index order)
    return m.Switch.objects.filter(tier="leaf").order_by("index")[leaf].name


def _hostnames() -> list[str]:
    return list(m.Node.objects.order_by("id").values_list("hostname", flat=True))


def test_the_api_names_the_leaf_its_nodes_and_its_jobs(scene, login):
    body = login("operator").get("/api/incidents").json()
    assert body["live"] and body["counts"]["open"] == 2
    leaf = next(i for i in body["incidents"] if i["drill_id"] == 5)
    assert leaf["state"] == "open" and leaf["drill"] and leaf["cause"] == "drill_leaf_switch"
    assert leaf["component"]["kind"] == "switch"
    assert leaf["component"]["name"] == _leaf_name(scene["leaf"])
    assert leaf["component"]["url"].startswith("/switches/")
    hosts = _hostnames()
    nodes = scene["engine"].reliability.nodes_of("leaf", scene["leaf"]).tolist()
    assert [n["name"] for n in leaf["nodes"]] == [hosts[n] for n in nodes[:16]]
    assert leaf["nodes_count"] == len(nodes)
    cabled = set(m.Link.objects.filter(switch__name=leaf["component"]["name"],
                                       node__isnull=False).values_list("node__hostname",
                                                                       flat=True))
    assert cabled == {hosts[n] for n in nodes}  # the switch named is the one cabling them
    assert {j["name"] for j in leaf["jobs"]} <= set(scene["leaf_hit"]["jobs"])
    assert leaf["jobs_count"] == len(scene["leaf_hit"]["jobs"])
    assert all(j["url"] == f"/jobs/{j['name']}/" for j in leaf["jobs"])
    assert leaf["since"]["t_sim"] == pytest.approx(6 * HOUR)
    assert leaf["since"]["wall"] is not None  # wall clock (ISO), simulated time beside it
    assert leaf["expected_repair"]["t_sim"] > leaf["since"]["t_sim"]
    assert leaf["gpu_hours_lost"] > 0 and leaf["acknowledged_by"] is None
    node = next(i for i in body["incidents"] if i["drill_id"] == 6)
    assert node["component"]["name"] == hosts[scene["node"]]  # a hostname, not "host <id>"
    # worst first: the leaf took more GPUs down and hit more jobs
    assert [i["drill_id"] for i in body["incidents"]] == [5, 6]


def test_filters_and_search(scene, login):
    client = login("operator")
    assert len(client.get("/api/incidents?state=open").json()["incidents"]) == 2
    assert client.get("/api/incidents?state=resolved").json()["incidents"] == []
    name = _leaf_name(scene["leaf"])
    found = client.get(f"/api/incidents?q={name[2:].upper()}").json()["incidents"]
    assert [i["drill_id"] for i in found] == [5]  # a substring, any case
    job = scene["leaf_hit"]["jobs"][0]
    assert 5 in [i["drill_id"] for i in client.get(f"/api/incidents?q={job}").json()["incidents"]]
    assert client.get("/api/incidents?q=no-such-thing").json()["incidents"] == []
    bad = client.get("/api/incidents?state=bogus")
    assert bad.status_code == 400 and "state must be one of open, resolved" in bad.json()["error"]
    assert client.get("/api/incidents?q=" + "x" * 101).status_code == 400
    page = client.get("/incidents/?state=bogus")
    assert page.status_code == 400 and "state must be one of" in page.content.decode()


def test_the_pages_link_names(scene, login):
    client = login("operator")
    html = client.get("/incidents/").content.decode()
    name = _leaf_name(scene["leaf"])
    assert f">{name}</a>" in html and 'href="/incidents/' in html
    job = scene["leaf_hit"]["jobs"][0]
    assert f'href="/jobs/{job}/">{job}</a>' in html
    body = client.get("/api/incidents").json()
    leaf_id = next(i["id"] for i in body["incidents"] if i["drill_id"] == 5)
    page = client.get(f"/incidents/{leaf_id}/").content.decode()
    assert f">{name}</a>" in page and "drill #5" in page
    # the timeline holds the drill's own event (logged under its leaf unit)
    assert f"drill leaf_switch on {scene['leaf']}:" in page
    assert client.get("/incidents/999/").status_code == 404
    assert client.get("/api/incidents/999").status_code == 404


def test_only_staff_acknowledge_with_csrf(scene, demo_users):
    body = Client()
    body.force_login(demo_users["operator"])
    leaf_id = next(i["id"] for i in body.get("/api/incidents").json()["incidents"]
                   if i["drill_id"] == 5)
    url = f"/api/incidents/{leaf_id}/ack"
    assert body.post(url, "{}", content_type="application/json").status_code == 403

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(demo_users["staff"])
    assert strict.post(url, "{}", content_type="application/json").status_code == 403  # no token
    strict.get("/incidents/")
    token = strict.cookies["csrftoken"].value
    done = strict.post(url, "{}", content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert done.status_code == 200 and done.json()["acknowledged_by"] == "staff"
    again = strict.post(url, "{}", content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert again.status_code == 409
    seen = body.get("/api/incidents?q=staff").json()["incidents"]
    assert seen == [] and body.get("/api/incidents").json()["incidents"][0][
        "acknowledged_by"] == "staff"
    assert m.AuditEntry.objects.filter(action="incident_ack", username="staff").count() == 1


def test_no_frame_yet_is_not_an_error(db, login, demo_users):
    body = login("operator").get("/api/incidents").json()
    assert body == {"live": False, "t": None, "counts": None, "incidents": []}
