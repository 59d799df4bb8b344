"""The JSON API and /metrics: shapes, permissions, CSRF and clear errors."""

import json
import re

import pytest
from django.test import Client

from scheduler.live import live_frame
from scheduler.simulate import Scenario, run_scenario
from twin import models as m
from twin.services import live_state_write

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]+="[^"]*",?)*\})? '
                    r'(-?[0-9.eE+-]+|NaN|[+-]Inf)$')


@pytest.fixture(scope="module")
def frame():
    """A real live frame of the dev-small preset, with two events."""
    engine, _ = run_scenario(Scenario(preset="dev-small", days=0.05, seed=1))
    engine.log("failure", "drill_node on host 3: 1 job(s), 8 GPUs hit", cause="drill_node")
    engine.log("drill", "drill node on 3: 1 job(s), 8 GPUs hit", drill="node")
    return json.loads(json.dumps(live_frame(engine)))


@pytest.fixture
def live(db, frame):
    live_state_write(seq=42, t_sim=frame["t"], frame={**frame, "health": "ok"}, health="ok",
                     last_error="", speed=120.0, paused=False)
    return m.LiveState.objects.get()


def post_drill(client, body, **extra):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post("/api/drills", data=data, content_type="application/json", **extra)


# ----------------------------------------------------------------- reads
@pytest.mark.parametrize("path", ["/api/state", "/api/jobs", "/api/events", "/api/drills",
                                  "/api/racks/0"])
def test_anonymous_api_calls_get_a_json_401(client, db, path):
    response = client.get(path)
    assert response.status_code == 401
    assert response.json() == {"error": "authentication required"}


@pytest.mark.parametrize("path", ["/api/state", "/api/jobs", "/api/events"])
def test_before_the_engine_publishes_the_api_says_so(login, path):
    response = login("operator").get(path)
    assert response.status_code == 503
    assert "has not published a frame" in response.json()["error"]


def test_state_returns_the_latest_frame_with_health_and_seq(login, live, frame):
    data = login("operator").get("/api/state").json()
    assert data["seq"] == 42 and data["health"] == "ok"
    assert data["speed"] == 120.0 and data["paused"] is False and data["updated_at"]
    assert data["t"] == frame["t"]
    util = data["frame"]["util"]
    assert util["allocated"] + util["idle"] + util["spare"] + util["down"] == util["gpus"] == 512
    assert set(data["frame"]) >= {"mfu", "loss_pp", "goodput", "jobs", "queue",
                                  "running_jobs", "tenants", "failures", "events", "heatmaps"}


def test_jobs_returns_the_queue_running_jobs_and_tenants(login, live, frame):
    data = login("operator").get("/api/jobs").json()
    assert data["seq"] == 42
    assert data["jobs"] == frame["jobs"]
    assert data["running_jobs"] == frame["running_jobs"] and data["running_jobs"]
    job = data["running_jobs"][0]
    assert set(job) >= {"name", "tenant", "gpus", "state", "model", "span", "mfu", "running_h"}
    assert {t["tenant"] for t in data["tenants"]} == {t["tenant"] for t in frame["tenants"]}
    assert isinstance(data["queue"], list)


def test_events_lists_the_frames_events_and_filters_by_kind(login, live):
    client = login("operator")
    events = client.get("/api/events").json()["events"]
    assert [e["kind"] for e in events[-2:]] == ["failure", "drill"]
    drills = client.get("/api/events?kind=drill").json()["events"]
    assert [e["text"] for e in drills] == ["drill node on 3: 1 job(s), 8 GPUs hit"]


def test_drills_lists_recent_drills_newest_first(login, demo_users):
    m.Drill.objects.create(kind="node", target="3", requested_by=demo_users["staff"],
                           status=m.DrillStatus.APPLIED, applied_at_sim=3600.0,
                           outcome={"jobs": ["a"], "gpus": 8, "repair_s": 14400.0})
    m.Drill.objects.create(kind="power_cap", target="all", params={"fraction": 0.7},
                           requested_by=demo_users["staff"])
    drills = login("operator").get("/api/drills").json()["drills"]
    assert [d["kind"] for d in drills] == ["power_cap", "node"]
    newest, applied = drills
    assert newest["status"] == "pending" and newest["params"] == {"fraction": 0.7}
    assert newest["requested_by"] == "staff" and newest["requested_at"]
    assert applied["outcome"]["gpus"] == 8 and applied["applied_at_sim"] == 3600.0


@pytest.mark.parametrize("limit", ["0", "201", "x"])
def test_drills_limit_must_be_a_small_positive_integer(login, limit):
    response = login("operator").get(f"/api/drills?limit={limit}")
    assert response.status_code == 400 and "limit" in response.json()["error"]


