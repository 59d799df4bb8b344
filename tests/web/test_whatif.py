"""What-ifs from the live twin: permissions, refusals, the worker, the pages and the API."""

from __future__ import annotations

import json
import os
import pickle
import zlib
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from scheduler.simulate import Scenario
from scheduler.snapshot import dumps
from twin import models as m
from twin.studies import whatif as service

WAIT_S = 300.0  # a ceiling for a spawned worker on a loaded machine, never a measurement


@pytest.fixture(scope="module")
def dev_small_blob() -> bytes:
    """The dev-small engine two simulated hours in, as the live engine stores it."""
    engine, _ = Scenario(preset="dev-small", days=2, seed=0).engine()
    engine.run_until(7200.0)
    return dumps(engine)


def snapshot(data: bytes, t_sim: float = 7200.0) -> m.EngineSnapshot:
    return m.EngineSnapshot.objects.create(t_sim=t_sim, preset="dev-small", seed=0, data=data)


def post(client, body, content_type="application/json"):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post("/api/whatif", data, content_type=content_type)


SPINE = {"action": {"kind": "spine_switch", "target": 0}, "hours": 2, "seeds": 2}


class _Exit:
    """Unpickled in the worker, it ends the process at once (a crash, not an exception)."""

    def __reduce__(self):
        return os._exit, (3,)


# ------------------------------------------------------------------ permissions
def test_operator_can_read_the_page_and_api_but_cannot_start_a_whatif(login, db):
    client = login("operator")
    page = client.get("/whatif/")
    assert page.status_code == 200 and 'id="whatif-form"' not in page.content.decode()
    assert client.get("/api/whatif").status_code == 200
    assert client.post("/whatif/", {"kind": "node", "hours": 1, "seeds": 1}).status_code == 403
    denied = post(client, SPINE)
    assert denied.status_code == 403 and "staff" in denied.json()["error"]
    assert not m.WhatIf.objects.exists()


def test_staff_see_the_form_and_everyone_sees_the_nav_link(login, db):
    staff = login("staff").get("/whatif/").content.decode()
    assert 'id="whatif-form"' in staff and 'href="/whatif/"' in staff


def test_anonymous_visitors_are_sent_to_the_login_page(client, db):
    assert client.get("/whatif/").status_code == 302
    assert client.get("/api/whatif/1").status_code in (401, 302)


def test_starting_a_whatif_needs_a_csrf_token(demo_users):
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo_users["staff"])
    assert post(client, SPINE).status_code == 403
    assert not m.WhatIf.objects.exists()


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("body,status,message", [
    ("not json", 400, "not valid JSON"),
    ([1, 2], 400, "send an object"),
    ({"action": {"kind": "meteor"}}, 400, "unknown action kind 'meteor'"),
    ({"action": {"kind": "power_cap", "fraction": 5}}, 400, "fraction must be at most 1"),
    ({"action": {"kind": "drain", "unit": "row", "target": 1}}, 400, "drain unit must be"),
    ({"action": None, "hours": 0}, 400, "hours must be a positive number"),
    ({"action": None, "hours": 1e400}, 400, "hours must be a positive number"),
    ({"action": None, "seeds": 33}, 400, "seeds must be at most 32"),
    ({"action": None, "bogus": 1}, 400, "unknown field(s) bogus"),
])
def test_a_bad_body_gets_one_error_and_writes_nothing(login, db, body, status, message):
    snapshot(b"unused")
    response = post(login("staff"), body)
    assert response.status_code == status
    assert message in response.json()["error"] and "\n" not in response.json()["error"]
    assert not m.WhatIf.objects.exists()


def test_a_body_that_is_not_json_is_refused_with_415(login, db):
    response = post(login("staff"), "action=node", content_type="text/plain")
    assert response.status_code == 415 and not m.WhatIf.objects.exists()


