"""A study on a real Dask cluster: ``dask scheduler`` and ``dask worker`` started as separate
processes on loopback (``conftest.py``), and ``manage.py study run --scheduler`` sending them
the runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = """\
name: distributed
base: {preset: dev-small, days: 0.5}
seeds: 3
arms:
  - name: default
  - name: fifo
    set: {policy: fifo}
figures: [mfu, goodput, wait_mean_h, jobs_completed]
"""

pytestmark = pytest.mark.dask


def test_runs_go_to_the_separate_worker_processes_and_match_a_serial_run(dask_cluster,
                                                                         tmp_path):
    address, worker_pid = dask_cluster
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    env = {**os.environ, "CLUSTERTWIN_INSECURE_DEMO": "1"}
    r = subprocess.run([sys.executable, "manage.py", "study", "run", str(spec), "--out",
                        str(tmp_path / "dist"), "--scheduler", address], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"on {address}" in r.stdout and "ran 6, kept 0" in r.stdout
    # every run ran in a process under the `dask worker` command we started
    worker_tree = {p.pid for p in psutil.Process(worker_pid).children(recursive=True)}
    timing = json.loads((tmp_path / "dist" / "timing.json").read_text())
    pids = {int(t["worker"].rsplit(":", 1)[1]) for t in timing["runs"]}
    assert pids and pids <= worker_tree
    from distributed import Client
    with Client(address, timeout=30) as c:  # the documented configuration reached the workers
        assert c.submit(os.environ.get, "MALLOC_TRIM_THRESHOLD_", "unset",
                        pure=False).result() == "unset"

    r = subprocess.run([sys.executable, "manage.py", "study", "run", str(spec), "--out",
                        str(tmp_path / "serial"), "--serial"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    dist = json.loads((tmp_path / "dist" / "results.json").read_text())
    serial = json.loads((tmp_path / "serial" / "results.json").read_text())
    assert dist == serial  # same seeds, same study, across processes and machines
