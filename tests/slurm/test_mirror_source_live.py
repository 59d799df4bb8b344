"""Issue 14: the mirror's Slurm reader follows a real, running Slurm (Debian's 22.05).

A 4-node H100 cluster is exported and started (``conftest.py``); jobs are submitted with
``sbatch``, nodes drained with ``scontrol``, and :func:`twin.mirror.slurm_source.slurm_view`
must report what Slurm says: the running jobs on their nodes with their GPUs, the pending ones
with Slurm's reasons, a finished one with its exit code, the drained nodes with their reasons,
and no accounting (no slurmdbd here) said as such.
"""

from __future__ import annotations

import time

import pytest

from scheduler.hardware.cluster import NodeGroup, plan_cluster
from tests.slurm.conftest import export_tree
from twin.inventory.adapter import cluster_plan_write
from twin.mirror.slurm_source import slurm_view

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


def test_the_mirror_reads_jobs_drained_nodes_and_pending_reasons_from_a_running_slurm(
        db, slurm, tmp_path):
    cluster_plan_write(plan_cluster("mir", (NodeGroup("H100-SXM", 4),),
                                    fabric_kind="fat-tree", fabric_kw={"radix": 8}))
    running = slurm(export_tree(tmp_path))
    work = tmp_path / "work"
    work.mkdir()

    def sbatch(*args: str) -> str:
        return running.run("sbatch", "--parsable", "-D", str(work), *args).strip()

    def view_jobs(view) -> dict:
        return {job.job_id: job for job in view.jobs}

    try:
        ok = sbatch("-J", "ok", "--wrap", "exit 3")
        train = sbatch("-J", "train", "-N", "2", "--gres=gpu:8", "--wrap", "sleep 300")
        small = sbatch("-J", "small", "-N", "1", "--gres=gpu:4", "-t", "30",
                       "--wrap", "sleep 300")

        def started() -> bool:
            jobs = view_jobs(slurm_view(conf=running.conf))
            states = {k: jobs[k].state for k in (ok, train, small)}
            assert states == {ok: "FAILED", train: "RUNNING", small: "RUNNING"}, states
            return True

        running.wait("the first jobs to run and end", started)
        big = sbatch("-J", "big", "-N", "3", "--gres=gpu:8", "--wrap", "sleep 300")
        after = sbatch("-J", "after", "-N", "1", "--gres=gpu:8", "--wrap", "sleep 300")
        small_node = view_jobs(slurm_view(conf=running.conf))[small].nodes[0]
        idle = next(n for n in running.nodes
                    if n not in view_jobs(slurm_view(conf=running.conf))[train].nodes
                    and n != small_node)
        running.run("scontrol", "update", f"nodename={small_node}", "state=drain",
                    "reason=xid 79 on gpu 3")
        running.run("scontrol", "update", f"nodename={idle}", "state=drain",
                    "reason=maintenance: reseat NIC")

        def pending() -> bool:
            jobs = view_jobs(slurm_view(conf=running.conf))
            reasons = {k: (jobs[k].state, jobs[k].reason) for k in (big, after)}
            assert reasons[big][0] == "PENDING" and reasons[after][0] == "PENDING", reasons
            assert reasons[big][1] not in ("", "None") and reasons[after][1] == "Priority", \
                reasons
            return True

        running.wait("the pending jobs to get Slurm's reasons", pending)
        view = slurm_view(conf=running.conf, clock=lambda: 42.0)
        jobs = view_jobs(view)
        assert (view.source, view.read_at, view.accounting) == ("cli", 42.0, False)
        assert "accounting storage is disabled" in view.accounting_note
        assert set(view.nodes) == set(running.nodes) and view.partitions == ("all",)
        assert view.nodes[small_node].state >= {"drain", "draining"}
        assert view.nodes[small_node].reason == "xid 79 on gpu 3"
        assert view.nodes[idle].state >= {"idle", "drain", "drained"}
        assert view.nodes[idle].reason == "maintenance: reseat NIC"
        assert all(node.gpus == 8 for node in view.nodes.values())
        assert (jobs[ok].exit_code, jobs[ok].reason) == (3, "NonZeroExitCode")
        assert len(jobs[train].nodes) == 2 and set(jobs[train].nodes) <= set(running.nodes)
        assert (jobs[train].gpus, jobs[train].gpus_per_node) == (16, 8)
        assert (jobs[small].gpus, jobs[small].time_limit_s) == (4, 1800.0)
        assert jobs[small].start_time is not None and jobs[small].exit_code is None
        # 3 nodes wanted, one free and drained: Slurm says Resources or names the drained node
        assert jobs[big].reason.startswith(("Resources", "ReqNodeNotAvail", "Nodes required"))
        assert (jobs[big].gpus, jobs[big].nodes) == (24, ())
    finally:
        # let slurmd end the job steps before the fixture stops it (a slurmstepd whose
        # slurmd is gone stays behind)
        running.run("scancel", "--user=root")
        deadline = time.monotonic() + 20
        while running.run("squeue", "-h", "-t", "R,CG,CF").strip() and \
                time.monotonic() < deadline:
            time.sleep(0.2)