def test_without_a_snapshot_of_the_live_engine_a_whatif_is_refused(login, db):
    response = post(login("staff"), SPINE)
    assert response.status_code == 409 and "no snapshot" in response.json()["error"]
    assert not m.WhatIf.objects.exists()


def test_the_form_shows_a_bad_action_and_writes_nothing(login, db):
    snapshot(b"unused")
    page = login("staff").post("/whatif/", {"kind": "power_cap", "target": "all",
                                            "fraction": "0.01", "hours": "1", "seeds": "1"})
    assert page.status_code == 400
    assert "fraction must be at least 0.1" in page.content.decode()
    assert not m.WhatIf.objects.exists()


# ------------------------------------------------------------------ the worker
@pytest.mark.django_db(transaction=True)
def test_the_worker_runs_a_whatif_on_the_live_snapshot_to_done(login, dev_small_blob):
    snap = snapshot(dev_small_blob)
    m.LiveState.objects.create(pk=1, seq=42, t_sim=7500.0, health="ok")
    client = login("staff")
    started = post(client, SPINE)
    assert started.status_code == 202, started.content
    pk = started.json()["id"]
    row = m.WhatIf.objects.get(pk=pk)
    assert row.status == "running" and row.t_sim == 7200.0 and row.seq == 42
    assert row.params["snapshot"]["id"] == snap.pk
    assert row.params["snapshot"]["behind_live_sim_s"] == 300.0
    assert service.whatif_wait(pk, WAIT_S)
    row.refresh_from_db()
    assert row.status == "done", row.error
    assert row.finished_at is not None and row.error == ""
    report = row.result
    assert report["from"]["t_sim"] == 7200.0 and report["seeds"] == [1, 2]
    assert report["action"] == {"kind": "spine_switch", "target": 0}
    assert set(report["summary"]) >= {"jobs_hit", "gpu_hours_lost", "mfu", "ettr",
                                      "queue_wait_mean_h"}
    api = client.get(f"/api/whatif/{pk}").json()
    assert api["status"] == "done" and api["result"] == report
    page = client.get(f"/whatif/{pk}/").content.decode()
    assert 'id="whatif-table"' in page and "gpu_hours_lost" in page
    assert "whatif-chart-data" in page and "plotly.min.js" in page
    operator = login("operator").get(f"/whatif/{pk}/")
    assert operator.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_bad_target_ends_the_whatif_in_error_with_the_engines_message(login, dev_small_blob):
    snapshot(dev_small_blob)
    pk = post(login("staff"), {"action": {"kind": "rack_power", "target": 9999}, "hours": 1,
                               "seeds": 1}).json()["id"]
    assert service.whatif_wait(pk, WAIT_S)
    row = m.WhatIf.objects.get(pk=pk)
    assert row.status == "error" and "does not exist" in row.error


@pytest.mark.django_db(transaction=True)
def test_a_snapshot_that_cannot_be_loaded_ends_the_whatif_in_error(login):
    snapshot(b"this is not a compressed pickle")
    pk = post(login("staff"), SPINE).json()["id"]
    assert service.whatif_wait(pk, WAIT_S)
    row = m.WhatIf.objects.get(pk=pk)
    assert row.status == "error" and "the snapshot cannot be loaded" in row.error


@pytest.mark.django_db(transaction=True)
def test_a_worker_process_that_dies_ends_the_whatif_in_error_and_the_next_one_runs(
        login, dev_small_blob):
    snapshot(zlib.compress(pickle.dumps(_Exit())))
    client = login("staff")
    pk = post(client, SPINE).json()["id"]
    assert service.whatif_wait(pk, WAIT_S)
    row = m.WhatIf.objects.get(pk=pk)
    assert row.status == "error" and "process died" in row.error
    snapshot(dev_small_blob)
    again = post(client, {**SPINE, "seeds": 1}).json()["id"]
    assert service.whatif_wait(again, WAIT_S)
    assert m.WhatIf.objects.get(pk=again).status == "done"


