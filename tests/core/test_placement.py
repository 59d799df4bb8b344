"""Gang placement on literal clusters: span, best fit, host resources, models, all or nothing."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.hardware.cluster import NodeGroup
from scheduler.model.state import ClusterState, Placement
from scheduler.scheduling.placement import STRATEGIES, Placer
from scheduler.workload.jobs import Requirement
from tests.core.factories import (
    HOUR,
    job,
    occupy,
    pods_spanned,
    request,
    run_engine,
    small_plan,
    workload,
)


def state_of(nodes=16, **kw) -> ClusterState:
    return ClusterState(small_plan(nodes, **kw))


def placer(state, strategy="topology", seed=0) -> Placer:
    return Placer(state, strategy, np.random.default_rng(seed))


def columns(state: ClusterState) -> dict:
    return {k: getattr(state, k).copy() for k in (
        "gpu_owner", "node_free", "node_free_cpu", "node_free_ram", "node_free_nic")}


# ------------------------------------------------------------------ topology and best fit
def test_the_radix_8_fat_tree_has_pods_of_two_nodes():
    # the layout the tests below rely on: one leaf per 8-GPU node, two nodes per pod
    s = state_of(16)
    assert s.domain["pod"].tolist() == [p for p in range(8) for _ in range(2)]
    assert s.n_domains["leaf"] == 16


def test_topology_keeps_a_16_gpu_gang_in_one_pod_when_one_has_room():
    s = state_of(16)
    occupy(s, [0])  # pod 0 keeps one free node, pod 1 two
    p = placer(s, "topology").place(request(16))
    assert p.gpus == 16
    assert pods_spanned(s, p) == 1
    assert p.nodes.tolist() == [2, 3]


def test_a_placer_without_a_strategy_is_topology_aware():
    s = state_of(16)
    occupy(s, [0])
    assert Placer(s).strategy == "topology"
    assert Placer(s).place(request(16)).nodes.tolist() == [2, 3]


def test_first_fit_on_the_same_cluster_spans_two_pods():
    s = state_of(16)
    occupy(s, [0])
    p = placer(s, "first-fit").place(request(16))
    assert p.nodes.tolist() == [1, 2]
    assert pods_spanned(s, p) == 2


def test_topology_keeps_a_gang_within_one_rail_leaf_group():
    # rail-optimised, scalable units of 4 nodes: SU 0 has 1 free node, SU 1 has 3
    s = state_of(16, fabric="rail", fabric_kw={"nodes_per_su": 4})
    occupy(s, [0, 1, 2, 4])
    p = placer(s, "topology").place(request(16))
    assert np.unique(s.domain["leaf"][p.nodes]).tolist() == [1]
    assert placer(s, "first-fit").place(request(16)).nodes.tolist() == [3, 5]


def test_best_fit_takes_the_pod_with_fewest_free_nodes_and_leaves_the_whole_pod_whole():
    # radix 16: two pods of 8 nodes; pod 1 has 5 free nodes, pod 0 all 8
    s = state_of(16, fabric_kw={"radix": 16})
    occupy(s, [8, 9, 10])
    p = placer(s, "topology").place(request(32))
    assert set(s.domain["pod"][p.nodes].tolist()) == {1}
    occupy(s, p.nodes, owner=20_000)
    big = placer(s, "topology").place(request(64, affinity="pod"))
    assert big is not None and big.nodes.tolist() == list(range(8))


def test_first_fit_breaks_the_large_block_that_best_fit_keeps():
    s = state_of(16, fabric_kw={"radix": 16})
    occupy(s, [8, 9, 10])
    p = placer(s, "first-fit").place(request(32))
    assert p.nodes.tolist() == [0, 1, 2, 3]
    occupy(s, p.nodes, owner=20_000)
    assert placer(s, "first-fit").place(request(64, affinity="pod")) is None


def test_a_partial_node_gang_goes_to_the_fullest_node_that_fits():
    s = state_of(4)
    occupy(s, [0], 5)  # 3 free
    occupy(s, [1], 2, owner=20_000)  # 6 free
    occupy(s, [2], 4, owner=30_000)  # 4 free
    p = placer(s, "topology")
    assert p.place(request(3)).nodes.tolist() == [0]
    assert p.place(request(4)).nodes.tolist() == [2]
    assert p.place(request(5)).nodes.tolist() == [1]
    assert p.place(request(7)).nodes.tolist() == [3]


def test_a_small_gang_breaks_a_whole_node_in_the_pod_with_fewest_whole_free_nodes():
    # no partly used node: every free node is whole, an equally good fit.  Node 3 is busy, so
    # pod 1 (nodes 2, 3) could no longer hold a two-node gang; the 4-GPU gang breaks node 2
    # there, not node 0 (the lowest-numbered), and every other pod stays whole
    s = state_of(16)
    occupy(s, [3])
    p = placer(s, "topology").place(request(4))
    assert p.nodes.tolist() == [2]


def test_the_remainder_of_a_multi_node_gang_stays_in_the_gangs_pod():
    s = state_of(16)
    occupy(s, [1], 4)  # pod 0: node 0 whole, node 1 half free
    p = placer(s, "topology").place(request(12))
    assert p.nodes.tolist() == [0, 1]
    assert p.counts.tolist() == [8, 4]


def test_topology_prefers_the_gangs_own_pod_for_the_remainder_over_a_fuller_node_elsewhere():
    # a 10-GPU gang: one whole node (node 0, in the pod with fewest whole free nodes) plus 2
    # GPUs.  Node 5 (2 free) is the best fit overall, but node 1 (4 free) shares node 0's pod
    s = state_of(16)
    occupy(s, [1], 4)
    occupy(s, [5], 6, owner=20_000)
    p = placer(s, "topology").place(request(10))
    assert p.nodes.tolist() == [0, 1] and p.counts.tolist() == [8, 2]
    assert pods_spanned(s, p) == 1


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_remainder_of_a_pod_affine_gang_never_leaves_its_pod(strategy):
    # pod 0: node 0 whole, node 1 with 4 free; pod 1: node 2 with 4 free, node 3 full.  A
    # 12-GPU pod-affine gang must take node 0 and put its 4-GPU remainder on node 1
    s = state_of(4)
    occupy(s, [1], 4)
    occupy(s, [2], 4, owner=20_000)
    occupy(s, [3], owner=30_000)
    p = placer(s, strategy).place(request(12, affinity="pod"))
    assert p.nodes.tolist() == [0, 1] and p.counts.tolist() == [8, 4]


def pod_choice(strategy: str, seed: int = 0) -> set[int]:
    """Pods (of 8 nodes, radix 16) holding a 32-GPU pod-affine gang when pod 1 has 5 whole
    free nodes and pod 0 all 8."""
    s = state_of(16, fabric_kw={"radix": 16})
    occupy(s, [8, 9, 10])
    p = placer(s, strategy, seed=seed).place(request(32, affinity="pod"))
    assert pods_spanned(s, p) == 1
    return set(s.domain["pod"][p.nodes].tolist())


def test_topology_gives_a_pod_affine_gang_the_fullest_pod_that_holds_it():
    assert pod_choice("topology") == {1}


def test_first_fit_gives_a_pod_affine_gang_the_lowest_numbered_pod_that_holds_it():
    assert pod_choice("first-fit") == {0}


def test_random_placement_draws_the_pod_of_a_pod_affine_gang():
    assert set().union(*(pod_choice("random", seed=k) for k in range(12))) == {0, 1}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_pod_with_room_for_the_whole_nodes_but_not_the_remainder_is_passed_over(strategy):
    # 12 GPUs, pod affinity: one whole node plus 4 GPUs in the same pod.  Pod 0 has one whole
    # free node and nothing else; pod 1 has two, so the gang goes there
    s = state_of(4)
    occupy(s, [1])
    p = placer(s, strategy).place(request(12, affinity="pod"))
    assert p is not None
    assert sorted(p.nodes.tolist()) == [2, 3] and sorted(p.counts.tolist()) == [4, 8]


def test_a_gang_larger_than_any_pod_fills_the_freest_pods_and_best_fits_the_rest():
    # pods of two: 0, 1 and 2 wholly free, 3 full, 4 and 5 with one free node, 6 and 7 full.
    # A 5-node gang takes pods 0 and 1 whole and its last node from pod 4 (one free node: the
    # best fit; pod 3 has none), leaving pod 2 whole
    s = state_of(16)
    occupy(s, [6, 7, 9, 11, 12, 13, 14, 15])
    p = placer(s, "topology").place(request(40))
    assert p.nodes.tolist() == [0, 1, 2, 3, 8]


def nvl72_state(busy):
    """36 GB200 trays (4 GPUs each) on a rail fabric of 8-tray units: pods {0-15}, {16-31},
    {32-35}; NVLink domains are racks of 18 trays, {0-17} and {18-35}."""
    s = ClusterState(small_plan(36, "GB200", fabric="rail", fabric_kw={"nodes_per_su": 8}))
    assert s.domain["nvlink"].tolist() == [0] * 18 + [1] * 18
    occupy(s, busy)
    return s


def test_on_nvl72_a_gang_takes_the_smallest_nvlink_domain_of_its_pod_that_holds_it():
    # pods 0 and 2 are busy.  In pod 1, rack 0 has 2 free trays (16, 17) and rack 1 has 14:
    # a 2-tray gang takes the small piece of rack 0 and leaves rack 1's 14 trays whole
    s = nvl72_state([*range(16), *range(32, 36)])
    p = placer(s, "topology").place(request(8))
    assert p.nodes.tolist() == [16, 17]


@pytest.mark.parametrize("affinity", ["any", "pod"])
def test_on_nvl72_a_gang_stays_in_one_nvlink_domain_and_then_one_leaf(affinity):
    # as above but tray 16 is busy too: rack 0 keeps one free tray in pod 1, so the gang goes
    # to rack 1, and there to one leaf (the leaves alternate: even trays, odd trays)
    s = nvl72_state([*range(17), *range(32, 36)])
    p = placer(s, "topology").place(request(8, affinity=affinity))
    assert p.nodes.tolist() == [18, 20]
    assert np.unique(s.domain["nvlink"][p.nodes]).size == 1
    assert np.unique(s.domain["leaf"][p.nodes]).size == 1


# ------------------------------------------------------------------ first fit and random
def test_first_fit_takes_the_lowest_numbered_nodes():
    s = state_of(8)
    p = placer(s, "first-fit")
    assert p.place(request(24)).nodes.tolist() == [0, 1, 2]
    occupy(s, [1])
    assert p.place(request(24)).nodes.tolist() == [0, 2, 3]
    assert p.place(request(4)).nodes.tolist() == [0]


def test_random_placement_is_seeded_same_seed_same_nodes():
    s = state_of(16)
    first = placer(s, "random", seed=5).place(request(32))
    again = placer(s, "random", seed=5).place(request(32))
    assert first.nodes.tolist() == again.nodes.tolist()
    others = {tuple(placer(s, "random", seed=k).place(request(32)).nodes.tolist())
              for k in range(10)}
    assert len(others) > 1


def test_first_fit_puts_a_partial_gang_on_the_lowest_numbered_node_not_the_fullest():
    s = state_of(4)
    occupy(s, [2], 4)
    assert placer(s, "first-fit").place(request(4)).nodes.tolist() == [0]
    assert placer(s, "topology").place(request(4)).nodes.tolist() == [2]  # best fit


def test_first_fit_puts_the_remainder_on_the_lowest_numbered_node_even_in_another_pod():
    # node 0 has 4 free, node 1 none: the whole node is node 2 (pod 1), the remainder node 0
    s = state_of(8)
    occupy(s, [0], 4)
    occupy(s, [1], owner=20_000)
    p = placer(s, "first-fit").place(request(10))
    assert p.nodes.tolist() == [2, 0] and p.counts.tolist() == [8, 2]


def test_random_placement_of_a_partial_gang_draws_the_node():
    s = state_of(4)
    nodes = {int(placer(s, "random", seed=k).place(request(4)).nodes[0]) for k in range(12)}
    assert len(nodes) > 1


def test_random_placement_without_a_generator_is_refused():
    with pytest.raises(ValueError, match="Generator"):
        Placer(state_of(4), "random")


def test_an_unknown_strategy_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="first-fit"):
        Placer(state_of(4), "worst-fit")


# ------------------------------------------------------------------ hard constraints
def test_pod_affinity_refuses_a_placement_that_would_span_pods():
    s = state_of(16)
    occupy(s, list(range(0, 16, 2)))  # one free node in every pod
    for strategy in STRATEGIES:
        assert placer(s, strategy).place(request(16, affinity="pod")) is None
    loose = placer(s, "topology").place(request(16, affinity="any"))
    assert loose is not None and pods_spanned(s, loose) == 2


@pytest.mark.parametrize("need", [
    {"cpu_per_gpu": 15.0},       # 8 x 15 = 120 cores > 112
    {"ram_gb_per_gpu": 300.0},   # 8 x 300 = 2400 GB > 2048
    {"nic_gbps_per_gpu": 450.0},  # 450 > 400 Gb/s per GPU
])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_gang_whose_host_needs_exceed_a_node_is_not_placed(need, strategy):
    s = state_of(4)
    assert placer(s, strategy).place(request(8, **need)) is None
    assert placer(s, strategy).place(request(4, **need)) is not None


@pytest.mark.parametrize("exact, over", [
    ({"cpu_per_gpu": 14.0}, {"cpu_per_gpu": 14.0625}),          # 112 cores; 112.5
    ({"ram_gb_per_gpu": 256.0}, {"ram_gb_per_gpu": 256.0625}),  # 2048 GB; 2048.5
    ({"nic_gbps_per_gpu": 400.0}, {"nic_gbps_per_gpu": 400.0625}),  # 3200 Gb/s; 3200.5
])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_gang_that_needs_exactly_a_nodes_host_resources_fits_and_a_hair_more_does_not(
        exact, over, strategy):
    s = state_of(1)
    assert placer(s, strategy).place(request(8, **exact)) is not None
    assert placer(s, strategy).place(request(8, **over)) is None


def test_host_resources_used_by_a_neighbour_push_a_gang_to_another_node():
    s = state_of(4)
    occupy(s, [1, 2, 3], 2)  # nodes 1-3 have 6 free GPUs, node 0 is whole
    s.allocate(1, Placement(np.array([0]), np.array([4]), 0), cpu_per_gpu=20.0,
               ram_gb_per_gpu=0.0, nic_gbps_per_gpu=0.0)  # node 0: 4 GPUs, 32 cores left
    plain = placer(s).place(request(4, cpu_per_gpu=8.0))
    assert plain.nodes.tolist() == [0]  # the fullest node
    hungry = placer(s).place(request(4, cpu_per_gpu=10.0))
    assert hungry.nodes.tolist() == [1]


def test_a_job_accepting_only_amd_lands_on_the_mi300x_nodes():
    plan = small_plan(groups=(NodeGroup("H100-SXM", 4), NodeGroup("MI300X", 4)))
    wl = workload(job(gpus=16, hours=2, requirement=Requirement(vendors=("AMD",))),
                  job(gpus=16, hours=2, requirement=Requirement(vendors=("NVIDIA",))))
    e = run_engine(plan, wl, until_h=0.0)
    amd, nvidia = e.runs
    assert plan.models[amd.model].name == "MI300X"
    assert {plan.models[m].name for m in plan.node_model[amd.placement.nodes]} == {"MI300X"}
    assert {plan.models[m].name for m in plan.node_model[nvidia.placement.nodes]} == {"H100-SXM"}


def test_through_the_engine_a_pod_affine_gang_waits_rather_than_span_pods():
    # first fit: x0 node 0, y (1 h) node 1, x2 node 2; when y ends each pod has one free node
    wl = workload(job(gpus=8, hours=10, name="x0"), job(gpus=8, hours=1, name="y"),
                  job(gpus=8, hours=10, name="x2"),
                  job(gpus=16, hours=1, submit_h=1.5, affinity="pod", name="tight"),
                  job(gpus=16, hours=1, submit_h=2, name="loose"))
    e = run_engine(small_plan(4), wl, policy="backfill", until_h=2.5)
    x0, y, x2, tight, loose = e.runs
    assert [r.placement.nodes.tolist() for r in (x0, y, x2)] == [[0], [1], [2]]
    assert tight.first_start is None
    assert loose.first_start == 2 * HOUR and pods_spanned(e.state, loose.placement) == 2


@pytest.mark.parametrize("need", [{"cpu_per_gpu": 20.0}, {"ram_gb_per_gpu": 300.0}])
def test_through_the_engine_two_gangs_whose_host_needs_exceed_one_node_get_two(need):
    # 4 GPUs x 20 cores = 80 of 112 (x 300 GB = 1200 of 2048): two such gangs cannot share
    wl = workload(job(gpus=4, hours=1, **need), job(gpus=4, hours=1, submit_h=0.01, **need))
    e = run_engine(small_plan(2), wl, until_h=0.05)
    a, b = e.runs
    assert a.placement.nodes.tolist() == [0] and b.placement.nodes.tolist() == [1]


def test_placement_on_a_model_index_never_uses_another_models_nodes():
    plan = small_plan(groups=(NodeGroup("H100-SXM", 4), NodeGroup("MI300X", 4)))
    s = ClusterState(plan)
    for strategy in STRATEGIES:
        p = placer(s, strategy).place(request(32, models=(1,)))
        assert (s.node_model[p.nodes] == 1).all()
        assert placer(s, strategy).place(request(40, models=(1,))) is None


# ------------------------------------------------------------------ all or nothing
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_gang_is_placed_whole_or_not_at_all_and_a_refusal_changes_nothing(strategy):
    s = state_of(4)
    occupy(s, [0], 3)
    before = columns(s)
    assert placer(s, strategy).place(request(30)) is None  # 29 GPUs free
    after = columns(s)
    for k, v in before.items():
        np.testing.assert_array_equal(after[k], v, err_msg=k)
    p = placer(s, strategy).place(request(29))
    assert p.gpus == 29 and int(p.counts.sum()) == 29


def test_allocate_refuses_a_node_without_room_and_changes_nothing():
    s = state_of(2)
    occupy(s, [0], 6)
    before = columns(s)
    with pytest.raises(ValueError, match="too few free GPUs"):
        s.allocate(1, Placement(np.array([1, 0]), np.array([8, 4]), 0), cpu_per_gpu=0.0,
                   ram_gb_per_gpu=0.0, nic_gbps_per_gpu=0.0)
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(s, k), v, err_msg=k)
