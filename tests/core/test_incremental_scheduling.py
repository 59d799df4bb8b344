"""What a scheduling pass remembers between instants, and what it may skip.

Issue 11: a pass does work in proportion to what changed.  A gang that did not fit is not
placed again until capacity of its models grows; a failed preemption attempt is not repeated
while nothing it could use changed; backfill runs in cycles (Slurm's ``bf_interval``); and an
instant that leaves the blocked head first and unchanged runs no pass at all.  The first two
and the last must not change any outcome: the equivalence tests run the same scenario with
and without them and compare every run's history.
"""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.model.job_run import QUEUED, RUNNING
from scheduler.scheduling import passes
from scheduler.scheduling.policies.base import BACKFILL_INTERVAL_S
from scheduler.simulate import Scenario
from tests.core.factories import HOUR, job, run_engine, small_plan, workload
from tests.core.test_preemption import at, by_name, nodes, preempted


# ------------------------------------------------------------------ no fit, remembered
def fragmented_head(*extra):
    """Four 8-GPU nodes, each used by a 5-GPU gang (p0..p3, ending at 1, 2, 10, 10 h): 12 GPUs
    are free, 3 per node, so ``big`` (12 GPUs: a whole node and 4 more) cannot be placed."""
    gangs = [job(gpus=5, hours=h, name=f"p{i}") for i, h in enumerate((1, 2, 10, 10))]
    gangs = [at(i, g) for i, g in enumerate(gangs)]
    return workload(*gangs, at(60, job(gpus=12, hours=1, name="big")), *extra)


def test_a_gang_that_did_not_fit_is_not_placed_again_until_capacity_grows():
    # five 1-GPU jobs arrive behind big: each arrival runs a pass, which meets big first;
    # big's shape failed and nothing was released since, so it is not placed again
    arrivals = [at(600 * (k + 1), job(gpus=1, hours=5, name=f"s{k}")) for k in range(5)]
    e = run_engine(small_plan(4), fragmented_head(*arrivals), policy="fifo", until_h=0.95)
    g = by_name(e)
    assert [nodes(g[f"p{i}"]) for i in range(4)] == [[0], [1], [2], [3]]
    assert g["big"].state == QUEUED
    assert e.counters["placement_decisions"] == 4 + 1  # p0..p3, and big once
    assert e.counters["known_not_to_fit"] == 5
    # p0 ends at 1 h: node 0 is whole again, big is placed again (and still fails: no other
    # node has 4 GPUs free); p1 ends at 2 h: big starts on nodes 0 and 1
    e.run_until(1.5 * HOUR)
    assert e.counters["placement_decisions"] == 4 + 2 and g["big"].state == QUEUED
    e.run_until(2.5 * HOUR)
    assert g["big"].state == RUNNING
    assert g["big"].first_start == pytest.approx(g["p1"].end_s)
    assert nodes(g["big"]) == [0, 1]


def test_a_smaller_gang_of_the_same_shape_is_still_tried():
    # big (12) failed; a 3-GPU gang of the same shape fits the 3 free GPUs of a node
    small = at(600, job(gpus=3, hours=1, name="small"))
    e = run_engine(small_plan(4), fragmented_head(small), policy="backfill", until_h=0.5)
    assert by_name(e)["big"].state == QUEUED
    assert by_name(e)["small"].state == RUNNING


# ------------------------------------------------------------------ backfill cycles
def blocked_head(*extra):
    """``a`` (24 GPUs, 2 h) from t=0; ``h`` (32 GPUs) at 30 min waits for it (shadow 2 h)."""
    return workload(job(gpus=24, hours=2, name="a"),
                    at(1800, job(gpus=32, hours=1, name="h")), *extra)


SMALL = [at(1810, job(gpus=2, hours=0.25, name="s1")),
         at(1820, job(gpus=2, hours=0.25, name="s2")),
         at(1850, job(gpus=2, hours=0.25, name="s3"))]


def test_backfill_runs_in_cycles_of_the_interval():
    # s1 is the first gang behind the blocked head: its pass backfills at once (1810 s); s2
    # (1820 s) waits for the next cycle (1810 + 30 s), s3 (1850 s) for the one after that
    e = run_engine(small_plan(4), blocked_head(*SMALL), policy="backfill", until_h=1)
    g = by_name(e)
    assert g["h"].state == QUEUED
    assert [g[n].first_start for n in ("s1", "s2", "s3")] == pytest.approx(
        [1810, 1810 + BACKFILL_INTERVAL_S, 1810 + 2 * BACKFILL_INTERVAL_S])


def test_without_an_interval_a_gang_backfills_as_it_arrives(monkeypatch):
    orig = passes.get_policy
    monkeypatch.setattr(passes, "get_policy", lambda name, placement=None: dataclasses.replace(
        orig(name, placement=placement), backfill_interval_s=None))
    e = run_engine(small_plan(4), blocked_head(*SMALL), policy="backfill", until_h=1)
    g = by_name(e)
    assert [g[n].first_start for n in ("s1", "s2", "s3")] == pytest.approx([1810, 1820, 1850])


def test_the_head_starts_when_capacity_frees_not_at_a_cycle():
    # a ends at 2 h, between cycles: h starts in that instant's main pass
    e = run_engine(small_plan(4), blocked_head(*SMALL), policy="backfill", until_h=3)
    g = by_name(e)
    assert g["h"].first_start == pytest.approx(max(g["a"].end_s, g["s1"].end_s,
                                                   g["s2"].end_s, g["s3"].end_s))


