"""``Engine.fork`` (a what-if from now) and ``Engine.inject`` (state observed outside)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scheduler.engine import Engine
from scheduler.report import WALL_CLOCK_FIELDS, build_report
from scheduler.sim import Kind
from scheduler.simulate import Scenario
from tests.core.factories import HOUR, job, small_plan, workload


def report(e: Engine) -> dict:
    r = build_report(e, scenario={}, wall_seconds=0.0)
    for path in WALL_CLOCK_FIELDS:
        d = r
        for k in path[:-1]:
            d = d[k]
        d.pop(path[-1], None)
    return json.loads(json.dumps(r))


def dev_small(seed: int = 2, days: float = 0.5) -> Engine:
    e, _ = Scenario(preset="dev-small", days=3, seed=seed).engine()
    e.run_until(days * 86400)
    return e


# ------------------------------------------------------------------ fork
def test_a_fork_driven_elsewhere_leaves_the_original_exactly_as_an_unforked_twin():
    original, control = dev_small(), dev_small()
    fork = original.fork(seed=99)
    fork.command("drill", kind="leaf_switch", target=0)
    fork.command("set_policy", name="fifo")
    fork.run_until(1.5 * 86400)
    original.run_until(1.0 * 86400)
    control.run_until(1.0 * 86400)
    assert report(original) == report(control)
    assert not np.shares_memory(fork.state.gpu_owner, original.state.gpu_owner)
    assert fork.policy.name == "fifo" and original.policy.name == "default"


def test_a_fork_without_a_seed_continues_exactly_as_the_original():
    original = dev_small()
    fork = original.fork()
    for e in (original, fork):
        e.run_until(1.5 * 86400)
    assert report(fork) == report(original)


def test_a_fork_with_another_seed_shares_the_past_and_draws_another_future():
    # 16,384 GPUs fail about 8 times a day (Llama 3): two days give each future its own draws
    original, _ = Scenario(preset="llama3-16k", days=4, seed=2).engine()
    original.run_until(86400)
    past = report(original)
    fork = original.fork(seed=7)
    assert {**report(fork), "scenario": None} == {**past, "scenario": None}
    pending = [h.time for h in fork.kernel.pending(Kind.FAIL)]
    assert pending != [h.time for h in original.kernel.pending(Kind.FAIL)]
    assert min(pending) >= original.now  # the next failures were drawn again, from now
    for e in (original, fork):
        e.run_until(3 * 86400)
    assert report(fork)["failures"]["by_cause"] != report(original)["failures"]["by_cause"]
    assert fork.seed == 7 and original.seed == 2


def test_two_forks_with_the_same_seed_agree():
    original = dev_small()
    a, b = original.fork(seed=5), original.fork(seed=5)
    a.run_until(1.5 * 86400)
    b.run_until(1.5 * 86400)
    assert report(a) == report(b)


# ------------------------------------------------------------------ inject
def busy_cluster() -> Engine:
    """Four 8-GPU nodes; j0 (16 GPUs) runs on two of them for 10 h."""
    e = Engine(small_plan(4), workload(job(gpus=16, hours=10)), seed=0, failures=False)
    e.run_until(HOUR)
    return e


def frozen(e: Engine) -> tuple:
    s = e.state
    return (s.version, len(e.runs), len(e.events), s.node_up.tobytes(),
            s.node_drained.tobytes(), s.gpu_owner.tobytes(), dict(e.reliability.failed_links))


@pytest.mark.parametrize("changes, message", [
    ({"nodes": {99: {"up": False}}}, "node 99 does not exist"),
    ({"nodes": {0: {"up": False}}, "links": {10**6: {"up": False}}}, "link 1000000 does not"),
    ({"nodes": {0: {"up": "no"}}}, "up must be true or false"),
    ({"nodes": {0: {"healthy": False}}}, "unknown status 'healthy'"),
    ({"gpus": {32: {"up": False}}}, "gpu 32 does not exist"),
    ({"switches": [{"up": False}]}, "with an 'id'"),
    ({"jobs": [{"job": "j9"}]}, "TrainingJob under 'job'"),
    ({"jobs": [{"job": job(9, gpus=8, name="x"), "state": "running", "nodes": [0]}]},
     "node 0 has 0 free GPU"),
    ({"jobs": [{"job": job(9, gpus=16, name="x"), "state": "running", "nodes": [2]}]},
     "has 16 GPUs but its nodes hold 8"),
    ({"jobs": [{"job": job(9, gpus=4096, name="x")}]}, "no accelerator of this cluster"),
    ({"jobs": [{"job": job(9, gpus=8, name="j0")}]}, "already in the twin"),
])
def test_bad_injections_raise_one_clear_error_and_change_nothing(changes, message):
    e = busy_cluster()
    e.inject(nodes={3: {"drained": True}})
    before = frozen(e)
    with pytest.raises(ValueError, match=message):
        e.inject(**changes)
    assert frozen(e) == before


def test_a_node_observed_down_interrupts_its_gang_once_and_comes_back_when_observed_up():
    e = busy_cluster()
    j0 = e.runs[0]
    node = int(j0.placement.nodes[0])
    out = e.inject(nodes={node: {"up": False}})
    assert out["nodes_down"] == [node] and not e.state.node_up[node]
    assert j0.state == "detecting" and j0.interruptions == 1
    e.inject(nodes={node: {"up": False}})  # a status is set, not counted
    assert e.reliability.down_count[node] == 1 and j0.interruptions == 1
    e.inject(nodes={node: {"up": True}})
    assert e.state.node_up[node] and e.reliability.down_count[node] == 0


def test_one_gpu_down_takes_its_node_out_until_all_its_gpus_are_up():
    e = busy_cluster()
    free_node = 3
    first = int(e.state.node_first_gpu[free_node])
    e.inject(gpus={first + 5: {"up": False}})
    assert not e.state.node_up[free_node]
    e.inject(gpus={first + 6: {"up": True}})
    assert not e.state.node_up[free_node]
    e.inject(gpus={first + 5: {"up": True}})
    assert e.state.node_up[free_node]


def test_links_and_spines_observed_down_are_what_the_fabric_model_reads():
    e = busy_cluster()
    spine = int(np.flatnonzero(e.plan.fabric.switch_tier > 0)[0])
    e.inject(switches={spine: {"up": False}}, links=[{"id": 3, "up": False}])
    assert e.reliability.failed_switches[spine] == 1 and e.reliability.failed_links[3] == 1
    e.inject(switches={spine: {"up": True}}, links=[{"id": 3, "up": True}])
    assert e.reliability.failed_switches[spine] == 0 and e.reliability.failed_links[3] == 0


def test_a_running_job_is_adopted_on_its_nodes_and_a_waiting_one_joins_the_queue_now():
    e = busy_cluster()
    free = [int(n) for n in np.flatnonzero(e.state.node_free == 8)]
    assert len(free) == 2
    running = job(5, gpus=12, hours=4, name="slurm-1234")
    waiting = job(6, gpus=32, hours=1, name="slurm-1235")
    out = e.inject(jobs=[
        {"job": running, "state": "running", "nodes": free, "gpus_per_node": [8, 4],
         "done_fraction": 0.5},
        {"job": waiting, "state": "queued"}])
    adopted, queued = e.runs[out["jobs"][0]["idx"]], e.runs[out["jobs"][1]["idx"]]
    assert adopted.state == "running" and queued.state == "queued"
    assert np.count_nonzero(e.state.gpu_owner == adopted.idx) == 12
    assert set(np.unique(e.state.gpu_node[e.state.gpu_owner == adopted.idx])) == set(free)
    # half its work is behind it: 2 of its 4 hours are left
    e.run_until(HOUR + 2 * HOUR + 60)
    assert adopted.state == "done" and adopted.end_s == pytest.approx(3 * HOUR, abs=1.0)
