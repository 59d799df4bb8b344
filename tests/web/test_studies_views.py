"""The Studies page and API: staff launch (form, spec, API), everyone reads, bad input refused,
runs recorded as they finish, a what-if saved as a study, an interrupted study resumed."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from scheduler.control.whatif import whatif
from scheduler.simulate import Scenario
from twin import models as m
from twin.studies import store

PROFILE_FILE = Path(__file__).resolve().parents[2] / "scheduler/reliability/profiles/rsc1.toml"
WAIT_S = 300.0  # a ceiling for Dask workers on a loaded machine, never a measurement
SPEC = """\
name: policy
base: {preset: dev-small, days: 0.25}
seeds: 2
arms:
  - name: default
  - name: fifo
    set: {policy: fifo}
figures: [mfu, wait_mean_h]
"""


@pytest.fixture(autouse=True)
def study_dir(settings, tmp_path):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "STUDY_DIR": str(tmp_path / "studies"),
                            "STUDY_WORKERS": 1, "STUDY_SCHEDULER": ""}
    return tmp_path / "studies"


def post_api(client, body):
    return client.post("/api/studies", json.dumps(body), content_type="application/json")


def test_operators_read_but_cannot_start_a_study(login, db):
    client = login("operator")
    page = client.get("/studies/")
    assert page.status_code == 200 and 'id="spec-form"' not in page.content.decode()
    assert client.get("/api/studies").json() == {"studies": []}
    assert client.post("/studies/", {"spec": SPEC}).status_code == 403
    denied = post_api(client, {"spec": SPEC})
    assert denied.status_code == 403 and "staff" in denied.json()["error"]
    assert not m.Study.objects.exists()


def test_staff_see_both_forms_and_everyone_the_nav_link(login, db):
    page = login("staff").get("/studies/").content.decode()
    assert 'id="spec-form"' in page and 'id="study-form"' in page
    assert 'href="/studies/"' in login("operator").get("/").content.decode()


@pytest.mark.parametrize("body, message", [
    ({"spec": SPEC.replace("policy: fifo", "policy: nope")}, "line 7: arm 'fifo': unknown policy"),
    ({"spec": SPEC.replace("    set: {policy: fifo}\n", "")}, "changes nothing"),
    ({"spec": 3}, "spec must be text or an object"),
    ({"spec": SPEC, "extra": 1}, 'send {"spec"'),
    ({"spec": {"name": "x"}}, "base is missing"),
    ({"spec": SPEC.replace("policy: fifo", f"failure_profile: {PROFILE_FILE}")},
     "a failure profile file is read by the command line"),
])
def test_a_bad_spec_gets_one_error_and_writes_nothing(login, db, body, message, study_dir):
    r = post_api(login("staff"), body)
    assert r.status_code == 400 and message in r.json()["error"]
    assert not m.Study.objects.exists() and not study_dir.exists()


def test_the_web_reads_no_trace_file_of_the_server(login, db, study_dir, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("jobid,gpus\n")
    r = post_api(login("staff"), {"spec": SPEC.replace("policy: fifo", f"trace: {trace}")})
    assert r.status_code == 400 and "a trace file is read by the command line" in r.json()["error"]
    assert not m.Study.objects.exists()


def test_the_form_refuses_a_single_value_and_shows_why(login, db):
    r = login("staff").post("/studies/", {"name": "x", "preset": "dev-small", "days": 1,
                                          "seeds": 2, "vary": "spares", "values": "0.1"})
    assert r.status_code == 400 and "at least two values" in r.content.decode()
    assert not m.Study.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_study_from_the_form_runs_on_dask_and_everyone_reads_its_verdicts(login, study_dir):
    client = login("staff")
    r = client.post("/studies/", {"name": "spares", "preset": "dev-small", "days": 0.25,
                                  "seeds": 3, "vary": "spares", "values": "0, 0.25"})
    assert r.status_code == 302
    study = m.Study.objects.get()
    assert r.url == f"/studies/{study.pk}/" and study.total_runs == 6
    assert store.study_wait(study.pk, WAIT_S)
    study.refresh_from_db()
    assert study.status == "done", study.error
    assert study.done_runs == 6 and "LocalCluster" in study.where
    assert set(study.runs.values_list("status", flat=True)) == {"done"}
    paired = study.summary["paired"][0]
    assert paired["arm"] == "spares=0.25"
    # a quarter of the nodes held as hot spares: more GPU-hours booked as spare (a figure
    # with no better direction reads higher/lower)
    assert paired["figures"]["ledger.hot_spare"]["verdict"] == "higher"
    page = login("operator").get(f"/studies/{study.pk}/").content.decode()
    assert 'id="study-paired"' in page and "spares=0.25" in page and "higher" in page
    assert f'href="/studies/{study.pk}/report.html"' in page
    report = login("operator").get(f"/studies/{study.pk}/report.html")
    assert report.status_code == 200 and b"Plotly" in b"".join(report.streaming_content)
    assert client.get(f"/studies/{study.pk}/secret.txt").status_code == 404
    api = client.get(f"/api/studies/{study.pk}").json()
    assert api["done_runs"] == 6 and len(api["runs"]) == 6 and api["summary"]


@pytest.mark.django_db(transaction=True)
def test_an_interrupted_study_resumes_running_only_what_is_missing(login, study_dir):
    client = login("staff")
    r = post_api(client, {"spec": SPEC})
    assert r.status_code == 202, r.content
    pk = r.json()["id"]
    assert store.study_wait(pk, WAIT_S)
    # as if the web process died: the row left running by another pid, one run's file lost
    dead = subprocess.Popen(["true"])
    dead.wait()
    m.Study.objects.filter(pk=pk).update(status="running",
                                         owner=f"{socket.gethostname()}:{dead.pid}:gone")
    m.StudyRun.objects.filter(study_id=pk, arm="fifo", seed=1).update(status="pending")
    (study_dir / str(pk) / "runs" / "fifo" / "seed-1.json").unlink()
    assert "interrupted" in client.get(f"/studies/{pk}/").content.decode()
    assert client.post(f"/studies/{pk}/resume").status_code == 302
    assert store.study_wait(pk, WAIT_S)
    study = m.Study.objects.get(pk=pk)
    assert study.status == "done" and study.done_runs == 4
    statuses = dict(((r.arm, r.seed), r.status) for r in study.runs.all())
    assert statuses[("fifo", 1)] == "done" and statuses[("default", 0)] == "kept"


def test_a_finished_whatif_is_saved_as_a_two_arm_study_with_verdicts(login, db):
    engine, _ = Scenario(preset="dev-small", days=1, seed=0).engine()
    engine.run_until(3600.0)
    result = whatif(engine, {"kind": "power_cap", "target": "all", "fraction": 0.3},
                    hours=2, seeds=[1, 2, 3])
    row = m.WhatIf.objects.create(status="done", result=result, params={})
    assert login("operator").post(f"/whatif/{row.pk}/save-study").status_code == 403
    r = login("staff").post(f"/whatif/{row.pk}/save-study")
    study = m.Study.objects.get()
    assert r.status_code == 302 and r.url == f"/studies/{study.pk}/"
    assert study.origin == "whatif" and study.whatif_id == row.pk
    assert [a["name"] for a in study.summary["arms"]] == ["baseline", "action"]
    mfu = study.summary["paired"][0]["figures"]["mfu"]
    per_seed = [s["action"]["mfu"] - s["baseline"]["mfu"] for s in result["per_seed"]]
    assert mfu["n"] == 3 and abs(mfu["mean"] - sum(per_seed) / 3) < 1e-9
    assert mfu["verdict"] == "worse"
    # when it forked, as the pages say it: the wall clock, the engine's clock after
    assert " at t=" not in study.description
    assert "(simulated day 0, 01:00), 2 h forward" in study.description


def test_an_unfinished_whatif_cannot_be_saved(login, db):
    row = m.WhatIf.objects.create(status="running", params={})
    r = login("staff").post(f"/whatif/{row.pk}/save-study")
    assert r.status_code == 302 and not m.Study.objects.exists()
