"""The mirror applies what the real scheduler allocated, a poll whole or not at all, and
follows each job once: lean nodes, per-job refusals, lost book entries, reused ids."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.control.inject import inject
from scheduler.control.mirror import Observation, ObservedJob, mirror_hold, mirror_summary, observe
from scheduler.engine import Engine
from scheduler.hardware.cluster import NodeGroup, NodeShape, plan_cluster
from scheduler.workload.jobs import TrainingJob, Workload

LEAN = NodeShape(cpu_cores=32, ram_gb=256.0, nic_gbps=400.0)


@pytest.fixture
def lean():
    """8 nodes of 8 H100s with 32 cores and 256 GB each (Debian's test slurmd -N nodes)."""
    plan = plan_cluster("lean", (NodeGroup("H100-SXM", 8, shape=LEAN),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})
    engine = Engine(plan, Workload(jobs=()), seed=1)
    mirror_hold(engine)
    return engine


def running(key, nodes, gpus_each=8, **kw):
    return ObservedJob(key=key, state="running", gpus=gpus_each * len(nodes),
                       nodes=tuple(nodes), gpus_per_node=(gpus_each,) * len(nodes), **kw)


def run_named(engine, name):
    return next(r for r in engine.runs if r.spec.name == name)


def test_jobs_slurm_runs_on_lean_nodes_hold_what_slurm_allocated_and_none_is_refused(lean):
    nic = lean.state.node_free_nic.copy()
    changes = observe(lean, Observation(jobs=[
        running("1", [0], cpus_per_gpu=4.0, ram_gb_per_gpu=32.0),
        running("2", [1, 2]),  # Slurm did not say: no cores or memory booked
        ObservedJob(key="3", state="pending", gpus=16, reason="Resources")]))
    assert changes["rejected"] == [] and lean.mirror.rejected == {}
    assert sorted(changes["started"]) == ["1", "2"] and changes["queued"] == ["3"]
    s = lean.state
    assert s.node_free_cpu[0] == pytest.approx(0.0) and s.node_free_ram[0] == pytest.approx(0.0)
    assert s.node_free_cpu[1] == pytest.approx(32.0) and (s.node_free_nic == nic).all()
    one = run_named(lean, "slurm-1").spec
    assert (one.cpu_per_gpu, one.ram_gb_per_gpu, one.nic_gbps_per_gpu) == (4.0, 32.0, 0.0)
    assert run_named(lean, "slurm-3").state == "queued"


def test_more_cores_than_the_inventory_says_are_cut_to_fit_never_refused(lean):
    changes = observe(lean, Observation(jobs=[running("1", [0], cpus_per_gpu=8.0)]))
    assert changes["clamped"] == ["1"] and changes["rejected"] == []
    run = run_named(lean, "slurm-1")
    assert run.state == "running" and run.spec.cpu_per_gpu == pytest.approx(4.0)


def test_inject_refuses_a_job_whose_host_share_does_not_fit_and_changes_nothing(lean):
    big = TrainingJob(job_id=-1, name="big", tenant="t", submit_s=0.0, gpus=8, work_flops=1e18)
    with pytest.raises(ValueError, match="free cores"):
        inject(lean, jobs=[{"job": big, "state": "running", "nodes": [0]}])
    assert lean.runs == [] and lean.state.node_free[0] == 8


def test_one_job_that_cannot_be_followed_leaves_the_rest_applied(lean):
    changes = observe(lean, Observation(
        jobs=[running("1", [0]), running("2", [0]), running("3", [4]),
              ObservedJob(key="4", state="pending", gpus=8)],
        nodes={5: {"drained": True}}))
    assert changes["rejected"] == ["2"] and "free GPU" in lean.mirror.rejected["2"]
    assert sorted(changes["started"]) == ["1", "3"] and changes["queued"] == ["4"]
    assert lean.state.node_drained[5]
    again = observe(lean, Observation(jobs=[running("1", [0]), running("3", [4]),
                                            ObservedJob(key="4", state="pending", gpus=8)]))
    assert lean.mirror.rejected == {} and again["started"] == again["queued"] == []


def test_a_refused_observation_leaves_the_twin_as_it_was(lean):
    observe(lean, Observation(jobs=[running("1", [0])]))
    before = (len(lean.runs), lean.state.node_free.copy(), dict(lean.mirror.runs))
    bad = Observation(jobs=[running("2", [1])], nodes={3: {"up": "no"}})
    with pytest.raises(ValueError, match="true or false"):
        observe(lean, bad)
    assert len(lean.runs) == before[0] and (lean.state.node_free == before[1]).all()
    assert lean.mirror.runs == before[2] and lean.state.node_up.all()


def test_a_job_whose_book_entry_was_lost_is_matched_to_its_run_not_added_again(lean):
    observe(lean, Observation(jobs=[running("1", [0])]))
    del lean.mirror.runs["1"]  # what an apply cut short by an error left before
    changes = observe(lean, Observation(jobs=[running("1", [0])]))
    assert changes["rejected"] == [] and "reused" not in str(lean.mirror.rejected)
    assert [r.spec.name for r in lean.runs] == ["slurm-1"]
    assert lean.mirror.runs == {"1": 0}


def test_an_id_the_scheduler_reused_after_forgetting_the_job_is_a_new_run(lean):
    observe(lean, Observation(jobs=[running("5", [0])]))
    observe(lean, Observation(jobs=[ObservedJob(key="5", state="ended", gpus=8,
                                                reason="COMPLETED")]))
    observe(lean, Observation(jobs=[]))
    observe(lean, Observation(jobs=[running("5", [3])]))
    assert run_named(lean, "slurm-5").state == "done"
    again = run_named(lean, "slurm-5-r2")
    assert again.state == "running" and again.placement.nodes.tolist() == [3]
    assert lean.mirror.rejected == {}


def test_events_name_nodes_by_hostname(lean):
    lean.mirror.hostnames = [f"gpu-{i:02d}" for i in range(lean.plan.n_nodes)]
    xid = np.zeros(lean.state.n_gpus)
    xid[8 * 3 + 1] = 79
    observe(lean, Observation(nodes={2: {"up": False}}, reasons={2: "Not responding"},
                              telemetry={"xid": xid}))
    texts = [e["text"] for e in lean.events if e["kind"] in ("node_down", "xid")]
    assert texts == ["gpu-02 down in the cluster: Not responding", "XID 79 on gpu-03 GPU 1"]


def test_slurm_names_users_and_suspension_reach_the_summary(lean):
    observe(lean, Observation(jobs=[
        running("7_1", [0], name="sweep", user="ana", account="vision",
                slurm_state="SUSPENDED"),
        ObservedJob(key="8+0", state="pending", gpus=8, name="het", user="bo")]))
    summary = mirror_summary(lean)
    assert summary["suspended"] == 1
    assert summary["jobs"]["slurm-7_1"] == {"key": "7_1", "name": "sweep", "user": "ana",
                                            "account": "vision", "partition": "",
                                            "state": "suspended"}
    assert summary["jobs"]["slurm-8+0"]["user"] == "bo"
    observe(lean, Observation(jobs=[running("7_1", [0], name="sweep", slurm_state="RUNNING")]))
    assert mirror_summary(lean)["suspended"] == 0


def test_a_book_from_an_older_snapshot_gains_the_new_fields(lean):
    import pickle

    book = lean.mirror
    del book.hostnames, book.jobs  # as a book pickled before they existed
    old = pickle.loads(pickle.dumps(book))
    assert old.hostnames is None and old.jobs == {} and old.host(3) == "node 3"


def test_a_job_that_outlives_the_twins_estimate_of_its_length_is_followed_on(lean):
    observe(lean, Observation(jobs=[running("1", [0], time_limit_s=600.0)]))
    lean.run_until(lean.now + 900.0)  # the twin thought it done after 600 s
    assert run_named(lean, "slurm-1").state == "done"
    changes = observe(lean, Observation(jobs=[running("1", [0], time_limit_s=600.0,
                                                      elapsed_s=900.0)]))
    assert changes["rejected"] == [] and changes["started"] == ["1"]
    assert lean.runs[lean.mirror.runs["1"]].state == "running"


def test_a_job_moved_where_the_twin_cannot_follow_is_stopped_and_listed_never_ended(lean):
    observe(lean, Observation(jobs=[running("7", [0])]))
    run = run_named(lean, "slurm-7")
    # the scheduler still lists job 7, on a node the inventory lacks: the adapter drops it
    changes = observe(lean, Observation(jobs=[], unmapped={"7"}))
    assert changes["ended"] == [] and changes["rejected"] == ["7"]
    assert run.state == "queued" and "7" in lean.mirror.rejected
    assert lean.mirror.ended == {}
    # back on nodes the twin knows: the same run follows it again
    changes = observe(lean, Observation(jobs=[running("7", [3])]))
    assert run.state == "running" and run.placement.nodes.tolist() == [3]
    assert "7" not in lean.mirror.rejected
    # and when the scheduler stops listing it, it has ended
    assert observe(lean, Observation(jobs=[]))["ended"] == ["7"]
