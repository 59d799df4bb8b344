"""Node and switch pages explain their state: a status with its colour class, the cause and
since (the open incident's, else the last state change logged), the expected repair, and a
history of the state changes the log holds for that component under every name the core gives
it (``host 5`` from failures, ``node 5`` from drills and operators)."""

from __future__ import annotations

import re

import pytest

from tests import frames
from tests.web.test_entity_pages import RUN, frame, placement
from twin.live import services

pytestmark = pytest.mark.django_db

LOG = [
    {"t": 600.0, "kind": "drill", "text": "drill node on 5: 0 job(s), 0 GPUs hit",
     "component": "node 5", "drill": "node", "jobs": []},
    {"t": 600.0, "kind": "failure", "text": "drill_node on host 5: 1 job(s), 8 GPUs hit",
     "component": "host 5", "cause": "drill_node", "jobs": ["train-7"]},
    {"t": 700.0, "kind": "failure", "text": "xid on host 3: 0 job(s), 0 GPUs hit",
     "component": "host 3", "jobs": []},
    {"t": 800.0, "kind": "switch", "text": "spine switch 24 marked failed: its links are out",
     "switch": 24, "jobs": []},
]


def incident(**extra) -> dict:
    return {"id": 4, "component": "host", "unit": 5, "target_kind": "node", "target_id": 5,
            "cause": "drill_node", "source": "drill", "drill": True, "drill_id": 2,
            "since": 600.0, "expected_repair": 15000.0, "resolved_at": None,
            "duration_s": None, "nodes": [5], "nodes_count": 1, "gpus_down": 8,
            "jobs": [], "jobs_count": 0, "gpus_hit": 8, "lost_work_gpu_h": 0.0,
            "down_gpu_h": 1.0, "gpu_hours_lost": 1.0, **extra}


@pytest.fixture
def live(small_cluster):
    stored = frame()
    if "incidents" in stored:  # the frame of an engine that reports incidents
        stored["incidents"] = {**stored["incidents"], "open": [incident()]}
    services.live_state_write(seq=1, t_sim=7200.0, frame=stored, health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN,
                              placement=placement(switches_down=[[24, 24]],
                                                  links_down=[[0, 0]]))
    services.engine_events_store(inventory=RUN, first_seq=0, events=LOG)
    return small_cluster


def history_texts(html: str) -> list[str]:
    table = html.split('id="entity-history"', 1)[1].split("</table>", 1)[0]
    return [re.sub(r"<[^>]+>", "", row) for row in re.findall(r"<tr class=[^>]*>(.*?)</tr>",
                                                                table, re.S)]


def test_a_down_node_says_why_since_when_and_until_when(live, login):
    html = login("operator").get("/nodes/5/").content.decode()
    assert '<span class="status status-down">down</span>' in html
    if "incidents" in frame():
        assert 'id="entity-cause">drill: drill node</span>' in html
        assert 'id="entity-incident"' in html and 'href="/incidents/4/"' in html
        repair = html.split('id="entity-repair">', 1)[1].split("</span>", 1)[0]
        assert "not known" not in repair and "day 0, 04:10" in repair  # 15,000 s
    else:
        assert 'id="entity-cause">drill_node on' in html


def test_a_node_s_history_joins_the_drill_s_and_the_failure_s_names_for_it(live, login):
    html = login("operator").get("/nodes/5/").content.decode()
    rows = history_texts(html)
    assert len(rows) == 2  # "host 5" and "node 5"; host 3's failure is another node's
    assert all("tiny-n000005" in row for row in rows)
    assert '<a href="/jobs/train-7/">train-7</a>' in html


def test_an_up_node_has_no_cause_and_an_empty_history(live, login):
    html = login("operator").get("/nodes/1/").content.decode()
    assert '<span class="status status-up">up</span>' in html
    assert 'id="entity-cause"' not in html
    assert "No failure, repair, drill or operator mark logged for it." in html


def test_a_failed_switch_is_down_with_its_history_and_a_peer_is_degraded(live, login):
    client = login("operator")
    html = client.get("/switches/24/").content.decode()
    assert '<span class="status status-down">down</span>' in html
    assert any("spine-00024 marked failed" in row for row in history_texts(html))
    # link 0 (spine-00024 – leaf-00000) is out: the leaf is up but degraded
    leaf = client.get("/switches/0/").content.decode()
    assert '<span class="status status-degraded">degraded</span>' in leaf


def test_frames_without_incidents_still_render(small_cluster, login):
    stored = frames.frame()
    stored.pop("incidents", None)
    services.live_state_write(seq=1, t_sim=10.0, frame=stored, health="ok", last_error="",
                              speed=1.0, paused=False, inventory=RUN,
                              placement=placement(down=[[5, 5]]))
    html = login("operator").get("/nodes/5/").content.decode()
    assert '<span class="status status-down">down</span>' in html
    assert 'expected repair: <span id="entity-repair"><span class="muted">not known' in html


# ----------------------------------------------------------------- incidents, charts, colours
def publish_incidents(*records, power=None) -> None:
    """The fixture's live state with these incidents (open or resolved by ``resolved_at``)."""
    stored = frame()
    stored["power"] = power
    stored["incidents"] = {**stored["incidents"],
                           "open": [r for r in records if r["resolved_at"] is None],
                           "resolved": [r for r in records if r["resolved_at"] is not None]}
    services.live_state_write(seq=2, t_sim=7200.0, frame=stored, health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN,
                              placement=placement(switches_down=[[24, 24]],
                                                  links_down=[[0, 0]]))


