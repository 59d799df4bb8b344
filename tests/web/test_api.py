"""The JSON API and /metrics: values equal to the engine's own state, permissions, CSRF and
clear errors.

The API serves the frame the engine driver last wrote; these tests check what it serves
against the engine that made the frame (its queue, runs, cluster state, tenants and books),
recomputed here from the engine's public surface.
"""

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
from channels.layers import InMemoryChannelLayer
from django.test import Client

from scheduler.live import live_frame, live_placement
from scheduler.simulate import Scenario
from tests import frames
from twin import models as m
from twin.live import broadcast
from twin.live.driver import EngineDriver
from twin.live.services import live_state_write

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]+="[^"]*",?)*\})? '
                    r'(-?[0-9.eE+-]+|NaN|[+-]Inf)$')
HOUR = 3600.0


def as_json(value):
    return json.loads(json.dumps(value))


@pytest.fixture(scope="module")
def scene():
    """dev-small (failures and physics on) at the first hour when three gangs queue; then a
    node drill on a running gang and a drained node, so the frame has interruptions, events
    and a rack out."""
    engine, _ = Scenario(preset="dev-small", days=2, seed=1).engine()
    for hour in range(1, 49):
        engine.run_until(hour * HOUR)
        if len(engine.queue) >= 3:
            break
    victim = next(r for r in engine.running.values() if r.state == "running")
    drilled = int(victim.placement.nodes[0])
    engine.command("drill", kind="node", target=drilled)
    drained = int(np.flatnonzero(engine.state.node_up & ~engine.state.node_drained)[-1])
    engine.command("drain_node", node=drained)
    return SimpleNamespace(engine=engine, frame=as_json(live_frame(engine)), drilled=drilled,
                           drained=drained, victim=victim.spec.name)


@pytest.fixture
def frame(scene):
    return scene.frame


@pytest.fixture
def live(db, frame, scene):
    live_state_write(seq=42, t_sim=frame["t"], frame=frames.frame(**frame, speed=120.0),
                     health="ok",
                     last_error="", speed=120.0, paused=False,
                     placement=as_json(live_placement(scene.engine)))
    return m.LiveState.objects.get()


# ----------------------------------------------------------------- the engine's own figures
def _index(e, run) -> int:
    return next(i for i, r in enumerate(e.runs) if r is run)


def engine_queue(e) -> list[str]:
    return [r.spec.name for r in sorted(e.queue.values(),
                                        key=lambda r: e.policy.order(r, e.tenants))]


def engine_running(e) -> list[str]:
    return [r.spec.name for r in sorted(e.running.values(), key=lambda r: (-r.gpus, _index(e, r)))]


def engine_util(e) -> dict:
    s = e.state
    free = np.bincount(s.gpu_node[s.gpu_owner < 0], minlength=s.node_up.size)
    up = s.node_up & ~s.node_drained
    return {"gpus": int(s.gpu_owner.size), "allocated": int(np.count_nonzero(s.gpu_owner >= 0)),
            "idle": int(free[up & ~s.node_spare].sum()),
            "spare": int(free[up & s.node_spare].sum()), "down": int(free[~up].sum())}


def engine_tenants(e) -> dict[str, int]:
    """GPUs per tenant: its running gangs' plus its services' replicas on ``gpu_owner``."""
    owner = e.state.gpu_owner
    used = {t: 0 for t in e.tenants.usage}
    for run in e.running.values():
        used[run.spec.tenant] += int(np.count_nonzero(owner == _index(e, run)))
    for s in e.fleet.services:
        used[s.spec.tenant] += int(np.count_nonzero(np.isin(owner,
                                                            [r.owner for r in s.replicas])))
    return used


def engine_jobs(e) -> dict:
    states = [r.state for r in e.runs]
    return {"queued": states.count("queued"),
            "running": states.count("running") + states.count("draining"),
            "recovering": states.count("detecting"), "in_cloud": states.count("cloud"),
            "done": states.count("done"), "preemptions": e.counters["preemptions"]}


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


