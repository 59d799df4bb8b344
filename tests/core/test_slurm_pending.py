"""The ``slurm`` policy's pending order (``scheduler.scheduling.slurm.pending``) is the one a
``SortedList`` of ``(key, run index)`` walked by ``bisect_right`` gives, and its column-wise
priorities are ``priority/multifactor``'s factor-by-factor sum, job by job."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import given, settings
from sortedcontainers import SortedList

from scheduler.scheduling.slurm.pending import PendingOrder
from scheduler.scheduling.slurm.priority import Factors, combine

FACTORS = Factors(nodes=64, cpus=4096, part_factor_max=3, qos_priority_max=7)


def _order(weights, max_age_s=600.0):
    return PendingOrder(weights, FACTORS, max_age_s=max_age_s, favor_small=False)


def _enter(p, idx, draw_job, fair):
    pre, tier, nodes, part, qos, user, submit = draw_job
    return p.enter(idx, job_id=1000 - idx, tier=tier, preemptor=pre, nodes=nodes,
                   part_factor=part, qos_prio=qos, user=f"u{user}", seq=idx + 1,
                   submit=submit, fair=fair)


JOB = st.tuples(st.integers(0, 1), st.integers(1, 3), st.integers(1, 64), st.integers(0, 3),
                st.integers(0, 7), st.integers(0, 4), st.integers(0, 40).map(float))
WEIGHTS = st.fixed_dictionaries({
    "age": st.integers(0, 10_000), "jobsize": st.integers(0, 10_000),
    "partition": st.integers(0, 10_000), "qos": st.integers(0, 10_000),
    "fairshare": st.integers(0, 10_000)})


def _scalar(weights, job, waited, fair, max_age_s=600.0):
    """The priority as the factors page states it, one job at a time."""
    pre, tier, nodes, part, qos, user, submit = job
    factors = {"age": FACTORS.age(waited_s=waited, max_age_s=max_age_s),
               "jobsize": FACTORS.job_size(nodes=nodes, cpus=nodes, favor_small=False),
               "partition": FACTORS.partition(part), "qos": FACTORS.qos(qos)}
    if weights.get("fairshare"):
        factors["fairshare"] = fair.get(f"u{user}", 1.0)
    return combine(weights, factors)


@settings(max_examples=60, deadline=None)
@given(WEIGHTS, st.lists(JOB, min_size=1, max_size=30), st.floats(0, 2000),
       st.dictionaries(st.sampled_from([f"u{i}" for i in range(5)]), st.floats(0, 1)))
def test_column_priorities_equal_the_factor_sum_job_by_job(weights, jobs, now, fair):
    p = _order(weights)
    for i, job in enumerate(jobs):
        assert _enter(p, i, job, fair) == _scalar(weights, job, 0.0, fair)
        p.add(i, submit=job[6], eligible=job[6])
    now += 40.0
    p.recalc(now, fair)
    for i, job in enumerate(jobs):
        assert int(p.prio[i]) == _scalar(weights, job, now - job[6], fair)
    keys = [p.key(i) for i in p.items]
    assert keys == sorted(keys) and sorted(p.items) == list(range(len(jobs)))


# steps of a walk: ("next",) takes the walk one job on, ("start", k) removes the k-th queued
# job, ("join", job) adds a new one, ("recalc", dt) recomputes priorities between walks
STEP = st.one_of(st.tuples(st.just("next")), st.tuples(st.just("start"), st.integers(0, 99)),
                 st.tuples(st.just("join"), JOB), st.tuples(st.just("recalc"),
                                                            st.floats(1, 300)))


@settings(max_examples=80, deadline=None)
@given(st.lists(JOB, max_size=20), st.lists(STEP, max_size=80))
def test_walk_gives_what_a_sorted_list_walked_by_bisect_gives(jobs, steps):
    p = _order({"age": 1000, "jobsize": 100})
    ref = SortedList()
    now, n = 0.0, 0

    def join(job):
        nonlocal n
        _enter(p, n, job, {})
        p.add(n, submit=job[6], eligible=job[6])
        ref.add((p.key(n), n))
        n += 1

    for job in jobs:
        join(job)
    walk, ref_item = None, None  # the reference walk: after ref_item (its key, its index)
    for step in steps:
        if step[0] == "next":
            if walk is None:
                walk, ref_item = p.walk(), None
            pos = 0 if ref_item is None else ref.bisect_right(ref_item)
            want = ref[pos][1] if pos < len(ref) else None
            assert next(walk, None) == want
            if want is None:
                walk = None
            else:
                ref_item = ref[pos]
        elif step[0] == "start" and p.items:
            idx = p.items[step[1] % len(p.items)]
            ref.remove((p.key(idx), idx))
            p.remove(idx)
        elif step[0] == "join":
            join(step[1])
        elif step[0] == "recalc" and walk is None:
            now += step[1]
            p.recalc(now, None)
            ref = SortedList((p.key(i), i) for _, i in ref)
        assert p.items == [i for _, i in ref]



@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=700),
       st.lists(st.booleans(), min_size=4, max_size=4), st.integers(0, 600),
       st.integers(0, 3))
def test_skip_passes_what_the_job_by_job_walk_would_only_count(jobs, known, budget, start):
    """``Walk.skip`` (kind known: counted and passed; not eligible: passed) against the
    backfill loop's job-by-job test, from a walk already ``start`` jobs in."""
    p = _order({"age": 1000})
    for i, (kind, late) in enumerate(jobs):
        _enter(p, i, (0, 1, 1, 0, 0, 0, float(i)), {})
        p.add(i, submit=float(i), eligible=1e9 if late else float(i), kind=kind)
    walk = p.walk()
    for _ in range(min(start, len(jobs))):
        next(walk)
    rest = p.items[min(start, len(jobs)):]
    counted, late, stop, upcoming = 0, [], False, None
    for idx in rest:  # the loop's own steps
        if p.eligible[idx] > 1e6:
            late.append(idx)
            continue
        if not known[p.kind[idx]]:  # the loop tests it itself (its budget check first)
            upcoming = idx
            break
        if counted == budget:
            stop = True
            break
        counted += 1
    assert walk.skip(1e6, np.array(known), budget) == (counted, late, stop)
    if not stop:
        assert next(walk, None) == upcoming


