"""What a mirror measures for its what-ifs (issue 26): the nodes the cluster took down over the
node-hours it watched them, and, once there are enough of them, forks that draw that rate
instead of the chosen profile; reservations kept and shown as such."""

from __future__ import annotations

import pytest

from scheduler.control.mirror import Observation, mirror_hold, mirror_summary, observe
from scheduler.control.whatif import mirror_failures, whatif
from scheduler.engine import Engine
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.reliability.mirror_fit import MIN_FAILURES
from scheduler.reliability.profiles import load_profile
from scheduler.workload.jobs import Workload

N = 16


@pytest.fixture
def mirror():
    plan = plan_cluster("m", (NodeGroup("H100-SXM", N),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})
    engine = Engine(plan, Workload(jobs=()), seed=1,
                    failure_modes=load_profile("rsc1").modes)
    mirror_hold(engine).profile = "rsc1"
    return engine


def poll_at(engine, t: float, down: set[int] = frozenset(), **kw) -> dict:
    engine.run_until(t)
    return observe(engine, Observation(
        nodes={n: {"up": n not in down, "drained": False} for n in range(N)}, **kw))


def test_node_hours_count_the_nodes_up_between_polls_and_downs_count_once(mirror):
    poll_at(mirror, 0.0)
    poll_at(mirror, 3600.0, down={3})             # 16 nodes up for the first hour
    poll_at(mirror, 7200.0, down={3})             # 15 up for the second; 3 is not down twice
    book = mirror.mirror
    assert book.nodes_down == 1
    assert book.node_hours == pytest.approx(16 + 15)
    poll_at(mirror, 9000.0)                       # back up: a repair, not a failure
    assert book.nodes_down == 1
    assert mirror_summary(mirror)["failures_measured"] == {
        "nodes_down": 1, "node_hours": pytest.approx(31 + 15 * 0.5, abs=0.05),
        "profile": "rsc1", "fitted": False}


def test_few_failures_keep_the_chosen_profile_and_the_report_says_so(mirror):
    poll_at(mirror, 0.0)
    poll_at(mirror, 3600.0, down={1, 2})
    got = mirror_failures(mirror)
    assert not got.fitted and got.profile == "rsc1"
    assert got.modes == load_profile("rsc1").modes
    report = whatif(mirror, None, hours=1, seeds=[1])
    assert report["from"]["failures"] == got.report()
    assert report["from"]["mirror"] is True and report["from"]["cluster"] == "m"
    assert "fewer than the 10 a fit needs" in got.why


def test_enough_failures_make_the_forks_draw_the_measured_node_rate(mirror):
    poll_at(mirror, 0.0)
    t = 0.0
    for k in range(MIN_FAILURES):                 # one node down and back each hour
        t += 3600.0
        poll_at(mirror, t, down={k % N})
        t += 1.0
        poll_at(mirror, t)
    got = mirror_failures(mirror)
    assert got.fitted and mirror.mirror.nodes_down == MIN_FAILURES
    hours = mirror.mirror.node_hours
    node = [m for m in got.modes if m.cause == "node_down"]
    assert len(node) == 1 and node[0].per_hour == pytest.approx(MIN_FAILURES / hours)
    # the GPU, host and NIC modes it replaces are gone; switches, power and the per-job
    # software/user/data causes (rsc1's, issue 29) stay
    kept = {m.component for m in got.modes} - {"host"}
    assert not kept & {"gpu", "nic"} and {"spine", "job", "leaf"} <= kept
    fork = mirror.fork(7)
    fork.reliability.set_modes(got.modes)
    assert fork.reliability.modes == got.modes and mirror.reliability.modes != got.modes


def test_reservations_are_kept_and_shown_as_maintenance_windows(mirror):
    mirror.mirror.hostnames = [f"gpu{n:02d}" for n in range(N)]
    poll_at(mirror, 0.0, reservations=[
        {"name": "psu-swap", "nodes": [2, 3], "start": 1_800_000_000.0,
         "end": 1_800_007_200.0, "flags": ["MAINT", "IGNORE_JOBS"], "maintenance": True}])
    shown = mirror_summary(mirror)["reservations"]
    assert shown == [{"name": "psu-swap", "nodes": 2, "hosts": ["gpu02", "gpu03"],
                      "start": 1_800_000_000.0, "end": 1_800_007_200.0, "maintenance": True,
                      "flags": ["MAINT", "IGNORE_JOBS"]}]
    with pytest.raises(ValueError, match="reservation"):
        observe(mirror, Observation(reservations=[{"name": "x", "nodes": [N + 4]}]))
    assert mirror_summary(mirror)["reservations"] == shown   # a refused poll changes nothing