# ------------------------------------------------------------------ rows left behind
def test_a_row_left_running_by_a_dead_web_process_is_marked_error_when_read(login, db):
    dead = m.WhatIf.objects.create(status="running", started_at=timezone.now(),
                                   owner=f"{service.socket.gethostname()}:999999999:x")
    old = m.WhatIf.objects.create(status="running", owner="elsewhere:1:y",
                                  started_at=timezone.now() - timedelta(hours=7))
    alive = m.WhatIf.objects.create(status="running", owner="elsewhere:1:z",
                                    started_at=timezone.now())
    restarted = m.WhatIf.objects.create(  # the same pid as this process, an earlier token
        status="running", started_at=timezone.now(),
        owner=f"{service.socket.gethostname()}:{os.getpid()}:before-restart")
    login("operator").get("/whatif/")
    for row in (dead, old, alive, restarted):
        row.refresh_from_db()
    assert dead.status == "error" and "pid 999999999" in dead.error
    assert restarted.status == "error"
    assert old.status == "error" and "no result after 6 hours" in old.error
    assert alive.status == "running"


def test_a_missing_whatif_is_a_404_in_json_and_on_the_page(login, db):
    client = login("operator")
    assert client.get("/api/whatif/12345").status_code == 404
    assert client.get("/api/whatif/12345").json()["error"] == "what-if 12345 does not exist"
    assert client.get("/whatif/12345/").status_code == 404


# ------------------------------------------------------------------ the command
def test_the_command_forks_a_preset_prints_a_table_and_writes_the_report(tmp_path, capsys, db):
    path = tmp_path / "whatif.json"
    call_command("whatif", "--preset", "dev-small", "--warm-hours", "6", "--action",
                 '{"kind": "leaf_switch", "target": 0}', "--hours", "3", "--seeds", "2",
                 "--json", str(path))
    report = json.loads(path.read_text())
    assert report["from"]["t_sim"] == 6 * 3600.0 and report["seeds"] == [1, 2]
    assert report["summary"]["jobs_hit"]["delta"] > 0
    out = capsys.readouterr().out
    assert "gpu_hours_lost" in out and "band: min-max across seeds" in out


def test_the_command_forks_the_live_snapshot_and_says_how_old_it_is(capsys, dev_small_blob, db):
    snapshot(dev_small_blob)
    call_command("whatif", "--from-live", "--hours", "1", "--seeds", "1", "--json", "-")
    captured = capsys.readouterr()
    assert json.loads(captured.out)["from"]["t_sim"] == 7200.0
    assert "at t=7,200 s, written" in captured.err


@pytest.mark.parametrize("args,message", [
    ((), "give one of --from-live or --preset NAME"),
    (("--from-live", "--preset", "dev-small"), "give one of --from-live or --preset NAME"),
    (("--from-live",), "the live engine has stored no snapshot yet"),
    (("--preset", "nope"), "unknown preset 'nope'"),
    (("--preset", "dev-small", "--action", "{kind"), "--action is not valid JSON"),
    (("--preset", "dev-small", "--action", '{"kind": "policy", "name": "x"}'),
     "unknown policy 'x'"),
    (("--preset", "dev-small", "--action", '{"kind": "rack_power", "target": 999}'),
     "rack power 999 does not exist"),
    (("--preset", "dev-small", "--hours", "721"), "hours must be at most 720 h"),
    (("--preset", "dev-small", "--seeds", "two"), "--seeds must be an integer"),
    (("--preset", "dev-small", "--json", "/no/such/folder/r.json"), "does not exist"),
])
def test_bad_flags_get_one_line_and_exit_status_2(db, args, message):
    with pytest.raises(CommandError) as err:
        call_command("whatif", *args)
    assert err.value.returncode == 2 and "\n" not in str(err.value)
    assert message in str(err.value)
