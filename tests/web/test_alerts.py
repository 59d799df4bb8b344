"""Alerts: rules on live figures fire after their duration, resolve, are acknowledged by staff
(audited), and go out as Alertmanager webhook messages without ever holding up a frame.

The thresholds here are the tests' own (these are behaviour checks, not validations of the
shipped thresholds, most of which are assumed; see ``twin.alerts.rules``)."""

from __future__ import annotations

import http.server
import json
import logging
import socket
import threading

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from tests import frames
from twin import models as m
from twin.alerts import rules as alerts
from twin.alerts import webhook as webhook_out
from twin.live import services

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh(settings, monkeypatch):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ALERT_WEBHOOK_URL": "",
                            "ALERT_RULES_REFRESH_S": 0.0}
    m.AlertRule.objects.all().delete()  # the shipped rules: tests name their own
    alerts.forget_process_state()
    monkeypatch.setattr(webhook_out, "_webhook", None)
    yield
    alerts.forget_process_state()


def rule(name="down", figure="util.down", comparison=">", threshold=4.0, for_s=600.0, **kw):
    return m.AlertRule.objects.create(name=name, figure=figure, comparison=comparison,
                                      threshold=threshold, for_s=for_s, **kw)


def frame(t, down=0, tenants=(("a", 10, 100),), **extra):
    return frames.frame(
        t=t, util={"gpus": 512, "allocated": 100, "idle": 412 - down, "down": down},
        tenants=[{"tenant": n, "used_gpus": u, "quota_gpus": q} for n, u, q in tenants],
        **extra)


def publish(t, **kw) -> dict:
    f = frame(t, **kw)
    services.live_state_write(seq=int(t) + 1, t_sim=t, frame=f, health="ok", last_error="",
                              speed=60.0, paused=False)
    return f


def firing():
    return list(m.Alert.objects.filter(state="firing"))


# ----------------------------------------------------------------- firing and resolving
def test_a_rule_fires_once_its_duration_has_passed_in_simulated_time_not_before():
    rule(for_s=600.0)
    publish(0.0, down=8)
    publish(300.0, down=8)
    assert firing() == []
    assert m.LiveState.objects.get().frame["alerts"] == {"firing": 0}
    publish(600.0, down=8)  # exactly for_s after the breach began
    (alert,) = firing()
    assert (alert.value, alert.t_sim, alert.labels) == (8.0, 600.0, {})
    assert m.LiveState.objects.get().frame["alerts"] == {"firing": 1}  # the nav badge
    publish(900.0, down=9)
    assert m.Alert.objects.count() == 1  # still the same alert, not a new one per frame


def test_a_breach_that_lapses_starts_its_duration_again():
    rule(for_s=600.0)
    publish(0.0, down=8)
    publish(300.0, down=0)
    publish(600.0, down=8)
    publish(900.0, down=8)
    assert firing() == []
    publish(1200.0, down=8)
    assert len(firing()) == 1


def test_an_alert_resolves_when_the_figure_recovers_and_a_new_breach_is_a_new_alert():
    rule(for_s=0.0)
    publish(0.0, down=8)
    publish(60.0, down=2)
    (alert,) = m.Alert.objects.all()
    assert alert.state == "resolved" and alert.t_sim_resolved == 60.0
    assert alert.resolved_at is not None
    assert m.LiveState.objects.get().frame["alerts"] == {"firing": 0}
    publish(120.0, down=8)
    assert m.Alert.objects.count() == 2 and len(firing()) == 1


def test_an_alert_resolves_when_its_figure_leaves_the_frame():
    rule(figure="mirror.telemetry.temp_max_c", threshold=80.0, for_s=0.0)
    publish(0.0, mirror={"telemetry": {"temp_max_c": 91.0}})
    assert len(firing()) == 1
    publish(10.0, mirror=None)  # the mirror stopped: no temperature read
    assert firing() == []


@pytest.mark.parametrize("comparison, value, fires", [
    (">", 5.0, False), (">=", 5.0, True), ("<", 5.0, False), ("<=", 5.0, True),
    (">", 6.0, True), ("<", 4.0, True)])
def test_each_comparison_holds_at_and_around_the_threshold(comparison, value, fires):
    rule(comparison=comparison, threshold=5.0, for_s=0.0)
    publish(0.0, down=value)
    assert len(firing()) == int(fires)


