"""Studies that survive their workers: a real ``dask scheduler`` and ``dask worker`` processes
on loopback (``conftest.py``).  A worker killed in the middle of a run loses only that run's
time (it is run again on another worker, with the same result); with no worker left the
study stops after ``CLUSTERTWIN_STUDY_NO_WORKER_S`` with the reason stored on it, and resumes
when a worker comes back."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from scheduler.study.spec import load_spec_text
from tests.dask.conftest import START_S, wait_until
from twin.studies.report import write_all
from twin.studies.runner import (
    NO_WORKER_ENV,
    StudyError,
    StudyStopped,
    no_worker_timeout_s,
    run_study,
)

pytestmark = pytest.mark.dask
STUDY_S = 600.0  # a ceiling for a study on a loaded machine, never a measurement
NO_WORKER_S = 3.0
SPEC = """\
name: survivors
base: {{preset: dev-small, days: {days}}}
seeds: {seeds}
arms:
  - name: default
  - name: fifo
    set: {{policy: fifo}}
figures: [mfu, goodput, wait_mean_h, jobs_completed]
"""


def results(spec, outcome, out) -> dict:
    """results.json of a study: figures and summary, the same wherever the runs ran."""
    write_all(spec, outcome, out)
    return json.loads((out / "results.json").read_text())


def run_key(arm, seed: int) -> str:
    return f"run-{arm.slug}-{seed}-{arm.key(seed)}"


def executing(client) -> tuple[str, str] | None:
    """(worker address, key) of a study run a worker is executing now."""
    for worker, keys in client.call_stack().items():
        for key in keys:
            if str(key).startswith("run-"):
                return worker, str(key)
    return None


def test_a_killed_workers_run_is_run_again_elsewhere_with_the_same_result(dask_processes,
                                                                         tmp_path):
    spec = load_spec_text(SPEC.format(days=4, seeds=3))
    procs = {p.pid: p for p in (dask_processes.worker("w1", nanny=False),
                                dask_processes.worker("w2", nanny=False))}
    with dask_processes.client() as client:
        client.wait_for_workers(2, timeout=START_S)
        pids = client.run(os.getpid)  # worker address -> its process (the command itself)
        assert set(pids.values()) == set(procs)
        with ThreadPoolExecutor(1) as pool:
            study = pool.submit(run_study, spec, tmp_path / "dist",
                                scheduler=dask_processes.address, no_worker_s=STUDY_S)
            victim, key = wait_until(lambda: executing(client), "a run starting on a worker")
            os.kill(pids[victim], signal.SIGKILL)
            procs[pids[victim]].wait(START_S)
            outcome = study.result(timeout=STUDY_S)
    survivor = next(pid for pid in procs if pid != pids[victim])
    assert outcome.failed == 0 and outcome.ran == len(spec.runs())
    arm, seed = next((a, s) for a, s in spec.runs() if run_key(a, s) == key)
    record = next(r for r in outcome.records if (r.arm, r.seed) == (arm.name, seed))
    # the run the killed worker had started finished on the other one
    assert int(record.worker.rsplit(":", 1)[1]) == survivor
    serial = run_study(spec, tmp_path / "serial", serial=True)
    assert results(spec, outcome, tmp_path / "dist") == results(spec, serial,
                                                                tmp_path / "serial")


@pytest.fixture
def staff(db):
    from django.contrib.auth import get_user_model

    from twin.config.demo import demo_accounts_seed
    demo_accounts_seed(password="demo-pass-123")
    return get_user_model().objects.get(username="staff")


@pytest.mark.django_db(transaction=True)
def test_with_no_worker_left_the_study_stops_says_why_and_resumes_later(
        dask_processes, tmp_path, settings, monkeypatch, staff, client):
    from twin.studies import store
    from twin.studies.models import Study

    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "STUDY_DIR": str(tmp_path / "studies"),
                            "STUDY_SCHEDULER": dask_processes.address}
    monkeypatch.setenv(NO_WORKER_ENV, str(NO_WORKER_S))
    workers = [dask_processes.worker(f"w{i}", nanny=False) for i in (1, 2)]
    with dask_processes.client() as c:
        c.wait_for_workers(2, timeout=START_S)
    spec = store.spec_check(text=SPEC.format(days=3, seeds=4))
    study = store.study_launch(user=staff, spec=spec)
    wait_until(lambda: Study.objects.get(pk=study.pk).done_runs >= 1, "a first run finishing",
               timeout=STUDY_S)
    for w in workers:  # every worker gone at once
        w.send_signal(signal.SIGKILL)
    for w in workers:
        w.wait(START_S)
    killed = time.monotonic()
    assert store.study_wait(study.pk, NO_WORKER_S + STUDY_S)
    waited = time.monotonic() - killed
    study.refresh_from_db()
    assert study.status == "interrupted", (study.status, study.error)
    assert waited >= NO_WORKER_S  # it waited for a worker as long as it was told to
    assert f"no Dask worker on {dask_processes.address} for {NO_WORKER_S:g} s" in study.error
    assert "resume" in study.error
    finished = study.done_runs
    assert 1 <= finished < len(spec.runs())
    assert f"{finished} of {len(spec.runs())} runs done and kept" in study.error
    client.force_login(staff)  # the reason on the study's page and in the API
    assert study.error in client.get(f"/studies/{study.pk}/").content.decode()
    assert client.get(f"/api/studies/{study.pk}").json()["error"] == study.error

    dask_processes.worker("w3", nanny=False)  # a worker comes back: resume runs the rest
    store.study_resume(user=staff, study=study)
    assert store.study_wait(study.pk, STUDY_S)
    study.refresh_from_db()
    assert study.status == "done" and study.error == "", study.error
    assert study.done_runs == len(spec.runs())
    assert study.runs.filter(status="kept").count() == finished
    serial = run_study(spec, tmp_path / "serial", serial=True)
    resumed = json.loads((tmp_path / "studies" / str(study.pk) / "results.json").read_text())
    assert resumed == results(spec, serial, tmp_path / "serial")


def test_with_the_scheduler_gone_the_study_stops_and_keeps_what_finished(dask_processes,
                                                                          tmp_path):
    spec = load_spec_text(SPEC.format(days=3, seeds=4))
    dask_processes.worker("w1", nanny=False)
    with dask_processes.client() as c:
        c.wait_for_workers(1, timeout=START_S)
    out = tmp_path / "out"
    with ThreadPoolExecutor(1) as pool:
        study = pool.submit(run_study, spec, out, scheduler=dask_processes.address,
                            no_worker_s=NO_WORKER_S)
        wait_until(lambda: any(out.rglob("seed-*.json")), "a first run finishing",
                   timeout=STUDY_S)
        dask_processes.procs[0].send_signal(signal.SIGKILL)  # the `dask scheduler`
        with pytest.raises(StudyStopped, match="no Dask worker") as stopped:
            study.result(timeout=STUDY_S)
    kept = len(list(out.rglob("seed-*.json")))
    assert stopped.value.finished == kept and 1 <= kept < len(spec.runs())


def test_the_no_worker_time_comes_from_the_environment_strictly(monkeypatch):
    monkeypatch.delenv(NO_WORKER_ENV, raising=False)
    assert no_worker_timeout_s() == 120.0
    monkeypatch.setenv(NO_WORKER_ENV, "7.5")
    assert no_worker_timeout_s() == 7.5
    for bad in ("soon", "0", "-1", "inf", "1e9"):
        monkeypatch.setenv(NO_WORKER_ENV, bad)
        with pytest.raises(StudyError, match=NO_WORKER_ENV):
            no_worker_timeout_s()
