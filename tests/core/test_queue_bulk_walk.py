"""Walking behind a reservation by partition (issue 25, part 6): ``Ordered.wait_bulk`` counts
the gangs that would delay the reservation with bisects per partition, from the estimates the
queue keeps (``QueueIndex.use_estimator``), and passes exactly the gangs the one-by-one walk
(``Ordered.wait_through`` with a verdict per gang) passes, in the same walk."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.model.job_run import JobRun
from scheduler.scheduling.policies import REGISTRY
from scheduler.scheduling.queue_index import STOP, WAIT, QueueIndex, partition_of
from tests.core.factories import job
from tests.core.test_long_queue import ORDERS, Books


@st.composite
def queues(draw):
    """Runs in few partitions, each with an estimate that ends before the shadow or not."""
    n = draw(st.integers(1, 70))
    runs, est = [], {}
    for i in range(n):
        spec = job(i, gpus=draw(st.sampled_from((1, 1, 1, 8))), submit_h=draw(st.integers(0, 9)),
                   tenant=draw(st.sampled_from(("a", "a", "b"))),
                   priority=draw(st.sampled_from((0, 0, 5))))
        runs.append(JobRun(i, spec, (0,), "any"))
        est[i] = draw(st.sampled_from((1.0, 30.0, 30.0, 30.0, 100.0)))
    return runs, est, draw(st.integers(0, 2**16))


def index_of(runs, est, sublist):
    index = QueueIndex()
    index.use_estimator(lambda r: est[r.idx], runs)
    for r in runs:
        index.add(r)
    if sublist:
        for part in index.parts.values():
            part._reset(sublist)  # walks cross from one sublist to the next
    return index


@settings(max_examples=300, deadline=None)
@given(queues(), st.sampled_from(ORDERS), st.sampled_from((None, 3)))
def test_the_bulk_walk_passes_the_gangs_the_one_by_one_walk_passes(q, name, sublist):
    runs, est, seed = q
    order = REGISTRY[name].order
    now, shadow = 100.0, 120.0  # a gang waits iff now + estimate > shadow: 30 and 100 wait
    one = index_of(runs, est, sublist).ordered(order, Books, runs)
    bulk_index = index_of(runs, est, sublist)
    bulk = bulk_index.ordered(order, Books, runs)
    shorts = bulk_index.short_finder(now, shadow)
    rng = random.Random(seed)
    keys = sorted({partition_of(r) for r in runs})
    waiting = {k for k in keys if rng.random() < 0.6}

    def verdict(run):
        return WAIT if now + est[run.idx] > shadow else STOP

    ones, bulks = iter(one), iter(bulk)
    for key, r in ones:
        other = next(bulks)
        assert other == (key, r)
        action = rng.random()
        if action < 0.15:
            one.drop(key)
            bulk.drop(key)
        elif action < 0.8:
            limit = rng.choice((0, 1, 3, 10, 1000))
            walked = one.wait_through(waiting, verdict, limit)
            counted = bulk.wait_bulk(waiting, shorts, limit)
            if counted < 0:  # more would wait than the limit: the one-by-one walk stops at it
                assert len(walked) == limit and next(ones, None) is not None
                return
            assert counted == len(walked)
    assert next(bulks, None) is None


def test_the_kept_estimates_follow_the_queue_and_a_stale_run():
    runs = [JobRun(i, job(i, gpus=1, submit_h=i), (0,), "any") for i in range(4)]
    est = {0: 5.0, 1: 50.0, 2: 1.0, 3: 7.0}
    index = index_of(runs, est, None)
    key = partition_of(runs[0])
    assert [e[-1] for e in index.shorts(key, 0.0, 6.0)] == [0, 2]  # in queue order
    index.remove(runs[2])
    est[1] = 2.0
    index.stale(runs[1])  # its work changed while it waited
    assert [e[-1] for e in index.shorts(key, 0.0, 6.0)] == [0, 1]
    assert index.shorts(key, 10.0, 6.0) == []