# ------------------------------------------------------------------ whole-node victims
def test_preemption_frees_whole_nodes_for_a_gang_of_whole_nodes():
    # 4 nodes, each with an old 5-GPU gang (a-d) and a young 3-GPU gang (e, f, g, k), all of
    # priority 0.  By GPU count the cheapest set is the four young gangs plus d (17 GPUs), which
    # frees node 3 and 3 GPUs on each other node: no room for h (16 GPUs = two whole nodes).
    # At 1.5 h every gang checkpointed at 1 h (plus its start): the later a gang started, the
    # less it loses.  The cheapest two nodes are those whose old gang is youngest, nodes 3
    # and 2: exactly d, k, c and g are evicted.
    old = [at(i, job(gpus=5, hours=10, name=n)) for i, n in enumerate("abcd")]
    young = [at(10 + i, job(gpus=3, hours=10, name=n)) for i, n in enumerate("efgk")]
    h = at(1.5 * HOUR, job(gpus=16, hours=1, priority=10, name="h"))
    e = run_engine(small_plan(4), workload(*old, *young, h), policy="default", until_h=0.01)
    g = by_name(e)
    assert [nodes(g[n]) for n in "abcdefgk"] == [[0], [1], [2], [3], [0], [1], [2], [3]]
    e.run_until(1.6 * HOUR)
    assert g["h"].first_start == pytest.approx(1.5 * HOUR)
    assert sorted(nodes(g["h"])) == [2, 3]
    assert preempted(e) == {"c": 1, "d": 1, "g": 1, "k": 1}


# ------------------------------------------------------------------ nothing changes
def history(engine) -> list[tuple]:
    return [(r.spec.name, r.state, r.first_start, r.end_s, r.preemptions, r.lendings,
             r.model, tuple(r.placement.nodes.tolist()) if r.placement is not None else None)
            for r in engine.runs]


def run_scenario_engine(**kw):
    engine, _ = Scenario(**kw).engine()
    engine.run_until(kw["days"] * 86400.0)
    return engine


SCENARIOS = [
    dict(preset="dev-small", days=3, seed=1, load=4.0),
    dict(preset="mixed-vendor", days=2, seed=2, load=4.0),  # busy enough to skip passes
    dict(preset="dev-small", days=3, seed=3, load=4.0, policy="backfill"),
]


@pytest.mark.parametrize("kw", SCENARIOS, ids=lambda kw: f"{kw['preset']}-{kw.get('policy')}")
def test_skipping_a_pass_for_an_unchanged_head_changes_no_outcome(monkeypatch, kw):
    skipping = run_scenario_engine(**kw)
    assert skipping.counters["passes_skipped"] > 0
    monkeypatch.setattr(passes.Scheduler, "_same_head", lambda self: False)
    every = run_scenario_engine(**kw)
    assert every.counters["passes_skipped"] == 0
    assert history(skipping) == history(every)


@pytest.mark.parametrize("kw", SCENARIOS, ids=lambda kw: f"{kw['preset']}-{kw.get('policy')}")
def test_remembering_failures_changes_no_outcome(monkeypatch, kw):
    remembering = run_scenario_engine(**kw)
    assert remembering.counters["known_not_to_fit"] > 0
    monkeypatch.setattr(passes.Scheduler, "place_queued",
                        lambda self, run: self.place(self.request(run)))
    monkeypatch.setattr(passes.SchedulingPass, "_still_no_victims", lambda self, *a: False)
    monkeypatch.setattr(passes.Scheduler, "_same_head", lambda self: False)
    forgetting = run_scenario_engine(**kw)
    assert forgetting.counters["known_not_to_fit"] == 0
    assert history(remembering) == history(forgetting)


def test_a_failed_preemption_is_tried_again_once_the_work_lost_reorders_its_victims():
    # Two 8-GPU nodes: node 0 holds C (7 GPUs) and A (1), node 1 holds D (5) and B (2) and one
    # GPU free; C and D (priority 10) are out of P's reach.  P (priority 5, 2 GPUs) arrives at
    # 0.9 h, when A has computed 3,180 s and B 3,238 s since their starts (no checkpoint yet):
    # A is the cheaper victim and the only set tried, [A] (with the free GPU that makes 2), but
    # it frees a GPU beside none: the attempt fails and is remembered.  B's hourly checkpoint
    # at 1 h drops its loss to what it computed since (0.2 h at Q's arrival, 1.2 h), A's is
    # 4,260 s: [B] is tried now and frees 3 GPUs on node 1.  No capacity grew and no gang moved
    # in between, so only the changed victim sets tell that the remembered failure is stale.
    jobs = [at(0, job(gpus=7, hours=10, priority=10, name="C")),
            at(1, job(gpus=5, hours=10, priority=10, name="D")),
            at(60, job(gpus=1, hours=10, name="A", checkpoint_interval_s=4 * HOUR)),
            at(2, job(gpus=2, hours=10, name="B", checkpoint_interval_s=HOUR)),
            at(0.9 * HOUR, job(gpus=2, hours=1, priority=5, name="P")),
            at(1.2 * HOUR, job(gpus=16, hours=1, name="Q"))]  # its arrival runs a pass
    e = run_engine(small_plan(2), workload(*jobs), failures=False, until_h=1.19)
    g = by_name(e)
    assert [nodes(g[n]) for n in "CADB"] == [[0], [0], [1], [1]]
    assert g["P"].state == QUEUED and preempted(e) == {}
    e.run_until(1.21 * HOUR)
    assert preempted(e) == {"B": 1}
    assert g["P"].state == RUNNING and nodes(g["P"]) == [1]
    assert g["P"].first_start == pytest.approx(1.2 * HOUR)
