"""Inventory edits as engine commands: a link, an accelerator or its NIC link marked down in the
admin reaches the engine as one command, logged once, naming what it hit."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.workload.jobs import Parallelism
from tests.core.factories import HOUR, job, run_engine, small_plan, workload


def wide_engine():
    """One data-parallel 32-GPU gang (7B, TP 8) over the 4 nodes of a radix-8 fat-tree,
    physics on: its all-reduce crosses the spine."""
    wide = job(gpus=32, hours=10, name="wide", parallelism=Parallelism(tp=8, pp=1, dp=4),
               params_b=7.0, tokens=1e12, checkpoint_gb=98.0)
    return run_engine(small_plan(4), workload(wide), physics=True, failures=False,
                      until_h=0.5)


def test_links_marked_down_slow_the_gangs_that_cross_them_and_back_up_restores_them():
    # all but one uplink of leaf 0: its share of the spine collapses
    e = wide_engine()
    wide = e.runs[0]
    before = wide.slow
    f = e.plan.fabric
    uplinks = np.flatnonzero((f.link_kind == 0) & (f.link_a == 0))[:-1].tolist()
    assert len(uplinks) >= 1
    hit = set()
    for link in uplinks:
        hit |= set(e.command("link_down", link=link)["jobs"])
    assert hit == {"wide"} and wide.slow < before
    events = [ev for ev in e.events if ev["kind"] == "link"]
    assert [ev["link"] for ev in events] == uplinks
    for link in uplinks:
        assert e.command("link_up", link=link)["up"] is True
    assert wide.slow == pytest.approx(before)


def test_an_accelerator_marked_failed_takes_its_node_out_and_interrupts_its_gang():
    e = wide_engine()
    out = e.command("gpu_down", gpu=11)  # GPU 3 of node 1
    assert out == {"gpu": 11, "node": 1, "jobs": ["wide"]}
    assert not e.state.node_up[1] and not e.state.gpu_up[11]
    assert e.reliability.interruptions["operator_marked_gpu_failed"] == 1
    e.command("gpu_up", gpu=11)
    assert e.state.node_up[1] and e.state.gpu_up[11]
    e.run_until(2 * HOUR)
    assert e.runs[0].state == "running"


def test_a_nic_link_down_is_blamed_on_the_link():
    e = wide_engine()
    e.command("gpu_down", gpu=0, nic=True)
    assert e.reliability.interruptions["operator_marked_nic_link_down"] == 1
    assert "NIC link of GPU 0" in [ev for ev in e.events if ev["kind"] == "inventory"][-1]["text"]


@pytest.mark.parametrize("command,params", [
    ("link_down", {"link": 10**6}), ("gpu_down", {"gpu": -1}), ("gpu_up", {"gpu": "x"}),
])
def test_an_edit_naming_a_part_the_engine_lacks_is_refused_and_changes_nothing(command, params):
    e = wide_engine()
    version = e.state.version
    with pytest.raises(ValueError):
        e.command(command, **params)
    assert e.state.version == version and e.state.node_up.all()


def test_links_and_switches_marked_out_show_on_the_link_heatmaps():
    from scheduler.frames import dashboard_frames
    e = wide_engine()
    f = e.plan.fabric
    spine = int(np.flatnonzero(f.switch_tier == 1)[0])
    link = int(np.flatnonzero((f.link_kind == 0) & (f.link_b != spine))[0])
    heat = dashboard_frames(e)["links"][0]
    assert heat["links_down"] == 0 and not np.any(heat["down"])
    e.command("switch_down", switch=spine)
    e.command("link_down", link=link)
    e.jobs.rerate_all()
    leaf_spine = dashboard_frames(e)["links"][0]
    expected = (f.link_kind == 0) & ((f.link_b == spine) | (np.arange(f.link_a.size) == link))
    assert leaf_spine["links_down"] == int(expected.sum()) > 1
    assert np.count_nonzero(leaf_spine["down"]) == int(expected.sum())  # one cell per link here
    e.command("switch_up", switch=spine)
    e.command("link_up", link=link)
    assert dashboard_frames(e)["links"][0]["links_down"] == 0


def test_a_failed_leaf_marks_its_uplinks_out_and_its_repair_clears_them():
    from scheduler.frames import links_down
    e = wide_engine()
    f = e.plan.fabric
    e.command("switch_down", switch=0)
    assert links_down(e).tolist() == ((f.link_a == 0) | (f.link_b == 0)).tolist()
    e.command("switch_up", switch=0)
    assert not links_down(e).any()


def test_a_failed_power_feed_takes_its_racks_nodes_down_in_one_event():
    e = wide_engine()
    rack = int(e.plan.node_rack[0])
    nodes = np.flatnonzero(e.plan.node_rack == rack)
    out = e.command("feed_down", rack=rack)
    assert out["nodes_down"] == nodes.size and out["jobs"] == ["wide"]
    assert not e.state.node_up[nodes].any()
    power = [ev for ev in e.events if ev["kind"] == "power"]
    assert len(power) == 1 and power[0]["component"] == f"rack {rack}"
    assert e.reliability.interruptions["operator_marked_feed_failed"] == 1
    e.command("feed_up", rack=rack)
    assert e.state.node_up.all()


def test_a_failed_cooling_loop_throttles_its_row_until_repaired():
    e = wide_engine()
    out = e.command("cooling_down", loop=0)
    assert out["racks"] and e.reliability.cooling_lost[0] == 1
    assert all(e.reliability.throttled_racks[r] == 1 for r in out["racks"])
    e.command("cooling_up", loop=0)
    assert e.reliability.cooling_lost[0] == 0
    assert all(e.reliability.throttled_racks[r] == 0 for r in out["racks"])
    with pytest.raises(ValueError):
        e.command("cooling_down", loop=999)
