"""Re-plan: a running engine moves onto a changed inventory without disturbing what the change
did not touch (:func:`scheduler.control.replan.replan`)."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.control.replan import replan
from scheduler.reliability.failures import MODES
from tests.core.factories import HOUR, job, run_engine, small_plan, workload


def four_jobs():
    # j0..j2 fill three of the four nodes for 10 h; j3 (16 GPUs) waits for two free nodes
    return workload(job(0, hours=10), job(1, hours=10), job(2, hours=10),
                    job(3, gpus=16, hours=2, submit_h=0.5), job(4, hours=1, submit_h=30))


def ends(engine):
    return {r.spec.name: (r.state, r.end_s) for r in engine.runs}


def test_re_planning_onto_the_same_inventory_changes_nothing_that_follows():
    control = run_engine(small_plan(4), four_jobs(), until_h=3)
    moved = run_engine(small_plan(4), four_jobs(), until_h=3)
    moved, summary = replan(moved, moved.plan, np.arange(4))
    assert summary["kept_running"] == ["j0", "j1", "j2"] and summary["stopped"] == []
    control.run_until(40 * HOUR)
    moved.run_until(40 * HOUR)
    assert ends(moved) == ends(control)
    np.testing.assert_allclose(moved.ledger.gpu_s, control.ledger.gpu_s)
    assert moved.ledger.achieved_flops == pytest.approx(control.ledger.achieved_flops)


def test_added_nodes_take_work_at_once_while_running_gangs_keep_their_nodes_and_end():
    old = run_engine(small_plan(4), four_jobs(), until_h=3)
    assert [r.spec.name for r in old.queue.values()] == ["j3"]
    before = {r.spec.name: (r.placement.nodes.tolist(), r.expected_end)
              for r in old.running.values()}
    new, summary = replan(old, small_plan(6), np.arange(4))
    assert summary["nodes_added"] == 2 and new.now == 3 * HOUR
    assert {r.spec.name: (r.placement.nodes.tolist(), r.expected_end)
            for r in new.running.values() if r.spec.name != "j3"} == before
    j3 = next(r for r in new.runs if r.spec.name == "j3")
    assert j3.state == "running" and j3.first_start == 3 * HOUR  # waited 2.5 h, then runs
    assert j3.wait_s == pytest.approx(2.5 * HOUR)


def test_a_removed_node_stops_its_gang_as_a_preemption_and_the_rest_run_on():
    old = run_engine(small_plan(4), four_jobs(), until_h=3.5)  # half an hour past a checkpoint
    victim = next(r for r in old.running.values() if 0 in r.placement.nodes.tolist())
    lost_before = old.horizon_ledger().gpu_hours()["preempted"]
    new, summary = replan(old, small_plan(3), np.array([-1, 0, 1, 2]))
    assert summary["nodes_removed"] == 1 and summary["stopped"] == [victim.spec.name]
    moved = next(r for r in new.runs if r.spec.name == victim.spec.name)
    assert moved.preemptions == victim.preemptions == 1
    assert moved.state in ("queued", "running")  # back in the queue (and maybe restarted)
    # the half hour since its last checkpoint is lost, and booked
    assert new.ledger.gpu_hours()["preempted"] == pytest.approx(lost_before + 0.5 * 8)
    others = [r.spec.name for r in new.running.values() if r.spec.name != victim.spec.name]
    assert sorted(summary["kept_running"]) == sorted(set(others) - {"j3"})
    assert any(e["kind"] == "replan" for e in new.events)


def test_a_node_down_for_repair_stays_down_under_its_new_id_until_its_repair():
    old = run_engine(small_plan(4, spares=0), workload(job(0, hours=50)), until_h=1,
                     failures=False)
    host = next(m for m in MODES if m.component == "host")
    node = int(old.running[0].placement.nodes[0])
    old.reliability.inject(host, node, rng=np.random.default_rng(0))
    (t_repair, *_), = old.reliability.repairs_in_flight()
    mapping = np.array([3, 2, 1, 0])  # the same nodes, numbered the other way round
    new, summary = replan(old, small_plan(4), mapping)
    assert summary["failures_carried"] == 1
    assert not new.state.node_up[mapping[node]]
    assert new.state.node_up[np.delete(mapping, node)].all()
    new.run_until(t_repair - 1)
    assert not new.state.node_up[mapping[node]]
    new.run_until(t_repair + 1)
    assert new.state.node_up[mapping[node]]


def test_the_log_goes_on_with_its_numbering_and_the_run_keeps_its_lineage():
    old = run_engine(small_plan(4), four_jobs(), until_h=3)
    old.lineage = "inventory-a"
    old.kernel.log("note", "before")
    count = old.kernel.logged
    new, _ = replan(old, small_plan(5), np.arange(4))
    assert new.kernel.logged == count + 1  # the replan line
    assert [e["text"] for e in new.events][:count] == [e["text"] for e in old.events]
    assert new.lineage == "inventory-a" and new.replans == 1


def test_the_same_re_plan_gives_the_same_future():
    def once():
        e = run_engine(small_plan(4), four_jobs(), until_h=3, failures=True, seed=5)
        e, _ = replan(e, small_plan(6), np.arange(4))
        e.run_until(60 * HOUR)
        return ends(e), e.ledger.gpu_s.tolist()
    assert once() == once()


@pytest.mark.parametrize("bad", [np.arange(3), np.array([0, 1, 2, 9]), np.array([0, 0, 1, 2]),
                                 np.array([0.0, 1, 2, 3]), np.array([-2, 0, 1, 2])])
def test_a_bad_node_map_is_refused_and_the_engine_is_untouched(bad):
    old = run_engine(small_plan(4), four_jobs(), until_h=3)
    running = {r.spec.name: r.state for r in old.runs}
    with pytest.raises(ValueError, match="node_map"):
        replan(old, small_plan(4), bad)
    assert {r.spec.name: r.state for r in old.runs} == running
