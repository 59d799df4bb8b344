"""Issue 14: the live twin mirrors a real Slurm.

A cluster is exported and started as a real Slurm (``conftest.py``), the inventory is rebuilt
from that Slurm (``import_inventory --from-slurm``), and a live engine runs with
``CLUSTERTWIN_SOURCE=mirror``, reading ``sinfo/squeue --json`` every poll.  Jobs are submitted
with ``sbatch``, a node is drained and one is set down with ``scontrol``: each change must show
in the mirror's frame within two poll intervals (counted in polls, not in seconds), with the
jobs on the nodes Slurm gave them and the pending reasons Slurm gives.  GPU telemetry comes from
a real Prometheus scraping stand-in DCGM exporters of the same hosts.  A what-if forked from
the mirrored state with a drill on the spine reports the jobs it would hit.
"""

from __future__ import annotations

import asyncio
import http.server
import io
import threading
import time

import numpy as np
import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from django.core.management import call_command

from scheduler.control.whatif import whatif
from tests import frames
from tests.prometheus.conftest import prometheus  # noqa: F401  (the fixture)
from tests.slurm.conftest import PLANS, export_tree
from twin import models as m
from twin.inventory.adapter import cluster_delete, cluster_plan_write
from twin.metrics.dcgm import dcgm_exposition_chunks, dcgm_inventory, dcgm_readings
from twin.mirror.poller import live_driver

pytestmark = [pytest.mark.slurm, pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

POLL_S = 0.5
POLLS = 2  # a change shows within this many polls started after it
GUARD_S = 120.0  # only against a hang


def build(tmp_path, slurm):
    original = cluster_plan_write(PLANS["fat-tree"]())
    running = slurm(export_tree(tmp_path))
    cluster_delete(cluster=original)
    call_command("import_inventory", "--from-slurm", "--slurm-conf", str(running.conf),
                 "--name", "from-slurm", stdout=io.StringIO())
    hosts = list(m.Node.objects.order_by("id").values_list("hostname", flat=True))
    return running, hosts


@pytest_asyncio.fixture
async def mirrors(tmp_path, slurm, settings):
    """``start(prometheus_url="")``: a mirror of a real Slurm whose inventory was imported from
    it; returns (driver, Slurm, hostnames in engine order)."""
    running, hosts = await database_sync_to_async(build)(tmp_path, slurm)
    drivers = []

    async def start(prometheus_url: str = ""):
        settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "SOURCE": "mirror",
                                "CLUSTER": "from-slurm", "SLURM_CONF": str(running.conf),
                                "MIRROR_POLL_S": POLL_S, "PROMETHEUS_URL": prometheus_url}
        driver = live_driver(frame_interval_s=0.1)
        await driver.start()
        drivers.append(driver)
        return driver, running, hosts

    yield start
    for driver in drivers:
        await driver.close(snapshot=False)
    jobs = running.run("squeue", "-h", "-o", "%i").split()
    if jobs:
        running.run("scancel", *jobs)
    running.wait("the test's jobs to end", lambda: not running.run(
        "squeue", "-h", "-t", "running,completing", "-o", "%i").split())


@pytest_asyncio.fixture
async def mirror(mirrors):
    return await mirrors()


async def shows(driver, what: str, condition):
    """Step the live engine until ``condition(frame)`` holds; fail if it takes more than
    ``POLLS`` polls started after the change (a poll already in flight does not count)."""
    book = driver.engine.mirror
    allowed = book.polls + POLLS + (1 if driver.mirror.poll_task is not None else 0)
    end = time.monotonic() + GUARD_S
    while True:
        frame = await driver.step_once()
        if condition(frame):
            return frame
        if book.polls > allowed:
            pytest.fail(f"{what}: not shown after {POLLS} polls; sources: {frame['sources']}; "
                        f"last events: {frame['events'][-3:]}")
        if time.monotonic() > end:
            pytest.fail(f"{what}: no poll finished in {GUARD_S:g} s; {frame['sources']}")
        await asyncio.sleep(0.05)


