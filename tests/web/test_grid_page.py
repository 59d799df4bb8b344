"""The grid pages (issue 30): login required; the rows come from the GridState documents (both
sources, with their age); every place's scoped page sums to the grid's totals; the JSON
endpoint gives the same; the drill form needs staff with twin.run_drill and CSRF, and a bad
drill is one error that writes nothing; the live grid applies a drill and resumes from its
snapshot; ``run_grid`` runs as a process, publishes, and stops on SIGTERM with a snapshot."""

from __future__ import annotations

import copy
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from scheduler.grid.overview import totals
from tests.waiting import wait_until
from tests.web.test_grid_inventory import grid_plans, grid_spec
from twin.inventory.grid import grid_write
from twin.live.grid_run import LiveGrid
from twin.live.models import Drill, DrillStatus, GridState

ROOT = Path(__file__).resolve().parents[2]
PLACES = ["paris", "oslo", "aws/eu-central-1", "gcp/us-east4"]


def row(place, kind, gpus, allocated, down=0, cost=None, mfu=None, wan=(0.0, 0.0),
        health="ok", q=(0, 0)):
    return {"place": place, "kind": kind, "cluster": place if kind == "site" else "",
            "jurisdiction": "EU", "gpus": gpus, "allocated": allocated, "down": down,
            "queued_jobs": q[0], "queued_gpus": q[1], "mfu": mfu, "cost_per_hour": cost,
            "wan_in_gb": wan[0], "wan_out_gb": wan[1], "health": health, "note": ""}


MIRRORED = {
    "grid": "eu", "source": "mirrored", "t_s": 1.7e9,
    "places": [row("paris", "site", 32, 24, 8, 12.5, 0.4123, (1500.5, 200.0), q=(3, 40)),
               row("oslo", "site", 24, 16, 0, 3.25, None, (0.0, 1300.0), q=(1, 8)),
               row("aws/eu-central-1", "cloud", 64, 16, 0, 110.4, None, (0.0, 0.0)),
               row("gcp/us-east4", "cloud", 32, 0, 32, None, None, (0.0, 0.0), "down")],
    "links": [{"a": "paris", "b": "oslo", "gbps": 100.0, "load_gbps": 25.0, "up": True},
              {"a": "paris", "b": "aws/eu-central-1", "gbps": 50.0, "load_gbps": 0.0,
               "up": False}],
    "moves": [{"job": "j1", "source": "oslo", "to": "paris", "gb": 1300.0, "started_s": 1.7e9,
               "done_s": None, "why": "dataset"}],
}


@pytest.fixture
def grid(db):
    plans = grid_plans()
    return grid_write(grid_spec(plans), plans)


@pytest.fixture
def mirrored(grid):
    return GridState.objects.create(grid=grid, source="mirrored", doc=copy.deepcopy(MIRRORED))


