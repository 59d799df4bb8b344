"""Issue 26: the mirror reads a real slurmrestd (Debian's 22.05, data parser ``v0.0.38``).

A 4-node cluster is exported and started (``conftest.py``), then ``slurmrestd`` on a Unix
socket with ``rest_auth/local`` and the ``openapi/v0.0.38`` plugin only (the dbv0.0.38 one
needs slurmdbd, which the test Slurm lacks; the socket's peer is this process's user, as slurmrestd
requires; no JWT key is set up here, so the token headers are not exercised against it).
``urllib`` speaks TCP only: a small relay thread carries each TCP connection to the socket.
The view must negotiate the version from ``/openapi/v3``, and show the jobs with what Slurm
allocated on each node, and a maintenance reservation.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from scheduler.hardware.cluster import NodeGroup, plan_cluster
from tests.slurm.conftest import SBIN, export_tree, stop, tail
from twin.inventory.adapter import cluster_plan_write
from twin.mirror.errors import SourceError
from twin.mirror.slurm_source import slurm_view

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

# the test Slurm runs as root (SlurmUser=root); slurmrestd refuses root unless told otherwise
AS_ROOT = {"SLURMRESTD_SECURITY": "disable_user_check"}


def relay(unix_path: Path) -> tuple[str, threading.Event]:
    """``http://127.0.0.1:PORT`` whose connections are carried to ``unix_path``."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve() -> None:
        while not done.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(str(unix_path))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}", done


@pytest.fixture
def slurmrestd():
    """Start slurmrestd for a running Slurm; returns its relayed URL."""
    path = shutil.which("slurmrestd", path=SBIN)
    if path is None:
        pytest.skip("slurmrestd not installed (apt-get install slurmrestd)")
    started = []

    def start(running) -> str:
        sock, log = running.root / "rest.sock", running.root / "log" / "slurmrestd.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([path, "-f", str(running.conf), "-a", "rest_auth/local",
                                     "-s", "openapi/v0.0.38", f"unix:{sock}"],
                                    stdout=out, stderr=subprocess.STDOUT,
                                    env={**running.env, **AS_ROOT}, start_new_session=True)
        url, done = relay(sock)
        started.append((proc, done))
        deadline = time.monotonic() + 20
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"slurmrestd did not start (exit {proc.poll()}):\n{tail(log)}")
            time.sleep(0.05)
        return url

    yield start
    for proc, done in started:
        done.set()
        stop([proc])


def detail_cpus(running, job_id: str, nodes: tuple[str, ...]) -> tuple[int, ...]:
    """CPUs per node as ``scontrol -d show job`` lists them (``Nodes=n CPU_IDs=0-2 ...``)."""
    cpus = {}
    for line in running.run("scontrol", "-d", "show", "job", job_id).splitlines():
        match = re.search(r"\bNodes=(\S+) CPU_IDs=(\S+)", line)
        if match:
            ids = sum(len(range(int(a), int(b or a) + 1)) for a, _, b in
                      (part.partition("-") for part in match.group(2).split(",")))
            for host in running.hostnames(match.group(1)):
                cpus[host] = ids
    return tuple(cpus[n] for n in nodes)


def test_a_real_slurmrestd_is_negotiated_and_gives_allocations_and_reservations(
        db, slurm, slurmrestd, tmp_path):
    cluster_plan_write(plan_cluster("rst", (NodeGroup("H100-SXM", 4),),
                                    fabric_kind="fat-tree", fabric_kw={"radix": 8}))
    running = slurm(export_tree(tmp_path))
    url = slurmrestd(running)
    work = tmp_path / "work"
    work.mkdir()

    def sbatch(*args: str) -> str:
        return running.run("sbatch", "--parsable", "-D", str(work), *args).strip()

    train = sbatch("-J", "train", "-N", "2", "-n", "4", "--mem=64G", "--gres=gpu:8",
                   "--wrap", "sleep 300")
    arr = sbatch("-J", "arr", "--array=0-1", "--gres=gpu:2", "--mem=8G", "--wrap",
                 "sleep 300")
    idle = running.nodes[-1]
    running.run("scontrol", "create", "reservation", "reservationname=fix-psu",
                "starttime=now+3600", "duration=60", f"nodes={idle}", "users=root",
                "flags=maint")

    def read():
        view = slurm_view(rest_url=url, user="root")
        jobs = {job.job_id: job for job in view.jobs}
        assert jobs.get(train) and jobs[train].state == "RUNNING", jobs.get(train)
        assert {f"{arr}_0", f"{arr}_1"} <= set(jobs), sorted(jobs)
        return view, jobs

    try:
        running.wait("the jobs to run, read through slurmrestd", lambda: bool(read()))
        view, jobs = read()
        assert view.source == "rest" and view.rest_version == "v0.0.38"
        # without slurmdbd its plugin cannot load: no /slurmdb/ paths, accounting off
        assert not view.accounting and "no /slurmdb/ API" in view.accounting_note
        job = jobs[train]
        assert len(job.nodes) == 2 and job.gpus_by_node == (8, 8)
        assert job.mem_mb_by_node == (65536, 65536)
        assert sum(job.cpus_by_node) == 4 and job.cpus_by_node == detail_cpus(running, train,
                                                                              job.nodes)
        assert job.gres_type == "h100_sxm" or job.gres_type == ""
        task = jobs[f"{arr}_1"]
        assert (task.array_job_id, task.gpus_by_node, task.mem_mb_by_node) == (
            arr, (2,), (8192,))
        assert view.nodes[idle].cpus and view.nodes[idle].real_memory_mb
        assert view.nodes[idle].gres_types and not view.nodes[idle].mig
        [resv] = [r for r in view.reservations if r.name == "fix-psu"]
        assert resv.nodes == (idle,) and resv.maintenance and resv.end - resv.start == 3600
        assert view.reservations_note == ""
        # the CLI reads the same allocation (22.05's scontrol: reservations from its text)
        cli = {j.job_id: j for j in slurm_view(conf=running.conf).jobs}
        assert (cli[train].cpus_by_node, cli[train].mem_mb_by_node,
                cli[train].gpus_by_node) == (job.cpus_by_node, job.mem_mb_by_node,
                                             job.gpus_by_node)
        cli_view = slurm_view(conf=running.conf)
        assert [r.nodes for r in cli_view.reservations if r.name == "fix-psu"] == [(idle,)]
        assert cli_view.reservations_note == ""
        with pytest.raises(SourceError, match="answered more than"):
            slurm_view(rest_url=url, user="root", max_bytes=2000)
    finally:
        running.run("scancel", train, arr)