def card_ids(html: str) -> list[int]:
    card = html.split('id="entity-incidents-table"', 1)[1].split("</table>", 1)[0]
    return [int(x) for x in re.findall(r'data-id="(\d+)"', card)]


def test_a_node_s_incidents_card_lists_what_took_it_down_and_its_gpus_faults(live, login):
    gpu = incident(id=7, component="gpu", unit=8 * 3 + 2, target_kind="gpu", target_id=26,
                   cause="xid_79", drill=False, source="exponential", nodes=[], nodes_count=0,
                   resolved_at=900.0, duration_s=300.0)
    publish_incidents(incident(), gpu)
    client = login("operator")
    html = client.get("/nodes/5/").content.decode()
    assert card_ids(html) == [4] and 'href="/incidents/4/"' in html
    assert card_ids(client.get("/nodes/3/").content.decode()) == [7]  # GPU 26 is node 3's
    quiet = client.get("/nodes/2/").content.decode()
    assert card_ids(quiet) == [] and "No open or recently resolved incident involves it." in quiet


def test_a_switch_s_incidents_card_lists_its_own_and_its_links_failures(live, login):
    leaf = incident(id=8, component="leaf", unit=0, target_kind="switch", target_id=0,
                    cause="leaf_switch", nodes=[0, 1], nodes_count=2)
    link = incident(id=9, component="fabric_link", unit=0, target_kind="link", target_id=0,
                    cause="link_flap", nodes=[], nodes_count=0)
    publish_incidents(leaf, link)
    client = login("operator")
    assert card_ids(client.get("/switches/0/").content.decode()) == [8, 9]  # leaf-00000
    assert card_ids(client.get("/switches/24/").content.decode()) == [9]  # the link's far end
    assert card_ids(client.get("/switches/1/").content.decode()) == []


def test_a_job_and_its_tenant_list_the_incidents_that_hit_the_job(live, login):
    hit = incident(id=5, jobs=[{"name": "train-7", "gpus": 16, "lost_gpu_h": 2.0}],
                   jobs_count=1)
    publish_incidents(hit)
    client = login("operator")
    assert card_ids(client.get("/jobs/train-7/").content.decode()) == [5]
    assert card_ids(client.get("/jobs/big-9/").content.decode()) == []
    tenant = client.get("/tenants/acme/").content.decode()
    assert card_ids(tenant) == [5]
    state = tenant.split('id="entity-state"', 1)[1].split("</p>", 1)[0]
    assert 'status-down">within quota' in state and "1 open incident(s) hit its jobs" in state
    assert card_ids(client.get("/tenants/serving/").content.decode()) == []


def test_job_and_tenant_pages_colour_their_status(live, login):
    client = login("operator")
    running = client.get("/jobs/train-7/").content.decode()
    assert '<span class="status status-up">running</span>' in running
    queued = client.get("/jobs/big-9/").content.decode()
    assert '<span class="status status-drained">queued</span>' in queued
    assert 'id="entity-note">waiting: Resources' in queued
    tenant = client.get("/tenants/serving/").content.decode()
    assert '<span class="status status-up">within quota</span>' in tenant
    assert "4 of 32 GPUs" in tenant


def test_entity_pages_chart_their_history_and_say_when_there_is_no_power_model(live, login):
    client = login("operator")
    node = client.get("/nodes/5/").content.decode()
    assert 'id="entity-charts" data-kind="node" data-id="5"' in node
    assert 'id="entity-chart-util"' in node and 'id="entity-chart-power"' not in node
    assert "No power model in this twin" in node and "js/entity-charts.js" in node
    switch = client.get("/switches/0/").content.decode()
    assert 'data-kind="switch" data-id="0"' in switch and "No physics model" in switch
    job = client.get("/jobs/train-7/").content.decode()
    assert 'data-kind="job" data-id="train-7"' in job and 'id="entity-chart-gpus"' in job
    publish_incidents(incident(), power={"it_mw": 0.1, "facility_mw": 0.12,
                                         "rack_peak_kw": 30.0, "throttled_gpus": 0})
    node = client.get("/nodes/5/").content.decode()
    assert 'id="entity-chart-power"' in node and 'id="entity-chart-temp"' in node
    assert "No power model" not in node
    assert 'id="entity-chart-load"' in client.get("/switches/0/").content.decode()


def test_a_job_hung_by_a_failure_is_red_with_the_incident_that_hit_it(live, login):
    stored = frame()
    hit = incident(id=6, cause="nvlink_error", jobs=[{"name": "train-7", "gpus": 16,
                                                       "lost_gpu_h": 1.0}], jobs_count=1)
    stored["incidents"] = {**stored["incidents"], "open": [hit]}
    hung = {"train-7": {"gpus": 16, "tenant": "acme", "nodes": [[0, 1]],
                        "gpu_runs": [[0, 15]], "state": "detecting"}}
    services.live_state_write(seq=2, t_sim=7200.0, frame=stored, health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN,
                              placement=placement(jobs=hung))
    html = login("operator").get("/jobs/train-7/").content.decode()
    state = html.split('id="entity-state"', 1)[1].split("</p>", 1)[0]
    assert '<span class="status status-down">detecting</span>' in state
    assert 'id="entity-cause">drill: nvlink error' in state and 'href="/incidents/6/"' in state
