"""Real Dask processes on loopback: a ``dask scheduler`` and ``dask worker`` commands started
as an operator starts them, and stopped (their whole process trees) after each test."""

from __future__ import annotations

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
START_S = 60.0  # a ceiling for a process to come up on a loaded machine, never a measurement
# the documented worker configuration (docs/studies.md): glibc's default memory trimming
DASK_ENV = {**os.environ, "DASK_CONFIG": str(ROOT / "docs" / "examples" / "dask")}


def wait_until(condition, what: str, timeout: float = START_S, every: float = 0.1):
    """``condition()``'s first true value, looked for every ``every`` s up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"{what} did not happen within {timeout:.0f} s")


def _json_file(path: Path):
    if path.is_file() and path.stat().st_size:
        try:
            return json.loads(path.read_text())
        except ValueError:
            return None
    return None


class DaskProcesses:
    """One ``dask scheduler`` and the ``dask worker`` commands started against it."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.procs: list[subprocess.Popen] = []
        sched_file = folder / "scheduler.json"
        self.procs.append(subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--scheduler-file", str(sched_file)],
            cwd=folder, env=DASK_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.address = wait_until(lambda: (_json_file(sched_file) or {}).get("address"),
                                  "dask scheduler start")

    def worker(self, name: str, *, nanny: bool = True) -> subprocess.Popen:
        """Start ``dask worker`` (one single-threaded worker); without a nanny the command's
        own process is the worker, and killing it loses the worker for good."""
        proc = subprocess.Popen(
            [str(BIN / "dask"), "worker", self.address, "--nworkers", "1", "--nthreads", "1",
             "--no-dashboard", "--name", name, *([] if nanny else ["--no-nanny"])],
            cwd=ROOT, env=DASK_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def client(self):
        from distributed import Client
        return Client(self.address, timeout=30, set_as_default=False)

    def stop(self) -> None:
        for p in reversed(self.procs):
            try:
                tree = [*psutil.Process(p.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                tree = []
            p.terminate()
            for child in tree:
                try:
                    child.terminate()
                except psutil.NoSuchProcess:
                    pass
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(15)


@pytest.fixture
def dask_processes(tmp_path):
    """A ``dask scheduler`` on loopback; start workers with ``.worker(name)``."""
    d = DaskProcesses(tmp_path)
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def dask_cluster(dask_processes):
    """A ``dask scheduler`` and one ``dask worker`` (two processes), as an operator starts them:
    ``(address, pid of the dask worker command)``."""
    worker = dask_processes.worker("loopback-worker")
    with dask_processes.client() as c:
        c.wait_for_workers(1, timeout=START_S)
    return dask_processes.address, worker.pid
