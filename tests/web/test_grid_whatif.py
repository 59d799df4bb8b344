"""Grid what-ifs from the web (issue 30, docs/grid_whatif.md): the form needs staff with
twin.run_drill and CSRF; a bad one is one error and stores nothing; a simulated what-if is run
by the live grid between frames (a thread on a fork: the live grid does not move) and shown on
the page with its verdict table; a mirrored what-if runs from a fixed mirrored document and
per-site Slurm jobs."""

from __future__ import annotations

import copy

import pytest
from django.test import Client

from tests.waiting import wait_until
from tests.web.test_grid_inventory import grid_plans, grid_spec
from tests.web.test_grid_page import MIRRORED
from twin.inventory.grid import grid_write
from twin.live.grid_run import LiveGrid
from twin.live.grid_whatif import grid_whatif_request, grid_whatif_run_mirrored
from twin.live.models import GridWhatIf
from twin.mirror.grid_sites import job_rows
from twin.mirror.slurm_source import SlurmJob

FORM = {"source": "simulated", "horizon_h": "6", "seeds": "3", "change": "region_loss",
        "place": "paris"}


@pytest.fixture
def grid(db):
    plans = grid_plans()
    return grid_write(grid_spec(plans), plans)


def test_the_form_needs_the_permission(login, grid):
    response = login("operator").post("/grids/eu/whatifs", FORM)
    assert response.status_code == 403 and GridWhatIf.objects.count() == 0
    assert "grid-whatif-form" not in login("operator").get("/grids/eu/").content.decode()
    assert "grid-whatif-form" in login("staff").get("/grids/eu/").content.decode()


def test_the_form_needs_csrf(demo_users, grid):
    c = Client(enforce_csrf_checks=True)
    c.force_login(demo_users["staff"])
    assert c.post("/grids/eu/whatifs", FORM).status_code == 403
    assert GridWhatIf.objects.count() == 0


@pytest.mark.parametrize("change, error", [
    ({"seeds": "1"}, "seeds must be 2 to 16"),
    ({"seeds": "17"}, "seeds must be 2 to 16"),
    ({"seeds": "2.5"}, "seeds must be a whole number"),
    ({"horizon_h": "0"}, "horizon must be"),
    ({"horizon_h": "many"}, "horizon (h) must be a number"),
    ({"place": "lyon"}, "no place 'lyon'"),
    ({"change": "wan_cut", "link": "oslo|aws/eu-central-1"}, "no WAN link"),
    ({"change": "load", "factor": "50"}, "load factor"),
    ({"change": "policy", "policy": "cheapest"}, "policy"),
    ({"change": "warp"}, "a change is an object with a kind"),
    ({"source": "dreamed"}, "source must be"),
])
def test_a_bad_what_if_is_one_error_and_stores_nothing(login, grid, change, error):
    response = login("staff").post("/grids/eu/whatifs", {**FORM, **change}, follow=True)
    msgs = [str(m) for m in response.context["messages"]]
    assert len(msgs) == 1 and msgs[0].startswith("What-if refused") and error in msgs[0], msgs
    assert GridWhatIf.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_simulated_what_if_runs_on_the_live_grid_and_shows(tmp_path, monkeypatch, demo_users):
    monkeypatch.setenv("CLUSTERTWIN_GRID_DIR", str(tmp_path))
    plans = grid_plans()
    grid = grid_write(grid_spec(plans), plans)
    live = LiveGrid(grid, seed=2, days=2)
    live.step(14.5 * 3600.0)            # three gangs running at oslo then
    c = Client()
    c.force_login(demo_users["staff"])
    response = c.post("/grids/eu/whatifs", {**FORM, "place": "oslo"}, follow=True)
    assert "What-if #" in [str(m) for m in response.context["messages"]][0]
    row = GridWhatIf.objects.get()
    assert row.status == "pending" and row.requested_by == demo_users["staff"]
    assert row.params["seeds"] == [1, 2, 3] and row.params["horizon_h"] == 6.0
    now, lost = live.grid.now, live.grid.places["oslo"].dark
    live.drills_apply()                  # what run_grid calls between two frames
    wait_until(lambda: GridWhatIf.objects.get(pk=row.pk).status in ("done", "failed"),
               what="the what-if to finish")
    row.refresh_from_db()
    assert row.status == "done", row.result
    assert live.grid.now == now and live.grid.places["oslo"].dark == lost  # untouched
    s = row.result["summary"]
    assert s["lost_work_h"]["difference"]["low"] > 0   # oslo's running jobs lose work
    assert row.result["from_s"] == now and row.finished_at is not None
    html = c.get("/grids/eu/").content.decode()
    sec = html.split(f'data-whatif="{row.pk}"')[1].split("</div>")[0]
    assert "region_loss" in sec and 'data-metric="lost_work_h"' in sec
    assert "higher" in sec.split('data-metric="lost_work_h"')[1].split("</tr>")[0]
    assert live.drills_apply() == 0 and GridWhatIf.objects.get().status == "done"  # once


