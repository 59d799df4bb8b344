"""Storage marked down, degraded or up by an operator: the engine's checkpoints, restores and
input reads follow until the status changes again (no duration)."""

from __future__ import annotations

import math

import pytest

from scheduler.hardware.cluster import StorageSpec
from scheduler.live import live_placement
from scheduler.workload.jobs import Parallelism
from tests.core.factories import HOUR, job, run_engine, small_plan, workload

PFS = StorageSpec("pfs", "central", 1000.0, 200.0, 100.0, True)


def engine(*, gpus=16, central=PFS, cache_read_gb_s=None, tokens=1e12, until_h=0.5):
    """One 7B gang (TP 8) with 980 GB checkpoints on a 4-node radix-8 fat-tree, physics on."""
    storage = (central,)
    if cache_read_gb_s is not None:
        storage += (StorageSpec("cache", "nvme", 4 * 30.0, cache_read_gb_s, cache_read_gb_s,
                                True),)
    gang = job(gpus=gpus, hours=10, name="llm", params_b=7.0, tokens=tokens,
               checkpoint_gb=980.0, parallelism=Parallelism(tp=8, pp=1, dp=gpus // 8))
    return run_engine(small_plan(4, storage=storage), workload(gang), physics=True,
                      failures=False, until_h=until_h)


def test_a_degraded_central_tier_makes_running_checkpoints_slower_until_it_is_up():
    """Degraded and up again in the same instant, 1,800 s in: the gang writes at the healthy
    cost again, and nothing else is left of the slowdown.

    By hand (hourly checkpoints of 9.8 s, 51,822 s of compute from 0 s: 14 checkpoints, end
    51,959.6 s): each re-cost keeps the 1,800 s computed and opens a segment whose checkpoint
    cycle counts from the re-cost, as every re-cost does (``JobLifecycle.recost_all``).  The
    50,022 s left then end 0.9 interval into their 14th hour, so 13 checkpoints of 9.8 s:
    1,800 + 50,022 + 127.4 = 51,949.8 s, one checkpoint (9.8 s) before the healthy end.
    Degraded (39.2 s each) the same 13 cost 509.6 s: end 52,332.0 s.
    """
    e = engine()
    run = e.runs[0]
    write_s, end, need = run.write_s, run.expected_end, run.need_s()
    assert e.now == 1800.0 and run.interval_s == 3600.0
    assert end == pytest.approx(need + (math.ceil(need / 3600.0) - 1) * write_s)
    out = e.command("storage_degraded", tier="central", factor=0.25)
    assert out["jobs"] == ["llm"] and out["bandwidth_left"] == 0.25
    assert run.write_s == pytest.approx(4 * write_s)
    left = need - 1800.0  # kept by the re-cost
    assert run.need_s() == pytest.approx(left)
    checkpoints = math.ceil(left / 3600.0) - 1
    assert run.expected_end == pytest.approx(1800.0 + left + checkpoints * 4 * write_s)
    assert run.expected_end > end
    e.command("storage_up", tier="central")
    assert run.write_s == pytest.approx(write_s)
    assert run.need_s() == pytest.approx(left)
    assert run.expected_end == pytest.approx(1800.0 + left + checkpoints * write_s)
    assert abs(run.expected_end - end) <= write_s + 1e-6  # the cycle's phase, at most one


def test_a_central_tier_marked_down_makes_checkpoints_crawl():
    e = engine()
    run = e.runs[0]
    write_s = run.write_s
    e.command("storage_down", tier="central")
    assert run.write_s > 1000 * write_s
    assert e.costs.storage_factor < 0.001


def _restart_after_a_node_failure(e) -> float:
    e.command("node_down", node=0)
    e.run_until(e.now + 2 * HOUR)
    run = e.runs[0]
    assert run.state == "running" and run.interruptions == 1  # restarted on two other nodes
    return run.restart_s


def test_a_restart_restores_slower_from_a_degraded_central_tier():
    healthy = _restart_after_a_node_failure(engine())
    slow = engine()
    slow.command("storage_degraded", tier="central", factor=0.25)
    assert _restart_after_a_node_failure(slow) > healthy


def test_statuses_replace_each_other_and_compose_with_a_drill():
    e = engine()
    e.command("drill", kind="storage_slowdown", factor=0.5, duration_s=10 * HOUR)
    e.command("storage_degraded", tier="central", factor=0.5)
    e.command("storage_down", tier="central")
    e.command("storage_degraded", tier="central", factor=0.5)
    assert e.costs.storage_factor == pytest.approx(0.25)  # the drill's half, then ours
    e.command("storage_up", tier="central")
    assert e.costs.storage_factor == pytest.approx(0.5)  # the drill's, until it ends


def test_a_cache_marked_down_sends_its_reads_to_the_central_tier():
    # a central tier too slow for the gang's reads: only the warm cache keeps it fed
    thin = StorageSpec("pfs", "central", 1000.0, 1e-4, 100.0, True)
    e = engine(central=thin, cache_read_gb_s=4 * 25.0, tokens=1e9)
    run = e.runs[0]
    fed = run.slow
    assert e.physics.last_storage.tier("nvme_read").supply_gb_s > 0
    e.command("storage_down", tier="nvme")
    assert e.physics.last_storage.tier("nvme_read").supply_gb_s == 0
    assert run.slow < fed
    e.command("storage_up", tier="nvme")
    assert run.slow == pytest.approx(fed)


def test_a_storage_command_is_logged_naming_the_system_and_its_tier():
    e = engine()
    e.command("storage_degraded", tier="central", factor=0.5)
    event = [ev for ev in e.events if ev["kind"] == "storage"][-1]
    assert "storage pfs (central tier) marked degraded: 50% of its bandwidth left" in event["text"]
    assert event["component"] == "storage central" and event["jobs"] == ["llm"]


@pytest.mark.parametrize("command,params,message", [
    ("storage_degraded", {"tier": "central", "factor": 1.5}, "between 0 and 1"),
    ("storage_degraded", {"tier": "central", "factor": 0}, "between 0 and 1"),
    ("storage_degraded", {"tier": "central", "factor": True}, "between 0 and 1"),
    ("storage_degraded", {"tier": "central"}, "factor"),
    ("storage_down", {"tier": "tape"}, "tier must be one of central, nvme"),
    ("storage_down", {"tier": "nvme"}, "no nvme storage tier"),
])
def test_bad_storage_parameters_are_refused_and_change_nothing(command, params, message):
    e = engine()
    run = e.runs[0]
    before = (run.write_s, run.expected_end, e.costs.storage_factor, len(e.events))
    with pytest.raises(ValueError, match=message):
        e.command(command, **params)
    assert (run.write_s, run.expected_end, e.costs.storage_factor, len(e.events)) == before
    assert e.reliability.storage_left == {}


def test_the_placement_reports_storage_switches_links_and_gpus_out():
    e = engine(cache_read_gb_s=100.0)
    e.command("storage_degraded", tier="central", factor=0.5)
    e.command("storage_down", tier="nvme")
    spine = int(e.plan.fabric.switch_tier.tolist().index(1))
    e.command("switch_down", switch=spine)
    e.command("gpu_down", gpu=30)
    p = live_placement(e)
    assert p["storage"] == {"central": 0.5, "nvme": 0.0}
    assert p["switches_down"] == [[spine, spine]]
    assert p["links_down"]  # the spine's links are out with it
    assert p["gpus_down"] == [[30, 30]]

