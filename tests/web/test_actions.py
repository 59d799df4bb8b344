"""Staff actions on the live twin (issue 16): a job's hold, release, cancel, requeue and
priority, a node's drain and resume, ending a drill.  Staff only (an operator sees no button and
a forged POST is refused), validated against the live state before anything is written, audited
with the user, sent to the engine; the API answers JSON 202/400/403/404/415/503."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from tests import frames
from tests.web.test_driver import FakeClock, commands_arrived, drivers, request_drill  # noqa: F401
from twin import models as m
from twin.control import actions as services_actions
from twin.control import edits as inventory_services
from twin.live import services as live_services
from twin.live.engine_commands import CommandError, command_parse

pytestmark = pytest.mark.django_db
RUN = "run-actions"


BIG_9 = [1, "big-9", "acme", 512, 1, 1.5, None, ""]  # a queue row (scheduler.live)


def placement(queue=(BIG_9,), queue_total=1):
    """train-7 running on nodes 0-1, held-3 held, ``queue`` the placement's queue rows (of
    ``queue_total`` queued)."""
    return frames.placement(
        t=7200.0,
        jobs={"train-7": {"gpus": 16, "tenant": "acme", "nodes": [[0, 1]],
                          "gpu_runs": [[0, 15]]}},
        held=[{"name": "held-3", "tenant": "acme", "gpus": 8, "priority": 2,
               "reason": "JobHeldUser", "wait_h": 0.5}],
        queue=list(queue), queue_total=queue_total)


def frame(queued=1):
    return frames.frame(t=7200.0, jobs={"queued": queued},
                        queue=[{"position": 1, "name": "big-9", "tenant": "acme", "gpus": 512,
                                "priority": 1, "wait_h": 1.5}])


@pytest.fixture
def sent(monkeypatch):
    """Commands the services hand to the live engine."""
    out = []
    monkeypatch.setattr(services_actions, "command_send",
                        lambda command, **params: out.append((command, params)))
    return out


@pytest.fixture
def live(small_cluster, sent):
    live_services.live_state_write(seq=1, t_sim=7200.0, frame=frame(), health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN, placement=placement())
    m.EngineEvent.objects.create(inventory=RUN, seq=1, t_sim=10.0, kind="finish", component="",
                                 jobs=",old-1,", text="old-1 finished")
    return small_cluster


def post_json(client, url, body, **extra):
    return client.post(url, json.dumps(body), content_type="application/json", **extra)


def audit():
    return list(m.AuditEntry.objects.order_by("id").values_list("username", "action", "target"))


# ----------------------------------------------------------------- jobs
@pytest.mark.parametrize("job, action, body, state", [
    ("big-9", "hold", {}, "queued"),
    ("held-3", "release", {}, "held"),
    ("train-7", "cancel", {}, "running"),
    ("train-7", "requeue", {}, "running"),
    ("big-9", "priority", {"priority": 40}, "queued"),
])
def test_staff_act_on_a_job_and_the_action_is_audited_and_sent(live, login, sent, job, action,
                                                                body, state):
    r = post_json(login("staff"), f"/api/jobs/{job}/actions", {"action": action, **body})
    assert r.status_code == 202, r.content
    assert r.json()["status"] == "sent" and r.json()["state_before"] == state
    assert audit() == [("staff", f"job {action}", job)]
    assert sent == [(f"job_{action}", {"job": job, "by": "staff", **body})]


@pytest.mark.parametrize("job, body, status, message", [
    ("train-7", {"action": "hold"}, 400, "job train-7 is running: only queued jobs can be held"),
    ("big-9", {"action": "release"}, 400, "not held: there is nothing to release"),
    ("held-3", {"action": "requeue"}, 400, "only running jobs can be requeued"),
    ("big-9", {"action": "priority", "priority": 5000}, 400, "priority must be at most 1,000"),
    ("big-9", {"action": "priority"}, 400, "priority must be an integer"),
    ("big-9", {"action": "hold", "priority": 3}, 400, "only the priority action takes"),
    ("big-9", {"action": "explode"}, 400, "unknown action 'explode'"),
    ("big-9", {"action": "hold", "why": "x"}, 400, "unknown field(s): why"),
    ("old-1", {"action": "cancel"}, 400, "it has ended"),
    ("ghost", {"action": "hold"}, 404, "no job 'ghost' in the live twin"),
])
def test_a_bad_job_action_is_refused_with_one_message_and_changes_nothing(live, login, sent, job,
                                                                          body, status, message):
    r = post_json(login("staff"), f"/api/jobs/{job}/actions", body)
    assert r.status_code == status and message in r.json()["error"]
    assert audit() == [] and sent == []


def test_a_job_queued_beyond_the_frames_rows_is_left_to_the_engine_to_check(live, login, sent):
    # 400 queued: the frame and the placement carry the first row only
    live_services.live_state_write(seq=2, t_sim=7300.0, frame=frame(queued=400), health="ok",
                              last_error="", speed=60.0, paused=False, inventory=RUN,
                              placement=placement(queue_total=400))
    r = post_json(login("staff"), "/api/jobs/old-1/actions", {"action": "hold"})
    assert r.status_code == 202 and r.json()["state_before"] is None
    assert sent == [("job_hold", {"job": "old-1", "by": "staff"})]


def test_a_job_deep_in_the_queue_is_checked_against_the_placements_queue(live, login, sent):
    """The frame carries the queue's head; the placement carries its first 20,000 rows, so a
    job far down is refused at once when the action does not fit its state."""
    deep = placement(queue=[[p, f"q-{p}", "acme", 8, 1, 2.0, None, "Priority"]
                            for p in range(1, 401)], queue_total=400)
    live_services.live_state_write(seq=2, t_sim=7300.0, frame=frame(queued=400), health="ok",
                              last_error="", speed=60.0, paused=False, inventory=RUN,
                              placement=deep)
    staff = login("staff")
    r = post_json(staff, "/api/jobs/q-377/actions", {"action": "release"})
    assert r.status_code == 400 and sent == []
    r = post_json(staff, "/api/jobs/q-377/actions", {"action": "hold"})
    assert r.status_code == 202 and r.json()["state_before"] == "queued"
    r = post_json(staff, "/api/jobs/old-1/actions", {"action": "hold"})  # ended: not queued
    assert r.status_code == 400 and "has ended" in r.json()["error"]


def test_operators_cannot_act_on_a_job(live, login, sent):
    operator = login("operator")
    r = post_json(operator, "/api/jobs/big-9/actions", {"action": "hold"})
    assert r.status_code == 403 and "staff" in r.json()["error"]
    assert operator.post("/jobs/big-9/actions", {"action": "cancel"}).status_code == 403
    assert audit() == [] and sent == []


def test_anonymous_requests_are_refused(live, sent):
    r = post_json(Client(), "/api/jobs/big-9/actions", {"action": "hold"})
    assert r.status_code == 401 and sent == []


def test_the_api_takes_json_only(live, login, sent):
    r = login("staff").post("/api/jobs/big-9/actions", {"action": "hold"})
    assert r.status_code == 415 and sent == []


def test_a_form_post_without_the_csrf_token_is_refused(live, demo_users, sent):
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo_users["staff"])
    assert client.post("/jobs/big-9/actions", {"action": "hold"}).status_code == 403
    assert sent == []


def test_an_unreachable_engine_is_a_503_and_nothing_is_audited(live, login, monkeypatch):
    def down(command, **params):
        raise ConnectionError("redis is down")
    monkeypatch.setattr(services_actions, "command_send", down)
    r = post_json(login("staff"), "/api/jobs/big-9/actions", {"action": "hold"})
    assert r.status_code == 503 and "nothing was changed" in r.json()["error"]
    assert audit() == []


def test_the_job_page_offers_staff_the_actions_of_the_jobs_state(live, login):
    staff = login("staff")
    queued = staff.get("/jobs/big-9/").content.decode()
    assert 'id="action-hold"' in queued and 'id="action-cancel"' in queued
    assert 'id="action-priority"' in queued and 'min="-1000" max="1000" step="1"' in queued
    assert 'id="action-requeue"' not in queued and 'id="action-release"' not in queued
    assert 'data-confirm="Cancel big-9 for good?' in queued and "csrfmiddlewaretoken" in queued
    running = staff.get("/jobs/train-7/").content.decode()
    assert 'id="action-requeue"' in running and 'id="action-hold"' not in running
    held = staff.get("/jobs/held-3/").content.decode()
    assert '<small id="job-state">held</small>' in held
    assert '<td id="job-reason">JobHeldUser</td>' in held and 'id="action-release"' in held


def test_operators_see_no_action_on_the_job_or_node_page(live, login):
    operator = login("operator")
    assert 'id="job-actions"' not in operator.get("/jobs/big-9/").content.decode()
    assert 'id="node-actions"' not in operator.get("/nodes/0/").content.decode()


def test_the_job_form_reports_the_outcome_as_a_message(live, login, sent):
    staff = login("staff")
    page = staff.post("/jobs/train-7/actions", {"action": "hold"}, follow=True)
    assert "hold of train-7 refused: job train-7 is running" in page.content.decode()
    page = staff.post("/jobs/big-9/actions", {"action": "priority", "priority": "12"},
                      follow=True)
    assert "priority (priority 12) of big-9 sent to the live engine by staff" in (
        page.content.decode())
    assert sent == [("job_priority", {"job": "big-9", "by": "staff", "priority": 12})]


def test_a_job_the_engine_cancelled_shows_as_cancelled(live, login):
    m.EngineCommand.objects.create(run=RUN, name="job_cancel", params={"job": "old-1",
                                                                       "by": "staff"},
                                   t_sim=7250.0, status="applied")
    html = login("operator").get("/jobs/old-1/").content.decode()
    assert '<small id="job-state">cancelled</small>' in html


def test_the_job_page_lists_what_the_engine_did_with_each_action(live, login):
    m.EngineCommand.objects.create(run=RUN, name="job_hold", params={"job": "big-9",
                                                                     "by": "staff"},
                                   t_sim=7250.0, status="refused",
                                   error="job big-9 is running: only queued jobs can be held")
    html = login("staff").get("/jobs/big-9/").content.decode()
    assert "<td>hold</td><td>staff</td><td>refused: job big-9 is running" in html


# ----------------------------------------------------------------- nodes
def test_staff_drain_and_resume_a_node_from_its_page(live, login, monkeypatch):
    told = []
    monkeypatch.setattr(inventory_services, "command_send", lambda c, **p: told.append((c, p)))
    staff = login("staff")
    page = staff.get("/nodes/0/").content.decode()
    assert 'id="node-drain"' in page and 'id="node-resume"' not in page
    r = staff.post("/nodes/0/drain", follow=True)
    node = m.Node.objects.get(hostname="tiny-n000000")
    assert node.status == m.NodeStatus.DRAINED and node.status_reason == "drained by staff"
    assert "tiny-n000000: drain sent to the live engine by staff" in r.content.decode()
    assert 'id="node-resume"' in r.content.decode()
    staff.post("/nodes/0/resume")
    node.refresh_from_db()
    assert node.status == m.NodeStatus.READY
    assert audit() == [("staff", "node drained", "tiny-n000000"),
                       ("staff", "node undrained", "tiny-n000000")]


def test_only_a_drained_node_can_be_resumed(live, login):
    r = login("staff").post("/nodes/0/resume", follow=True)
    assert "resume refused: tiny-n000000 is ready, not drained" in r.content.decode()
    assert audit() == []


def test_operators_cannot_drain_a_node(live, login):
    assert login("operator").post("/nodes/0/drain").status_code == 403
    assert m.Node.objects.get(hostname="tiny-n000000").status == m.NodeStatus.READY


# ----------------------------------------------------------------- drills
def applied_drill(user, **kw):
    fields = {"kind": "node", "target": "3", "status": m.DrillStatus.APPLIED,
              "applied_at_sim": 7000.0, "outcome": {"kind": "node", "target": 3,
                                                    "repair_s": 3600.0, "jobs": [], "gpus": 0}}
    return m.Drill.objects.create(requested_by=user, **{**fields, **kw})


def test_staff_end_a_running_drill_and_the_row_says_who(live, login, demo_users, sent):
    drill = applied_drill(demo_users["staff"])
    r = login("staff").post(f"/api/drills/{drill.pk}/end")
    assert r.status_code == 202 and r.json()["ended"] == {"by": "staff", "t_sim": 7200.0}
    drill.refresh_from_db()
    assert drill.outcome["ended"]["by"] == "staff"
    assert sent == [("end_drill", {"drill_id": drill.pk, "by": "staff"})]
    assert audit() == [("staff", "drill end", f"drill #{drill.pk} node")]
    again = login("staff").post(f"/api/drills/{drill.pk}/end")
    assert again.status_code == 400 and "already ended by staff" in again.json()["error"]


@pytest.mark.parametrize("fields, message", [
    ({"status": m.DrillStatus.PENDING, "applied_at_sim": None}, "is pending"),
    ({"status": m.DrillStatus.REFUSED, "applied_at_sim": None}, "is refused"),
    ({"kind": "supply_cut", "outcome": {"target": "MI300X"}}, "a supply cut lasts the run"),
    ({"applied_at_sim": 1000.0}, "is already over (it ran out at t = 4,600 s)"),
    ({"kind": "inference_surge", "outcome": {"until": 7100.0}}, "is already over"),
])
def test_a_drill_that_is_not_running_cannot_be_ended(live, login, demo_users, sent, fields,
                                                     message):
    drill = applied_drill(demo_users["staff"], **fields)
    r = login("staff").post(f"/api/drills/{drill.pk}/end")
    assert r.status_code == 400 and message in r.json()["error"]
    assert sent == [] and audit() == []


def test_ending_a_drill_that_does_not_exist_is_a_404(live, login):
    assert login("staff").post("/api/drills/999/end").status_code == 404


def test_operators_cannot_end_a_drill(live, login, demo_users, sent):
    drill = applied_drill(demo_users["staff"])
    assert login("operator").post(f"/api/drills/{drill.pk}/end").status_code == 403
    assert sent == []


def test_the_drills_page_shows_end_buttons_and_the_bounds(live, login, demo_users):
    running = applied_drill(demo_users["staff"])
    over = applied_drill(demo_users["staff"], applied_at_sim=10.0)
    html = login("staff").get("/drills/").content.decode()
    assert f'action="/drills/{running.pk}/end"' in html
    assert f'action="/drills/{over.pk}/end"' not in html
    # the bounds of the engine's table, as attributes and help text
    assert 'name="fraction" min="0.1" max="1" step="any"' in html
    assert 'name="duration_s" min="0" max="2592000" step="any"' in html
    assert "Share of the rack power budget, [0.1, 1] (default 0.8)." in html
    assert '"storage_slowdown": {"factor": {"min": "0.0001", "max": "1"' in html


def test_the_end_form_redirects_with_a_message(live, login, demo_users, sent):
    drill = applied_drill(demo_users["staff"])
    page = login("staff").post(f"/drills/{drill.pk}/end", follow=True).content.decode()
    assert f"Drill #{drill.pk} (node) ended by staff" in page
    assert "ended by staff</td>" in page


# ----------------------------------------------------------------- engine messages
@pytest.mark.parametrize("message, error", [
    ({"command": "job_hold", "params": {"job": ""}}, "job must be a job name"),
    ({"command": "job_priority", "params": {"job": "a", "priority": True}}, "priority must be"),
    ({"command": "job_cancel", "params": {"job": "a", "by": ["x"]}}, "by must be a name"),
    ({"command": "end_drill", "params": {"drill_id": -3}}, "drill_id must be a non-negative"),
    ({"command": "drill", "params": {"drill_id": 1, "kind": "node",
                                     "params": {"drill_id": 2}}}, "cannot override"),
])
def test_the_driver_drops_malformed_action_messages(message, error):
    with pytest.raises(CommandError, match=error):
        command_parse(message)


def test_a_drill_message_carries_its_id_to_the_engine():
    cmd = command_parse({"command": "drill", "params": {"drill_id": 4, "kind": "node",
                                                        "target": "2", "params": {}}})
    assert cmd.params == {"kind": "node", "target": 2, "drill_id": 4} and cmd.drill_id == 4


# ----------------------------------------------------------------- through the live driver
async def steps(driver, n=1, dt=2.0):
    for _ in range(n):
        driver.clock.now += dt
        await driver.step_once()


def as_staff(demo_users, fn, **kw):
    return database_sync_to_async(fn)(user=demo_users["staff"], **kw)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_actions_go_through_the_durable_log_and_survive_a_crash(drivers, demo_users):  # noqa: F811
    first = await drivers(speed=600.0)
    for _ in range(20):  # until a job runs (dev-small's first arrivals)
        await steps(first, dt=30.0)
        if first.engine.running:
            break
    await first.snapshot()
    running = sorted(r.spec.name for r in first.engine.running.values())[0]
    await as_staff(demo_users, services_actions.job_action_request, job=running,
                   action="cancel")
    drill = await request_drill(demo_users, kind="node", target="3", params={})
    await commands_arrived(first, "job_cancel", "drill")
    await steps(first)
    await database_sync_to_async(drill.refresh_from_db)()
    assert drill.status == m.DrillStatus.APPLIED and not first.engine.state.node_up[3]
    await as_staff(demo_users, services_actions.drill_end_request, drill_id=drill.pk)
    await commands_arrived(first, "end_drill")
    await steps(first)
    run = next(r for r in first.engine.runs if r.spec.name == running)
    assert run.state == "cancelled" and first.engine.state.node_up[3]
    texts = [e["text"] for e in first.engine.events]
    assert f"{running} cancelled (running) by staff" in texts
    assert "drill node on 3 ended early by staff" in texts
    rows = await database_sync_to_async(list)(
        m.EngineCommand.objects.order_by("pk").values_list("name", "status"))
    assert rows == [("job_cancel", "applied"), ("drill", "applied"), ("end_drill", "applied")]
    # the process dies (no closing snapshot); the next one replays the log after the snapshot
    second = await drivers(speed=600.0)
    again = next(r for r in second.engine.runs if r.spec.name == running)
    assert again.state == "cancelled" and second.engine.state.node_up[3]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_command_is_marked_applied_only_once_its_events_are_kept(drivers, monkeypatch):  # noqa: F811
    """A job page reads the command log and the event log: it must never show "applied" with
    a timeline that lacks the event the command logged (issue 28's race under load)."""
    from twin.live import command_log
    driver = await drivers(speed=600.0)
    for _ in range(20):
        await steps(driver, dt=30.0)
        if driver.engine.running:
            break
    running = sorted(r.spec.name for r in driver.engine.running.values())[0]
    seen_at_close = []
    close = command_log.command_close

    def close_and_look(*, row_id, applied, error=""):
        seen_at_close.append(m.EngineEvent.objects.filter(
            jobs__contains=running, text__contains="cancelled (running) by staff").exists())
        close(row_id=row_id, applied=applied, error=error)
    monkeypatch.setattr(command_log, "command_close", close_and_look)
    await driver.log.apply("job_cancel", {"job": running, "by": "staff"})
    assert seen_at_close == [True]