def test_state_returns_the_engines_figures_with_health_and_seq(login, live, scene):
    e = scene.engine
    data = login("operator").get("/api/state").json()
    assert data["seq"] == 42 and data["health"] == "ok"
    assert data["speed"] == 120.0 and data["paused"] is False and data["updated_at"]
    assert data["t"] == e.now
    f = data["frame"]
    assert {k: f["util"][k] for k in ("gpus", "allocated", "idle", "spare", "down")} == \
        engine_util(e)
    assert f["util"]["gpus"] == 512 and f["util"]["down"] >= 8  # the drained node's GPUs
    led = e.horizon_ledger()
    assert f["ledger_gpu_hours"] == led.gpu_hours()
    assert (f["mfu"], f["goodput"]) == (led.mfu()["achieved"], round(led.goodput(), 6))
    assert f["jobs"] == engine_jobs(e)
    rel = e.reliability
    assert f["interruptions"]["by_cause"] == dict(sorted(rel.interruptions.items()))
    assert f["interruptions"]["by_cause"]["drill_node"] == 1
    assert f["failures"]["total"] == sum(rel.failures.values())
    assert f["inference"]["serving_gpus"] == sum(
        int(np.count_nonzero(np.isin(e.state.gpu_owner, [r.owner for r in s.replicas])))
        for s in e.fleet.services)
    p = e.physics.last_power
    assert f["power"]["it_mw"] == round(p.it_mw, 4)
    assert f["power"]["facility_mw"] == round(p.facility_mw, 4)


def test_jobs_returns_the_queue_in_policy_order_running_jobs_and_tenant_gpus(login, live,
                                                                                scene):
    e = scene.engine
    data = login("operator").get("/api/jobs").json()
    assert data["seq"] == 42
    assert data["jobs"] == engine_jobs(e)
    assert len(data["queue"]) >= 3
    assert [q["name"] for q in data["queue"]] == engine_queue(e)[:50]
    assert [q["position"] for q in data["queue"]] == list(range(1, len(data["queue"]) + 1))
    by_name = {r.spec.name: r for r in e.runs}
    for q in data["queue"]:
        r = by_name[q["name"]]
        assert (q["tenant"], q["gpus"], q["priority"]) == (r.spec.tenant, r.gpus, r.spec.priority)
    assert [j["name"] for j in data["running_jobs"]] == engine_running(e)[:50]
    for j in data["running_jobs"]:
        r = by_name[j["name"]]
        assert (j["gpus"], j["state"], j["tenant"]) == (r.gpus, r.state, r.spec.tenant)
        assert j["span"]["pods"] == int(np.unique(e.state.domain["pod"][r.placement.nodes]).size)
        assert 0 <= j["running_h"] <= round((e.now - r.first_start) / HOUR, 3)
    victim = next(j for j in data["running_jobs"] if j["name"] == scene.victim)
    assert (victim["state"], victim["mfu"]) == ("detecting", 0.0)
    assert {t["tenant"]: t["used_gpus"] for t in data["tenants"]} == engine_tenants(e)
    assert {t["tenant"]: t["quota_gpus"] for t in data["tenants"]} == {
        t: int(q) for t, q in e.tenants.quota.items()}


