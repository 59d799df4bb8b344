"""Every entity name in the server-drawn tables (Events, Alerts, Failures, a job's timeline and
Incidents when that page exists) is a link to its page, shown by name: components the log
numbers by engine id (``host 3``, ``leaf 10``, ``switch 24``, ``rack 1``) by their names,
jobs and tenants by theirs.  The Jobs page's tables are drawn by the browser
(tests/browser/test_entity_links.py)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.utils import timezone

from twin import models as m
from twin.alerts.entities import Labeller
from twin.live import services

RUN = "run-links"
TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "twin"

if (TEMPLATES / "incidents.html").exists():  # the Incidents page's own scene: a leaf and a
    from tests.web.test_incidents_web import scene  # node drill on dev-small
else:
    scene = None

LOG = [
    {"t": 60.0, "kind": "failure", "text": "xid on host 3: 1 job(s), 8 GPUs hit",
     "component": "host 3", "cause": "xid", "jobs": ["train-7"]},
    {"t": 120.0, "kind": "drill", "text": "drill leaf_switch on 10: 2 job(s), 16 GPUs hit",
     "component": "leaf_switch 10", "drill": "leaf_switch", "jobs": ["train-7", "serve-2"]},
    {"t": 180.0, "kind": "switch", "text": "spine switch 24 marked failed: its links are out, "
     "1 job(s) re-rated", "switch": 24, "jobs": ["train-7"]},
    {"t": 240.0, "kind": "power", "text": "power feed of rack 1 marked failed: 4 nodes",
     "component": "rack 1", "jobs": []},
    {"t": 300.0, "kind": "drill", "text": "drill node on 5: 0 job(s), 0 GPUs hit",
     "component": "node 5", "drill": "node", "jobs": []},
    {"t": 360.0, "kind": "failure", "text": "overheat on gpu 19: 1 job(s), 4 GPUs hit",
     "component": "gpu 19", "jobs": ["serve-2"]},
]


class Table(HTMLParser):
    """The cells of one ``<table id=...>``: per row, per cell, its text and its links' texts
    (``headers``: the header cells' texts)."""

    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.depth = table_id, 0
        self.headers: list[str] = []
        self.rows: list[list[dict]] = []
        self._cell: dict | None = None
        self._in_link = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            if self.depth or attrs.get("id") == self.table_id:
                self.depth += 1
            return
        if not self.depth:
            return
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = {"tag": tag, "text": "", "links": [], "hrefs": []}
        elif tag == "a" and self._cell is not None:
            self._in_link = True
            self._cell["links"].append("")
            self._cell["hrefs"].append(attrs.get("href", ""))

    def handle_endtag(self, tag):
        if not self.depth:
            return
        if tag == "table":
            self.depth -= 1
        elif tag == "a":
            self._in_link = False
        elif tag in ("td", "th") and self._cell is not None:
            if self._cell["tag"] == "th":
                self.headers.append(self._cell["text"].strip())
            else:
                self.rows[-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data
            if self._in_link:
                self._cell["links"][-1] += data


def table(html: str, table_id: str) -> Table:
    parsed = Table(table_id)
    parsed.feed(html)
    assert parsed.headers, f"no table {table_id!r} in the page"
    return parsed


def column(parsed: Table, header: str) -> list[dict]:
    k = next(i for i, h in enumerate(parsed.headers) if h.startswith(header))
    return [row[k] for row in parsed.rows if len(row) > k]


def assert_all_linked(cells: list[dict], *, names: set[str]) -> None:
    """Each of ``names`` appearing in a cell is one of its links' texts, and no cell shows an
    engine id where a name belongs."""
    for cell in cells:
        for name in names:
            if name in cell["text"]:
                assert name in cell["links"], (name, cell)


@pytest.fixture
def live(small_cluster):
    from tests.web.test_entity_pages import frame, placement
    services.live_state_write(seq=1, t_sim=7200.0, frame=frame(), health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN, placement=placement())
    services.engine_events_store(inventory=RUN, first_seq=0, events=LOG)
    return small_cluster


ENTITIES = {"tiny-n000003", "tiny-n000005", "leaf-00010", "spine-00024", "tiny-rack-00001",
            "tiny-n000002:3", "train-7", "serve-2"}


def test_the_events_table_names_and_links_every_component_and_job(live, login):
    html = login("operator").get("/events/").content.decode()
    parsed = table(html, "event-table")
    components = column(parsed, "component")
    assert [c["links"] for c in components] == [
        ["tiny-n000002:3"], ["tiny-n000005"], ["tiny-rack-00001"], ["spine-00024"],
        ["leaf-00010"], ["tiny-n000003"]]
    assert all(len(c["hrefs"]) == 1 and c["hrefs"][0].startswith(("/nodes/", "/switches/",
                                                                   "/racks/"))
               for c in components)
    jobs = column(parsed, "jobs")
    assert [c["links"] for c in jobs if c["text"].strip()] == [
        ["serve-2"], ["train-7"], ["train-7", "serve-2"], ["train-7"]]
    texts = column(parsed, "event")
    assert_all_linked(components + jobs + texts, names=ENTITIES)
    shown = " ".join(c["text"] for c in components + texts)
    for engine_words in ("host 3", "gpu 19", "rack 1", "switch 24"):
        assert engine_words not in shown  # by name, not by engine id


def test_an_event_filter_takes_a_name_and_finds_every_way_the_log_names_it(live, login):
    client = login("operator")
    for query in ("leaf-00010", "leaf 10", "leaf_switch 10", "switch 10"):
        html = client.get("/events/", {"component": query}).content.decode()
        assert [c["links"] for c in column(table(html, "event-table"), "component")] == [
            ["leaf-00010"]], query
    html = client.get("/events/", {"component": "tiny-n000003"}).content.decode()
    assert [c["links"] for c in column(table(html, "event-table"), "component")] == [
        ["tiny-n000003"]]


def test_a_job_timeline_names_components_and_links_other_jobs(live, login):
    html = login("operator").get("/jobs/train-7/").content.decode()
    parsed = table(html, "job-timeline")
    assert_all_linked(column(parsed, "component") + column(parsed, "what"),
                      names=ENTITIES - {"train-7"})
    assert {"leaf-00010", "spine-00024", "tiny-n000003"} <= {
        link for c in column(parsed, "component") for link in c["links"]}


def test_the_failures_page_lists_the_latest_failures_by_name(live, login):
    html = login("operator").get("/failures/").content.decode()
    parsed = table(html, "failure-events")
    assert_all_linked(column(parsed, "component") + column(parsed, "jobs")
                      + column(parsed, "what"), names=ENTITIES)
    assert len([row for row in parsed.rows if row]) == len(LOG)


def test_alert_labels_link_tenants_jobs_and_components(live, login):
    rule = m.AlertRule.objects.create(name="links", figure="util.down", threshold=1.0)
    for labels in ({"tenant": "acme"}, {"job": "train-7"}, {"node": "3"}, {"switch": "10"},
                   {"rack": "1"}):  # labels hold engine ids (twin/alerts/entities.py)
        m.Alert.objects.create(rule=rule, labels=labels, value=2.0, t_sim=60.0,
                               started_at=timezone.now(),
                               entities=Labeller(live).entities_of(labels))
    html = login("operator").get("/alerts/").content.decode()
    labels = column(table(html, "alert-table"), "what")
    assert sorted(link for c in labels for link in c["links"]) == sorted(
        ["acme", "train-7", "tiny-n000003", "leaf-00010", "tiny-rack-00001"])
    assert_all_linked(labels, names=ENTITIES | {"acme"})


@pytest.mark.skipif(scene is None, reason="no Incidents page yet")
def test_the_incidents_table_links_every_component_and_job(login, scene):
    html = login("operator").get("/incidents/").content.decode()
    parsed = table(html, "incident-table")
    rows = [row for row in parsed.rows if row]
    assert rows, "the drills made no incident"
    names = (set(m.Node.objects.values_list("hostname", flat=True))
             | set(m.Switch.objects.values_list("name", flat=True))
             | set(m.Rack.objects.values_list("name", flat=True))
             | set(scene["leaf_hit"]["jobs"]))
    for row in rows:
        assert_all_linked(row, names=names)
    components = column(parsed, "component")
    assert all(c["links"] for c in components), components
