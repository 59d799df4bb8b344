"""Preemption bounded as production schedulers bound it (issue 25, part 5), on literal clusters.

* a gang is exempt from preemption until the first checkpoint of its latest start, for at least
  ten minutes and at most half an hour (Slurm's ``PreemptExemptTime``, per gang);
* of the gangs that may be evicted, those that lose least since their last checkpoint go first;
* nobody is preempted to make a placement compact: a gang that fits across domains starts
  there (unless the policy is compact);
* a preemptor evicts only what it needs, and a gang it evicted preempts nobody in that instant;
* a wave of preemptions is one line of the event log.

``small_plan(n)`` is a radix-8 fat-tree of 8-GPU H100 nodes with pods of two nodes ({0, 1},
{2, 3}, ...); with no storage tier a checkpoint takes no time, and a first start no restart,
so a gang checkpointing every ``I`` seconds has its first checkpoint ``I`` after it starts.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.hardware.cluster import NodeGroup
from scheduler.model.job_run import QUEUED, RUNNING
from scheduler.scheduling.policies import REGISTRY
from scheduler.scheduling.preemption import CASCADE_WAIT_S, MAX_EXEMPT_S, MIN_EXEMPT_S
from scheduler.workload.jobs import Requirement
from tests.core.factories import HOUR, job, pods_spanned, run_engine, small_plan, workload
from tests.core.test_preemption import at, by_name, nodes, preempted


@pytest.fixture
def compact(monkeypatch) -> str:
    """A policy as ``default`` but compact: a gang never starts across the domains its
    affinity names, and victims are sought within one."""
    monkeypatch.setitem(REGISTRY, "default-compact",
                        replace(REGISTRY["default"], name="default-compact", compact=True))
    return "default-compact"


def waves(e) -> list[dict]:
    return [ev for ev in e.events if ev["kind"] == "preempt"]


# ------------------------------------------------------------------ the exemption
def exemption_run(interval_s: float, h_submit_s: float):
    """low (32 GPUs, priority 0, a checkpoint every ``interval_s``) fills the 4 nodes from
    t=0; h (16 GPUs, priority 10) arrives at ``h_submit_s``."""
    wl = workload(job(gpus=32, hours=10, checkpoint_interval_s=interval_s, name="low"),
                  at(h_submit_s, job(gpus=16, hours=1, priority=10, name="h")))
    return run_engine(small_plan(4), wl, policy="default", until_h=1.5)


@pytest.mark.parametrize(("interval_s", "exempt_s"), [
    (900.0, 900.0),            # protected until its first checkpoint, 15 min after its start
    (300.0, MIN_EXEMPT_S),     # checkpoints sooner: still ten minutes
    (3600.0, MAX_EXEMPT_S),    # an hourly checkpoint: at most half an hour
])
def test_a_young_gang_is_not_preempted_before_its_exemption_ends(interval_s, exempt_s):
    early = exemption_run(interval_s, exempt_s - 1)
    assert preempted(early) == {}
    assert by_name(early)["h"].state == QUEUED and by_name(early)["low"].state == RUNNING
    on_time = exemption_run(interval_s, exempt_s)
    assert preempted(on_time) == {"low": 1}
    assert by_name(on_time)["h"].first_start == exempt_s


# ------------------------------------------------------------------ least work lost
def test_of_two_candidates_the_one_with_less_work_since_its_checkpoint_is_evicted():
    # a (node 0) starts at 0 and b (node 1) at 15 min, both priority 0, checkpointing hourly.
    # At 1.1 h a checkpointed 0.1 h ago, b has not yet (0.85 h of work unsaved): h (8 GPUs,
    # priority 10) evicts a, the older gang, where "youngest first" would have evicted b
    wl = workload(job(gpus=8, hours=10, name="a"),
                  job(gpus=8, hours=10, submit_h=0.25, name="b"),
                  job(gpus=8, hours=1, submit_h=1.1, priority=10, name="h"))
    e = run_engine(small_plan(2), wl, policy="default", until_h=1.2)
    g = by_name(e)
    assert preempted(e) == {"a": 1}
    assert g["h"].first_start == pytest.approx(1.1 * HOUR) and nodes(g["h"]) == [0]
    assert g["b"].state == RUNNING
    lost = e.horizon_ledger().gpu_hours()["preempted"]
    assert lost == pytest.approx(8 * 0.1)  # only a's 0.1 h since its checkpoint


def test_a_lower_priority_gang_goes_before_one_that_would_lose_less():
    # as above, but a has priority 5: the priority-0 gang b goes although it loses more
    wl = workload(job(gpus=8, hours=10, priority=5, name="a"),
                  job(gpus=8, hours=10, submit_h=0.25, name="b"),
                  job(gpus=8, hours=1, submit_h=1.1, priority=10, name="h"))
    e = run_engine(small_plan(2), wl, policy="default", until_h=1.2)
    assert preempted(e) == {"b": 1}


# ------------------------------------------------------------------ no preemption for compactness
def scattered_free():
    """l1 (node 0, pod 0) and l2 (node 2, pod 1), priority 0; nodes 1 and 3 free: 16 GPUs
    free in total but no whole pod.  h (16, priority 10, pod affinity) arrives at 1.5 h."""
    return workload(job(gpus=8, hours=10, name="l1"),
                    job(gpus=8, hours=1, submit_h=0.01, name="f1"),
                    job(gpus=8, hours=10, submit_h=0.02, name="l2"),
                    job(gpus=8, hours=1, submit_h=0.03, name="f2"),
                    job(gpus=16, hours=1, submit_h=1.5, priority=10, affinity="pod", name="h"))


def test_a_gang_that_fits_scattered_starts_scattered_without_any_preemption():
    e = run_engine(small_plan(4), scattered_free(), policy="default", until_h=1.6)
    g = by_name(e)
    assert [nodes(g[n]) for n in ("l1", "f1", "l2", "f2")] == [[0], [1], [2], [3]]
    assert g["f1"].end_s < 1.5 * HOUR and g["f2"].end_s < 1.5 * HOUR
    assert g["h"].first_start == pytest.approx(1.5 * HOUR)
    assert nodes(g["h"]) == [1, 3] and pods_spanned(e.state, g["h"].placement) == 2
    assert preempted(e) == {} and e.counters["preemptions"] == 0


def test_a_compact_policy_preempts_for_a_compact_placement_instead(compact):
    e = run_engine(small_plan(4), scattered_free(), policy=compact, until_h=1.6)
    g = by_name(e)
    assert len(preempted(e)) == 1  # one of l1, l2: its pod is then whole
    assert g["h"].first_start == pytest.approx(1.5 * HOUR)
    assert pods_spanned(e.state, g["h"].placement) == 1


# ------------------------------------------------------------------ only what it needs
def many_small():
    """Sixteen 1-GPU gangs (priority 0) on nodes 0 and 1, started a minute apart (so the
    later ones have less unsaved work at any time), and h (4 GPUs, priority 10) at 1.5 h."""
    small = [at(60.0 * i, job(gpus=1, hours=10, name=f"s{i:02d}")) for i in range(16)]
    return workload(*small, at(1.5 * HOUR, job(gpus=4, hours=1, priority=10, name="h")))


def test_a_preemptor_evicts_only_the_gpus_it_needs_and_the_wave_is_one_log_line():
    e = run_engine(small_plan(2), many_small(), policy="default", until_h=1.6)
    g = by_name(e)
    assert g["h"].first_start == pytest.approx(1.5 * HOUR)
    victims = sorted(preempted(e))
    assert len(victims) == 4 and sum(g[v].gpus for v in victims) == 4
    # the four that started last have the least work since their checkpoints, and all four
    # share a node with room for h
    assert set(nodes(g["h"])) == set().union(*(nodes(g[v]) for v in victims))
    (wave,) = waves(e)
    assert wave["text"].startswith("h preempted 4 jobs, 4 GPUs: ")
    assert wave["job"] == "h" and sorted(wave["jobs"]) == victims
    assert all(v in wave["text"] for v in victims)
    assert e.counters["preemptions"] == 4


def test_a_gang_preempted_in_an_instant_preempts_nobody_in_it():
    # H100 nodes 0-1 hold l (16, priority 0, NVIDIA only); MI300X nodes 2-3 hold m (16,
    # priority 5, any vendor: the MI300X first).  h (16, priority 10, AMD only) evicts m at
    # 1.5 h.  m could evict l at once; it does so only a cycle later, in a wave of its own
    nvidia, amd = Requirement(vendors=("NVIDIA",)), Requirement(vendors=("AMD",))
    plan = small_plan(groups=(NodeGroup("H100-SXM", 2), NodeGroup("MI300X", 2)))
    wl = workload(job(gpus=16, hours=10, requirement=nvidia, name="l"),
                  job(gpus=16, hours=10, priority=5, name="m"),
                  job(gpus=16, hours=1, submit_h=1.5, priority=10, requirement=amd, name="h"))
    e = run_engine(plan, wl, policy="default", until_h=1.5)
    g = by_name(e)
    assert plan.models[g["m"].model].name == "MI300X"
    assert preempted(e) == {"m": 1} and g["h"].first_start == pytest.approx(1.5 * HOUR)
    assert g["m"].state == QUEUED and g["l"].state == RUNNING
    e.run_until(1.5 * HOUR + CASCADE_WAIT_S)
    assert preempted(e) == {"m": 1, "l": 1}
    assert g["m"].state == RUNNING and g["m"].first_start == 0.0
    assert [(w["t"], w["job"], w["jobs"]) for w in waves(e)] == [
        (1.5 * HOUR, "h", ["m"]), (1.5 * HOUR + CASCADE_WAIT_S, "m", ["l"])]


def test_two_preemptors_of_one_instant_each_evict_their_own_victims_in_a_wave_of_their_own():
    # four 4-GPU gangs of priority 0 fill two nodes, started a minute apart; h1 and h2 (4 GPUs
    # each, priority 10) arrive together.  One pass serves one preemptor: h1 takes the gang
    # that loses least (d, the last started), and the next pass lets h2 take the next (c)
    small = [at(60.0 * i, job(gpus=4, hours=10, name=n)) for i, n in enumerate("abcd")]
    wl = workload(*small, at(1.5 * HOUR, job(gpus=4, hours=1, priority=10, name="h1")),
                  at(1.5 * HOUR, job(gpus=4, hours=1, priority=10, name="h2")))
    e = run_engine(small_plan(2), wl, policy="default", until_h=1.6)
    assert [(w["job"], w["jobs"]) for w in waves(e)] == [("h1", ["d"]), ("h2", ["c"])]
    assert {w["t"] for w in waves(e)} == {1.5 * HOUR}
    assert by_name(e)["h1"].state == RUNNING and by_name(e)["h2"].state == RUNNING
    assert preempted(e) == {"c": 1, "d": 1}
