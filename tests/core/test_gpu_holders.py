"""Which GPUs each job holds, as the live placement reports them: exactly the engine's
``gpu_owner``, including gangs on part of a node and inference replicas."""

from __future__ import annotations

import numpy as np

from scheduler.live import live_placement
from scheduler.model.state import REPLICA_BASE
from tests.core.factories import job, run_engine, service, small_plan, workload


def expand(runs) -> np.ndarray:
    return np.array([g for a, b in runs for g in range(a, b + 1)], dtype=np.int64)


def busy_engine():
    """Gangs of 12 and 4 GPUs (12 spans a node and a half), one replica of 2 GPUs, a gang that
    ends early: some GPUs free, some nodes shared."""
    return run_engine(small_plan(4), workload(
        job(gpus=12, hours=5), job(gpus=4, hours=5), job(gpus=8, hours=0.3),
        job(gpus=4, hours=5, submit_h=0.5),
        services=(service(gpus_per_replica=2, peak_replicas=1.0, trough_fraction=1.0),)),
        until_h=1.0)


def test_every_running_job_lists_exactly_the_gpus_it_owns():
    engine = busy_engine()
    jobs = live_placement(engine)["jobs"]
    owner = engine.state.gpu_owner
    assert jobs, "the scenario runs jobs at 1 h"
    partial = False
    for r in engine.running.values():
        gpus = expand(jobs[r.spec.name]["gpu_runs"])
        assert np.array_equal(gpus, np.flatnonzero(owner == r.idx)), r.spec.name
        assert gpus.size == r.gpus
        per_node = np.bincount(engine.state.gpu_node[gpus])
        partial |= bool(np.any((per_node > 0) & (per_node < 8)))
    assert partial, "no gang held part of a node: the scenario tests nothing partial"


def test_inference_replicas_are_listed_by_service_and_free_gpus_nowhere():
    engine = busy_engine()
    p = live_placement(engine)
    owner = engine.state.gpu_owner
    serving = expand(p["serving"]["svc0"])
    assert serving.size and np.array_equal(serving, np.flatnonzero(owner >= REPLICA_BASE))
    listed = np.concatenate([expand(j["gpu_runs"]) for j in p["jobs"].values()] + [serving])
    assert listed.size == np.unique(listed).size  # no GPU held twice
    free = np.flatnonzero(owner < 0)
    assert free.size and not np.isin(free, listed).any()
