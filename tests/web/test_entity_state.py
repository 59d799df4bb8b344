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
