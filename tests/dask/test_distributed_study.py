"""A study on a real Dask cluster: ``dask scheduler`` and ``dask worker`` started as separate
processes on loopback, and ``manage.py study run --scheduler`` sending them the runs."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
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


def _wait_for(path: Path, what: str, timeout: float = 60.0) -> dict:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.is_file() and path.stat().st_size:
            try:
                return json.loads(path.read_text())
            except ValueError:
                pass
        time.sleep(0.2)
    raise AssertionError(f"{what} did not start within {timeout:.0f} s")


@pytest.fixture
def dask_cluster(tmp_path):
    """A ``dask scheduler`` and one ``dask worker`` (two processes), as an operator starts them."""
    sched_file = tmp_path / "scheduler.json"
    # the documented worker configuration (docs/studies.md): glibc's default memory trimming
    env = {**os.environ, "DASK_CONFIG": str(ROOT / "docs" / "examples" / "dask")}
    procs = []
    try:
        procs.append(subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--scheduler-file", str(sched_file)],
            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        address = _wait_for(sched_file, "dask scheduler")["address"]
        worker = subprocess.Popen(
            [str(BIN / "dask"), "worker", address, "--nworkers", "1", "--nthreads", "1",
             "--no-dashboard", "--name", "loopback-worker"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(worker)
        from distributed import Client
        with Client(address, timeout=30) as c:
            c.wait_for_workers(1, timeout=60)
        yield address, worker.pid
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


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