@examples(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(1, 400), st.booleans()), min_size=1, max_size=12),
       st.sampled_from([0.0, 300.0, 600.0]))
def test_alerts_follow_the_runs_of_breaches_that_last_their_duration(steps, for_s):
    """Any sequence of frames: an alert fires once a breach has lasted ``for_s`` (simulated
    s, from its first frame) and resolves only once the figure has been clear for ``for_s``
    too (hysteresis): a flapping figure never fires and resolves within the rule's duration."""
    m.Alert.objects.all().delete()
    m.AlertRule.objects.all().delete()
    alerts.forget_process_state()
    rule(for_s=for_s)
    t, fired, firing_now, pending, clear = 0.0, 0, False, None, None
    for dt, breach in steps:
        t += dt
        publish(t, down=8 if breach else 0)
        if not firing_now:
            pending = (t if pending is None else pending) if breach else None
            if pending is not None and t - pending >= for_s:
                fired, firing_now, pending = fired + 1, True, None
        else:
            clear = None if breach else (t if clear is None else clear)
            if clear is not None and t - clear >= for_s:
                firing_now, clear = False, None
    assert m.Alert.objects.count() == fired
    assert len(firing()) == int(firing_now)
    for a in m.Alert.objects.filter(state="resolved"):
        assert a.t_sim_resolved - a.t_sim >= for_s


def test_each_derived_figure_reads_its_values_off_the_frame():
    busy = frames.frame(
        util={"gpus": 200, "down": 5},
        heatmaps={"links": [{"z": [[0.2, 0.97]]}],
                  "racks": {"outlet_c": {"z": [[30.0, -1.0, 41.5]], "empty": -1}}},
        queue=[{"name": "a", "wait_h": 3.0}, {"name": "b", "position": 2, "wait_h": 30.0}],
        running_jobs=[{"name": "llm", "mfu": 0.35},
                      {"name": "hung", "state": "detecting", "mfu": 0.0}],
        tenants=[{"tenant": "a", "used_gpus": 30, "quota_gpus": 20},
                 {"tenant": "no-quota", "used_gpus": 3, "quota_gpus": 0}],
        source="mirror", sources={"slurm": {"age_s": 12.0}, "prometheus": {"age_s": None}},
        mirror={"xid": {"79": 3, "48": 2}})
    assert {name: alerts.figure_values(name, busy) for name in alerts.DERIVED} == {
        "util.down_pct": [({}, 2.5)], "tenants.quota_ratio": [({"tenant": "a"}, 1.5)],
        "links.util_max": [({}, 0.97)], "racks.outlet_max_c": [({}, 41.5)],
        "queue.wait_h_max": [({}, 30.0)], "jobs.mfu": [({"job": "llm"}, 0.35)],
        "sources.lag_max_s": [({}, 12.0)], "mirror.xid_per_h": [({}, 5.0)]}
    quiet = frames.frame()  # no power model, no mirror, nothing queued, running or hot
    assert {name: v for name in alerts.DERIVED
            if (v := alerts.figure_values(name, quiet))} == {"util.down_pct": [({}, 0.0)]}


def test_a_tenant_over_quota_fires_for_that_tenant_only():
    rule(name="quota", figure="tenants.quota_ratio", threshold=1.0, for_s=0.0)
    publish(0.0, tenants=(("research", 40, 100), ("serving", 219, 100)))
    (alert,) = firing()
    assert alert.labels == {"tenant": "serving"} and alert.value == pytest.approx(2.19)


def test_mirror_lag_counts_wall_seconds_even_while_simulated_time_stands_still():
    clock = [1000.0]
    alerts._evaluator = alerts.Evaluator(wall=lambda: clock[0])
    rule(name="lag", figure="sources.lag_max_s", threshold=120.0, for_s=60.0)
    lagging = {"slurm": {"state": "stale", "age_s": 300.0}, "dcgm": {"age_s": 2.0}}
    publish(500.0, sources=lagging)  # the mirror is paused: t_sim stays at 500
    clock[0] += 59.0
    publish(500.0, sources=lagging)
    assert firing() == []
    clock[0] += 1.0
    publish(500.0, sources=lagging)
    assert firing()[0].value == 300.0


