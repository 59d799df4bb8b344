"""Staff actions on jobs (hold, release, cancel, requeue, priority) and ending a drill early, in
the core: each applies only in the states it names, refuses otherwise with nothing changed, and
leaves a line in the event log naming who asked."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from scheduler.control.job_actions import BY_MAX, HELD_REASON, held_jobs
from scheduler.live import live_frame
from tests.core.factories import HOUR, job, run_engine, service, small_plan, workload


def two_node_engine(*jobs, until_h=0.1, **kw):
    """16 GPUs (two 8-GPU nodes); failures off so nothing but the actions moves a job."""
    return run_engine(small_plan(2), workload(*jobs), failures=False, until_h=until_h, **kw)


def states(e):
    return {r.spec.name: r.state for r in e.runs}


def test_a_held_job_is_not_scheduled_until_released_and_keeps_its_submit_time_and_priority():
    # j0 fills the cluster; j1 waits behind it
    e = two_node_engine(job(gpus=16, hours=0.5, priority=9), job(gpus=8, hours=1, priority=7))
    assert states(e) == {"j0": "running", "j1": "queued"}
    out = e.command("job_hold", job="j1", by="alice")
    assert out["state"] == "held"
    assert held_jobs(e) == [{"name": "j1", "tenant": "research", "gpus": 8, "priority": 7,
                             "reason": HELD_REASON, "wait_h": 0.1}]
    assert e.events[-1]["text"] == "j1 held (JobHeldUser) by alice"
    e.run_until(2 * HOUR)  # j0 ended long ago and the whole cluster is free: j1 still waits
    assert states(e) == {"j0": "done", "j1": "held"}
    assert e.running == {} and len(e.queue) == 0
    e.command("job_release", job="j1", by="bob")
    assert e.events[-1]["text"] == "j1 released by bob"
    run = e.runs[1]
    assert (run.spec.submit_s, run.spec.priority, run.queued_since) == (0.0, 7, 0.0)
    e.run_until(e.now)
    assert run.state == "running" and run.wait_s == pytest.approx(2 * HOUR)


@pytest.mark.parametrize("action, params, message", [
    ("job_hold", {"job": "j0"}, "job j0 is running: only queued jobs can be held"),
    ("job_release", {"job": "j1"}, "job j1 is queued, not held: there is nothing to release"),
    ("job_requeue", {"job": "j1"}, "job j1 is queued: only running jobs can be requeued"),
    ("job_priority", {"job": "j0", "priority": 5},
     "job j0 is running: only queued or held jobs can be reprioritised"),
    ("job_priority", {"job": "j1", "priority": 1001}, "priority must be at most 1,000"),
    ("job_priority", {"job": "j1", "priority": 2.5}, "priority must be an integer"),
    ("job_cancel", {"job": "nope"}, "no job named 'nope'"),
    ("job_hold", {"job": "j1", "by": 7}, "by must be a name"),
])
def test_an_action_out_of_place_is_refused_and_changes_nothing(action, params, message):
    e = two_node_engine(job(gpus=16, hours=5), job(gpus=8, hours=1))
    before = pickle.dumps((states(e), e.runs[1].spec, len(e.events), e.ledger.gpu_s))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        e.command(action, **params)
    assert pickle.dumps((states(e), e.runs[1].spec, len(e.events), e.ledger.gpu_s)) == before


def test_cancelling_a_queued_job_ends_it_for_good_and_counts_it():
    e = two_node_engine(job(gpus=16, hours=0.5), job(gpus=8, hours=1))
    e.command("job_cancel", job="j1", by="alice")
    assert e.runs[1].state == "cancelled" and e.runs[1].end_s == pytest.approx(0.1 * HOUR)
    assert e.counters["cancelled"] == 1
    e.run_until(3 * HOUR)
    assert states(e) == {"j0": "done", "j1": "cancelled"} and e.runs[1].first_start is None
    assert "j1 cancelled (queued) by alice" in [ev["text"] for ev in e.events]


def test_cancelling_a_running_job_frees_its_gpus_and_books_work_since_its_checkpoint_as_preempted():
    # 10-minute checkpoints at 30 s writes; cancelled 25 min in: two checkpoints are usable
    e = two_node_engine(job(gpus=16, hours=5, checkpoint_interval_s=600.0), until_h=0)
    e.run_until(1500.0)
    run = e.runs[0]
    books = run.books_at(e.now)
    lost_gpu_s = 16 * (books.computed_s - books.saved_s)
    assert lost_gpu_s > 0 and books.saved_s > 0
    before = e.ledger.gpu_hours()
    e.command("job_cancel", job="j0", by="alice")
    after = e.ledger.gpu_hours()
    assert run.state == "cancelled" and e.state.node_free.sum() == 16
    assert after["preempted"] - before["preempted"] == pytest.approx(lost_gpu_s / 3600)
    assert after["lost_work"] == before["lost_work"] == 0.0
    assert after["productive"] - before["productive"] == pytest.approx(
        16 * books.saved_s * run.slow / 3600)


def test_requeue_stops_a_running_job_like_a_preemption_and_it_runs_again_from_its_checkpoint():
    e = two_node_engine(job(gpus=16, hours=5, checkpoint_interval_s=600.0), until_h=0)
    e.run_until(1500.0)
    run = e.runs[0]
    saved_flops = run.books_at(e.now).saved_s * run.rate * run.slow
    left = run.remaining_flops
    e.command("job_requeue", job="j0", by="carol")
    assert run.preemptions == 1 and e.counters["preemptions"] == 1
    assert run.remaining_flops == pytest.approx(left - saved_flops)
    assert "j0 (16 GPUs) preempted: requeued by carol" in [ev["text"] for ev in e.events]
    # nothing else wants the GPUs: the queue places it again at once, in a new segment that
    # starts with a restart from the checkpoint
    assert run.state == "running" and run.seg_start == e.now and run.restart_s > 0


def test_a_new_priority_reorders_the_queue():
    # three 16-GPU jobs wait behind a running one; raising the last puts it first
    e = two_node_engine(job(gpus=16, hours=1), job(gpus=16, hours=1), job(gpus=16, hours=1),
                        job(gpus=16, hours=1))
    assert [q["name"] for q in live_frame(e)["queue"]] == ["j1", "j2", "j3"]
    e.command("job_priority", job="j3", priority=50, by="alice")
    assert e.events[-1]["text"] == "j3 priority 0 -> 50 by alice"
    assert [q["name"] for q in live_frame(e)["queue"]] == ["j3", "j1", "j2"]
    e.run_until(1.2 * HOUR)
    assert e.runs[3].state == "running" and e.runs[1].state == "queued"


def test_a_held_job_can_be_reprioritised_and_keeps_the_new_priority_when_released():
    e = two_node_engine(job(gpus=16, hours=1), job(gpus=16, hours=1), job(gpus=16, hours=1))
    e.command("job_hold", job="j2")
    e.command("job_priority", job="j2", priority=9)
    assert e.runs[2].state == "held" and held_jobs(e)[0]["priority"] == 9
    e.command("job_release", job="j2")
    assert [q["name"] for q in live_frame(e)["queue"]] == ["j2", "j1"]


def test_held_and_cancelled_jobs_survive_a_snapshot():
    e = two_node_engine(job(gpus=16, hours=1), job(gpus=8, hours=1), job(gpus=8, hours=1))
    e.command("job_hold", job="j1")
    e.command("job_cancel", job="j2")
    copy = pickle.loads(pickle.dumps(e))
    copy.run_until(3 * HOUR)
    assert states(copy) == {"j0": "done", "j1": "held", "j2": "cancelled"}


# ----------------------------------------------------------------- ending drills
def drill_engine(**kw):
    return run_engine(small_plan(4), workload(job(gpus=8, hours=50), services=(service(),)),
                      failures=False, until_h=0.1, **kw)


def test_ending_a_node_drill_repairs_the_node_as_its_repair_would_and_names_who_ended_it():
    e = drill_engine()
    hit = e.command("drill", kind="node", target=0, drill_id=7)
    assert not e.state.node_up[0] and hit["repair_s"] > 3600
    done = e.reliability.repairs_done
    out = e.command("end_drill", drill_id=7, by="alice")
    assert out["ended_by"] == "alice"
    assert e.events[-1]["text"] == "drill node on 0 ended early by alice"
    e.run_until(e.now)  # the repair event is due now: the next step handles it
    assert e.state.node_up[0] and e.reliability.repairs_done == done + 1
    assert e.reliability.repairs_pending == 0


def test_a_drill_ended_early_leaves_the_engine_where_its_own_repair_would_have():
    # the same drill, once ended at once, once shortened to nothing by its repair: same state
    ended, natural = drill_engine(), drill_engine()
    ended.command("drill", kind="spine_switch", target=0, drill_id=1)
    ended.command("end_drill", drill_id=1)
    ended.run_until(2 * HOUR)
    natural.command("drill", kind="spine_switch", target=0, drill_id=1)
    natural.run_until(natural.now + 40 * HOUR)  # far past any drawn repair
    for e in (ended, natural):
        assert sum(e.reliability.failed_switches.values()) == 0
        assert e.reliability.repairs_pending == 0 and e.runs[0].slow == 1.0


def test_ending_a_surge_reverts_demand_at_the_next_demand_step():
    e = drill_engine()
    e.command("drill", kind="inference_surge", target="all", drill_id=3, factor=5,
              duration_s=86_400)
    svc = e.fleet.services[0]
    assert svc.surge == 5.0
    e.command("end_drill", drill_id=3, by="bob")
    e.run_until(e.now + e.fleet.step_s)
    assert svc.surge == 1.0


def test_ending_a_storage_slowdown_restores_the_bandwidth():
    e = drill_engine()
    e.command("drill", kind="storage_slowdown", drill_id=4, factor=0.25, duration_s=86_400)
    assert e.costs.storage_factor == pytest.approx(0.25)
    e.command("end_drill", drill_id=4)
    e.run_until(e.now)
    assert e.costs.storage_factor == pytest.approx(1.0)


def test_ending_a_power_cap_lifts_it():
    e = drill_engine(physics=True)
    power = e.physics.power
    e.command("drill", kind="power_cap", target="all", drill_id=5, fraction=0.5)
    assert np.allclose(power.caps_kw, power.base_caps_kw * 0.5)
    e.command("end_drill", drill_id=5)
    assert np.allclose(power.caps_kw, power.base_caps_kw)


@pytest.mark.parametrize("setup, drill_id, message", [
    (lambda e: None, 9, "drill 9 is not running"),
    (lambda e: (e.command("drill", kind="node", target=1, drill_id=2),
                e.command("end_drill", drill_id=2)), 2, "drill 2 is not running"),
    (lambda e: (e.command("drill", kind="storage_slowdown", drill_id=2, factor=0.5,
                          duration_s=60), e.run_until(e.now + 120)), 2,
     r"drill 2 \(storage slowdown\) is already over"),
    (lambda e: e.command("drill", kind="supply_cut", drill_id=2), 2, "supply cut"),
    (lambda e: None, -1, "drill_id must be a non-negative integer"),
])
def test_a_drill_that_is_not_running_cannot_be_ended(setup, drill_id, message):
    e = drill_engine()
    setup(e)
    logged = len(e.events)
    with pytest.raises(ValueError, match=message):
        e.command("end_drill", drill_id=drill_id)
    assert len(e.events) == logged


def test_an_endable_drill_survives_a_snapshot():
    e = drill_engine()
    e.command("drill", kind="node", target=2, drill_id=11)
    copy = pickle.loads(pickle.dumps(e))
    copy.command("end_drill", drill_id=11, by="alice")
    copy.run_until(copy.now)
    assert copy.state.node_up[2] and not e.state.node_up[2]


def test_each_action_logs_its_kind_job_and_who_and_returns_the_jobs_new_state():
    e = two_node_engine(job(gpus=16, hours=5, priority=9), job(gpus=8, hours=1, priority=7),
                        job(gpus=8, hours=1, priority=3), until_h=0.5)
    out = e.command("job_hold", job="j2", by="alice")
    assert out == {"job": "j2", "state": "held", "priority": 3, "by": "alice"}
    out = e.command("job_hold", job="j1", by="bob")
    assert {k: e.events[-1][k] for k in ("kind", "job")} == {"kind": "hold", "job": "j1"}
    # held jobs oldest submission first, each with its wait so far (0.5 h)
    assert [(h["name"], h["wait_h"]) for h in held_jobs(e)] == [("j1", 0.5), ("j2", 0.5)]
    e.command("job_release", job="j1", by="")
    assert e.events[-1]["kind"] == "hold" and e.events[-1]["text"] == "j1 released by an operator"
    out = e.command("job_priority", job="j1", priority=50, by="carol")
    # at 50, j1 outranks the running j0 (9) and evicts it at once: the failed preemption
    # remembered before the change no longer hides it (its victim sets are rechecked)
    evs = list(e.events)
    assert out["priority"] == 50 and [ev["kind"] for ev in evs[-2:]] == ["priority", "preempt"]
    assert evs[-2]["text"] == "j1 priority 7 -> 50 by carol"
    out = e.command("job_cancel", job="j2", by="dan")
    assert out["state"] == "cancelled" and e.events[-1]["kind"] == "cancel"
    assert e.events[-1]["job"] == "j2" and e.events[-1]["text"].endswith("by dan")


@pytest.mark.parametrize("params, message", [
    ({"job": ""}, "job must be a job name"),
    ({"job": "j1", "by": "x" * (BY_MAX + 1)}, "by must be a name"),
])
def test_an_empty_job_name_or_an_overlong_name_of_who_is_refused(params, message):
    e = two_node_engine(job(gpus=16, hours=5), job(gpus=8, hours=1))
    with pytest.raises(ValueError, match=message):
        e.command("job_hold", **params)
    e.command("job_hold", job="j1", by="x" * BY_MAX)  # at the bound: accepted
