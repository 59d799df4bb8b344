"""Preemption, worked by hand on literal clusters: exactly who is evicted, and who is spared.

Every scenario names its gangs and states the victims as ``{name: preemptions}``; a gang that
is not in that dict must not have been preempted at all.  Only the engine's public surface is
used (runs, counters, events, placements), so the tests survive changes to its internals.

The default ``small_plan(n)`` is a radix-8 fat-tree: 8-GPU H100 nodes, one leaf per node and
pods of two nodes ({0, 1}, {2, 3}, ...).  Gangs are submitted a few seconds apart so that each
starts in its own scheduling pass and lands where the comment says (topology placement: a
partial-node gang goes to the fullest node that fits, a whole-node gang to the fullest pod).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.hardware.cluster import NodeGroup
from scheduler.model.job_run import DONE, QUEUED, RUNNING
from scheduler.workload.jobs import Requirement, Tenant
from tests.core.factories import HOUR, job, run_engine, small_plan, workload

EXEMPT_S = 1800.0
"""How long ``low`` of :func:`guard_run` is protected after its start: until its first
checkpoint (one hour: no restart, no write time on a first start here) but at most the
exemption's half-hour cap (``preemption.MAX_EXEMPT_S``)."""


def preempted(e) -> dict[str, int]:
    """``{job name: preemptions}`` of every gang preempted at least once."""
    return {r.spec.name: r.preemptions for r in e.runs if r.preemptions}


def evicted_in_order(e) -> list[str]:
    """Names of the preempted gangs in the order the engine logged their eviction (a wave of
    preemptions is one line naming its victims in ``jobs``)."""
    return [name for ev in e.events if ev["kind"] == "preempt"
            for name in ev.get("jobs", [ev["job"]])]


def by_name(e) -> dict:
    return {r.spec.name: r for r in e.runs}


def nodes(run) -> list[int]:
    return run.placement.nodes.tolist()


def at(seconds: float, j):
    """``j`` submitted at exactly ``seconds`` (``submit_h`` would carry rounding residue)."""
    return replace(j, submit_s=float(seconds))


