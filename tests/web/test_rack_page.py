"""A rack's page (``/racks/<id>/``): its status coloured and explained, its nodes with their
live status and jobs, the incidents that involve it (its power feed, its cooling loop, its
nodes), its state changes in the event log, its history charts (power and temperature only with
a power model); rack names link here wherever the twin names a rack."""

from __future__ import annotations

import re

import pytest

from tests import frames
from twin import models as m
from twin.inventory.names import Names
from twin.live import services
from twin.pages.rack import rack_status

pytestmark = pytest.mark.django_db
RUN = "run-racks"
POWER = {"it_mw": 0.1, "facility_mw": 0.12, "rack_peak_kw": 30.0, "throttled_gpus": 0}
# the small cluster: rack 0 holds nodes 0-3, rack 1 nodes 4-7, rack 2 nodes 8-11


def incident(id_, **extra) -> dict:
    return {"id": id_, "source": "exponential", "drill": False, "since": 600.0, **extra}


PDU = incident(11, component="pdu", unit=1, target_kind="rack", target_id=1,
               cause="pdu_failure", nodes=[4, 5], nodes_count=2, gpus_down=16,
               expected_repair=9000.0, jobs=[{"name": "train-7", "gpus": 16}], jobs_count=1)
ELSEWHERE = incident(12, component="host", unit=9, target_id=9, cause="xid_79", nodes=[9],
                     nodes_count=1, gpus_down=8)
RESOLVED = incident(13, component="host", unit=2, target_id=2, cause="ecc_error", nodes=[2],
                    nodes_count=1, gpus_down=8, resolved_at=900.0, duration_s=300.0)
LOG = [
    {"t": 600.0, "kind": "failure", "text": "pdu_failure on pdu 1: 1 job(s), 16 GPUs hit",
     "component": "pdu 1", "jobs": ["train-7"]},
    {"t": 650.0, "kind": "drill", "text": "drill rack_power on 1", "component": "rack 1",
     "drill": "rack_power", "jobs": []},
    {"t": 700.0, "kind": "failure", "text": "xid on rack 0's host", "component": "rack 0",
     "jobs": []},
]


def publish(*, power=POWER) -> None:
    frame = frames.frame(t=3600.0, power=power,
                         incidents={"open": [PDU, ELSEWHERE], "resolved": [RESOLVED],
                                    "counts": {"open": 2, "resolved": 1,
                                               "resolved_kept": 1}})
    placement = frames.placement(
        t=3600.0, down=[[4, 5]], drained=[[6, 6]],
        jobs={"train-7": {"gpus": 16, "tenant": "acme", "nodes": [[6, 7]],
                          "gpu_runs": [[56, 63]]}})
    services.live_state_write(seq=1, t_sim=3600.0, frame=frame, health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN, placement=placement)


@pytest.fixture
def live(small_cluster):
    publish()
    services.engine_events_store(inventory=RUN, first_seq=0, events=LOG)
    return small_cluster


def row(html: str, table: str, row_id: str) -> str:
    body = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return body.split(f'id="{row_id}"', 1)[1].split("</tr>", 1)[0]


def incident_ids(html: str) -> list[int]:
    body = html.split('id="entity-incidents-table"', 1)[1].split("</table>", 1)[0]
    return [int(x) for x in re.findall(r'data-id="(\d+)"', body)]


def test_a_rack_page_lists_its_nodes_with_live_status_and_their_jobs(live, login):
    html = login("operator").get("/racks/1/").content.decode()
    hosts = m.Node.objects.filter(rack__hall__site__cluster=live).order_by("id")
    for node in (4, 5, 6, 7):
        assert f'href="/nodes/{node}/">{hosts[node].hostname}</a>' in html
    assert 'status-down">down' in row(html, "rack-nodes", "rack-node-5")
    assert 'status-drained">drained' in row(html, "rack-nodes", "rack-node-6")
    assert 'href="/jobs/train-7/"' in row(html, "rack-nodes", "rack-node-7")
    assert 'status-up">up' in row(html, "rack-nodes", "rack-node-7")
    assert hosts[0].hostname not in html.split('id="rack-nodes"', 1)[1].split("</table>")[0]


def test_a_rack_with_nodes_out_is_degraded_and_says_why_from_its_open_incident(live, login):
    html = login("operator").get("/racks/1/").content.decode()
    assert 'id="rack-live" class="status status-degraded">degraded' in html
    state = html.split('id="entity-state"', 1)[1].split("</p>", 1)[0]
    assert 'status-degraded' in state and 'id="entity-cause">pdu failure' in state
    assert 'href="/incidents/11/"' in state
    healthy = login("operator").get("/racks/2/").content.decode()
    assert 'id="rack-live" class="status status-up">up' in healthy


def test_the_incidents_card_lists_the_open_and_resolved_ones_involving_the_rack(live, login):
    client = login("operator")
    assert incident_ids(client.get("/racks/1/").content.decode()) == [11]
    rack0 = client.get("/racks/0/").content.decode()
    assert incident_ids(rack0) == [13]  # node 2's, resolved
    assert 'href="/incidents/13/"' in rack0 and 'data-state="resolved"' in rack0
    assert incident_ids(client.get("/racks/2/").content.decode()) == [12]  # node 9's


def test_the_history_lists_the_state_changes_logged_for_the_rack_under_its_names(live, login):
    html = login("operator").get("/racks/1/").content.decode()
    table = html.split('id="entity-history"', 1)[1].split("</table>", 1)[0]
    text = re.sub(r"<[^>]+>", "", table)
    assert "pdu_failure on tiny-rack-00001" in text and "drill rack_power on 1" in text
    assert "xid on" not in text  # rack 0's
    assert 'href="/racks/1/"' in table  # the rack named in the log links to its page


def test_the_charts_show_power_and_temperature_only_with_a_power_model(live, login):
    client = login("operator")
    html = client.get("/racks/1/").content.decode()
    assert 'data-kind="rack" data-id="1"' in html
    for chart in ("util", "power", "temp"):
        assert f'id="entity-chart-{chart}"' in html
    assert 'id="entity-no-power"' not in html
    publish(power=None)
    html = client.get("/racks/1/").content.decode()
    assert 'id="entity-chart-util"' in html and 'id="entity-chart-power"' not in html
    assert 'id="entity-no-power"' in html and "No power model" in html
    assert "no power model" in html.split('id="rack-power"', 1)[1].split("</td>", 1)[0]


def test_an_unknown_rack_is_a_404(live, login):
    assert login("operator").get("/racks/3/").status_code == 404


def test_rack_names_link_to_the_rack_page_from_names_search_and_a_node(live, login):
    assert Names(live).rack(2).url == "/racks/2/"
    client = login("operator")
    found = client.get("/api/search", {"q": "tiny-rack-00002"}).json()
    assert "/racks/2/" in {hit["url"] for hit in found["results"]["rack"]["hits"]}
    node = client.get("/nodes/9/").content.decode()
    assert 'id="node-rack" href="/racks/2/"' in node


@pytest.mark.parametrize(("statuses", "status"), [
    (["up", "up", "spare"], "up"), (["up", "down"], "degraded"),
    (["down", "drained"], "down"), (["up", "unknown"], "unknown"), ([], "up")])
def test_a_rack_s_status_follows_its_nodes(statuses, status):
    assert rack_status(statuses) == status
