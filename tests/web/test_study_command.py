"""``manage.py study``: runs on Dask, keeps finished runs, reports failures, refuses bad input."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.study.spec import Arm, load_spec_text
from twin.studies.report import write_all
from twin.studies.runner import run_study

ROOT = Path(__file__).resolve().parents[2]
SPEC = """\
name: cap
base: {preset: dev-small, days: 0.5}
seeds: 4
arms:
  - name: uncapped
  - name: capped
    set: {power_cap: 0.4}
figures: [mfu, ledger.throttled, energy_mwh, "wait_mean_h:research"]
"""


def manage(*args, timeout=300):
    env = {**os.environ, "CLUSTERTWIN_INSECURE_DEMO": "1"}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def spec_file(tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC)
    return p


def test_a_study_runs_on_a_local_dask_cluster_then_resumes_only_what_is_missing(spec_file,
                                                                                tmp_path):
    out = tmp_path / "out"
    r = manage("study", "run", str(spec_file), "--out", str(out), "--workers", "2")
    assert r.returncode == 0, r.stderr
    assert "ran 8, kept 0" in r.stdout and "LocalCluster (2 workers)" in r.stdout
    timing = json.loads((out / "timing.json").read_text())
    assert {w["worker"].rsplit(":", 1)[1] for w in timing["runs"]} - {str(os.getpid())}
    first = json.loads((out / "results.json").read_text())
    capped = next(p for p in first["summary"]["paired"] if p["arm"] == "capped")
    assert capped["figures"]["ledger.throttled"]["verdict"] == "worse"
    for name in ("arms.csv", "paired.csv", "runs.csv", "report.html"):
        assert (out / name).stat().st_size > 0
    html = (out / "report.html").read_text()
    assert not re.search(r"<script[^>]*\ssrc=", html)  # self-contained: Plotly is inline
    assert "Plotly.newPlot" in html and "capped" in html

    (out / "runs" / "capped" / "seed-1.json").unlink()
    r = manage("study", "run", str(spec_file), "--out", str(out), "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert "ran 1, kept 7" in r.stdout
    again = json.loads((out / "results.json").read_text())
    assert again == first  # the same seeds give the same study, whichever process ran them


def test_a_changed_arm_runs_again_and_the_rest_is_kept(spec_file, tmp_path):
    out = tmp_path / "out"
    spec = load_spec_text(SPEC)
    run_study(spec, out, serial=True)
    changed = load_spec_text(SPEC.replace("power_cap: 0.4", "power_cap: 0.5"))
    outcome = run_study(changed, out, serial=True)
    assert (outcome.ran, outcome.kept) == (4, 4)


def test_a_failed_run_is_reported_with_its_arm_and_seed_and_the_others_are_kept(tmp_path):
    spec = load_spec_text(SPEC)
    broken = Arm("broken", {"trace": "gone.csv"},
                 {**spec.arms[0].options, "trace": str(tmp_path / "gone.csv")})
    spec = type(spec)(name=spec.name, arms=(*spec.arms, broken), seeds=spec.seeds,
                      figures=spec.figures, source=spec.source)
    outcome = run_study(spec, tmp_path / "out", workers=1)
    failed = [(r.arm, r.seed) for r in outcome.records if r.status == "failed"]
    assert failed == [("broken", s) for s in range(4)]
    assert all("does not exist" in r.error for r in outcome.records if r.status == "failed")
    assert outcome.ran == 8 and outcome.failed == 4
    res = write_all(spec, outcome, tmp_path / "out")
    assert [a["runs"] for a in res["summary"]["arms"]] == [4, 4, 0]
    assert "Failed runs" in (tmp_path / "out" / "report.html").read_text()


def test_bad_specs_and_flags_exit_2_before_any_run(spec_file, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC.replace("power_cap: 0.4", "power_cap: 4"))
    r = manage("study", "run", str(bad), "--out", str(tmp_path / "o1"))
    assert r.returncode == 2 and "line 7:" in r.stderr and "power cap" in r.stderr
    assert not (tmp_path / "o1").exists()
    r = manage("study", "run", str(spec_file), "--out", str(tmp_path / "o2"), "--workers", "x")
    assert r.returncode == 2 and "--workers must be an integer" in r.stderr


def test_an_unreachable_scheduler_exits_2_and_writes_nothing(spec_file, tmp_path):
    r = manage("study", "run", str(spec_file), "--out", str(tmp_path / "o"),
               "--scheduler", "tcp://127.0.0.1:9")
    assert r.returncode == 2
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in r.stderr
    assert not (tmp_path / "o").exists()


def test_check_lists_the_runs_without_running(spec_file):
    r = manage("study", "check", str(spec_file))
    assert r.returncode == 0 and "2 arms x 4 seeds = 8 runs; baseline uncapped" in r.stdout


def test_the_embedded_clusters_workers_keep_glibcs_default_memory_trimming():
    """Dask's nanny would set MALLOC_TRIM_THRESHOLD_=65536, which makes a run 2.2x slower."""
    from twin.studies.runner import _close, connect

    client = connect(None, 1)
    try:
        assert client.submit(os.environ.get, "MALLOC_TRIM_THRESHOLD_", "unset",
                             pure=False).result() == "unset"
    finally:
        _close(client, None)
