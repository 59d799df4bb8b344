"""The Events page and /api/events: severity per kind, kinds as a choice list with counts,
routine scheduling behind a filter, preemption waves as one row, bad filters answered with a
400 and a message, a page past the last answered with the last."""

import html
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from twin.api.events import KINDS, SEVERITIES
from twin.live import models as m
from twin.live.services import engine_events_store

INVENTORY = "inv-events"


def _line(t, kind, text, **extra):
    return {"t": t, "kind": kind, "text": text, **extra}


LOG = [
    _line(100.0, "failure", "xid on gpu 7: 1 job(s), 8 GPUs hit", component="gpu 7", jobs=["a"]),
    *[_line(200.0, "preempt", f"job-{k} preempted: for big", job=f"job-{k}") for k in range(5)],
    _line(300.0, "lend", "job-9 (8 GPUs) checkpoints and lends its GPUs", job="job-9"),
    _line(400.0, "drill", "drill node on 3: 1 job(s), 8 GPUs hit", component="node 3"),
    _line(500.0, "recover", "a resumes on 1 hot spare(s)", job="a"),
    _line(600.0, "failure", "nic on node 4: 0 job(s), 0 GPUs hit", component="node 4"),
]


@pytest.fixture
def events_live(db):
    live = m.LiveState.objects.create(pk=m.LiveState.SINGLETON_PK, health="ok",
                                      inventory=INVENTORY, t_sim=700.0, speed=10.0)
    engine_events_store(inventory=INVENTORY, first_seq=0, events=LOG)
    return live


def _html(client, query=""):
    response = client.get(f"/events/?{query}")
    return response.status_code, html.unescape(response.content.decode())


def _rows(page):
    return re.findall(r'<tr class="sev-(\w+)" data-kind="(\w+)">', page)


def test_every_listed_kind_has_a_known_severity():
    assert KINDS and {k.severity for k in KINDS.values()} <= set(SEVERITIES)
    assert KINDS["failure"].severity == "critical" and KINDS["node_down"].severity == "critical"
    assert KINDS["preempt"].routine and KINDS["lend"].routine
    assert not KINDS["failure"].routine and not KINDS["drill"].routine


def test_the_default_page_hides_routine_scheduling_and_a_filter_shows_it(login, events_live):
    client = login("operator")
    _, page = _html(client)
    assert [k for _, k in _rows(page)] == ["failure", "recover", "drill", "failure"]
    assert "4 events (routine scheduling hidden)" in page
    _, everything = _html(client, "routine=1")
    assert "10 events" in everything
    assert [k for _, k in _rows(everything)].count("preempt") == 1  # the wave is one row
    _, preempts = _html(client, "kind=preempt")  # a routine kind chosen by name is shown
    assert "5 events" in preempts and "a wave of 5 preemptions" in preempts


def test_a_preemption_wave_is_one_row_with_its_members(login, events_live):
    _, page = _html(login("operator"), "kind=preempt")
    assert len(_rows(page)) == 1 and "preempt ×5" in page
    text = re.sub(r"<[^>]+>", "", page)
    assert all(f"job-{k} preempted: for big" in text for k in range(5))
    assert all(f'<a href="/jobs/job-{k}/">job-{k}</a> preempted' in page for k in range(5))


def test_kinds_are_a_choice_list_with_counts_most_serious_first(login, events_live):
    _, page = _html(login("operator"))
    options = re.findall(r'<option value="(\w+)" data-severity="(\w+)"[^>]*>\w+ \((\d+)\)', page)
    assert options[0] == ("failure", "critical", "2")
    assert dict((k, int(n)) for k, _, n in options) == {
        "failure": 2, "drill": 1, "recover": 1, "preempt": 5, "lend": 1}


@pytest.mark.parametrize("severity, kinds", [
    ("critical", {"failure"}), ("warning", {"failure", "drill"}),
    ("info", {"failure", "drill", "recover"})])
def test_a_severity_filter_keeps_that_severity_and_above(login, events_live, severity, kinds):
    client = login("operator")
    _, page = _html(client, f"severity={severity}")
    assert {k for _, k in _rows(page)} == kinds
    api = client.get(f"/api/events?severity={severity}&routine=0").json()["events"]
    assert {e["kind"] for e in api} == kinds
    assert all(e["severity"] in SEVERITIES[SEVERITIES.index(severity):] for e in api)


@pytest.mark.parametrize("query, words", [
    ("kind=bogus", "unknown event kind 'bogus'"),
    ("severity=urgent", "unknown severity 'urgent'"),
    ("routine=maybe", "routine must be 1 or 0"),
])
def test_a_bad_filter_is_a_400_with_one_message_on_the_page_and_the_api(login, events_live,
                                                                        query, words):
    client = login("operator")
    status, page = _html(client, query)
    assert status == 400 and words in page and 'id="event-table"' not in page
    response = client.get(f"/api/events?{query}")
    assert response.status_code == 400 and words in response.json()["error"]


def test_an_unknown_kind_message_lists_the_kinds(login, events_live):
    error = login("operator").get("/api/events?kind=bogus").json()["error"]
    assert "failure" in error and "preempt" in error


def test_a_kind_the_engine_logs_but_the_table_lacks_is_accepted(login, events_live):
    engine_events_store(inventory=INVENTORY, first_seq=len(LOG),
                        events=[_line(650.0, "novel", "something new")])
    client = login("operator")
    status, page = _html(client, "kind=novel")
    assert status == 200 and "something new" in page and 'class="sev-info"' in page


@pytest.mark.parametrize("page", ["x", "1.5", "0", "-3"])
def test_a_page_that_is_not_a_whole_number_from_1_is_a_400(login, events_live, page):
    status, body = _html(login("operator"), f"page={page}")
    assert status == 400 and "page must be a whole number from 1" in body


def test_a_page_past_the_last_shows_the_last_and_says_so(login, events_live):
    client = login("operator")
    status, page = _html(client, "page=99999")
    assert status == 200 and "page 1 of 1" in page and "There is no page 99,999" in page
    data = client.get("/api/events?page=99999&per_page=3").json()
    assert data["page"] == data["pages"] == 4 and data["page_asked"] == 99999
    assert [e["seq"] for e in data["events"]] == [0]


def test_pager_links_keep_the_filters(login, events_live):
    engine_events_store(inventory=INVENTORY, first_seq=len(LOG), events=[
        _line(700.0 + k, "failure", f"fan on node 4 #{k}", component="node 4") for k in range(120)])
    _, page = _html(login("operator"), "component=node+4&severity=critical")
    assert "121 events" in page and "page 1 of 2" in page
    older = re.search(r'href="\?([^"]*)" id="older"', page).group(1)
    assert older == "component=node+4&severity=critical&page=2"
    _, second = _html(login("operator"), older)
    assert "page 2 of 2" in second and "fan on node 4 #0" in second


def test_event_times_are_wall_clock_with_the_simulated_time_on_hover(login, events_live):
    now = timezone.now()
    m.LiveState.objects.filter(pk=m.LiveState.SINGLETON_PK).update(updated_at=now)
    _, page = _html(login("operator"), "kind=drill")
    # the drill at t = 400 s, 300 simulated s before the live state at speed 10: 30 s earlier
    expected = (now - timedelta(seconds=30)).isoformat(timespec="seconds")
    assert f'<time class="wall" datetime="{expected}"' in page
    assert "simulated day 0, 00:06" in page
