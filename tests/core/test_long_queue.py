"""Long queues at speed (issue 25, part 6): behind the reservation a pass walks on through the
gangs of partitions known to wait in one go (``SchedulingPass.look_ahead``,
``Ordered.wait_through``, :mod:`scheduler.scheduling.reservation`), and that changes nothing a
pass decides: the walk passes the same gangs in the same order, and runs with and without the
look-ahead have the same history, pending reasons and counters."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.model.job_run import JobRun
from scheduler.scheduling import passes
from scheduler.scheduling.policies import REGISTRY
from scheduler.scheduling.queue_index import SKIP, STOP, WAIT, QueueIndex, partition_of
from scheduler.simulate import Scenario
from tests.core.factories import job, run_engine, small_plan, workload


@st.composite
def walks(draw):
    """A queue of runs in few partitions (so runs of one partition come one after another),
    and a script of what a pass does at each run: look ahead (how far), take how many of
    the runs it was shown, drop the partition at which run."""
    n = draw(st.integers(1, 60))
    runs = []
    for i in range(n):
        spec = job(i, gpus=draw(st.sampled_from((1, 1, 1, 8))), submit_h=draw(st.integers(0, 9)),
                   tenant=draw(st.sampled_from(("a", "a", "b"))),
                   priority=draw(st.sampled_from((0, 0, 5))))
        runs.append(JobRun(i, spec, (0,), "any"))
    seed = draw(st.integers(0, 2**16))
    return runs, seed


class Books:
    """A queue context (what fair orders read): tenant a within its quota, b beyond it."""

    @staticmethod
    def within_quota(run: JobRun) -> bool:
        return run.spec.tenant == "a"

    @staticmethod
    def dominant_share(tenant: str) -> float:
        return {"a": 0.5, "b": 0.25}[tenant]


ORDERS = sorted(n for n, p in REGISTRY.items()
                if getattr(p, "ranking", None) is None and getattr(p, "mechanics", None) is None)


def drops(run: JobRun) -> bool:
    """The script's drop rule: a pass drops the partition at these runs."""
    return run.idx % 7 == 3


@settings(max_examples=300, deadline=None)
@given(walks(), st.sampled_from(ORDERS))
def test_walking_through_waiting_partitions_keeps_the_walks_order(w, name):
    runs, seed = w
    order = REGISTRY[name].order
    index = QueueIndex()
    for r in runs:
        index.add(r)
    for part in index.parts.values():
        part._reset(4)  # sublists of a few entries: walks cross from one to the next
    rng = random.Random(seed)
    keys = sorted({partition_of(r) for r in runs})
    waiting = {k for k in keys if rng.random() < 0.6}
    says = {r.idx: rng.choice((SKIP, WAIT, WAIT, WAIT, STOP)) for r in runs}
    seen, dropped_at = [], {}
    walk = index.ordered(order, Books, runs)

    def verdict(run):
        if says[run.idx] != STOP:
            seen.append(run.idx)  # passed over by the walk
        return says[run.idx]

    for key, r in walk:
        seen.append(r.idx)
        if drops(r):
            walk.drop(key)
            dropped_at[key] = r.idx
        elif rng.random() < 0.7:
            start = len(seen)
            walked = walk.wait_through(waiting, verdict, rng.randint(0, 8))
            passed = seen[start:]
            assert [x.idx for x in walked] == [i for i in passed if says[i] == WAIT]
            assert all(partition_of(runs[i]) in waiting for i in passed)
    # the plain order, less what follows a drop in its partition
    plain, gone = [], set()
    for r in sorted(runs, key=lambda r: (order(r, Books), r.idx)):
        key = partition_of(r)
        if key in gone:
            continue
        plain.append(r.idx)
        if dropped_at.get(key) == r.idx:
            gone.add(key)
    assert seen == plain


def history(engine) -> list[tuple]:
    return [(r.spec.name, r.state, r.first_start, r.end_s, r.wait_s, r.preemptions, r.model,
             tuple(r.placement.nodes.tolist()) if r.placement is not None else None)
            for r in engine.runs]


def decided(engine) -> tuple:
    """What the passes decided: every run's history, the last pass's pending reasons and the
    counters that are not clocks."""
    s = engine.scheduler
    counters = {k: v for k, v in engine.counters.items() if not k.endswith("_s")}
    return history(engine), dict(s.reasons), dict(s.partition_reasons), counters


def many_small_jobs(n: int = 400, seed: int = 0):
    """Mostly one-GPU jobs of three tenants with long and short durations, arriving faster
    than a 16-GPU cluster serves them, and a few 8-GPU gangs that become heads."""
    rng = random.Random(seed)
    jobs = [job(i, gpus=rng.choice((1, 1, 1, 1, 2, 8)), hours=rng.choice((0.05, 0.2, 1.0, 6.0)),
                submit_h=i * 0.02, tenant=rng.choice(("a", "b", "c")))
            for i in range(n)]
    return workload(*jobs)


def counting_look_aheads(monkeypatch) -> list[int]:
    """How many gangs each look-ahead walked (appended to the list returned)."""
    walked = []
    original = passes.walk_on

    def walk_on(*a):
        n = original(*a)
        walked.append(n)
        return n

    monkeypatch.setattr(passes, "walk_on", walk_on)
    return walked


@pytest.mark.parametrize("policy", ["backfill", "default"])
def test_looking_ahead_behind_a_reservation_changes_no_decision(monkeypatch, policy):
    walked = counting_look_aheads(monkeypatch)
    ahead = run_engine(small_plan(2), many_small_jobs(), policy=policy, until_h=12)
    assert sum(walked) > 50  # the look-ahead did walk gangs in bulk
    monkeypatch.setattr(passes.SchedulingPass, "look_ahead", False)
    walked.clear()
    plain = run_engine(small_plan(2), many_small_jobs(), policy=policy, until_h=12)
    assert walked == []
    assert decided(ahead) == decided(plain)


def test_a_saturated_preset_decides_the_same_with_and_without_the_look_ahead(monkeypatch):
    kw = dict(preset="hyperscale-100k", days=0.4, seed=1, policy="backfill", failures=False,
              physics=False, load=100)
    walked = counting_look_aheads(monkeypatch)
    ahead, _ = Scenario(**kw).engine()
    ahead.run_until(kw["days"] * 86400.0)
    assert ahead.counters["backfill_depth_stops"] > 0 and sum(walked) > 0
    monkeypatch.setattr(passes.SchedulingPass, "look_ahead", False)
    plain, _ = Scenario(**kw).engine()
    plain.run_until(kw["days"] * 86400.0)
    assert decided(ahead) == decided(plain)