@pytest.fixture
def live(grid, tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERTWIN_GRID_DIR", str(tmp_path))
    lg = LiveGrid(grid, seed=2, days=2)
    lg.step(6 * 3600.0)
    lg.publish()
    return lg


def cells(html: str, source: str, place: str) -> dict:
    """A place's (or ``total``'s) row of ``source``'s table: {data-key: text}."""
    sec = html.split(f'<section class="card grid-source" data-source="{source}">')[1]
    sec = sec.split("</section>")[0]
    marker = "data-total>" if place == "total" else f'data-place="{place}">'
    tr = sec.split(marker)[1].split("</tr>")[0]
    return {k: re.sub("<[^>]+>", "", v).strip()
            for k, v in re.findall(r'data-key="(\w+)"[^>]*>(.*?)</td>', tr)}


def test_pages_and_api_need_a_login(client, grid, mirrored):
    for url in ("/grids/", "/grids/eu/", "/grids/eu/sites/paris/"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.get("/api/grids/eu/").status_code == 401


def test_the_list_and_nav_link(login, grid, mirrored):
    html = login("operator").get("/grids/").content.decode()
    assert '<a href="/grids/">Grid</a>' in html or 'href="/grids/" aria-current' in html
    assert '<a href="/grids/eu/">eu</a>' in html and "mirrored" in html


def test_grid_page_rows_come_from_the_document(login, mirrored):
    html = login("operator").get("/grids/eu/").content.decode()
    paris = cells(html, "mirrored", "paris")
    assert paris == {"place": "paris", "gpus": "32", "allocated": "24", "down": "8",
                     "queued_jobs": "3", "queued_gpus": "40", "mfu": "41.23 %",
                     "cost_per_hour": "12.50", "wan_in_gb": "1,500.5", "wan_out_gb": "200.0",
                     "health": "ok"}
    assert cells(html, "mirrored", "gcp/us-east4")["health"] == "down"
    assert cells(html, "mirrored", "gcp/us-east4")["cost_per_hour"] == "–"
    total = cells(html, "mirrored", "total")
    assert total["gpus"] == "152" and total["allocated"] == "56" and total["down"] == "40"
    assert total["cost_per_hour"] == "126.15" and total["wan_out_gb"] == "1,500.0"
    assert "paris – oslo" in html and "25.0 %" in html and ">cut<" in html
    assert "under way" in html and 'href="/grids/eu/sites/paris/"' in html
    assert "updated" in html and "ago" in html


def test_both_sources_shown_with_their_age(login, mirrored, live):
    html = login("operator").get("/grids/eu/").content.decode()
    assert html.index('data-source="simulated"') < html.index('data-source="mirrored"')
    sim = live.grid.places["paris"].engine
    assert cells(html, "simulated", "paris")["gpus"] == f"{sim.plan.n_gpus:,}"
    assert "day 0, 06:00" in html  # the simulated source's clock


def test_site_pages_sum_to_the_grid_totals(login, mirrored, live):
    c = login("staff")
    for source in ("mirrored", "simulated"):
        doc = GridState.objects.get(source=source).doc
        want = totals(doc)
        summed = dict.fromkeys(("gpus", "allocated", "down", "queued_jobs", "queued_gpus"), 0)
        for place in PLACES:
            response = c.get(f"/grids/eu/sites/{place}/")
            assert response.status_code == 200
            html = response.content.decode()
            got = cells(html, source, place)
            for key in summed:
                summed[key] += int(got[key].replace(",", ""))
            assert cells(html, source, "total")["gpus"] == got["gpus"]
        assert summed == {k: want[k] for k in summed}
    html = c.get("/grids/eu/sites/paris/").content.decode()
    assert 'id="site-admin"' in html and "/admin/twin/cluster/" in html
    assert "paris – oslo" in html and "oslo – gcp" not in html
    assert c.get("/grids/eu/sites/lyon/").status_code == 404


def test_api_gives_the_same_cells_and_numbers(login, mirrored):
    body = login("operator").get("/api/grids/eu/").json()
    (src,) = body["sources"]
    assert src["source"] == "mirrored" and src["age_s"] >= 0
    assert src["totals"] == totals(MIRRORED)
    assert src["places"][0][2] == {"text": "32", "key": "gpus"}
    one = login("operator").get("/api/grids/eu/", {"place": "oslo"}).json()["sources"][0]
    assert [r["place"] for r in one["place_rows"]] == ["oslo"] and one["totals"]["gpus"] == 24
    assert login("operator").get("/api/grids/nope/").status_code == 404


def test_a_broken_document_is_one_error_not_half_a_grid(login, grid):
    GridState.objects.create(grid=grid, source="mirrored", doc={"grid": "eu"})
    html = login("operator").get("/grids/eu/").content.decode()
    assert "grid overview: missing source" in html and "data-place" not in html


def test_drills_need_the_permission(login, grid):
    response = login("operator").post("/grids/eu/drills", {"kind": "grid_region_loss",
                                                           "place": "paris"})
    assert response.status_code == 403 and Drill.objects.count() == 0
    assert 'id="grid-drill"' not in login("operator").get("/grids/eu/").content.decode()


def test_drills_need_csrf(demo_users, grid):
    c = Client(enforce_csrf_checks=True)
    c.force_login(demo_users["staff"])
    response = c.post("/grids/eu/drills", {"kind": "grid_region_loss", "place": "paris"})
    assert response.status_code == 403 and Drill.objects.count() == 0


@pytest.mark.parametrize("form, error", [
    ({"kind": "grid_region_loss", "place": "lyon"}, "no place 'lyon' in grid eu"),
    ({"kind": "grid_wan_cut", "link": "oslo|aws/eu-central-1"}, "no WAN link joins"),
    ({"kind": "grid_region_loss", "place": "paris", "duration_s": "-5"}, "duration must be"),
    ({"kind": "power_cap", "place": "paris"}, "unknown grid drill"),
])
def test_a_bad_drill_is_one_error_and_changes_nothing(login, grid, form, error):
    response = login("staff").post("/grids/eu/drills", form, follow=True)
    msgs = [str(m) for m in response.context["messages"]]
    assert len(msgs) == 1 and error in msgs[0] and msgs[0].startswith("Drill refused")
    assert Drill.objects.count() == 0


def test_the_live_grid_applies_a_drill_and_audits_it(login, live, demo_users):
    c = login("staff")
    c.post("/grids/eu/drills", {"kind": "grid_region_loss", "place": "oslo",
                                "duration_s": "7200"})
    c.post("/grids/eu/drills", {"kind": "grid_wan_cut", "link": "paris|oslo"})
    drills = list(Drill.objects.order_by("pk"))
    assert [d.status for d in drills] == ["pending", "pending"]
    assert drills[0].requested_by == demo_users["staff"]
    assert live.drills_apply() == 2
    doc = live.publish()
    rows = {r["place"]: r for r in doc["places"]}
    assert rows["oslo"]["health"] == "down" and rows["oslo"]["down"] == rows["oslo"]["gpus"]
    assert rows["paris"]["health"] == "ok"
    assert [lk["up"] for lk in doc["links"] if {lk["a"], lk["b"]} == {"paris", "oslo"}] == [False]
    drills = list(Drill.objects.order_by("pk"))
    assert [d.status for d in drills] == [DrillStatus.APPLIED] * 2
    assert drills[0].applied_at_sim == live.grid.now and "oslo dark" in drills[0].outcome["effect"]
    live.step(7200.0)
    assert live.publish()["places"][1]["health"] == "ok"  # back after its duration
    html = c.get("/grids/eu/").content.decode()
    assert 'data-drill="' in html and "oslo dark" in html


def test_the_cluster_engine_leaves_grid_drills_alone(login, grid):
    from twin.live.command_log import drills_pending
    login("staff").post("/grids/eu/drills", {"kind": "grid_region_loss", "place": "paris"})
    assert Drill.objects.count() == 1 and drills_pending() == []


def test_a_restart_resumes_from_the_snapshot(live, grid):
    live.save()
    again = LiveGrid(grid, seed=2, days=2)
    assert again.resumed_from == live.grid.now == 6 * 3600.0
    live.step(3600.0)
    again.step(3600.0)
    assert again.publish() == live.publish()
    other = LiveGrid(grid, seed=3, days=2)  # another seed: not this snapshot
    assert other.resumed_from is None and other.grid.now == 0.0 and "afresh" in other.note


def run_grid(env, *args, log: Path | None = None):
    out = subprocess.PIPE if log is None else log.open("a")
    return subprocess.Popen([sys.executable, "manage.py", "run_grid", *args], cwd=ROOT,
                            env=env, stdout=out, stderr=subprocess.STDOUT, text=True)


@pytest.fixture
def grid_db(tmp_path):
    from bench.live_server import live_env, manage
    env = live_env(tmp_path / "db.sqlite3", mode="off", speed=3600.0, frame_interval_s=0.2)
    env["CLUSTERTWIN_GRID_DIR"] = str(tmp_path / "grids")
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", "from tests.web.test_grid_inventory import grid_plans, grid_spec\n"
                               "from twin.inventory.grid import grid_write\n"
                               "p = grid_plans(); grid_write(grid_spec(p), p)")
    return env, tmp_path


def _state_t(tmp_path):
    import json
    import sqlite3
    with sqlite3.connect(tmp_path / "db.sqlite3") as db:
        got = db.execute("select doc from twin_gridstate where source='simulated'").fetchone()
    return None if got is None else json.loads(got[0])["t_s"]


def test_run_grid_publishes_stops_on_sigterm_and_resumes(grid_db):
    env, tmp = grid_db
    log = tmp / "run_grid.log"
    starts = []
    for run in range(2):
        proc = run_grid(env, "--grid", "eu", "--seed", "1", log=log)
        try:
            wait_until(lambda n=2 * run: log.read_text().count("grid eu: ") > n, timeout=120,
                       what="run_grid to say it started")
            since = _state_t(tmp) or 0.0
            wait_until(lambda s=since: (_state_t(tmp) or 0) > s + 3600.0, timeout=120,
                       what="run_grid to publish an hour further on")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        assert proc.returncode == 0, log.read_text()
        text = log.read_text()
        starts.append(re.findall(r"(started|resumed) at t=(\d+) s", text)[-1])
        stopped = re.findall(r"stopped at t=(\d+) s, snapshot stored", text)
        assert len(stopped) == run + 1 and "Traceback" not in text
    assert starts[0] == ("started", "0")
    assert starts[1] == ("resumed", stopped[0])
    assert (tmp / "grids" / "eu.pickle").exists()


def test_run_grid_refuses_an_unknown_grid_in_one_line(grid_db):
    env, _ = grid_db
    proc = run_grid(env, "--grid", "nope")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert out.strip().splitlines()[-1].endswith("no grid 'nope' in the inventory (grids: eu)")


def test_a_grid_without_an_overview_says_how_to_get_one(login, grid):
    html = login("operator").get("/grids/eu/").content.decode()
    assert 'id="grid-no-source"' in html and "run_grid --grid eu" in html
    assert login("operator").get("/api/grids/eu/").json()["sources"] == []
    assert login("operator").get("/grids/nope/").status_code == 404
