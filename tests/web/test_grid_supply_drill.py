"""The supply-cut drill from the product's entry points (issue 30, item 4): staff with
twin.run_drill ask for it on the grid page (an audited Drill row), a model no place has is one
error that writes nothing, the running LiveGrid applies it (spares frozen, the cloud's quota
frozen, the overview's note), and ``simulate --supply-cut MODEL@HOURS[+DURATION_H]``."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from tests.web.test_grid_inventory import grid_plans, grid_spec
from twin.inventory.grid import grid_write
from twin.live.grid_run import LiveGrid
from twin.live.models import Drill, DrillStatus

CUT = {"kind": "grid_supply_cut", "model": "mi300x", "duration_s": "7200"}


@pytest.fixture
def grid(db):
    plans = grid_plans()
    return grid_write(grid_spec(plans), plans)


@pytest.fixture
def live(grid, tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERTWIN_GRID_DIR", str(tmp_path))
    lg = LiveGrid(grid, seed=2, days=2)
    lg.step(3600.0)
    return lg


def test_a_supply_cut_drill_needs_the_permission(login, grid):
    response = login("operator").post("/grids/eu/drills", CUT)
    assert response.status_code == 403 and Drill.objects.count() == 0


def test_the_form_offers_the_supply_cut(login, grid):
    html = login("staff").get("/grids/eu/").content.decode()
    assert 'value="grid_supply_cut"' in html and 'name="model"' in html


@pytest.mark.parametrize("model, error", [
    ("B200", "no place of grid eu has accelerator model 'B200' (models: H100-SXM, MI300X)"),
    ("", "no place of grid eu has accelerator model ''"),
])
def test_a_model_no_place_has_is_one_error_and_writes_nothing(login, grid, model, error):
    response = login("staff").post("/grids/eu/drills", {**CUT, "model": model}, follow=True)
    msgs = [str(m) for m in response.context["messages"]]
    assert len(msgs) == 1 and msgs[0].startswith("Drill refused") and error in msgs[0]
    assert Drill.objects.count() == 0


def test_the_live_grid_applies_a_supply_cut_and_audits_it(login, live, demo_users):
    login("staff").post("/grids/eu/drills", CUT)
    (drill,) = Drill.objects.all()
    assert (drill.kind, drill.target, drill.status) == ("grid_supply_cut", "MI300X", "pending")
    assert drill.requested_by == demo_users["staff"] and drill.params["grid"] == "eu"
    assert live.drills_apply() == 1
    drill.refresh_from_db()
    assert drill.status == DrillStatus.APPLIED and drill.applied_at_sim == live.grid.now
    assert "supply of MI300X cut" in drill.outcome["effect"]
    places = live.grid.places
    assert places["oslo"].engine.spares.cut_models == {0}        # its spare node frozen
    assert places["paris"].engine.spares.cut_models == set()     # H100s only: untouched
    assert places["gcp/us-east4"].supply["MI300X"]["frozen_gpus"] is not None
    rows = {r["place"]: r for r in live.publish()["places"]}
    assert rows["oslo"]["note"].startswith("supply of MI300X cut since")
    assert rows["paris"]["note"] == ""
    live.step(7200.0)  # the cut's duration
    assert places["oslo"].engine.spares.cut_models == set()
    assert all(r["note"] == "" for r in live.publish()["places"])


def test_a_pending_cut_of_a_model_the_grid_lost_is_refused_with_its_reason(login, live):
    """A drill written before the grid changed: the running grid refuses it, says why, and
    schedules nothing."""
    login("staff").post("/grids/eu/drills", CUT)
    Drill.objects.update(target="B200")
    heap = list(live.grid._heap)
    assert live.drills_apply() == 0
    (drill,) = Drill.objects.all()
    assert drill.status == DrillStatus.REFUSED and "B200" in drill.outcome["error"]
    assert live.grid._heap == heap


# ------------------------------------------------------------------ simulate --supply-cut
def simulate(tmp_path, *args):
    path = tmp_path / "r.json"
    call_command("simulate", "--preset", "grid", "--days", "1", "--seed", "1", *args,
                 "--json", str(path), stdout=_Out())
    return json.loads(path.read_text())


class _Out:
    text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_simulate_supply_cut_books_the_cut(db, tmp_path):
    rep = simulate(tmp_path, "--supply-cut", "h100-sxm@2+6")
    assert rep["scenario"]["supply_cuts"] == [["H100-SXM", 7200.0, 21600.0]]
    by = {s["place"]: s["supply_cut"] for s in rep["sites"]}
    assert by["aws/eu-central-1"]["hours"] == 6.0 and by["eu-west"]["hours"] == 0.0
    assert by["aws/eu-central-1"]["capacity_refused_gpu_hours"] > 0


@pytest.mark.parametrize("flag, message", [
    ("B300@1", "--supply-cut 'B300@1': no place of the grid has accelerator model 'B300'"),
    ("H100-SXM", "--supply-cut must be MODEL@HOURS or MODEL@HOURS+DURATION_H"),
    ("H100-SXM@30", "--supply-cut hours must be hours in [0, 24)"),
    ("H100-SXM@1+0", "--supply-cut duration must be hours > 0"),
])
def test_a_bad_supply_cut_flag_is_one_line_and_no_report(db, tmp_path, flag, message):
    path = tmp_path / "r.json"
    with pytest.raises(CommandError) as err:
        call_command("simulate", "--preset", "grid", "--supply-cut", flag, "--json", str(path))
    assert err.value.returncode == 2 and message in str(err.value)
    assert "\n" not in str(err.value) and not path.exists()


def test_supply_cut_goes_with_a_grid_run_only(db):
    with pytest.raises(CommandError, match="--supply-cut goes with a grid run"):
        call_command("simulate", "--preset", "dev-small", "--supply-cut", "H100-SXM@1")