def sbatch(slurm, *args: str) -> str:
    out = slurm.run("sbatch", "--parsable", "--no-requeue", "--output=/dev/null", *args,
                    "--wrap", "sleep 3000")
    return out.strip().split(";")[0]


def job_state(slurm, job_id: str) -> str:
    return slurm.run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T").strip()


def settled(slurm, job_id: str) -> str:
    """Wait until Slurm has decided about the job (running, or pending with a reason)."""
    slurm.wait(f"job {job_id} to start or get a reason", lambda: job_state(slurm, job_id) in (
        "RUNNING", "PENDING") and slurm.run("squeue", "-h", "-j", job_id, "-o", "%r").strip()
        not in ("None", "") or job_state(slurm, job_id) == "RUNNING")
    return job_state(slurm, job_id)


def job_nodes(slurm, job_id: str) -> set[str]:
    expr = slurm.run("squeue", "-h", "-j", job_id, "-o", "%N").strip()
    return set(slurm.hostnames(expr))


def run_of(driver, job_id):
    return next((r for r in driver.engine.runs if r.spec.name == f"slurm-{job_id}"), None)


def placed_on(driver, hosts, job_id) -> set[str]:
    run = run_of(driver, job_id)
    if run is None or run.state != "running":
        return set()
    return {hosts[n] for n in run.placement.nodes.tolist()}


async def test_jobs_drains_and_failures_in_slurm_show_in_the_mirror(mirror):
    driver, slurm, hosts = mirror
    await shows(driver, "the first poll", lambda f: f["sources"]["slurm"]["state"] == "ok")

    small = sbatch(slurm, "-N", "2", "--gres=gpu:8", "-J", "small",
                   "--comment", "twin:params_b=8,tp=8")
    other = sbatch(slurm, "-N", "1", "--gres=gpu:8", "-J", "other")
    assert settled(slurm, small) == settled(slurm, other) == "RUNNING"
    slurm_small = job_nodes(slurm, small)
    assert len(slurm_small) == 2
    await shows(driver, "the declared model", lambda f: run_of(driver, small) is not None)
    assert run_of(driver, small).spec.params_b == 8.0
    assert run_of(driver, small).spec.parallelism.tp == 8
    await shows(driver, "two running jobs",
                lambda f: placed_on(driver, hosts, small) == slurm_small
                and placed_on(driver, hosts, other) == job_nodes(slurm, other))

    # more GPUs than are free: Slurm keeps it pending and says why
    big = sbatch(slurm, "-N", "16", "--gres=gpu:4", "-J", "big",
                 "--comment", "twin:params_b=70,tp=4")
    assert settled(slurm, big) == "PENDING"
    reason = slurm.run("squeue", "-h", "-j", big, "-o", "%r").strip()
    assert reason in ("Resources", "Priority")
    frame = await shows(driver, "the pending job and its reason",
                        lambda f: any(q["name"] == f"slurm-{big}" and q["reason"] == reason
                                      for q in f["queue"]))
    assert frame["mirror"]["pending_reasons"].get(reason, 0) >= 1

    # a drained node keeps its job running
    drained = sorted(slurm_small)[0]
    slurm.run("scontrol", "update", f"nodename={drained}", "state=drain", "reason=maintenance")
    await shows(driver, "the drained node",
                lambda f: driver.engine.state.node_drained[hosts.index(drained)])
    assert run_of(driver, small).state == "running"

    # a node set down kills the job on it (NODE_FAIL, not requeued): an interruption
    failed = next(iter(job_nodes(slurm, other)))
    slurm.run("scontrol", "update", f"nodename={failed}", "state=down", "reason=broken")
    frame = await shows(driver, "the failed node and its job",
                        lambda f: not driver.engine.state.node_up[hosts.index(failed)]
                        and run_of(driver, other).state == "done")
    end_state = job_state(slurm, other)
    assert end_state in frame["mirror"]["ended"], (end_state, frame["mirror"]["ended"])
    if end_state == "NODE_FAIL":
        assert frame["interruptions"]["by_cause"].get("node_fail") == 1
    assert run_of(driver, small).state == "running"

    # what if, from now: drills forked from the mirrored state report the jobs they would hit
    # (the live mirror is untouched).  A leaf under the small job hits it; a spine drill runs
    # and can only hit mirrored jobs (in this small fabric the other spines absorb the loss).
    now = driver.engine.now
    engine = driver.engine
    mirrored = {f"slurm-{small}", f"slurm-{big}"}
    first_gpu = int(engine.state.node_first_gpu[hosts.index(sorted(slurm_small)[0])])
    leaf = int(engine.plan.fabric.endpoint_leaf[first_gpu])

    def hit(action):
        report = whatif(engine, action, hours=1.0, seeds=[1, 2])
        return {name for seed in report["per_seed"] for name in seed["jobs_hit"]}

    leaf_hit = hit({"kind": "leaf_switch", "target": leaf})
    assert f"slurm-{small}" in leaf_hit and leaf_hit <= mirrored, leaf_hit
    assert hit({"kind": "spine_switch", "target": 0}) <= mirrored
    assert engine.now == now and engine.scheduler.held and engine is driver.engine