# ------------------------------------------------------------------ fewest victims (pruning)
def test_a_small_victim_made_unnecessary_by_a_larger_one_is_spared():
    # t=0: m (8, priority 5) -> node 0, v16 (16, priority 0) -> pod 1 (nodes 2, 3);
    # t=0.1 h: v8 (8, priority 0) -> node 1.  At 1 h urgent (16, priority 10) finds nothing
    # free.
    # Cheapest first is the youngest of the lowest priority: v8 (8 GPUs, not enough), then v16
    # (24 GPUs in all).  v16 alone frees the 16 GPUs urgent needs: v8 must not be evicted.
    wl = workload(job(gpus=16, hours=10, name="v16"),
                  job(gpus=8, hours=10, priority=5, name="m"),
                  job(gpus=8, hours=10, submit_h=0.1, name="v8"),
                  job(gpus=16, hours=1, submit_h=1, priority=10, name="urgent"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=1.5)
    g = by_name(e)
    assert nodes(g["m"]) == [0] and nodes(g["v16"]) == [2, 3] and nodes(g["v8"]) == [1]
    assert preempted(e) == {"v16": 1}
    assert evicted_in_order(e) == ["v16"]
    assert g["urgent"].first_start == 1 * HOUR and nodes(g["urgent"]) == [2, 3]
    (text,) = [ev["text"] for ev in e.events if ev["kind"] == "preempt"]
    assert "urgent" in text  # the operator sees who the gang made room for
    assert g["v8"].state == RUNNING and g["m"].state == RUNNING
    assert g["v16"].state == QUEUED
    assert e.counters["preemptions"] == 1


def test_every_small_victim_a_larger_one_made_unnecessary_is_spared():
    # m (8, priority 5) node 0; v16 (16, priority 0) nodes 2-3; a4 and b4 (4 each, priority 0,
    # youngest) share node 1.  h needs 16: b4, a4, v16 make 24; v16 alone suffices, so both
    # small gangs are dropped again, one after the other.
    wl = workload(job(gpus=8, hours=10, priority=5, name="m"),
                  job(gpus=16, hours=10, submit_h=0.01, name="v16"),
                  job(gpus=4, hours=10, submit_h=0.02, name="a4"),
                  job(gpus=4, hours=10, submit_h=0.03, name="b4"),
                  job(gpus=16, hours=1, submit_h=1, priority=10, name="h"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=1.5)
    g = by_name(e)
    assert [nodes(g[n]) for n in ("m", "v16", "a4", "b4")] == [[0], [2, 3], [1], [1]]
    assert preempted(e) == {"v16": 1}
    assert g["h"].first_start == 1 * HOUR and nodes(g["h"]) == [2, 3]


def test_the_gang_that_just_checkpointed_is_taken_not_the_youngest():
    # 48 GPUs, all priority 0, started a24, b16, c8 (youngest last), checkpointing hourly.
    # h needs 24 anywhere at 1 h.  a24 has just written its first checkpoint: evicting it
    # loses nothing but its restart, while b16 and c8 have not checkpointed yet (and are still
    # protected until they have).  Formerly the youngest were taken (c8 and b16), which threw
    # away 0.99 h x 16 + 0.98 h x 8 GPU-hours of work for nothing.
    wl = workload(job(gpus=24, hours=10, name="a24"),
                  job(gpus=16, hours=10, submit_h=0.01, name="b16"),
                  job(gpus=8, hours=10, submit_h=0.02, name="c8"),
                  job(gpus=24, hours=1, submit_h=1, priority=10, name="h"))
    e = run_engine(small_plan(6), wl, policy="default", until_h=1.5)
    assert preempted(e) == {"a24": 1}
    assert by_name(e)["h"].first_start == 1 * HOUR
    assert by_name(e)["b16"].state == RUNNING and by_name(e)["c8"].state == RUNNING


def test_pruning_drops_the_largest_unnecessary_victim_first():
    # 6 nodes: c16 (priority 0) on nodes 0-1, b8 (0) on node 2, p8 (5) on node 3, p4 (5) and
    # a4 (0) share node 4, q8 (5) on node 5; a4 is the youngest, c16 the oldest.
    # h needs 20 GPUs.  Cheapest first: a4 (4), b8 (12), c16 (28 >= 20).  Dropping the largest
    # unnecessary one first removes b8 (28 - 8 = 20 still enough), after which a4 is needed:
    # {a4, c16} frees 20 GPUs, where dropping the smallest first would evict {b8, c16} (24).
    wl = workload(job(gpus=16, hours=10, name="c16"),
                  job(gpus=8, hours=10, submit_h=0.01, name="b8"),
                  job(gpus=8, hours=10, priority=5, submit_h=0.02, name="p8"),
                  job(gpus=4, hours=10, priority=5, submit_h=0.03, name="p4"),
                  job(gpus=4, hours=10, submit_h=0.04, name="a4"),
                  job(gpus=8, hours=10, priority=5, submit_h=0.05, name="q8"),
                  job(gpus=20, hours=1, submit_h=1, priority=10, name="h"))
    e = run_engine(small_plan(6), wl, policy="default", until_h=1.5)
    g = by_name(e)
    assert [nodes(g[n]) for n in ("c16", "b8", "p8", "p4", "a4", "q8")] == [
        [0, 1], [2], [3], [4], [4], [5]]
    assert preempted(e) == {"a4": 1, "c16": 1}
    assert g["h"].first_start == 1 * HOUR
    assert nodes(g["h"]) == [0, 1, 4] and g["h"].placement.counts.tolist() == [8, 8, 4]
    assert g["b8"].state == RUNNING


def test_a_borrowing_gang_is_evicted_before_one_of_the_same_priority_that_loses_as_much():
    # quotas a, b: 16 each.  bW (16, within b's quota), bB (8, beyond it: borrowed), a1 (8,
    # within a's quota), all started together: at 1 h each has just checkpointed and would
    # lose the same.  h (8, priority 10, another tenant) takes the borrowed GPUs
    tenants = (Tenant("a", 16), Tenant("b", 16))
    wl = workload(job(gpus=16, hours=10, tenant="b", name="bW"),
                  job(gpus=8, hours=10, tenant="b", name="bB"),
                  job(gpus=8, hours=10, tenant="a", name="a1"),
                  job(gpus=8, hours=1, tenant="ops", submit_h=1, priority=10, name="h"),
                  tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="default", until_h=1.5)
    assert preempted(e) == {"bB": 1}
    assert by_name(e)["h"].first_start == 1 * HOUR


def test_free_gpus_on_a_drained_node_do_not_count_toward_the_room_made():
    # v1 node 0, v2 node 1 (priority 0), m node 2 (priority 5); node 3 is drained with its 8
    # GPUs free.  h (16) needs both v1 and v2 gone: v2 plus the drained node would not do.
    wl = workload(job(gpus=8, hours=10, name="v1"),
                  job(gpus=8, hours=10, submit_h=0.01, name="v2"),
                  job(gpus=8, hours=10, priority=5, submit_h=0.02, name="m"),
                  job(gpus=16, hours=1, submit_h=1, priority=10, name="h"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=0.05)
    g = by_name(e)
    assert [nodes(g[n]) for n in ("v1", "v2", "m")] == [[0], [1], [2]]
    e.command("drain_node", node=3)
    e.run_until(1.5 * HOUR)
    assert preempted(e) == {"v1": 1, "v2": 1}
    assert g["h"].first_start == 1 * HOUR and nodes(g["h"]) == [0, 1]


def test_the_free_gpus_of_a_pod_count_toward_a_pod_affine_gang():
    # k (16, priority 20) fills pod 0; v (8, priority 0) node 2; node 3 is free.  h (16, pod
    # affinity): pod 1's free node plus v's is enough, so only v is evicted
    wl = workload(job(gpus=16, hours=10, priority=20, name="k"),
                  job(gpus=8, hours=10, submit_h=0.01, name="v"),
                  job(gpus=16, hours=1, submit_h=1, priority=10, affinity="pod", name="h"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=1.5)
    g = by_name(e)
    assert nodes(g["k"]) == [0, 1] and nodes(g["v"]) == [2]
    assert preempted(e) == {"v": 1}
    assert g["h"].first_start == 1 * HOUR and nodes(g["h"]) == [2, 3]


# ------------------------------------------------------------------ several accelerator models
NVIDIA, AMD = Requirement(vendors=("NVIDIA",)), Requirement(vendors=("AMD",))


def two_model_plan():
    """2 H100 nodes (0, 1) and 2 MI300X nodes (2, 3); a gang accepting both tries the
    MI300X first (more BF16 FLOP/s)."""
    return small_plan(groups=(NodeGroup("H100-SXM", 2), NodeGroup("MI300X", 2)))


def test_only_free_gpus_of_the_gangs_model_count_in_a_pod_of_two_models():
    # H100 nodes 0-2, MI300X node 3: pod 1 is H100 node 2 (v, priority 0) and the idle
    # MI300X node 3.  h (8 GPUs, H100 only, pod affinity) cannot use the MI300X's 8 free GPUs:
    # v must go
    plan = small_plan(groups=(NodeGroup("H100-SXM", 3), NodeGroup("MI300X", 1)))
    wl = workload(job(gpus=16, hours=10, priority=20, requirement=NVIDIA, name="k"),
                  job(gpus=8, hours=10, requirement=NVIDIA, submit_h=0.01, name="v"),
                  job(gpus=8, hours=1, submit_h=1, priority=10, requirement=NVIDIA,
                      affinity="pod", name="h"))
    e = run_engine(plan, wl, policy="default", until_h=1.5)
    g = by_name(e)
    assert nodes(g["k"]) == [0, 1] and nodes(g["v"]) == [2]
    assert preempted(e) == {"v": 1}
    assert g["h"].first_start == 1 * HOUR and nodes(g["h"]) == [2]


def test_a_gang_accepting_two_models_preempts_on_the_second_when_the_first_has_no_victim():
    # the MI300X nodes hold a priority-20 gang only; the H100 nodes a priority-0 one
    plan = two_model_plan()
    wl = workload(job(gpus=16, hours=10, priority=20, requirement=AMD, name="kA"),
                  job(gpus=16, hours=10, requirement=NVIDIA, name="l"),
                  job(gpus=16, hours=1, submit_h=1, priority=10, name="h"))
    e = run_engine(plan, wl, policy="default", until_h=1.5)
    h = by_name(e)["h"]
    assert preempted(e) == {"l": 1}
    assert h.first_start == 1 * HOUR and plan.models[h.model].name == "H100-SXM"


def test_a_gang_accepting_two_models_preempts_on_the_second_when_the_first_has_too_few():
    # on the MI300X a priority-0 gang of 8 beside a priority-20 one: evicting it is not enough
    plan = two_model_plan()
    wl = workload(job(gpus=8, hours=10, priority=20, requirement=AMD, name="kA"),
                  job(gpus=8, hours=10, requirement=AMD, submit_h=0.01, name="lA"),
                  job(gpus=16, hours=10, requirement=NVIDIA, submit_h=0.02, name="l"),
                  job(gpus=16, hours=1, submit_h=1, priority=10, name="h"))
    e = run_engine(plan, wl, policy="default", until_h=1.5)
    h = by_name(e)["h"]
    assert plan.models[by_name(e)["lA"].model].name == "MI300X"
    assert preempted(e) == {"l": 1}
    assert h.first_start == 1 * HOUR and plan.models[h.model].name == "H100-SXM"


# ------------------------------------------------------------------ trial placement
def fragmented_pod(extra=()):
    """Pod 0 with 8 GPUs free in total but no whole node once the cheapest victim is gone.

    t=0: k0 (4, priority 20) -> node 0; f (4, 1 h) -> node 0 (the fullest that fits);
    k1 (4, priority 20) -> node 1; v (4, priority 0) -> node 1.  f ends at about 1 h, so from
    then node 0 has 4 free GPUs and node 1 none.  k0 ends at 3 h.
    """
    return workload(job(gpus=4, hours=3, priority=20, name="k0"),
                    job(gpus=4, hours=1, submit_h=0.001, name="f"),
                    job(gpus=4, hours=10, priority=20, submit_h=0.002, name="k1"),
                    job(gpus=4, hours=10, submit_h=0.003, name="v"),
                    *extra)


def test_nobody_is_evicted_for_a_gang_that_the_eviction_would_not_let_start():
    # h (8 GPUs, one whole node) arrives at 1.5 h.  4 free + v's 4 = 8, but evicting v leaves
    # two half-free nodes: h could still not start, so v keeps running and h waits for k0.
    wl = fragmented_pod((job(gpus=8, hours=1, submit_h=1.5, priority=10, name="h"),))
    e = run_engine(small_plan(2), wl, policy="default", until_h=2.5)
    g = by_name(e)
    assert nodes(g["k0"]) == [0] and nodes(g["f"]) == [0]
    assert nodes(g["k1"]) == [1] and nodes(g["v"]) == [1]
    assert g["f"].state == DONE
    assert preempted(e) == {}
    assert e.counters["preemptions"] == 0
    assert g["h"].state == QUEUED and g["v"].state == RUNNING
    e.run_until(4 * HOUR)
    assert g["h"].first_start == pytest.approx(3 * HOUR)  # when k0 frees node 0
    assert nodes(g["h"]) == [0]
    assert preempted(e) == {}


def test_a_gang_blocked_only_by_fragmentation_evicts_a_lower_priority_gang():
    # node 0: k0 (4, priority 20) and 4 free GPUs; node 1: v (4, priority 0) and 4 free.  h
    # (8 GPUs, priority 10) sees 8 free GPUs but no whole node; evicting v frees node 1, so h
    # should start at 1.5 h instead of waiting until 10 h
    wl = workload(job(gpus=4, hours=10, priority=20, name="k0"),
                  job(gpus=4, hours=1, submit_h=0.001, name="f0"),
                  job(gpus=4, hours=10, submit_h=0.002, name="v"),
                  job(gpus=4, hours=1, submit_h=0.003, name="f1"),
                  job(gpus=8, hours=1, submit_h=1.5, priority=10, name="h"))
    e = run_engine(small_plan(2), wl, policy="default", until_h=1.4)
    g = by_name(e)
    assert nodes(g["k0"]) == [0] and nodes(g["v"]) == [1]
    e.run_until(2 * HOUR)
    assert preempted(e) == {"v": 1}
    assert g["h"].first_start == pytest.approx(1.5 * HOUR) and nodes(g["h"]) == [1]
    # and v restarts at once on the four GPUs left beside k0
    assert g["v"].state == "running" and nodes(g["v"]) == [0]


def test_a_pod_affine_gang_passes_over_a_cheaper_victim_set_that_leaves_no_room_in_its_pod():
    # Pod 0 as in fragmented_pod; pod 1: x (8, priority 20) on node 2, w (8, priority 1) on
    # node 3.  h (8 GPUs, pod affinity) at 1.5 h: pod 0's set {v} is cheaper (priority 0,
    # 4 GPUs) and adds up to 8 GPUs, but leaves no whole node; pod 1's {w} (priority 1) does.
    wl = fragmented_pod((job(gpus=8, hours=10, priority=20, submit_h=0.004, name="x"),
                         job(gpus=8, hours=10, priority=1, submit_h=0.005, name="w"),
                         job(gpus=8, hours=1, submit_h=1.5, priority=10, affinity="pod",
                             name="h")))
    e = run_engine(small_plan(4), wl, policy="default", until_h=2)
    g = by_name(e)
    assert nodes(g["v"]) == [1] and nodes(g["x"]) == [2] and nodes(g["w"]) == [3]
    assert preempted(e) == {"w": 1}
    assert g["h"].first_start == pytest.approx(1.5 * HOUR) and nodes(g["h"]) == [3]
    assert g["v"].state == RUNNING and g["w"].state == QUEUED


def test_a_pod_affine_gang_takes_the_cheapest_victims_across_pods_rather_than_a_whole_pod():
    # l1 (node 0) and l2 (node 2) are the cheapest (priority 0) but sit in different pods;
    # h (16 GPUs, pod affinity) would need a whole pod: l1 + m1 (pod 0) or l2 + m2 (pod 1).
    # The default policy preempts nobody to make a placement compact: h takes l1 and l2 and
    # starts across the two pods.  (Formerly it took l2 and m2 for a compact placement, and
    # m2, priority 5, then evicted l1 in turn: three gangs preempted instead of two, one
    # of them of priority 5; tests/core/test_preemption_bounds.py keeps that for a compact
    # policy, without the cascade in the same instant.)
    wl = workload(job(gpus=8, hours=10, name="l1"),
                  job(gpus=8, hours=10, priority=5, name="m1", submit_h=0.01),
                  job(gpus=8, hours=10, name="l2", submit_h=0.02),
                  job(gpus=8, hours=10, priority=5, name="m2", submit_h=0.03),
                  job(gpus=16, hours=1, submit_h=1.5, priority=10, affinity="pod", name="h"))
    e = run_engine(small_plan(4), wl, policy="default", until_h=0.05)
    g = by_name(e)
    assert [nodes(g[n]) for n in ("l1", "m1", "l2", "m2")] == [[0], [1], [2], [3]]
    e.run_until(2 * HOUR)
    assert sorted(evicted_in_order(e)) == ["l1", "l2"]
    assert preempted(e) == {"l2": 1, "l1": 1}
    assert g["h"].first_start == pytest.approx(1.5 * HOUR) and nodes(g["h"]) == [0, 2]
    assert g["m1"].state == RUNNING and g["m2"].state == RUNNING
    assert g["l1"].state == QUEUED and g["l2"].state == QUEUED


# ------------------------------------------------------------------ the exemption
def guard_run(h_submit_s: float, *extra):
    """low (32 GPUs, priority 0) fills 4 nodes from t=0; h (16, priority 10) arrives later."""
    wl = workload(job(gpus=32, hours=10, name="low"),
                  at(h_submit_s, job(gpus=16, hours=1, priority=10, name="h")), *extra)
    return run_engine(small_plan(4), wl, policy="default", until_h=2)


def test_a_gang_is_not_preempted_before_its_exemption_ends():
    e = guard_run(EXEMPT_S - 1)
    g = by_name(e)
    assert preempted(e) == {}
    assert g["h"].state == QUEUED and g["low"].state == RUNNING


def test_a_gang_may_be_preempted_once_its_exemption_ends():
    e = guard_run(EXEMPT_S)
    assert preempted(e) == {"low": 1}
    assert by_name(e)["h"].first_start == EXEMPT_S


def test_a_gang_spared_by_its_exemption_is_preempted_at_the_next_pass_after_it():
    # h arrives at 5 min (low is protected); nothing happens until a job arrives at 35 min,
    # whose scheduling pass lets h evict low
    late = EXEMPT_S + 300.0
    e = guard_run(300.0, at(late, job(gpus=8, hours=1, name="late")))
    g = by_name(e)
    assert preempted(e) == {"low": 1}
    assert g["h"].first_start == late
    assert g["late"].first_start == late  # beside h, in what low left


def test_the_guard_counts_from_the_latest_restart_not_the_first_start():
    # low is preempted at 1 h by h1 (16 GPUs, 1 h) and restarts at 2 h when h1 ends; h2
    # arriving 5 min after that restart may not evict it again
    wl = workload(job(gpus=32, hours=10, name="low"),
                  job(gpus=16, hours=1, submit_h=1, priority=10, name="h1"),
                  at(2 * HOUR + 300.0, job(gpus=16, hours=1, priority=10, name="h2")))
    e = run_engine(small_plan(4), wl, policy="default", until_h=2.5)
    g = by_name(e)
    assert g["h1"].first_start == 1 * HOUR
    assert preempted(e) == {"low": 1}
    assert g["low"].state == RUNNING and g["h2"].state == QUEUED


# ------------------------------------------------------------------ borrowed quota
def test_reclaiming_quota_evicts_the_borrowing_gang_not_the_tenants_guaranteed_one():
    # quotas a: 16, b: 16 on 32 GPUs.  b1 (16) is within b's quota; b2 (8) starts beyond it
    # (borrowed); a1 (8) is within a's.  a2 (8) at 1 h is within a's quota (8 + 8 <= 16) and
    # finds no GPU free: it reclaims b's borrowed 8 GPUs, and only those.
    tenants = (Tenant("a", 16), Tenant("b", 16))
    wl = workload(job(gpus=16, hours=10, tenant="b", name="b1"),
                  job(gpus=8, hours=10, tenant="b", submit_h=0.01, name="b2"),
                  job(gpus=8, hours=10, tenant="a", submit_h=0.02, name="a1"),
                  job(gpus=8, hours=1, tenant="a", submit_h=1, name="a2"),
                  tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="default", until_h=1.5)
    g = by_name(e)
    assert preempted(e) == {"b2": 1}
    assert g["a2"].first_start == 1 * HOUR
    assert nodes(g["a2"]) == nodes(g["b2"])  # b2's last placement is where a2 went
    assert g["b1"].state == RUNNING and g["a1"].state == RUNNING


def test_a_gang_within_its_own_tenants_quota_is_not_reclaimed():
    # quotas add up to more than the cluster: b's 32 GPUs are all within its quota, so a's
    # job, though within a's quota, has no borrower to evict and waits
    tenants = (Tenant("a", 16), Tenant("b", 32))
    wl = workload(job(gpus=32, hours=10, tenant="b", name="b1"),
                  job(gpus=16, hours=1, tenant="a", submit_h=1, name="a1"),
                  tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="default", until_h=2)
    assert preempted(e) == {}
    assert by_name(e)["a1"].state == QUEUED


def test_reclaiming_takes_only_borrowed_gpus_even_when_they_are_too_few():
    # quotas a, b, c: 16 each on 32 GPUs.  b1 (16) and c1 (8) are within their quotas, b2 (8)
    # is borrowed.  a1 (16, within a's quota) would need b2 and one more gang: it may take
    # only borrowed GPUs, so it waits and nobody is evicted
    tenants = (Tenant("a", 16), Tenant("b", 16), Tenant("c", 16))
    wl = workload(job(gpus=16, hours=10, tenant="b", name="b1"),
                  job(gpus=8, hours=10, tenant="b", submit_h=0.01, name="b2"),
                  job(gpus=8, hours=10, tenant="c", submit_h=0.02, name="c1"),
                  job(gpus=16, hours=1, tenant="a", submit_h=1, name="a1"),
                  tenants=tenants)
    e = run_engine(small_plan(4), wl, policy="default", until_h=2)
    assert preempted(e) == {}
    assert by_name(e)["a1"].state == QUEUED


def test_a_tenant_does_not_reclaim_from_its_own_borrowing_gang():
    # quotas a, b, d: 16 each on 48 GPUs.  aW (16, within a's quota, 1 h), bW (16, within),
    # bB (8, beyond b's quota: borrowed), aB (8, beyond a's: borrowed, younger than bB).
    # dW (16, within d's quota) arrives while all are still exempt (young), so it waits
    # and starts when aW ends.  At 2 h a3 (8) is within a's quota again (aB's 8 + 8 <= 16):
    # it reclaims b's borrowed GPUs; its own tenant's borrower aB, though younger, is no
    # candidate.
    tenants = (Tenant("a", 16), Tenant("b", 16), Tenant("d", 16))
    wl = workload(job(gpus=16, hours=1, tenant="a", name="aW"),
                  job(gpus=16, hours=10, tenant="b", submit_h=0.01, name="bW"),
                  job(gpus=8, hours=10, tenant="b", submit_h=0.02, name="bB"),
                  job(gpus=8, hours=10, tenant="a", submit_h=0.03, name="aB"),
                  job(gpus=16, hours=10, tenant="d", submit_h=0.05, name="dW"),
                  job(gpus=8, hours=1, tenant="a", submit_h=2, name="a3"),
                  tenants=tenants)
    e = run_engine(small_plan(6), wl, policy="default", until_h=2.5)
    g = by_name(e)
    assert g["dW"].first_start == pytest.approx(1 * HOUR)
    assert preempted(e) == {"bB": 1}
    assert g["a3"].first_start == 2 * HOUR
    assert g["aB"].state == RUNNING
