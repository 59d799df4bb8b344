"""Issue 26: the mirror holds on real clusters, checked against Debian's real slurmctld.

The nodes are lean, as a newcomer's were (32 CPUs, 256 GB, 8 GPUs: the simulator's per-GPU
defaults of 8 CPUs and 64 GB would not fit them), and the inventory is a little older than the
cluster (one node Slurm has is under another name in it).  Every change must show within two
polls started after it (:func:`tests.slurm.test_mirror_live.shows`): jobs of one and two nodes
running where Slurm put them and one pending with Slurm's reason, none refused; a job on the
node the twin does not know is named, the rest applied, and once it ends the twin converges;
job arrays, requeue, suspend, a maintenance reservation, drain and down.
"""

from __future__ import annotations

import io

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from django.core.management import call_command

from scheduler.control.whatif import whatif
from scheduler.hardware.cluster import NodeGroup, NodeShape, plan_cluster
from tests.slurm.conftest import export_tree
from tests.slurm.test_mirror_live import job_nodes, job_state, placed_on, run_of, settled, shows
from twin import models as m
from twin.inventory.adapter import cluster_delete, cluster_plan_write
from twin.mirror.poller import live_driver

pytestmark = [pytest.mark.slurm, pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

POLL_S = 0.5
LEAN = NodeShape(cpu_cores=32, ram_gb=256.0, nic_gbps=400.0)
GHOST = "renamed-in-inventory"


def build(tmp_path, slurm):
    """A real Slurm of five lean nodes, and an inventory imported from it whose last node
    has since been renamed (so Slurm's last node is unknown to the twin)."""
    original = cluster_plan_write(plan_cluster(
        "lean", (NodeGroup("H100-SXM", 5, shape=LEAN),), fabric_kind="fat-tree",
        fabric_kw={"radix": 8}))
    running = slurm(export_tree(tmp_path))
    cluster_delete(cluster=original)
    call_command("import_inventory", "--from-slurm", "--slurm-conf", str(running.conf),
                 "--name", "lean", stdout=io.StringIO())
    nodes = list(m.Node.objects.order_by("id"))
    assert {(n.cpu_cores, n.ram_gb) for n in nodes} == {(32, 256.0)}
    unknown = nodes[-1].hostname
    m.Node.objects.filter(pk=nodes[-1].pk).update(hostname=GHOST)
    return running, [n.hostname for n in nodes[:-1]] + [GHOST], unknown


@pytest_asyncio.fixture
async def mirror(tmp_path, slurm, settings):
    running, hosts, unknown = await database_sync_to_async(build)(tmp_path, slurm)
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "SOURCE": "mirror", "CLUSTER": "lean",
                            "SLURM_CONF": str(running.conf), "MIRROR_POLL_S": POLL_S,
                            "PROMETHEUS_URL": ""}
    driver = live_driver(frame_interval_s=0.1)
    await driver.start()
    await shows(driver, "the first poll", lambda f: f["sources"]["slurm"]["state"] == "ok")
    yield driver, running, hosts, unknown
    await driver.close(snapshot=False)
    jobs = running.run("squeue", "-h", "-o", "%i").split()
    if jobs:
        running.run("scancel", *jobs)


def sbatch(slurm, *args: str) -> str:
    out = slurm.run("sbatch", "--parsable", "--output=/dev/null", *args, "--wrap", "sleep 3000")
    return out.strip().split(";")[0]


def started(slurm, job_id: str) -> None:
    """Wait for Slurm to start the job (its scheduler runs a pass within a few seconds)."""
    slurm.wait(f"job {job_id} to run", lambda: job_state(slurm, job_id) == "RUNNING")


def problems(frame) -> dict:
    return frame["sources"]["slurm"]["problems"]