def _slurm_job(job_id, state, gpus, start, limit):
    return SlurmJob(job_id, "train", "u", "a", "gpu", state, "", (), gpus, None, None, start,
                    None, limit, None)


def test_a_mirrored_what_if_starts_from_the_real_queues(demo_users, grid):
    read_at = 1.7e9
    paris = [_slurm_job("1", "RUNNING", 16, read_at - 3600.0, 3 * 3600.0),
             _slurm_job("2", "RUNNING", 8, read_at - 600.0, None),
             _slurm_job("3", "PENDING", 8, None, 7200.0),
             _slurm_job("4", "COMPLETED", 8, read_at - 9000.0, 7200.0)]
    jobs = {"paris": list(job_rows(paris, read_at)),
            "oslo": list(job_rows([_slurm_job("9", "RUNNING", 8, read_at - 60, 36000.0)],
                                  read_at))}
    assert [(j["job_id"], j["state"], j["elapsed_s"]) for j in jobs["paris"]] == [
        ("1", "running", 3600.0), ("2", "running", 600.0), ("3", "pending", None)]
    doc = copy.deepcopy(MIRRORED)
    rows = []
    for change, place in ((None, None), ("region_loss", "oslo")):
        row = grid_whatif_request(
            user=demo_users["staff"], grid=grid, source="mirrored", horizon_h=4, seeds=3,
            change={"kind": "none"} if change is None else {"kind": change, "place": place})
        rows.append(grid_whatif_run_mirrored(row=row, doc=doc, jobs=jobs))
    base, loss = rows
    assert base.status == loss.status == "done", (base.result, loss.result)
    per = base.result["per_seed"][0]["baseline"]
    assert per["cost"] > 0 and per["mfu"] > 0          # the mirrored jobs run from now
    d = loss.result["summary"]["cost"]["difference"]
    assert loss.result["summary"]["cost"]["verdict"] != "too few seeds" and d["n"] == 3


def test_a_mirrored_what_if_with_jobs_at_no_place_fails_and_says_why(demo_users, grid):
    row = grid_whatif_request(user=demo_users["staff"], grid=grid, source="mirrored",
                              horizon_h=1, seeds=2, change={"kind": "none"})
    bad = {"paris": [{"job_id": "1", "state": "running", "gpus": 0}]}
    out = grid_whatif_run_mirrored(row=row, doc=copy.deepcopy(MIRRORED), jobs=bad)
    assert out.status == "failed" and "gpus must be" in out.result["error"]


def test_the_command_runs_a_mirrored_what_if_and_refuses_a_bad_call(demo_users, grid):
    from django.core.management import CommandError, call_command
    row = grid_whatif_request(user=demo_users["staff"], grid=grid, source="mirrored",
                              horizon_h=1, seeds=2, change={"kind": "region_loss",
                                                            "place": "paris"})
    with pytest.raises(CommandError, match="give --id"):
        call_command("grid_whatif")
    call_command("grid_whatif", id=row.pk)  # no SiteMirror rows: every site unreachable
    row.refresh_from_db()
    assert row.status == "failed" and "no site's Slurm answered" in row.result["error"]
    with pytest.raises(CommandError, match="no pending mirrored"):
        call_command("grid_whatif", id=row.pk)
