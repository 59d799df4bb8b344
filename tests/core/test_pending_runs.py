"""A run not submitted yet (``pending``) is its job and its admission, nothing more: snapshots
and forks carry it as its constructor's arguments and its arrival event (issue 28: a busy
preset's year of future jobs, slot by slot, was most of a snapshot's time, so of a stop's).
Nothing may change a pending run but its arrival event, and a round trip keeps every run."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from scheduler.model.job_run import PENDING, RUNNING, JobRun
from scheduler.simulate import Scenario
from scheduler.snapshot import dumps, loads

HOUR = 3600.0


@pytest.fixture(scope="module")
def busy():
    """dev-small, two days of work planned, six hours in, with a drill and a drained node."""
    e, _ = Scenario(preset="dev-small", gpus=64, days=2, seed=11, failures=True,
                    physics=True).engine()
    e.run_until(2 * HOUR)
    e.command("drill", kind="node", target="random", drill_id=1)
    e.run_until(4 * HOUR)
    e.command("drain_node", node=0)
    e.run_until(6 * HOUR)
    assert {r.state for r in e.runs} >= {PENDING, RUNNING}
    return e


def slots(run: JobRun) -> dict:
    """Every slot of ``run`` as comparable values (its event by what it is, not by identity)."""
    out = {}
    for name in JobRun.__slots__:
        value = getattr(run, name)
        if name == "event":
            value = None if value is None else (value.time, value.kind, value.cancelled,
                                                value.payload.idx)
        elif isinstance(value, np.ndarray):
            value = (value.dtype.str, value.tolist())
        elif name == "placement":
            value = pickle.dumps(value)
        out[name] = value
    return out


def test_a_pending_run_is_what_its_admission_made_but_for_its_arrival(busy):
    pending = [r for r in busy.runs if r.state == PENDING]
    assert pending
    for run in pending:
        fresh = slots(JobRun(run.idx, run.spec, run.models, run.affinity))
        assert {**slots(run), "event": None} == fresh, run.spec.name
        assert run.event is not None and run.event.payload is run


@pytest.mark.parametrize("copy", ["snapshot", "fork"])
def test_a_snapshot_and_a_fork_keep_every_run_as_it_was(busy, copy):
    other = loads(dumps(busy)) if copy == "snapshot" else busy.fork()
    assert len(other.runs) == len(busy.runs)
    for mine, theirs in zip(busy.runs, other.runs, strict=True):
        assert slots(theirs) == slots(mine), mine.spec.name
    # a pending run's arrival is the very event on the copy's heap
    heap = {id(entry[-1]) for entry in other.kernel._heap}
    assert all(id(r.event) in heap for r in other.runs if r.state == PENDING)


def test_only_a_pending_run_is_pickled_without_its_slots(busy):
    pending = next(r for r in busy.runs if r.state == PENDING)
    running = next(r for r in busy.runs if r.state == RUNNING)
    assert b"remaining_flops" not in pickle.dumps(pending)
    assert b"remaining_flops" in pickle.dumps(running)