async def test_lean_nodes_a_refused_job_and_convergence(mirror):
    driver, slurm, hosts, unknown = mirror
    stray = sbatch(slurm, "-w", unknown, "--gres=gpu:8", "-J", "stray")
    one = sbatch(slurm, "-N", "1", "--gres=gpu:8", "-J", "one", "-x", unknown)
    two = sbatch(slurm, "-N", "2", "--gres=gpu:8", "-J", "two", "-x", unknown)
    for job in (stray, one, two):
        started(slurm, job)
    waits = sbatch(slurm, "-N", "2", "--gres=gpu:8", "-J", "waits", "-x", unknown)
    assert settled(slurm, waits) == "PENDING"
    reason = slurm.run("squeue", "-h", "-j", waits, "-o", "%r").strip()

    frame = await shows(
        driver, "one- and two-node jobs running, one pending, the stray job named",
        lambda f: placed_on(driver, hosts, one) == job_nodes(slurm, one)
        and placed_on(driver, hosts, two) == job_nodes(slurm, two)
        and any(q["name"] == f"slurm-{waits}" and q["reason"] == reason for q in f["queue"])
        and stray in problems(f).get("jobs_on_unknown_nodes", {}).get("names", []))
    assert frame["mirror"]["rejected_count"] == 0, frame["mirror"]["rejected"]
    assert problems(frame)["unknown_nodes"]["names"] == [unknown]
    assert run_of(driver, stray) is None
    # Slurm's allocation, not the simulator's 8 CPUs and 64 GB per GPU
    spec = run_of(driver, one).spec
    assert spec.cpu_per_gpu * 8 <= 32 and spec.ram_gb_per_gpu * 8 <= 256
    names = frame["mirror"]["jobs"]
    assert names[f"slurm-{two}"]["name"] == "two" and names[f"slurm-{two}"]["user"] == "root"

    # the stray job ends: the next polls converge, nothing stuck, no false health event
    slurm.run("scancel", stray)
    slurm.wait("the stray job to end", lambda: job_state(slurm, stray) not in (
        "RUNNING", "COMPLETING"))
    frame = await shows(driver, "the twin equal to Slurm",
                        lambda f: "jobs_on_unknown_nodes" not in problems(f))
    assert frame["mirror"]["rejected_count"] == 0
    assert {r.spec.name for r in driver.engine.runs if r.state == "running"} == {
        f"slurm-{one}", f"slurm-{two}"}
    assert not any("reachable again" in e["text"] for e in frame["events"])

    # what if, from now: scheduled by the cluster's own slurm.conf, failures from its profile
    report = whatif(driver.engine, None, hours=0.25, seeds=[1])
    said = report["from"]
    assert said["mirror"] and said["cluster"] == "lean"
    assert said["policy"] == "slurm (the cluster's slurm.conf)"
    assert said["failures"]["profile"] == "llama3" and not said["failures"]["fitted"]
    assert driver.engine.scheduler.held


async def test_arrays_requeue_suspend_reservation_drain_and_down(mirror):
    driver, slurm, hosts, unknown = mirror
    known = [h for h in hosts if h != GHOST]
    array = sbatch(slurm, "--array=0-2", "--gres=gpu:2", "--mem=8G", "-J", "sweep",
                   "-w", known[0])
    victim = sbatch(slurm, "--requeue", "--gres=gpu:8", "-J", "victim", "-w", known[1])
    paused = sbatch(slurm, "--gres=gpu:8", "-J", "paused", "-w", known[2])
    for job in (victim, paused):
        started(slurm, job)
    tasks = [f"{array}_{k}" for k in range(3)]
    for task in tasks:
        started(slurm, task)
    await shows(driver, "the array's three tasks, each its own job",
                lambda f: all(placed_on(driver, hosts, t) == {known[0]} for t in tasks))

    slurm.run("scontrol", "suspend", paused)
    await shows(driver, "the suspended job",
                lambda f: f["mirror"]["jobs"].get(f"slurm-{paused}", {}).get("state")
                == "suspended" and f["mirror"]["suspended"] >= 1)
    assert run_of(driver, paused).state == "running"   # it keeps its GPUs

    slurm.run("scontrol", "requeue", victim)
    # Slurm holds a requeued job back for its credential's lifetime (BeginTime): it waits
    await shows(driver, "the requeued job back in the queue",
                lambda f: any(q["name"] == f"slurm-{victim}" for q in f["queue"]))
    assert run_of(driver, victim).state == "queued"

    slurm.run("scontrol", "create", "reservation", "ReservationName=psu-swap",
              "StartTime=now+600", "Duration=60", f"Nodes={known[3]}", "Users=root",
              "Flags=MAINT,IGNORE_JOBS")
    frame = await shows(driver, "the maintenance window",
                        lambda f: any(r["name"] == "psu-swap" for r in
                                      f["mirror"]["reservations"]))
    window = next(r for r in frame["mirror"]["reservations"] if r["name"] == "psu-swap")
    assert window["maintenance"] and window["hosts"] == [known[3]] and window["end"] > \
        window["start"]

    slurm.run("scontrol", "update", f"nodename={known[3]}", "state=drain", "reason=psu")
    await shows(driver, "the drained node",
                lambda f: driver.engine.state.node_drained[hosts.index(known[3])])
    slurm.run("scontrol", "update", f"nodename={known[2]}", "state=down", "reason=broken")
    # its job is requeued by Slurm (batch jobs are requeueable by default) or ended
    frame = await shows(driver, "the node set down and its job off it",
                        lambda f: not driver.engine.state.node_up[hosts.index(known[2])]
                        and run_of(driver, paused).state in ("queued", "done"))
    downs = [e for e in frame["events"] if e["kind"] == "node_down"]
    assert downs and known[2] in downs[-1]["text"]      # named by hostname, not engine id
    assert frame["mirror"]["failures_measured"]["nodes_down"] >= 1
