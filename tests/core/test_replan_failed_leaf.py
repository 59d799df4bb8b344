"""A leaf switch that failed before a re-plan stays failed after it, until its repair: its
links stay out on the heatmaps and in the placement while its incident is open
(:func:`scheduler.control.replan.replan`); where the change took the switch away, the
incident closes at the re-plan instead of staying open over nothing."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.control.drills import run_drill
from scheduler.control.replan import replan
from scheduler.frames import links_down
from scheduler.live import in_ranges, live_frame, live_placement
from scheduler.sim import Kind
from tests.core.factories import job, run_engine, small_plan, workload
from tests.frames import validate


def drilled_leaf(nodes: int = 4):
    """An engine an hour in with two gangs, node 0's first leaf switch failed by a drill; the
    leaf's id and the drill's repair time (s)."""
    e = run_engine(small_plan(nodes), workload(job(0, hours=50), job(1, hours=50)),
                   until_h=1, physics=True)
    leaf = int(e.plan.fabric.endpoint_leaf[0])
    run_drill(e, "leaf_switch", leaf, drill_id=7)
    (repair,) = [h.time for h in e.kernel.pending(Kind.REPAIR)]
    return e, leaf, repair


def leaf_links(plan, leaf: int) -> np.ndarray:
    f = plan.fabric
    return np.flatnonzero((f.link_a == leaf) | (f.link_b == leaf))


def shows_failed(e, leaf: int) -> bool:
    """The switch and every link of it out, as the switch page and the heatmaps read it."""
    placement = live_placement(e)
    out = links_down(e)
    links = leaf_links(e.plan, leaf)
    heat = {h["title"]: h["links_down"] for h in live_frame(e)["heatmaps"].get("links", [])}
    return (e.reliability.failed_switches[leaf] > 0
            and in_ranges(leaf, placement["switches_down"])
            and bool(out[links].all()) and sum(heat.values()) == links.size)


@pytest.mark.parametrize("mapping", [[0, 1, 2, 3], [3, 2, 1, 0]],
                         ids=["same ids", "nodes renumbered"])
def test_a_failed_leaf_stays_failed_across_a_re_plan_until_its_repair(mapping):
    old, leaf, repair = drilled_leaf()
    assert shows_failed(old, leaf)
    mapping = np.array(mapping)
    new, summary = replan(old, small_plan(4), mapping)
    # the same GPUs hang off the failed switch: renumbered nodes move it to their leaf
    moved = int(new.plan.fabric.endpoint_leaf[new.plan.node_first_gpu[mapping[0]]])
    assert summary["failures_carried"] == 1
    assert shows_failed(new, moved)
    assert [s for s, n in new.reliability.failed_switches.items() if n > 0] == [moved]
    (inc,) = new.reliability.incidents.open_incidents.values()
    assert (inc.component, inc.target_kind, inc.target_id, inc.unit) == (
        "leaf", "switch", moved, moved)
    assert inc.drill_id == 7 and inc.nodes.tolist() == [mapping[0]]
    validate("LiveFrame", live_frame(new))

    new.run_until(repair - 1.0)
    assert shows_failed(new, moved) and inc.id in new.reliability.incidents.open_incidents
    new.run_until(repair + 1.0)
    assert new.reliability.failed_switches[moved] == 0
    assert not links_down(new).any() and live_placement(new)["switches_down"] == []
    assert not new.reliability.incidents.open_incidents
    assert new.reliability.incidents.resolved[-1].resolved_at == pytest.approx(repair)


def test_a_failed_leaf_stays_failed_across_two_re_plans():
    old, leaf, repair = drilled_leaf()
    mid, _ = replan(old, small_plan(4), np.arange(4))
    new, summary = replan(mid, small_plan(4), np.arange(4))
    assert summary["failures_carried"] == 1 and shows_failed(new, leaf)
    new.run_until(repair + 1.0)
    assert new.reliability.failed_switches[leaf] == 0 and not links_down(new).any()


def test_a_failed_leaf_whose_nodes_were_removed_stays_failed_while_the_switch_is_there():
    old, leaf, repair = drilled_leaf()
    new, _ = replan(old, small_plan(3), np.array([-1, 0, 1, 2]))  # the same switches
    assert new.plan.fabric.n_switches() == old.plan.fabric.n_switches()
    assert shows_failed(new, leaf)
    assert [i.unit for i in new.reliability.incidents.open_incidents.values()] == [leaf]
    new.run_until(repair + 1.0)
    assert not links_down(new).any() and not new.reliability.incidents.open_incidents


def test_a_failed_leaf_the_change_took_away_closes_its_incident_at_the_re_plan():
    old, leaf, _ = drilled_leaf()
    # node 0 removed and two nodes added: another fabric, where nothing of the leaf is left
    new, _ = replan(old, small_plan(6), np.array([-1, 0, 1, 2]))
    assert new.plan.fabric.n_switches() != old.plan.fabric.n_switches()
    assert not any(n > 0 for n in new.reliability.failed_switches.values())
    assert not new.reliability.incidents.open_incidents
    (inc,) = new.reliability.incidents.resolved
    assert inc.drill_id == 7 and inc.resolved_at == new.now
    assert not new.kernel.pending(Kind.REPAIR)