class Exporter(http.server.ThreadingHTTPServer):
    """A stand-in for the cluster's DCGM exporters: what ``twin.metrics.dcgm`` reports for a fixed
    state of the imported cluster (a gang on nodes 0-1, node 5 down), served for Prometheus."""

    def __init__(self, inv, readings):
        body = b"".join(dcgm_exposition_chunks(inv, readings))

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def exporter_state():
    nodes = tuple(m.Node.objects.order_by("id").values_list(
        "hostname", "accelerator_model__name", "accelerator_count", "nic_gbps"))
    inv = dcgm_inventory("from-slurm", nodes)
    placement = frames.placement(
        jobs={"train": {"state": "running", "gpus": 16, "nodes": [[0, 1]],
                        "gpu_runs": frames.gpu_runs((0, 8), (1, 8))}},
        down=[[5, 5]])
    frame = frames.frame(running_jobs=[{"name": "train", "mfu": 0.41}])
    return inv, dcgm_readings(inv, placement=placement, frame=frame)


@pytest.mark.prometheus
async def test_gpu_power_and_utilisation_on_the_pages_come_from_prometheus(mirrors, prometheus):  # noqa: F811,E501
    inv, readings = await database_sync_to_async(exporter_state)()
    exporter = Exporter(inv, readings)
    try:
        prom = prometheus([{"job_name": "dcgm", "scrape_interval": "1s", "static_configs": [
            {"targets": [f"127.0.0.1:{exporter.server_address[1]}"]}]}])
        reported = readings.gpus.size
        prom.wait(lambda p: (r := p.query("count(DCGM_FI_DEV_POWER_USAGE)"))
                  and int(float(r[0]["value"][1])) == reported, what="the exporter's series")
        driver, _, hosts = await mirrors(prometheus_url=prom.url)
        frame = await shows(driver, "the telemetry", lambda f: f["mirror"]["telemetry"]
                            ["gpus_reporting"] == reported)
    finally:
        exporter.shutdown()
    tel = driver.engine.mirror.telemetry
    power = readings.values["DCGM_FI_DEV_POWER_USAGE"]
    util = readings.values["DCGM_FI_DEV_GPU_UTIL"]
    np.testing.assert_allclose(tel["power_w"][readings.gpus], power)
    np.testing.assert_allclose(tel["util"][readings.gpus], util)
    silent = np.setdiff1d(np.arange(driver.engine.state.n_gpus), readings.gpus)
    assert np.isnan(tel["power_w"][silent]).all()  # node 5 (down) and the AMD nodes: no data
    shown = frame["mirror"]["telemetry"]
    assert shown["power_kw"] == pytest.approx(power.sum() / 1000.0, rel=1e-3)
    assert shown["util_mean_pct"] == pytest.approx(util.mean(), rel=1e-3)
    assert frame["sources"]["prometheus"]["state"] == "ok"