def test_a_slurm_engine_snapshot_goes_on_as_the_engine_does(tmp_path):
    """The pending order pickles (snapshots, forks) without its walks in progress."""
    import random

    from scheduler.job_log import job_log_text
    from scheduler.simulate import Scenario
    from scheduler.snapshot import dumps, loads

    rng = random.Random(5)
    rows = ["job_id,submit_s,duration_s,gpus,gpus_per_node,partition,qos,user,time_limit_s"]
    for i in range(80):
        gpus, duration = rng.choice((1, 2, 4, 8, 16)), rng.randint(300, 3000)
        rows.append(f"{i + 1},{i * 20},{duration},{gpus},{min(gpus, 8)},batch,normal,"
                    f"u{i % 4},{2 * duration}")
    trace = tmp_path / "jobs.csv"
    trace.write_text("\n".join(rows) + "\n")
    engine, _ = Scenario(preset="dev-small", gpus=32, days=0.3, seed=3, policy="slurm",
                         failures=False, physics=False, trace=str(trace),
                         slurm_conf="bench/slurm_defaults.conf").engine()
    engine.run_until(1500.0)
    assert len(engine.scheduler.mechanics.pending.items) > 10  # jobs wait at the snapshot
    copy = loads(dumps(engine))
    for e in (engine, copy):
        e.run_until(0.3 * 86400.0)
    assert job_log_text(copy) == job_log_text(engine)
    assert job_log_text(engine).count(",,") == 0  # every job ran