def test_an_xid_storm_is_a_rate_of_new_xids_per_simulated_hour():
    rule(name="xid", figure="mirror.xid_per_h", threshold=60.0, for_s=0.0)
    publish(0.0, mirror={"xid": {"79": 500}})  # an old total alone is no storm
    publish(3600.0, mirror={"xid": {"79": 530}})  # 30 new in an hour
    assert firing() == []
    publish(5400.0, mirror={"xid": {"79": 560, "48": 20}})  # 50 in half an hour: 100/h
    assert firing()[0].value == pytest.approx(100.0)


def test_disabling_a_firing_rule_resolves_its_alert():
    r = rule(for_s=0.0)
    publish(0.0, down=8)
    r.enabled = False
    r.save()
    alerts.rules_changed()
    publish(10.0, down=8)
    assert firing() == []


def test_a_restarted_process_keeps_its_firing_alerts_without_duplicating_them():
    rule(for_s=0.0)
    publish(0.0, down=8)
    alerts.forget_process_state()  # the engine process restarted
    publish(10.0, down=8)
    assert m.Alert.objects.count() == 1
    publish(20.0, down=0)
    assert firing() == []


def test_an_error_in_evaluation_is_logged_once_and_the_frame_is_still_written(
        monkeypatch, caplog):
    rule(for_s=0.0)

    def broken(figure, frame):
        raise KeyError("boom")

    monkeypatch.setattr(alerts, "figure_values", broken)
    with caplog.at_level(logging.ERROR, logger="twin.alerts.rules"):
        publish(0.0, down=8)
        publish(10.0, down=8)
    live = m.LiveState.objects.get()
    assert live.seq == 11 and live.t_sim == 10.0 and "alerts" not in live.frame
    assert len([r for r in caplog.records if r.name == "twin.alerts.rules"]) == 1


# ----------------------------------------------------------------- rule validation
@pytest.mark.parametrize("field, value", [
    ("figure", "util..down"), ("figure", "nothing.here"), ("figure", "util.down; drop"),
    ("threshold", float("nan")), ("threshold", float("inf")), ("for_s", -1.0),
    ("for_s", 1e12)])
def test_bad_rule_values_are_refused_by_clean_with_one_message_on_the_field(field, value):
    r = m.AlertRule(name="bad", figure="util.down", threshold=1.0, for_s=0.0)
    setattr(r, field, value)
    with pytest.raises(ValidationError) as err:
        r.full_clean()
    assert list(err.value.message_dict) == [field]


def test_the_shipped_rules_are_valid_and_name_figures_the_evaluator_knows():
    assert alerts.rules_seed() == len(alerts.DEFAULT_RULES)
    assert alerts.rules_seed() == 0  # idempotent
    for r in m.AlertRule.objects.all():
        r.full_clean()
    figures = {r.figure for r in m.AlertRule.objects.all()}
    assert {"util.down_pct", "tenants.quota_ratio", "links.util_max", "power.throttled_gpus",
            "mirror.xid_per_h", "sources.lag_max_s", "ettr", "jobs.mfu",
            "queue.wait_h_max", "mirror.telemetry.temp_max_c"} <= figures


def test_staff_edit_rules_in_the_admin_and_a_bad_figure_is_refused(login):
    client = login("staff")
    data = {"name": "hot", "figure": "racks.outlet_max_c", "comparison": ">",
            "threshold": "40", "for_s": "60", "severity": "warning", "enabled": "on",
            "description": ""}
    assert client.post("/admin/twin/alertrule/add/", data).status_code == 302
    bad = client.post("/admin/twin/alertrule/add/", {**data, "name": "bad", "figure": "x..y"})
    assert bad.status_code == 200 and "is not a figure" in bad.content.decode()
    assert list(m.AlertRule.objects.values_list("name", flat=True)) == ["hot"]
    assert login("operator").get("/admin/twin/alertrule/").status_code == 302  # not staff


# ----------------------------------------------------------------- API and page
@pytest.fixture
def two_alerts():
    rule(name="down", for_s=0.0, severity="critical")
    rule(name="quota", figure="tenants.quota_ratio", threshold=1.0, for_s=0.0)
    publish(0.0, down=8, tenants=(("a", 150, 100),))
    publish(10.0, down=8, tenants=(("a", 50, 100),))
    return {a.rule.name: a for a in m.Alert.objects.select_related("rule")}


