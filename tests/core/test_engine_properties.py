"""Properties of the engine over random small workloads, checked after every ``step()``.

No GPU is held twice, host resources stay within capacity, gangs are whole or absent, the
ledger accounts for every GPU-second, and EASY backfill never starts the head later than its
reservation.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.engine import Engine
from scheduler.hardware.cluster import NodeGroup
from scheduler.model.job_run import (
    CLOUD,
    DETECTING,
    DONE,
    DRAINING,
    PENDING,
    QUEUED,
    REJECTED,
    RUNNING,
)
from scheduler.model.state import FREE
from scheduler.scheduling.policies import REGISTRY
from scheduler.scheduling.slurm.conf import parse_slurm_conf
from scheduler.workload.jobs import AFFINITIES, Requirement, Tenant
from tests.core.factories import HOUR, central_storage, job, service, small_plan, workload

PLANS = {
    "4xH100": small_plan(4),
    "8xH100-one-pod": small_plan(8, fabric_kw={"radix": 16}),
    "H100+MI300X": small_plan(groups=(NodeGroup("H100-SXM", 4), NodeGroup("MI300X", 4))),
    "6xH100-1-spare": small_plan(6, spares=1),
    "4xH100-slow-storage": small_plan(4, storage=central_storage(2.0)),  # writes take minutes
}
FLAT = small_plan(8, fabric_kw={"radix": 16}, storage=central_storage(4.0))
"""One pod (topology does not limit starts), and checkpoint writes of minutes."""
REQUIREMENTS = (Requirement(), Requirement(), Requirement(vendors=("NVIDIA",)),
                Requirement(vendors=("AMD",)))
HORIZON_H = 48.0
FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SIZES = st.one_of(st.integers(1, 16), st.integers(1, 64))  # small gangs more often
WHOLE_NODES = st.sampled_from((8, 16, 24, 32, 40, 48, 56, 64))
ANY_AFFINITY = st.sampled_from(AFFINITIES)
ANY_REQUIREMENT = st.sampled_from(REQUIREMENTS)
ANY_PRIORITY = st.sampled_from((0, 0, 5, 10))
ANY_CHECKPOINT = st.sampled_from((0.0, 0.0, 50.0, 400.0))  # GB


@st.composite
def jobs(draw, sizes=SIZES, affinities=ANY_AFFINITY, requirements=ANY_REQUIREMENT,
         priorities=ANY_PRIORITY, checkpoints=ANY_CHECKPOINT):
    return job(
        gpus=draw(sizes),
        hours=draw(st.floats(0.05, 8.0)),
        submit_h=draw(st.floats(0.0, 12.0)),
        priority=draw(priorities),
        tenant=draw(st.sampled_from(("a", "b", "c"))),
        affinity=draw(affinities),
        requirement=draw(requirements),
        checkpoint_interval_s=draw(st.sampled_from((1800.0, 3600.0))),
        checkpoint_gb=draw(checkpoints),
    )


SLURM_CONF = parse_slurm_conf("PriorityType=priority/multifactor\nPriorityWeightAge=100\n"
                              "PriorityWeightJobSize=10\nPartitionName=all Nodes=ALL "
                              "Default=YES\n")


@st.composite
def scenarios(draw):
    plan = PLANS[draw(st.sampled_from(sorted(PLANS)))]
    js = draw(st.lists(jobs(), min_size=1, max_size=12))
    services = ()
    if draw(st.booleans()):
        services = (service(gpus_per_replica=draw(st.sampled_from((1, 4, 8))),
                            peak_replicas=draw(st.floats(1.0, 4.0)),
                            peak_hour=draw(st.floats(0.0, 24.0)), priority=100),)
    quotas = draw(st.sampled_from(((), (Tenant("a", 16), Tenant("b", 8), Tenant("c", 0)))))
    wl = workload(*js, services=services, tenants=quotas)
    return plan, wl, dict(
        seed=draw(st.integers(0, 2**16)),
        policy=draw(st.sampled_from(sorted(REGISTRY))),
        placement=draw(st.sampled_from((None, None, "random"))),
        demand_step_s=1800.0,
        slurm_conf=SLURM_CONF,  # what the slurm policy schedules by (the others ignore it)
    )


def check_invariants(e: Engine) -> None:
    s = e.state
    parts, owners = [], []
    for run in e.running.values():
        assert run.state in (RUNNING, DRAINING, DETECTING)
        assert run.gids.size == run.gpus == run.placement.gpus, run.spec.name
        parts.append(run.gids)
        owners.append(np.full(run.gids.size, run.idx))
    replicas = [(svc.spec, r) for svc in e.fleet.services for r in svc.replicas]
    for spec, r in replicas:
        assert r.gids.size == r.placement.gpus == spec.gpus_per_replica
        parts.append(r.gids)
        owners.append(np.full(r.gids.size, r.owner))
    held = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    # every allocation's GPUs are its own, none is held twice, and nothing else is owned
    assert np.unique(held).size == held.size, "a GPU is held by two allocations"
    if held.size:
        np.testing.assert_array_equal(s.gpu_owner[held], np.concatenate(owners))
    np.testing.assert_array_equal(np.sort(held), np.flatnonzero(s.gpu_owner != FREE))

    for run in e.runs:
        if run.state in (QUEUED, PENDING, DONE, REJECTED, CLOUD):
            assert run.gids.size == 0 and run.idx not in e.running, run.spec.name
        assert (run.idx in e.queue) == (run.state == QUEUED)

    free_gpus = np.bincount(s.gpu_node[s.gpu_owner == FREE], minlength=s.plan.n_nodes)
    np.testing.assert_array_equal(s.node_free, free_gpus)
    assert (s.node_free >= 0).all() and (s.node_free <= s.node_gpus).all()
    for free, cap in ((s.node_free_cpu, s.node_cpu), (s.node_free_ram, s.node_ram),
                      (s.node_free_nic, s.node_nic)):
        assert (free >= -1e-6).all() and (free <= cap + 1e-6).all()
    # host resources taken are exactly what the holders asked for
    used = np.zeros((3, s.plan.n_nodes))
    for spec, p in [(r.spec, r.placement) for r in e.running.values()] + \
                   [(sp, r.placement) for sp, r in replicas]:
        for k, per in enumerate((spec.cpu_per_gpu, spec.ram_gb_per_gpu, spec.nic_gbps_per_gpu)):
            np.add.at(used[k], p.nodes, p.counts * per)
    np.testing.assert_allclose(s.node_cpu - s.node_free_cpu, used[0], atol=1e-6)
    np.testing.assert_allclose(s.node_ram - s.node_free_ram, used[1], atol=1e-6)
    np.testing.assert_allclose(s.node_nic - s.node_free_nic, used[2], atol=1e-6)

    # the incrementally kept counts the ledger integrates equal a recount from the node
    # columns, and so do the serving and tenant books
    np.testing.assert_array_equal(e.free_counts(), s.recount())
    np.testing.assert_array_equal(s.node_whole, s.node_free == s.node_gpus)
    serving = np.zeros(s.n_models, dtype=np.int64)
    tenant_gpus = dict.fromkeys(e.tenants.usage, 0)
    for spec, r in replicas:
        serving[r.placement.model] += r.placement.gpus
        tenant_gpus[spec.tenant] += r.placement.gpus
    for run in e.running.values():
        tenant_gpus[run.spec.tenant] += run.gpus
    np.testing.assert_array_equal(e.fleet.serving_by_model, serving)
    assert {t: round(u[0]) for t, u in e.tenants.usage.items()} == tenant_gpus

    led = e.horizon_ledger()
    assert (led.gpu_s >= 0).all()
    assert led.total_gpu_s() == pytest.approx(s.n_gpus * e.now, rel=1e-9, abs=1e-6)


def step_through(e: Engine, horizon_s: float, check=check_invariants) -> None:
    check(e)
    while e.peek() is not None and e.peek() <= horizon_s:
        assert e.step()
        check(e)


@FAST
@given(scenarios())
def test_after_every_step_allocations_partition_the_owned_gpus_and_the_ledger_covers_the_period(
        scenario):
    plan, wl, kw = scenario
    e = Engine(plan, wl, **kw)
    step_through(e, HORIZON_H * HOUR)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.floats(0.5, 20.0))
def test_the_invariants_hold_with_failures_on(scenario, until_h):
    plan, wl, kw = scenario
    e = Engine(plan, wl, failures=True, **kw)
    step_through(e, until_h * HOUR)


@FAST
@given(st.lists(jobs(sizes=WHOLE_NODES, affinities=st.just("any"),
                     requirements=st.just(Requirement()), priorities=st.just(0)),
                min_size=2, max_size=14),
       st.integers(0, 2**16))
def test_easy_backfill_never_starts_the_head_after_its_reservation(js, seed):
    e = Engine(FLAT, workload(*js), seed=seed, policy="backfill")
    step_through(e, 1e9)
    assert all(r.state == DONE for r in e.runs)
    for r in e.runs:
        if r.reserved_start is not None:
            assert r.first_start <= r.reserved_start + 1e-6, r.spec.name


DRILLS = ("node", "accelerator", "nic", "optical_link", "leaf_switch", "spine_switch",
          "rack_power", "cooling")


@st.composite
def commands(draw):
    kind = draw(st.sampled_from(("drill", "drill", "drain_node", "undrain_node", "set_policy",
                                 "inference_surge")))
    if kind == "drill":
        params = {"kind": draw(st.sampled_from(DRILLS))}
    elif kind in ("drain_node", "undrain_node"):
        params = {"node": draw(st.integers(0, 3))}
    elif kind == "set_policy":
        params = {"name": draw(st.sampled_from(sorted(REGISTRY)))}
    else:
        params = {"factor": draw(st.floats(1.5, 4.0)), "duration_s": 3600.0}
    return draw(st.floats(0.0, 24.0)), kind, params


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.lists(commands(), max_size=6))
def test_the_invariants_hold_through_drills_and_operator_commands(scenario, cmds):
    plan, wl, kw = scenario
    e = Engine(plan, wl, **kw)
    for t_h, kind, params in sorted(cmds, key=lambda c: c[0]):
        step_through(e, t_h * HOUR)
        e.run_until(t_h * HOUR)
        e.command(kind, **params)
        check_invariants(e)
    step_through(e, HORIZON_H * HOUR)
