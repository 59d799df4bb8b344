"""Alerts an on-call would keep: rules per GPU, link, switch, rack row and node counted from the
stored event log; hysteresis; silences with expiry; values with units; entities by name with
links; runbooks.  Event sequences are hand-made in the core's own words; thresholds are the
tests' own."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from tests import frames
from tests.web.test_alerts import Receiver, receiver  # noqa: F401 (the receiver fixture)
from twin import models as m
from twin.alerts import rules as alerts
from twin.alerts import silences as silencing
from twin.alerts import webhook as webhook_out
from twin.alerts.figures import value_text
from twin.alerts.log_windows import classify
from twin.alerts.runbooks import runbook_sections
from twin.alerts.shipped import SHIPPED
from twin.inventory.names import Names
from twin.live import services

pytestmark = pytest.mark.django_db
RUN = "fingerprint:1"


@pytest.fixture(autouse=True)
def fresh(settings, monkeypatch):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ALERT_WEBHOOK_URL": "",
                            "ALERT_RULES_REFRESH_S": 0.0}
    m.AlertRule.objects.all().delete()
    alerts.forget_process_state()
    monkeypatch.setattr(webhook_out, "_webhook", None)
    yield
    alerts.forget_process_state()


@pytest.fixture
def log(small_cluster):
    """``log(t, kind, text, **extra)`` keeps one engine log line of the run."""
    seq = [0]

    def add(t, kind, text, **extra):
        services.engine_events_store(inventory=RUN, first_seq=seq[0],
                                     events=[{"t": t, "kind": kind, "text": text, **extra}])
        seq[0] += 1
    return add


@pytest.fixture
def names(small_cluster):
    return Names(small_cluster)


def rule(name, figure, threshold, *, comparison=">=", for_s=0.0, **kw):
    return m.AlertRule.objects.create(name=name, figure=figure, comparison=comparison,
                                      threshold=threshold, for_s=for_s, **kw)


def publish(t, **kw):
    f = frames.frame(t=t, **kw)
    services.live_state_write(seq=int(t) + 1, t_sim=t, frame=f, health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN)


def firing(name=None):
    qs = m.Alert.objects.filter(state="firing")
    return list(qs.filter(rule__name=name) if name else qs)


# ----------------------------------------------------------------- reading the log
@pytest.mark.parametrize("kind, component, text, signals", [
    ("xid", "node 1", "XID 79 on n0001 GPU 2", [("xid", ("node_gpu", 1, 2))]),
    ("xid", "gpu 10", "XID 48 on n0001:2", [("xid", ("gpu", 10))]),
    ("link", "link 3", "link 3 marked down: 2 job(s) re-rated", [("flap", ("link", 3))]),
    ("link", "", "link 3 back up", [("flap", ("link", 3))]),
    ("switch", "switch 5", "spine switch 5 marked failed: its links are out, 0 job(s) "
     "re-rated", [("flap", ("switch", 5))]),
    ("switch", "", "leaf switch 2 back in service: 1 nodes", [("flap", ("switch", 2))]),
    ("failure", "fabric_link 7", "fabric_link on fabric_link 7: 0 job(s), 0 GPUs hit",
     [("flap", ("link", 7))]),
    ("failure", "leaf 1", "drill_leaf_switch on leaf 1: 1 job(s), 8 GPUs hit",
     [("flap", ("leaf", 1))]),
    ("drill", "optical_link 7", "drill optical link on 7 ended early by staff",
     [("flap", ("link", 7))]),
    ("drill", "optical_link 7", "drill optical_link on 7: 0 job(s), 0 GPUs hit", []),
    ("failure", "endpoint_link 9", "network_cable on endpoint_link 9: 1 job(s), 8 GPUs hit",
     [("flap", ("nic", 9)), ("failure", ("gpu_node", 9))]),
    ("failure", "host 2", "power_supply on host 2: 1 job(s), 8 GPUs hit",
     [("failure", ("node", 2))]),
    ("failure", "gpu 17", "faulty_gpu on gpu 17: 1 job(s), 8 GPUs hit",
     [("failure", ("gpu_node", 17))]),
    ("failure", "planned 2", "planned_maintenance on planned 2: 1 job(s), 8 GPUs hit", []),
    ("failure", "software 2", "software_bug on software 2: 1 job(s), 8 GPUs hit", []),
    ("inventory", "node 4", "node 4 marked failed: 0 job(s) interrupted",
     [("failure", ("node", 4))]),
    ("inventory", "", "GPU 17 (node 2) marked failed: 1 job(s) interrupted",
     [("failure", ("node", 2))]),
    ("node_down", "node 3", "n0003 down in the cluster: Not responding",
     [("failure", ("node", 3))]),
    ("cooling", "cooling 0", "cooling loop 0 marked failed: 2 racks throttle, 1 job(s) "
     "re-rated", [("throttle_on", ("cooling", 0))]),
    ("cooling", "cooling 0", "cooling loop 0 back", [("throttle_off", ("cooling", 0))]),
    ("failure", "cooling 0", "cooling_loop on cooling 0: 0 job(s), 0 GPUs hit",
     [("throttle_failed", ("cooling", 0))]),
    ("drill", "power_cap 1", "drill power_cap on 1: 1 job(s), 8 GPUs hit",
     [("throttle_on", ("rack", 1))]),
    ("drill", "power_cap 1", "drill power cap on 1 ended early by staff",
     [("throttle_off", ("rack", 1))]),
    ("repair", "cooling 0", "cooling_loop on cooling 0 repaired after 5.20 h",
     [("throttle_off", ("cooling", 0))]),
    ("repair", "leaf 1", "leaf_switch on leaf 1 repaired after 7.91 h", [("flap", ("leaf", 1))]),
    ("repair", "host 2", "power_supply on host 2 repaired after 8.00 h", []),
    ("preempt", "", "llm-1 (64 GPUs) preempted: priority", []),
])
def test_each_log_line_gives_the_signals_of_what_it_names(kind, component, text, signals):
    assert classify(kind, component, text) == signals


# ----------------------------------------------------------------- rules per entity
def test_an_xid_storm_on_one_gpu_fires_for_that_gpu_named_as_host_index_and_resolves(
        log, names):
    rule("xid", "gpu.xid_events", 3, window_s=600.0, resolve_for_s=600.0)
    gpu = names.gpu(10)  # node 1, GPU 2 (8 GPUs a node)
    for t in (100.0, 200.0):
        log(t, "xid", f"XID 79 on {names.node(1).name} GPU 2", component="node 1")
    log(250.0, "xid", f"XID 79 on {names.node(0).name} GPU 0", component="node 0")
    publish(250.0)
    assert firing() == []
    log(300.0, "xid", f"XID 79 on {names.node(1).name} GPU 2", component="node 1")
    publish(300.0)
    (alert,) = firing()
    assert alert.labels == {"gpu": "10"} and alert.value == 3.0
    assert alert.entities == [{"key": "gpu", "value": "10", "name": gpu.name, "url": gpu.url}]
    assert gpu.name == f"{names.node(1).name}:2" and gpu.url == "/nodes/1/#gpu-2"
    publish(750.0)  # two XIDs left the window: clear since now
    publish(1300.0)
    assert len(firing()) == 1  # clear for 550 s < 600 s
    publish(1350.0)
    assert firing() == [] and m.Alert.objects.get().t_sim_resolved == 1350.0


def test_event_windows_are_rebuilt_from_the_log_after_a_restart(log):
    rule("xid", "gpu.xid_events", 3, window_s=600.0)
    publish(50.0)
    for t in (100.0, 200.0, 300.0):
        log(t, "xid", "XID 79 on n GPU 2", component="node 1")
    alerts.forget_process_state()  # a new process: nothing in memory
    publish(310.0)
    assert [a.labels for a in firing()] == [{"gpu": "10"}]
    alerts.forget_process_state()
    publish(320.0)  # a restart keeps the firing alert and does not fire it twice
    assert m.Alert.objects.count() == 1 and len(firing()) == 1


def test_link_flaps_fire_per_link_and_per_switch_with_their_names(log, names, small_cluster):
    rule("flaps", "link.flaps", 4, window_s=3600.0, resolve_for_s=600.0)
    for t in (10.0, 20.0, 30.0, 40.0):
        log(t, "link", f"link 3 {'marked down: 0 job(s) re-rated' if t % 20 else 'back up'}",
            link=3)
    for t in (15.0, 25.0, 35.0):  # three events: not yet a storm of flaps
        log(t, "switch", f"spine switch 5 {'marked failed' if t % 10 else 'back in service'}",
            switch=5)
    publish(40.0)
    (alert,) = firing()
    link = names.link(3)
    assert alert.labels == {"link": "3"} and alert.value == 4.0
    assert alert.entities[0]["name"] == link.name and " – " in link.name
    log(45.0, "switch", "spine switch 5 back in service", switch=5)
    publish(45.0)
    switch = names.switch_at(5)
    assert {a.labels["switch"] for a in firing("flaps") if "switch" in a.labels} == {
        str(switch.id)}
    on_switch = next(a for a in firing() if "switch" in a.labels)
    assert on_switch.entities[0] == {"key": "switch", "value": str(switch.id),
                                     "name": switch.name, "url": f"/switches/{switch.id}/"}
    publish(3600.0 + 45.0)  # both windows emptied at 3640 / 3645 s
    publish(3600.0 + 645.0)
    assert firing() == []


def test_a_rack_row_throttled_long_enough_fires_and_resolves_after_its_clear_time(log):
    rule("hot", "racks.throttled_s", 900.0, resolve_for_s=300.0)
    log(0.0, "cooling", "cooling loop 0 marked failed: 2 racks throttle, 0 job(s) re-rated",
        component="cooling 0")
    publish(600.0)
    assert firing() == []
    publish(900.0)
    (alert,) = firing()
    assert alert.labels == {"cooling": "0"} and value_text("racks.throttled_s",
                                                           alert.value) == "15 min"
    log(1000.0, "cooling", "cooling loop 0 back", component="cooling 0")
    publish(1000.0)
    publish(1200.0)
    assert len(firing()) == 1  # back for 200 s < 300 s
    publish(1300.0)
    assert firing() == []


def test_a_drawn_cooling_fault_ends_when_the_frame_lists_no_incident_for_it(log):
    """The core logs no line when it repairs a cooling loop it failed itself: a frame listing
    every open incident ends the throttle (an operator's mark ends with its own line)."""
    rule("hot", "racks.throttled_s", 60.0)
    log(0.0, "failure", "cooling_loop on cooling 0: 0 job(s), 0 GPUs hit",
        component="cooling 0")
    log(0.0, "cooling", "cooling loop 1 marked failed: 2 racks throttle, 0 job(s) re-rated",
        component="cooling 1")
    def publish_incidents(t, listed):  # only the keys the alerts read
        f = frames.frame(t=t)
        f["incidents"] = {"open": listed, "resolved": [], "counts": {"open": len(listed)}}
        services.live_state_write(seq=int(t) + 1, t_sim=t, frame=f, health="ok",
                                  last_error="", speed=60.0, paused=False, inventory=RUN)

    publish_incidents(100.0, [{"component": "cooling", "unit": 0}])
    assert sorted(a.labels["cooling"] for a in firing()) == ["0", "1"]
    publish_incidents(200.0, [])
    assert [a.labels["cooling"] for a in firing()] == ["1"]


def test_repeated_failures_of_one_node_fire_with_its_hostname_and_link(log, names):
    rule("lemon", "node.failures", 2, window_s=7 * 86400.0, resolve_for_s=3600.0)
    log(10.0, "failure", "faulty_gpu on gpu 17: 1 job(s), 8 GPUs hit", component="gpu 17")
    log(20.0, "failure", "planned_maintenance on planned 2: 0 job(s), 0 GPUs hit",
        component="planned 2")
    log(30.0, "failure", "power_supply on host 1: 0 job(s), 0 GPUs hit", component="host 1")
    publish(40.0)
    assert firing() == []  # gpu 17 is node 2's (one failure); maintenance is no failure
    log(50.0, "inventory", "node 2 marked failed: 0 job(s) interrupted", component="node 2")
    publish(60.0)
    (alert,) = firing()
    host = names.node(2)
    assert alert.labels == {"node": "2"}
    assert alert.entities == [{"key": "node", "value": "2", "name": host.name,
                               "url": "/nodes/2/"}]
    page = alert_page()
    assert f'<a href="/nodes/2/" class="entity entity-node" title="node=2">{host.name}</a>' \
        in page and "2 failures" in page


# ----------------------------------------------------------------- hysteresis
def quota(t, ratio):
    publish(t, tenants=[{"tenant": "research", "used_gpus": int(ratio * 100),
                         "quota_gpus": 100}])


def test_a_flapping_figure_does_not_resolve_within_the_rules_duration():
    rule("quota", "tenants.quota_ratio", 1.0, comparison=">", for_s=300.0)
    for t in range(0, 301, 30):
        quota(float(t), 1.2)
    assert len(firing()) == 1
    t = 300.0
    for _ in range(20):  # over and under quota every 10 s for 400 s
        t += 10.0
        quota(t, 0.8)
        t += 10.0
        quota(t, 1.2)
    assert len(firing()) == 1 and m.Alert.objects.count() == 1
    quota(t + 10.0, 0.8)
    quota(t + 300.0, 0.8)
    assert len(firing()) == 1  # clear for 290 s
    quota(t + 310.0, 0.8)
    (alert,) = m.Alert.objects.all()
    assert alert.state == "resolved" and alert.t_sim_resolved - alert.t_sim >= 300.0


def test_a_resolve_threshold_holds_the_alert_until_the_figure_is_well_back():
    rule("quota", "tenants.quota_ratio", 1.0, comparison=">", resolve_threshold=0.95,
         resolve_for_s=0.0)
    quota(0.0, 1.1)
    quota(10.0, 0.97)  # under quota, not under 95 % of it
    assert len(firing()) == 1
    quota(20.0, 0.94)
    assert firing() == []


@pytest.mark.parametrize("fields, field", [
    ({"figure": "node.failures", "threshold": 2.0}, "window_s"),
    ({"figure": "tenants.quota_ratio", "threshold": 1.0, "resolve_threshold": 1.2},
     "resolve_threshold"),
    ({"figure": "ettr", "comparison": "<", "threshold": 0.9, "resolve_threshold": 0.8},
     "resolve_threshold"),
    ({"figure": "util.down", "threshold": 1.0, "resolve_for_s": -5.0}, "resolve_for_s"),
])
def test_rules_that_could_never_resolve_sensibly_are_refused(fields, field):
    r = m.AlertRule(name="bad", for_s=0.0, **fields)
    with pytest.raises(ValidationError) as err:
        r.full_clean()
    assert list(err.value.message_dict) == [field]


# ----------------------------------------------------------------- silences
def silence(user, ends_in=timedelta(hours=1), **matchers):
    return silencing.silence_create(user=user, matchers=matchers,
                                    ends_at=timezone.now() + ends_in, comment="known")


def test_a_silence_holds_the_webhook_records_the_alert_and_releases_it_when_it_ends(
        receiver, demo_users):  # noqa: F811 (the fixture)
    receiver.release.set()
    rule("quota", "tenants.quota_ratio", 1.0, comparison=">")
    held = silence(demo_users["staff"], alertname="quota", tenant="re*")
    publish(0.0, tenants=[{"tenant": "research", "used_gpus": 150, "quota_gpus": 100},
                          {"tenant": "serving", "used_gpus": 150, "quota_gpus": 100}])
    alerts.webhook().queue.join()
    assert [b["alerts"][0]["labels"]["tenant"] for _, b in receiver.bodies] == ["serving"]
    research = m.Alert.objects.get(labels__tenant="research")
    assert research.state == "firing" and research.silence == held and not research.notified
    page = alert_page()
    assert page.count(">silenced</span>") == 1 and "known" in page
    m.Silence.objects.filter(pk=held.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    publish(10.0, tenants=[{"tenant": "research", "used_gpus": 150, "quota_gpus": 100},
                           {"tenant": "serving", "used_gpus": 150, "quota_gpus": 100}])
    alerts.webhook().queue.join()
    assert [(b["status"], b["alerts"][0]["labels"]["tenant"]) for _, b in receiver.bodies][1:] \
        == [("firing", "research")]
    research.refresh_from_db()
    assert research.notified and research.silence is None and ">silenced<" not in alert_page()


def test_an_alert_silenced_until_it_resolves_is_never_notified(receiver, demo_users):  # noqa: F811
    receiver.release.set()
    rule("quota", "tenants.quota_ratio", 1.0, comparison=">")
    silence(demo_users["staff"], tenant="research")
    quota(0.0, 1.5)
    quota(10.0, 0.5)
    alerts.webhook().queue.join()
    assert receiver.bodies == [] and m.Alert.objects.get().state == "resolved"


def test_staff_end_a_silence_early_and_both_steps_are_audited(login):
    staff = login("staff")
    response = staff.post("/alerts/silences", {"matchers": "alertname=quota, tenant=research",
                                               "until": until(2), "comment": "moving jobs"})
    assert response.status_code == 302
    (s,) = m.Silence.objects.all()
    assert s.matchers == {"alertname": "quota", "tenant": "research"}
    assert s.created_by_name == "staff" and s.comment == "moving jobs"
    assert s.ends_at - timezone.now() > timedelta(hours=1, minutes=58)
    assert staff.post(f"/alerts/silences/{s.pk}/expire").status_code == 302
    s.refresh_from_db()
    assert s.ends_at <= timezone.now()
    assert set(m.AuditEntry.objects.values_list("action", flat=True)) == {
        "silence_create", "silence_expire"}


def until(hours):
    return timezone.localtime(timezone.now() + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M")


@pytest.mark.parametrize("data, message", [
    ({"matchers": "", "until": None, "comment": "x"}, "at least one label"),
    ({"matchers": "tenant", "until": None, "comment": "x"}, "label=value"),
    ({"matchers": "tenant=a", "until": None, "comment": " "}, "say why"),
    ({"matchers": "tenant=a", "until": "yesterday", "comment": "x"}, "date and time"),
    ({"matchers": "tenant=a", "until": -1, "comment": "x"}, "end after it starts"),
    ({"matchers": "tenant=a", "until": 24 * 40, "comment": "x"}, "at most 30 days"),
])
def test_a_bad_silence_is_refused_with_one_message(login, data, message):
    data = {**data, "until": until(1) if data["until"] is None else
            until(data["until"]) if isinstance(data["until"], int) else data["until"]}
    response = login("staff").post("/alerts/silences", data, follow=True)
    assert message in response.content.decode() and not m.Silence.objects.exists()


def test_only_staff_create_or_end_silences_and_the_form_needs_its_csrf_token(
        login, demo_users):
    operator = login("operator")
    data = {"matchers": "tenant=a", "until": until(1), "comment": "x"}
    assert operator.post("/alerts/silences", data).status_code == 403
    assert "silence-form" not in operator.get("/alerts/").content.decode()
    s = silence(demo_users["staff"], tenant="b")
    assert operator.post(f"/alerts/silences/{s.pk}/expire").status_code == 403
    assert Client().post("/alerts/silences", data).status_code in (302, 401, 403)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(demo_users["staff"])
    assert strict.post("/alerts/silences", data).status_code == 403
    page = strict.get("/alerts/")
    assert 'id="silence-form"' in page.content.decode()
    data["csrfmiddlewaretoken"] = strict.cookies["csrftoken"].value
    assert strict.post("/alerts/silences", data).status_code == 302
    assert list(m.Silence.objects.values_list("matchers", flat=True)) == [{"tenant": "b"},
                                                                          {"tenant": "a"}] \
        or m.Silence.objects.count() == 2
    with pytest.raises(silencing.PermissionDenied):
        silencing.silence_create(user=demo_users["operator"], matchers={"tenant": "a"},
                                 ends_at=timezone.now() + timedelta(hours=1), comment="x")


# ----------------------------------------------------------------- units, links, runbooks
@pytest.mark.parametrize("figure, value, text", [
    ("tenants.quota_ratio", 1.004, "1.00 (ratio of quota)"),
    ("queue.wait_h_max", 24.009, "24.0 h"),
    ("util.down_pct", 2.5, "2.5 % of the fleet down"),
    ("jobs.mfu", 0.3646, "36.5 % MFU"),
    ("links.util_max", 0.97, "97.0 % link utilisation"),
    ("racks.outlet_max_c", 41.54, "41.5 °C"),
    ("sources.lag_max_s", 300.0, "5 min (wall)"),
    ("racks.throttled_s", 8040.0, "2 h 14 min"),
    ("gpu.xid_events", 3.0, "3 XID events"),
    ("util.down", 4096.0, "4,096 GPUs"),
    ("power.throttled_gpus", 12.0, "12 GPUs"),
    ("ettr", 0.91, "91.0 % ETTR"),
    ("mirror.telemetry.temp_max_c", 91.0, "91.0 °C"),
])
def test_every_value_is_written_with_its_unit(figure, value, text):
    assert value_text(figure, value) == text


def alert_page() -> str:
    client = Client()
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="reader")
    client.force_login(user)
    return client.get("/alerts/").content.decode()


def test_the_page_and_api_show_units_linked_entities_description_and_runbook(login):
    rule("quota", "tenants.quota_ratio", 1.0, comparison=">", description="over quota",
         runbook_url="/alerts/runbooks/#tenant-over-quota")
    rule("slow", "jobs.mfu", 0.19, comparison="<")
    publish(0.0, tenants=[{"tenant": "research", "used_gpus": 150, "quota_gpus": 100}],
            running_jobs=[{"name": "llm-7", "tenant": "research", "mfu": 0.1}])
    page = login("operator").get("/alerts/").content.decode()
    assert '<a href="/tenants/research/" class="entity entity-tenant"' in page
    assert '<a href="/jobs/llm-7/" class="entity entity-job"' in page
    assert "1.50 (ratio of quota)" in page and "10.0 % MFU" in page
    assert 'href="/alerts/runbooks/#tenant-over-quota"' in page and "over quota" in page
    body = login("operator").get("/api/alerts").json()
    by_rule = {a["rule"]: a for a in body["alerts"]}
    assert by_rule["quota"]["value_text"] == "1.50 (ratio of quota)"
    assert by_rule["quota"]["condition"] == "> 1.00 (ratio of quota)"
    assert by_rule["slow"]["entities"] == [{"key": "job", "value": "llm-7", "name": "llm-7",
                                            "url": "/jobs/llm-7/"}]


def test_the_webhook_carries_units_the_runbook_and_entity_names(receiver, log, names):  # noqa: F811
    receiver.release.set()
    rule("lemon", "node.failures", 2, window_s=86400.0, severity="critical",
         runbook_url="/alerts/runbooks/#node-failing-repeatedly")
    log(1.0, "failure", "power_supply on host 2: 0 job(s), 0 GPUs hit", component="host 2")
    log(2.0, "node_down", "n down in the cluster", component="node 2", node=2)
    publish(3.0)
    alerts.webhook().queue.join()
    (_, body), = receiver.bodies
    item = body["alerts"][0]
    assert item["labels"] == {"alertname": "lemon", "severity": "critical",
                              "figure": "node.failures", "node": "2"}
    assert item["annotations"]["node_name"] == names.node(2).name
    assert item["annotations"]["node_url"] == "/nodes/2/"
    assert item["annotations"]["runbook_url"] == "/alerts/runbooks/#node-failing-repeatedly"
    assert item["annotations"]["summary"].startswith("node.failures = 2 failures (>= 2 failures")


def test_every_shipped_rule_is_valid_and_has_a_runbook_section_that_is_served(login):
    assert alerts.rules_seed() == len(SHIPPED)
    anchors = {s.anchor for s in runbook_sections()}
    for r in m.AlertRule.objects.all():
        r.full_clean()
        assert r.description and r.runbook_url == f"/alerts/runbooks/#{r.name}"
        assert r.name in anchors
    assert {"gpu.xid_events", "link.flaps", "racks.throttled_s", "node.failures"} <= set(
        m.AlertRule.objects.values_list("figure", flat=True))
    page = login("operator").get("/alerts/runbooks/").content.decode()
    assert 'id="gpu-xid-storm"' in page and "<li>" in page
    assert all("<script" not in s.html for s in runbook_sections())


def test_the_shipped_tenant_over_quota_rule_cannot_flap_within_its_half_hour():
    alerts.rules_seed()
    m.AlertRule.objects.exclude(name="tenant-over-quota").delete()
    for t in range(0, 1801, 60):
        quota(float(t), 1.05)
    assert len(firing()) == 1
    quota(1810.0, 0.97)  # back under quota, but above 95 % of it
    quota(1820.0, 0.9)
    quota(1820.0 + 1790.0, 0.9)
    assert len(firing()) == 1
    quota(1820.0 + 1800.0, 0.9)
    assert firing() == []