def test_everyone_logged_in_reads_alerts_filtered_by_state_and_severity(login, two_alerts):
    client = login("operator")
    body = client.get("/api/alerts").json()
    assert body["firing"] == 1 and len(body["alerts"]) == 2
    assert [a["rule"] for a in client.get("/api/alerts?state=firing").json()["alerts"]] == [
        "down"]
    resolved = client.get("/api/alerts?state=resolved").json()["alerts"]
    assert [(a["rule"], a["labels"]) for a in resolved] == [("quota", {"tenant": "a"})]
    assert [a["rule"] for a in client.get("/api/alerts?severity=critical").json()["alerts"]] == [
        "down"]
    assert client.get("/api/alerts?state=acknowledged").json()["alerts"] == []
    for bad in ("state=burning", "severity=meh", "limit=0", "limit=x"):
        response = client.get(f"/api/alerts?{bad}")
        assert response.status_code == 400 and "error" in response.json()
    assert Client().get("/api/alerts").status_code == 401


def post_ack(client, pk, **kw):
    return client.post(f"/api/alerts/{pk}/ack", data=json.dumps({}),
                       content_type=kw.pop("content_type", "application/json"), **kw)


def test_staff_acknowledge_an_alert_once_and_it_is_audited(login, two_alerts, demo_users):
    alert = two_alerts["down"]
    client = login("staff")
    response = post_ack(client, alert.pk)
    assert response.status_code == 200 and response.json()["acknowledged_by"] == "staff"
    alert.refresh_from_db()
    assert alert.acknowledged_by == demo_users["staff"] and alert.acknowledged_at is not None
    assert alert.state == "firing"  # acknowledged, still firing
    (entry,) = m.AuditEntry.objects.filter(action="alert_ack")
    assert (entry.username, entry.target) == ("staff", f"alert {alert.pk}")
    assert entry.detail["rule"] == "down"
    assert post_ack(client, alert.pk).status_code == 409
    assert [a["id"] for a in client.get("/api/alerts?state=acknowledged").json()["alerts"]] == [
        alert.pk]


def test_acknowledging_is_refused_to_operators_and_to_bad_requests(login, two_alerts):
    alert = two_alerts["down"]
    assert post_ack(login("operator"), alert.pk).status_code == 403
    staff = login("staff")
    assert post_ack(staff, alert.pk, content_type="text/plain").status_code == 415
    assert post_ack(staff, 999999).status_code == 404
    assert staff.get(f"/api/alerts/{alert.pk}/ack").status_code == 405
    alert.refresh_from_db()
    assert alert.acknowledged_at is None
    assert not m.AuditEntry.objects.filter(action="alert_ack").exists()


def test_the_api_acknowledgement_needs_a_csrf_token(demo_users, two_alerts):
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo_users["staff"])
    assert post_ack(client, two_alerts["down"].pk).status_code == 403
    client.get("/alerts/")
    token = client.cookies["csrftoken"].value
    assert post_ack(client, two_alerts["down"].pk, HTTP_X_CSRFTOKEN=token).status_code == 200


def test_the_page_shows_alerts_and_staff_acknowledge_with_its_form(login, two_alerts):
    operator = login("operator").get("/alerts/").content.decode()
    assert "down" in operator and "tenant=a" in operator and "Acknowledge" not in operator
    alert = two_alerts["quota"]
    assert login("operator").post(f"/alerts/{alert.pk}/ack").status_code == 403
    staff = login("staff")
    assert "Acknowledge" in staff.get("/alerts/").content.decode()
    assert staff.post(f"/alerts/{alert.pk}/ack").status_code == 302
    alert.refresh_from_db()
    assert alert.acknowledged_by.username == "staff"
    assert m.AuditEntry.objects.filter(action="alert_ack", target=f"alert {alert.pk}").exists()
    assert 'id="alert-badge"' in staff.get("/").content.decode()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_ack_sent_over_the_dashboard_socket_changes_nothing(demo_users):
    from channels.testing import WebsocketCommunicator

    from twin.config.asgi import application

    def setup():
        m.AlertRule.objects.all().delete()
        rule(for_s=0.0)
        publish(0.0, down=8)
        client = Client()
        client.force_login(demo_users["staff"])
        return firing()[0].pk, client.cookies["sessionid"].value

    pk, session = await sync_to_async(setup)()
    comm = WebsocketCommunicator(application, "/ws/twin/", headers=[
        (b"host", b"testserver"), (b"origin", b"http://testserver"),
        (b"cookie", f"sessionid={session}".encode())])
    assert (await comm.connect())[0]
    assert (await comm.receive_json_from())["alerts"] == {"firing": 1}  # the snapshot
    await comm.send_json_to({"type": "ack", "id": pk})
    assert (await comm.receive_json_from())["type"] == "error"
    await comm.disconnect()
    alert = await m.Alert.objects.aget(pk=pk)
    assert alert.acknowledged_at is None
    assert not await m.AuditEntry.objects.filter(action="alert_ack").aexists()


