"""The grid page's Incidents (issue 30, item 4): a drill on the running grid (region loss, WAN
cut, supply cut) shows as an open incident naming what it hit with the jobs hit, then as
resolved once over; a document without incidents still renders; a site's page shows only the
incidents that name it or its links; the JSON endpoint carries them and grid.js redraws them."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from scheduler.grid.overview import check_overview
from tests.web.test_grid_page import MIRRORED, grid, live  # noqa: F401 - fixtures
from twin.live.models import GridState
from twin.mirror.errors import SourceError
from twin.mirror.grid_mirror import GridMirror
from twin.mirror.grid_sites import SiteReading, SiteSource

ROOT = Path(__file__).resolve().parents[2]


def incident_rows(html: str, source: str) -> list[dict]:
    """The Incidents table of ``source``: per row its attributes and {data-key: text}."""
    card = html.split('id="grid-incidents"')[1].split("</section>")[0]
    table = card.split(f'<table class="grid-incidents" data-source="{source}">')[1]
    table = table.split("</table>")[0]
    rows = []
    for attrs, body in re.findall(r'<tr (data-incident[^>]*)>(.*?)</tr>', table):
        row = dict(re.findall(r'data-(\w+)="([^"]*)"', attrs))
        row.update({k: re.sub("<[^>]+>", "", v).strip()
                    for k, v in re.findall(r'data-key="(\w+)"[^>]*>(.*?)</td>', body)})
        rows.append(row)
    return rows


def _drill(c, live, **form):  # noqa: F811 - the fixture
    c.post("/grids/eu/drills", form)
    assert live.drills_apply() == 1
    return live.publish()


@pytest.mark.parametrize("form, kind, target", [
    ({"kind": "grid_region_loss", "place": "paris", "duration_s": "7200"}, "region_loss",
     "paris"),
    ({"kind": "grid_wan_cut", "link": "paris|oslo", "duration_s": "7200"}, "wan_cut",
     "paris-oslo"),
    ({"kind": "grid_supply_cut", "model": "H100-SXM", "duration_s": "7200"}, "supply_cut",
     "H100-SXM"),
])
def test_a_drill_on_the_running_grid_is_an_open_incident_then_resolved(
        login, live, form, kind, target):  # noqa: F811 - the fixture
    c = login("staff")
    live.step(12 * 3600.0)  # to 18 h: two jobs run at paris
    at_paris = sum(js.place == "paris" and js.state in ("placed", "moving")
                   for js in live.grid.jobs.values())
    doc = _drill(c, live, **form)
    (inc,) = [i for i in doc["incidents"] if i["kind"] == kind]
    assert inc["target"] == target and inc["until_s"] is None
    if kind == "region_loss":  # the loss hits every job at paris
        assert inc["jobs_hit"] >= at_paris > 0
    html = c.get("/grids/eu/").content.decode()
    (row,) = incident_rows(html, "simulated")
    assert (row["incident"], row["target"], row["state"]) == (kind, target, "open")
    assert row["since"] == "day 0, 18:00" and row["jobs_hit"] == str(inc["jobs_hit"])
    assert row["resolved"] == "open"
    live.step(7200.0 + 60.0)
    live.publish()
    html = c.get("/grids/eu/").content.decode()
    (row,) = incident_rows(html, "simulated")
    assert row["target"] == target and row["state"] == "resolved"
    assert row["resolved"] == "resolved day 0, 20:00"


def test_a_document_without_incidents_still_renders(login, grid):  # noqa: F811
    GridState.objects.create(grid=grid, source="mirrored", doc=copy.deepcopy(MIRRORED))
    html = login("operator").get("/grids/eu/").content.decode()
    assert 'data-place="paris"' in html
    assert incident_rows(html, "mirrored") == [] and "no incident" in html
    body = login("operator").get("/api/grids/eu/").json()
    assert body["sources"][0]["incidents"] == []


def _inc(kind, target, until=None, hit=0):
    return {"kind": kind, "target": target, "since_s": 1.7e9 - 600.0, "until_s": until,
            "jobs_hit": hit, "moved_gb": 12.5, "lost_gpu_hours": None, "note": ""}


@pytest.fixture
def with_incidents(grid):  # noqa: F811
    doc = copy.deepcopy(MIRRORED)
    doc["incidents"] = [_inc("region_loss", "oslo", until=1.7e9 - 60.0, hit=3),
                        _inc("wan_cut", "paris-aws/eu-central-1", hit=2),
                        _inc("source_down", "gcp/us-east4")]
    return GridState.objects.create(grid=grid, source="mirrored", doc=doc)


def test_open_incidents_come_first_with_what_they_hurt(login, with_incidents):
    html = login("operator").get("/grids/eu/").content.decode()
    rows = incident_rows(html, "mirrored")
    assert [(r["target"], r["state"]) for r in rows] == [
        ("paris-aws/eu-central-1", "open"), ("gcp/us-east4", "open"), ("oslo", "resolved")]
    assert rows[2]["jobs_hit"] == "3" and rows[2]["moved_gb"] == "12.5"
    assert rows[2]["lost_gpu_hours"] == "–"


def test_a_site_page_shows_only_its_own_incidents(login, with_incidents):
    c = login("operator")
    want = {"paris": ["paris-aws/eu-central-1"], "oslo": ["oslo"],
            "aws/eu-central-1": ["paris-aws/eu-central-1"], "gcp/us-east4": ["gcp/us-east4"]}
    for place, targets in want.items():
        html = c.get(f"/grids/eu/sites/{place}/").content.decode()
        assert [r["target"] for r in incident_rows(html, "mirrored")] == targets
        api = c.get("/api/grids/eu/", {"place": place}).json()["sources"][0]
        assert [i["target"] for i in api["incident_rows"]] == targets
        assert [i["target"] for i in api["incidents"]] == targets


def test_the_api_carries_the_cells_and_the_poller_redraws_them(login, with_incidents):
    body = login("operator").get("/api/grids/eu/").json()
    assert "incident" in body["columns"]
    (src,) = body["sources"]
    assert [i["state"] for i in src["incidents"]] == ["open", "open", "resolved"]
    assert src["incidents"][0]["cells"][4] == {"text": "2", "key": "jobs_hit"}
    js = (ROOT / "static/js/grid.js").read_text()
    assert 'getElementById("grid-incidents")' in js and "incidents(view);" in js


def test_the_mirror_has_a_source_down_incident_since_the_first_failed_poll():
    clock = [100.0]
    dead = {"oslo"}

    def read(site):
        if site.place in dead:
            raise SourceError(site.place, "unreachable")
        return SiteReading(16, 8, 0, 1, 4, clock[0])

    mirror = GridMirror("eu", [SiteSource("paris"), SiteSource("oslo")], [], read=read,
                        clock=lambda: clock[0])
    mirror.poll_once()
    clock[0] = 160.0
    mirror.poll_once()  # still down: the incident keeps its first failed poll's time
    doc = check_overview(mirror.overview())
    (inc,) = doc["incidents"]
    assert (inc["kind"], inc["target"], inc["since_s"], inc["until_s"]) == \
        ("source_down", "oslo", 100.0, None)
    assert "unreachable" in inc["note"]
    dead.clear()
    clock[0] = 200.0
    mirror.poll_once()
    assert mirror.overview()["incidents"] == []