def test_a_rack_lists_its_nodes_and_live_values(login, small_cluster, live, frame):
    data = login("operator").get("/api/racks/0").json()
    first = m.Rack.objects.filter(hall__site__cluster=small_cluster).order_by("pk").first()
    assert data["id"] == 0 and data["name"] == first.name
    assert [n["hostname"] for n in data["nodes"]] == list(
        first.nodes.order_by("slot").values_list("hostname", flat=True))
    assert data["nodes"][0]["gpus"] > 0 and data["nodes"][0]["status"] == "ready"
    y, x = data["cell"]
    assert data["live"]["power_kw"] == frame["heatmaps"]["racks"]["power_kw"]["z"][y][x]
    assert data["jobs"] is None and "placement" in data["jobs_note"]


def test_an_unknown_rack_is_a_json_404(login, small_cluster):
    response = login("operator").get("/api/racks/9999")
    assert response.status_code == 404
    assert "rack 9999 does not exist" in response.json()["error"]


# ----------------------------------------------------------------- POST /api/drills
def test_operator_cannot_request_a_drill(login):
    response = post_drill(login("operator"), {"kind": "node"})
    assert response.status_code == 403
    assert "twin.run_drill" in response.json()["error"]
    assert not m.Drill.objects.exists()


@pytest.mark.parametrize("body, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", 'JSON object with a "kind"'),
    ({"target": "random"}, 'JSON object with a "kind"'),
    ({"kind": "meteor"}, "unknown drill 'meteor'"),
    ({"kind": "storage_slowdown", "factor": 3}, "factor must be at most 1"),
    ({"kind": "storage_slowdown", "factor": "half"}, "factor must be a positive number"),
    ({"kind": "inference_surge", "factor": -2}, "factor must be a positive number"),
    ({"kind": "node", "factor": 0.5}, "a node drill takes no parameters"),
    ({"kind": "node", "target": "rack-7"}, "targets 'random' or a non-negative id"),
])
def test_a_bad_drill_request_is_a_400_with_a_message_and_creates_nothing(login, body, message):
    response = post_drill(login("staff"), body)
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert not m.Drill.objects.exists()


def test_staff_request_a_drill_and_get_its_id(login, demo_users):
    response = post_drill(login("staff"), {"kind": "storage_slowdown", "target": "random",
                                           "factor": 0.25, "duration_s": 1800})
    assert response.status_code == 202
    drill = m.Drill.objects.get()
    assert response.json() == {"id": drill.pk, "status": "pending",
                               "kind": "storage_slowdown", "target": "random"}
    assert drill.params == {"factor": 0.25, "duration_s": 1800.0}
    assert drill.requested_by == demo_users["staff"]


def test_drill_requests_need_a_csrf_token(demo_users):
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo_users["staff"])
    refused = post_drill(client, {"kind": "node"})
    assert refused.status_code == 403
    assert not m.Drill.objects.exists()
    client.get("/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    accepted = post_drill(client, {"kind": "node"}, HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 202
    assert m.Drill.objects.get().pk == accepted.json()["id"]


def test_the_csrf_failure_view_answers_the_api_in_json(demo_users, settings):
    settings.CSRF_FAILURE_VIEW = "twin.views.csrf_failure"
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo_users["staff"])
    response = post_drill(client, {"kind": "node"})
    assert response.status_code == 403
    assert "X-CSRFToken" in response.json()["error"]


# ----------------------------------------------------------------- /metrics
def _samples(text):
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a Prometheus sample: {line!r}"
        samples[line.rsplit(" ", 1)[0]] = float(match.group(4))
    return samples


def test_metrics_are_prometheus_text_with_the_frames_numbers(login, live, frame):
    response = login("operator").get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = _samples(response.content.decode())
    util = frame["util"]
    for state in ("allocated", "idle", "down", "spare"):
        assert samples[f'clustertwin_gpus{{state="{state}"}}'] == util[state]
    assert samples["clustertwin_mfu"] == pytest.approx(frame["mfu"])
    assert samples["clustertwin_goodput"] == pytest.approx(frame["goodput"])
    assert samples['clustertwin_interruptions_total{kind="unplanned"}'] == \
        frame["interruptions"]["unplanned"]
    assert samples["clustertwin_power_it_megawatts"] == pytest.approx(frame["power"]["it_mw"])
    assert samples['clustertwin_jobs{state="running"}'] == frame["jobs"]["running"]
    assert samples['clustertwin_engine_health{state="ok"}'] == 1
    assert samples['clustertwin_engine_health{state="error"}'] == 0
    assert samples["clustertwin_frame_seq"] == 42
    assert "clustertwin_websocket_drops_total" in samples


def test_metrics_before_the_engine_ran_report_no_health_and_parse(login):
    samples = _samples(login("operator").get("/metrics").content.decode())
    assert all(samples[f'clustertwin_engine_health{{state="{s}"}}'] == 0
               for s in ("starting", "ok", "error", "stopped"))
    assert "clustertwin_mfu" not in samples
    assert "clustertwin_websocket_drops_total" in samples