def test_events_are_the_stored_log_newest_first_with_filters_and_pages(login, live, scene):
    from twin.live.services import engine_events_store
    e = scene.engine
    log = list(e.events)
    engine_events_store(inventory=live.inventory, first_seq=0, events=log)
    client = login("operator")
    data = client.get("/api/events?per_page=500").json()
    assert data["total"] == len(log) and data["pages"] == 1
    assert [ev["text"] for ev in data["events"]] == [ev["text"] for ev in reversed(log)]
    assert [ev["kind"] for ev in data["events"][:2]] == ["drain", "drill"]
    drills = client.get("/api/events?kind=drill").json()["events"]
    assert [ev["text"] for ev in drills] == [
        f"drill node on {scene.drilled}: 1 job(s), "
        f"{next(r.gpus for r in e.runs if r.spec.name == scene.victim)} GPUs hit"]
    assert drills[0]["component"] == f"node {scene.drilled}"
    assert drills[0]["jobs"] == [scene.victim]
    # by job: every line that names the victim, and only those
    mine = client.get(f"/api/events?job={scene.victim}&per_page=500").json()["events"]
    assert mine and all(scene.victim in ev["jobs"] for ev in mine)
    assert len(mine) == sum(1 for ev in log if ev.get("job") == scene.victim
                            or scene.victim in (ev.get("jobs") or []))
    # pages of 3, newest first, no line twice: the first two pages hold the 6 newest lines,
    # or all of them when there are fewer (seed 1 since issue 29: one preemption before the
    # drill's interrupt, failure and drill lines and the drain, 5 lines: 3 + 2)
    assert len(log) > 3  # a second page to read
    first, second = (client.get(f"/api/events?per_page=3&page={p}").json() for p in (1, 2))
    assert first["pages"] == -(-len(log) // 3)
    assert len(first["events"]) == 3
    assert [ev["seq"] for ev in first["events"] + second["events"]] == list(
        range(len(log) - 1, max(len(log) - 7, -1), -1))


@pytest.mark.parametrize("query", ["page=0", "per_page=501", "page=x", "per_page=-1"])
def test_bad_event_paging_is_a_400(login, live, query):
    response = login("operator").get(f"/api/events?{query}")
    assert response.status_code == 400 and "page" in response.json()["error"]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_api_serves_the_figures_of_the_engine_the_driver_runs(async_client,
                                                                       demo_users):
    """A real driver (dev-small, seed 1) steps one wall-second apart at x3,600 until gangs
    queue: the API then serves the frame of its engine, figure for figure."""
    clock = FakeClock()
    driver = EngineDriver(preset="dev-small", seed=1, speed=3600.0, clock=clock,
                          layer=InMemoryChannelLayer(), snapshot_in_child=False)
    await driver.start()
    try:
        for _ in range(48):
            clock.now += 1.0
            await driver.step_once()
            if len(driver.engine.queue) >= 3:
                break
        await async_client.aforce_login(demo_users["operator"])
        state = (await async_client.get("/api/state")).json()
        jobs = (await async_client.get("/api/jobs")).json()
    finally:
        await driver.close(snapshot=False)
        broadcast._local_listeners.clear()
    e = driver.engine
    assert len(e.queue) >= 3 and e.now == pytest.approx(driver.steps * HOUR)
    assert (state["seq"], state["health"], state["t"]) == (driver.steps, "ok", e.now)
    f = state["frame"]
    assert {k: f["util"][k] for k in ("gpus", "allocated", "idle", "spare", "down")} == \
        engine_util(e)
    assert f["ledger_gpu_hours"] == e.horizon_ledger().gpu_hours()
    assert f["jobs"] == jobs["jobs"] == engine_jobs(e)
    assert [q["name"] for q in jobs["queue"]] == engine_queue(e)[:50]
    assert [j["name"] for j in jobs["running_jobs"]] == engine_running(e)[:50]
    assert {t["tenant"]: t["used_gpus"] for t in jobs["tenants"]} == engine_tenants(e)
    assert state["frame"]["events"] == as_json(list(e.events)[-50:])


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
    assert newest["requested_by"] is None and newest["requested_at"]  # staff names: staff only
    assert applied["outcome"]["gpus"] == 8 and applied["applied_at_sim"] == 3600.0


@pytest.mark.parametrize("limit", ["0", "201", "x"])
def test_drills_limit_must_be_a_small_positive_integer(login, limit):
    response = login("operator").get(f"/api/drills?limit={limit}")
    assert response.status_code == 400 and "limit" in response.json()["error"]


def test_a_rack_lists_the_engines_nodes_and_their_live_values(login, build, live, scene):
    """The inventory built from the preset the engine runs: rack ids are the core's."""
    build("--preset", "dev-small")
    e = scene.engine
    rack = int(e.plan.node_rack[scene.drained])
    data = login("operator").get(f"/api/racks/{rack}").json()
    assert data["id"] == rack
    ids = [int(n["hostname"].rpartition("-n")[2]) for n in data["nodes"]]
    assert ids == np.flatnonzero(e.plan.node_rack == rack).tolist()
    assert all(n["gpus"] == 8 and n["status"] == "ready" for n in data["nodes"])
    nodes = e.plan.node_rack == rack
    out = ~e.state.node_up[nodes] | e.state.node_drained[nodes]
    assert data["live"]["status"] == round(float(out.mean()), 4) > 0
    assert data["live"]["power_kw"] == round(float(e.physics.last_power.rack_kw[rack]), 4)
    assert data["live"]["outlet_c"] == round(float(e.physics.last_power.outlet_c[rack]), 4)
    # each node's live status and jobs are the engine's, beside the operator's status
    for n, node in zip(ids, data["nodes"], strict=True):
        assert node["id"] == n
        expected = ("down" if not e.state.node_up[n] else "drained" if e.state.node_drained[n]
                    else "spare" if e.state.node_spare[n] else "up")
        assert node["live_status"] == expected
        assert sorted(node["jobs"]) == sorted(r.spec.name for r in e.running.values()
                                              if n in r.placement.nodes.tolist())
    assert any(node["live_status"] == "drained" for node in data["nodes"])
    on_rack = {r.spec.name for r in e.running.values()
               if np.isin(r.placement.nodes, ids).any()}
    assert {j["name"] for j in data["jobs"]} == on_rack


def test_a_node_and_a_job_show_where_the_engine_placed_them(login, build, live, scene):
    build("--preset", "dev-small")
    e = scene.engine
    client = login("operator")
    run = max(e.running.values(), key=lambda r: r.gpus)
    nodes = sorted(run.placement.nodes.tolist())
    job = client.get(f"/api/jobs/{run.spec.name}").json()
    assert job["node_ids"] == nodes and job["gpus"] == run.gpus and job["state"] == run.state
    assert [r["id"] for r in job["racks"]] == sorted({int(e.plan.node_rack[n]) for n in nodes})
    node = client.get(f"/api/nodes/{nodes[0]}").json()
    assert node["id"] == nodes[0] and run.spec.name in node["jobs"]
    assert node["rack"] == int(e.plan.node_rack[nodes[0]])
    assert node["hostname"].endswith(f"-n{nodes[0]:06d}")
    drained = client.get(f"/api/nodes/{scene.drained}").json()
    assert drained["live_status"] == "drained" and drained["status"] == "ready"


@pytest.mark.parametrize("path", ["/api/nodes/99999", "/api/jobs/nope"])
def test_an_unknown_node_or_job_is_a_json_404(login, build, live, path):
    build("--preset", "dev-small")
    response = login("operator").get(path)
    assert response.status_code == 404 and "error" in response.json()


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
    ({"kind": "node", "target": "rack-7"}, "'rack-7' names nothing in this cluster"),
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
    settings.CSRF_FAILURE_VIEW = "twin.pages.views.csrf_failure"
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


def test_metrics_are_prometheus_text_with_the_engines_numbers(login, live, scene):
    e = scene.engine
    response = login("operator").get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = _samples(response.content.decode())
    util = engine_util(e)
    for state in ("allocated", "idle", "down", "spare"):
        assert samples[f'clustertwin_gpus{{state="{state}"}}'] == util[state]
    led = e.horizon_ledger()
    assert samples["clustertwin_mfu"] == pytest.approx(led.mfu()["achieved"], abs=1e-6)
    assert samples["clustertwin_goodput"] == pytest.approx(led.goodput(), abs=1e-6)
    rel = e.reliability
    assert samples['clustertwin_interruptions_total{kind="unplanned"}'] == rel.unplanned
    assert samples['clustertwin_interruptions_total{kind="planned"}'] == rel.planned
    assert samples["clustertwin_power_it_megawatts"] == pytest.approx(
        e.physics.last_power.it_mw, abs=1e-4)
    jobs = engine_jobs(e)
    for state in ("queued", "running", "recovering", "in_cloud", "done"):
        assert samples[f'clustertwin_jobs{{state="{state}"}}'] == jobs[state]
    assert samples["clustertwin_preemptions_total"] == e.counters["preemptions"]
    assert samples["clustertwin_simulated_seconds"] == e.now
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


def test_the_events_page_lists_the_stored_log_with_filters_and_pages(login, live, scene):
    from twin.live.services import engine_events_store
    log = list(scene.engine.events)
    engine_events_store(inventory=live.inventory, first_seq=0, events=log)
    client = login("operator")
    page = client.get("/events/?routine=1").content.decode()
    assert f"{len(log)} event" in page and log[-1]["text"] in page
    drills = client.get("/events/?kind=drill").content.decode()
    assert "1 event " in drills and "drill node on" in drills and log[0]["text"] not in drills
    if len(log) > 100:
        older = client.get("/events/?routine=1&page=2").content.decode()
        assert log[len(log) - 101]["text"] in older
    assert client.get("/events/?page=x").status_code == 400  # tests/web/test_events_filters.py
