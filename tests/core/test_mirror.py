"""The engine as a mirror: the real scheduler's word sets jobs and nodes, nothing is invented."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.control.mirror import (
    DEFAULT_LIMIT_S,
    Observation,
    ObservedJob,
    mirror_hold,
    mirror_summary,
    observe,
    release_fork,
)
from scheduler.engine import Engine
from scheduler.live import live_frame
from scheduler.presets import get_preset
from scheduler.workload.jobs import Workload


@pytest.fixture
def mirror():
    plan = get_preset("dev-small").plan()
    engine = Engine(plan, Workload(jobs=()), seed=3)
    mirror_hold(engine)
    return engine


def running(key, nodes, gpus_each=8, **kw):
    return ObservedJob(key=key, state="running", gpus=gpus_each * len(nodes),
                       nodes=tuple(nodes), **kw)


def run_named(engine, key):
    return next(r for r in engine.runs if r.spec.name == f"slurm-{key}")


def test_a_running_job_is_placed_on_the_nodes_the_scheduler_gave_it(mirror):
    observe(mirror, Observation(jobs=[running("11", [2, 3], elapsed_s=3600.0,
                                              time_limit_s=4 * 3600.0)]))
    run = run_named(mirror, "11")
    assert run.state == "running"
    assert sorted(run.placement.nodes.tolist()) == [2, 3]
    assert (mirror.state.gpu_owner[mirror.state.gpu_node == 2] == run.idx).all()


def test_the_work_left_follows_elapsed_time_over_the_time_limit(mirror):
    observe(mirror, Observation(jobs=[running("1", [0], elapsed_s=3 * 3600.0,
                                              time_limit_s=4 * 3600.0),
                                      running("2", [1], elapsed_s=0.0,
                                              time_limit_s=4 * 3600.0)]))
    late, early = run_named(mirror, "1"), run_named(mirror, "2")
    assert late.remaining_flops == pytest.approx(0.25 * early.remaining_flops)


def test_a_job_with_no_time_limit_is_assumed_to_run_the_default_limit(mirror):
    observe(mirror, Observation(jobs=[running("1", [0], elapsed_s=DEFAULT_LIMIT_S / 2)]))
    run = run_named(mirror, "1")
    assert run.remaining_flops == pytest.approx(run.spec.work_flops / 2)


def test_the_held_scheduler_starts_no_pending_job_even_with_free_gpus(mirror):
    observe(mirror, Observation(jobs=[ObservedJob(key="5", state="pending", gpus=8,
                                                  reason="Priority")]))
    mirror.run_until(mirror.now + 3600.0)
    run = run_named(mirror, "5")
    assert run.state == "queued"
    assert mirror_summary(mirror)["pending_reasons"] == {"Priority": 1}
    frame = live_frame(mirror)
    assert frame["mirror"]["pending_reasons"] == {"Priority": 1}
    assert frame["queue"][0]["reason"] == "Priority"


def test_a_fork_released_from_the_mirror_schedules_the_pending_jobs(mirror):
    observe(mirror, Observation(jobs=[ObservedJob(key="5", state="pending", gpus=8)]))
    fork = mirror.fork()
    release_fork(fork)
    fork.run_until(fork.now + 60.0)
    assert run_named(fork, "5").state == "running"
    assert run_named(mirror, "5").state == "queued"  # the mirror itself is untouched


def test_a_node_fail_end_counts_as_an_interruption_by_that_cause(mirror):
    observe(mirror, Observation(jobs=[running("7", [4])]))
    mirror.run_until(mirror.now + 600.0)
    observe(mirror, Observation(jobs=[ObservedJob(key="7", state="ended", gpus=8,
                                                  reason="NODE_FAIL")],
                                nodes={4: {"up": False}}))
    run = run_named(mirror, "7")
    assert run.state == "done" and run.interruptions == 1
    assert mirror.reliability.interruptions["node_fail"] == 1
    assert not mirror.state.node_up[4]
    assert mirror.state.node_free[4] == 0 or not mirror.state.node_up[4]
    assert (mirror.state.gpu_owner[mirror.state.gpu_node == 4] < 0).all()
    assert live_frame(mirror)["interruptions"]["by_cause"]["node_fail"] == 1


def test_a_completed_job_is_done_and_not_an_interruption(mirror):
    observe(mirror, Observation(jobs=[running("8", [5])]))
    mirror.run_until(mirror.now + 600.0)
    observe(mirror, Observation(jobs=[ObservedJob(key="8", state="ended", gpus=8,
                                                  reason="COMPLETED")]))
    run = run_named(mirror, "8")
    assert run.state == "done" and run.interruptions == 0
    assert sum(mirror.reliability.interruptions.values()) == 0
    assert mirror.state.node_free[5] == mirror.state.node_gpus[5]


def test_a_job_that_left_a_complete_view_has_ended(mirror):
    observe(mirror, Observation(jobs=[running("9", [6])]))
    observe(mirror, Observation(jobs=[]))
    assert run_named(mirror, "9").state == "done"
    assert mirror.mirror.ended == {"GONE": 1}


def test_a_partial_view_ends_nothing(mirror):
    observe(mirror, Observation(jobs=[running("9", [6])]))
    observe(mirror, Observation(jobs=[], complete=False))
    assert run_named(mirror, "9").state == "running"


def test_a_requeued_job_goes_back_to_the_queue_and_follows_its_new_nodes(mirror):
    observe(mirror, Observation(jobs=[running("3", [1])]))
    observe(mirror, Observation(jobs=[ObservedJob(key="3", state="pending", gpus=8,
                                                  reason="BeginTime")]))
    run = run_named(mirror, "3")
    assert run.state == "queued" and run.preemptions == 1
    observe(mirror, Observation(jobs=[running("3", [7])]))
    assert run.state == "running" and run.placement.nodes.tolist() == [7]
    assert len([r for r in mirror.runs if r.spec.name == "slurm-3"]) == 1


def test_drained_nodes_are_set_and_their_jobs_keep_running(mirror):
    observe(mirror, Observation(jobs=[running("4", [2])]))
    observe(mirror, Observation(jobs=[running("4", [2])], nodes={2: {"drained": True}},
                                reasons={2: "maintenance"}))
    assert mirror.state.node_drained[2]
    assert run_named(mirror, "4").state == "running"
    assert mirror.mirror.node_reasons[2] == "maintenance"


def test_a_job_on_busy_gpus_is_rejected_with_its_reason_not_guessed(mirror):
    observe(mirror, Observation(jobs=[running("1", [0])]))
    changes = observe(mirror, Observation(jobs=[running("1", [0]), running("2", [0])]))
    assert changes["rejected"] == ["2"]
    assert "free GPU" in mirror.mirror.rejected["2"]
    assert not any(r.spec.name == "slurm-2" for r in mirror.runs)
    assert mirror_summary(mirror)["rejected_count"] == 1


def test_bad_observations_are_refused_before_anything_changes(mirror):
    before = mirror.state.node_up.copy()
    with pytest.raises(ValueError, match="not a node"):
        observe(mirror, Observation(nodes={0: {"up": False}, 10**6: {"up": False}}))
    with pytest.raises(ValueError, match="state must be"):
        observe(mirror, Observation(jobs=[ObservedJob(key="1", state="weird", gpus=8)]))
    with pytest.raises(ValueError, match="listed twice"):
        observe(mirror, Observation(jobs=[running("1", [0]), running("1", [1])]))
    assert (mirror.state.node_up == before).all()
    assert not mirror.runs


def test_a_new_xid_code_on_a_gpu_is_one_event_and_a_repeat_is_not(mirror):
    n = mirror.state.n_gpus
    xid = np.zeros(n)
    xid[9] = 79
    observe(mirror, Observation(telemetry={"xid": xid.copy()}))
    observe(mirror, Observation(telemetry={"xid": xid.copy()}))
    lines = [e for e in mirror.events if e["kind"] == "xid"]
    assert len(lines) == 1 and "XID 79" in lines[0]["text"]
    assert mirror.mirror.xid == {79: 1}


def test_telemetry_summary_reads_the_measured_columns_not_the_model(mirror):
    n = mirror.state.n_gpus
    power = np.full(n, np.nan)
    power[:4] = 500.0
    observe(mirror, Observation(telemetry={"power_w": power, "util": np.where(
        np.isnan(power), np.nan, 50.0)}))
    tel = mirror_summary(mirror)["telemetry"]
    assert tel["gpus_reporting"] == 4
    assert tel["power_kw"] == pytest.approx(2.0)
    assert tel["util_mean_pct"] == pytest.approx(50.0)


def test_an_ended_job_still_listed_is_counted_once(mirror):
    done = ObservedJob(key="12", state="ended", gpus=8, reason="COMPLETED")
    for _ in range(3):
        observe(mirror, Observation(jobs=[done]))
    assert mirror.mirror.ended == {"COMPLETED": 1}
    observe(mirror, Observation(jobs=[running("13", [1])]))
    observe(mirror, Observation(jobs=[ObservedJob(key="13", state="ended", gpus=8,
                                                  reason="FAILED")]))
    observe(mirror, Observation(jobs=[ObservedJob(key="13", state="ended", gpus=8,
                                                  reason="FAILED")]))
    assert mirror.mirror.ended == {"COMPLETED": 1, "FAILED": 1}


def test_each_node_the_cluster_changed_is_an_event_with_its_reason(mirror):
    observe(mirror, Observation(nodes={3: {"up": False}, 4: {"drained": True}},
                                reasons={3: "broken fan"}))
    lines = [(e["kind"], e["text"]) for e in mirror.events if e["kind"] in ("node_down",
                                                                           "drain")]
    assert lines == [("node_down", "node 3 down in the cluster: broken fan"),
                     ("drain", "node 4 drained in the cluster")]
    observe(mirror, Observation(nodes={3: {"up": False}, 4: {"drained": True}}))
    assert len([e for e in mirror.events if e["kind"] in ("node_down", "drain")]) == 2


def test_jobs_that_swap_nodes_between_two_polls_both_follow(mirror):
    observe(mirror, Observation(jobs=[running("a", [0]), running("b", [1])]))
    changes = observe(mirror, Observation(jobs=[running("a", [1]), running("b", [0])]))
    assert changes["rejected"] == [] and sorted(changes["moved"]) == ["a", "b"]
    assert run_named(mirror, "a").placement.nodes.tolist() == [1]
    assert run_named(mirror, "b").placement.nodes.tolist() == [0]


def test_ended_jobs_are_forgotten_once_the_scheduler_forgets_them(mirror):
    """squeue lists an ended job for MinJobAge; the mirror keeps no memory of it after."""
    done = ObservedJob(key="12", state="ended", gpus=8, reason="COMPLETED")
    observe(mirror, Observation(jobs=[done]))
    assert "12" in mirror.mirror.counted
    observe(mirror, Observation(jobs=[]))
    assert mirror.mirror.counted == set()
    observe(mirror, Observation(jobs=[done], complete=False))  # a partial view forgets nothing
    observe(mirror, Observation(jobs=[], complete=False))
    assert mirror.mirror.counted == {"12"}