# ----------------------------------------------------------------- the webhook out
class Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list
    arrived: threading.Event
    release: threading.Event

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.arrived.set()
        self.release.wait(timeout=20)
        self.bodies.append((self.headers["Content-Type"], body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver(settings):
    handler = type("H", (Receiver,), {"bodies": [], "arrived": threading.Event(),
                                       "release": threading.Event()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ALERT_WEBHOOK_TIMEOUT_S": 10.0,
                            "ALERT_WEBHOOK_URL": f"http://127.0.0.1:{server.server_port}/hook",
                            "ALERT_WEBHOOK_RETRIES": 0}
    yield handler
    handler.release.set()
    server.shutdown()


def test_fire_and_resolve_are_posted_as_alertmanager_webhook_messages(receiver):
    receiver.release.set()
    rule(name="quota", figure="tenants.quota_ratio", threshold=1.0, for_s=0.0,
         severity="critical", description="over quota")
    publish(0.0, tenants=(("serving", 219, 100),))
    publish(60.0, tenants=(("serving", 90, 100),))
    alerts.webhook().queue.join()
    (ct1, fired), (ct2, resolved) = receiver.bodies
    assert ct1 == ct2 == "application/json"
    assert fired["version"] == "4" and fired["status"] == "firing"
    (item,) = fired["alerts"]
    assert item["labels"] == {"alertname": "quota", "severity": "critical",
                              "figure": "tenants.quota_ratio", "tenant": "serving"}
    assert item["annotations"]["description"] == "over quota"
    assert item["endsAt"] == "0001-01-01T00:00:00Z" and item["startsAt"].endswith("Z")
    assert len(item["fingerprint"]) == 16
    assert {"receiver", "groupKey", "groupLabels", "commonLabels", "externalURL"} <= set(fired)
    (done,) = resolved["alerts"]
    assert resolved["status"] == done["status"] == "resolved"
    assert done["fingerprint"] == item["fingerprint"] and done["endsAt"] >= done["startsAt"]
    assert alerts.webhook().counts == {"sent": 2, "failed": 0, "dropped": 0}


def test_a_receiver_that_does_not_answer_never_holds_up_a_frame(receiver):
    rule(for_s=0.0)
    publish(0.0, down=8)  # the POST is in flight; the receiver holds it until released
    publish(10.0, down=0)
    publish(20.0, down=8)
    assert m.LiveState.objects.get().t_sim == 20.0 and len(firing()) == 1
    assert receiver.bodies == []  # nothing answered yet, and every frame was written
    receiver.release.set()
    alerts.webhook().queue.join()
    assert [b["status"] for _, b in receiver.bodies] == ["firing", "resolved", "firing"]


def test_a_dead_receiver_is_retried_a_bounded_number_of_times_then_counted(settings):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ALERT_WEBHOOK_RETRIES": 2,
                            "ALERT_WEBHOOK_URL": f"http://127.0.0.1:{port}/",
                            "ALERT_WEBHOOK_BACKOFF_S": 0.0}
    tries = []
    hook = alerts.webhook()
    real = hook._post
    hook._post = lambda payload, url: (tries.append(url), real(payload, url))
    rule(for_s=0.0)
    publish(0.0, down=8)
    hook.queue.join()
    assert len(tries) == 3 and hook.counts == {"sent": 0, "failed": 1, "dropped": 0}


def test_a_full_webhook_queue_drops_messages_and_counts_them(receiver, settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ALERT_WEBHOOK_QUEUE": 1}
    rule(for_s=0.0)
    publish(0.0, down=8)
    assert receiver.arrived.wait(timeout=20)  # the first message is in flight, held
    for i in range(1, 4):  # resolve, fire, resolve: one queued, two dropped
        publish(10.0 * i, down=8 if i % 2 == 0 else 0)
    assert alerts.webhook().counts["dropped"] == 2
    receiver.release.set()
    alerts.webhook().queue.join()
    assert alerts.webhook().counts["sent"] == 2
