"""Routing and link loads: routes against networkx, conservation, max-min shares, failures."""

from __future__ import annotations

import doctest
import itertools

import networkx as nx
import numpy as np
import pytest

from scheduler.fabric import (
    build_fabric,
    compute_islands,
    dragonfly_plus,
    fat_tree,
    rail_optimized,
    routing,
)
from scheduler.fabric.routing import Router, max_min_rates
from scheduler.presets import get_preset

SMALL = {
    "fat-tree-4": fat_tree(4),
    "fat-tree-8-3pods": fat_tree(8, pods=3),
    "fat-tree-8-oversub": fat_tree(8, oversubscription=3.0),
    "islands-2pods": compute_islands(2, radix=8, oversubscription=3.0),
    "rail-2tier": rail_optimized(2, nodes_per_su=4, gpus_per_node=4, radix=8, nodes=7),
    "rail-3tier": rail_optimized(3, nodes_per_su=4, gpus_per_node=2, radix=8, su_per_group=2),
    "dragonfly-4": dragonfly_plus(4),
    "dragonfly-8-3groups": dragonfly_plus(8, groups=3),
    "islands-dragonfly": compute_islands(4, radix=8, oversubscription=3.0, join="dragonfly+"),
}


def _sample_pairs(n: int, count: int, seed: int = 0):
    if n * (n - 1) <= count:
        return [(s, d) for s in range(n) for d in range(n) if s != d]
    rng = np.random.default_rng(seed)
    pairs = set()
    while len(pairs) < count:
        s, d = (int(v) for v in rng.integers(n, size=2))
        if s != d:
            pairs.add((s, d))
    return sorted(pairs)


def _directed_switch_hops(f, route) -> set:
    a, b = f.link_a[route.link], f.link_b[route.link]
    return {(int(u), int(v)) if d == 0 else (int(v), int(u))
            for u, v, d in zip(a, b, route.direction, strict=True)}


def _reference_ring(jobs, gpn):
    """Ring flows written out plainly: rank r of each node to rank r of the next node."""
    flows = []
    for j, gpus in enumerate(jobs):
        nodes: dict[int, list[int]] = {}
        for g in sorted(int(v) for v in gpus):
            nodes.setdefault(g // gpn, []).append(g)
        order = sorted(nodes)
        for r in range(gpn):
            ring = [nodes[n][r] for n in order if len(nodes[n]) > r]
            if len(ring) > 1:
                flows += [(j, ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring))]
    return flows


def _route_sum(router, flows_with_rate) -> np.ndarray:
    """Per-link loads from explicit flows, each routed on its own with Router.route."""
    load = np.zeros((router.fabric.link_a.size, 2))
    for s, d, rate in flows_with_rate:
        r = router.route(s, d)
        np.add.at(load, (r.link, r.direction), rate * r.fraction)
    return load


def _networkx_loads(f, flows_with_rate) -> dict:
    """Load per directed switch pair from networkx alone: each flow spread evenly over all its
    shortest physical paths (parallel links count as separate paths), by path counting.

    Paths from s to d through the directed edge u -> v: sigma_s(u) x links(u, v) x
    sigma_d(v), where sigma_x(y) counts shortest x-y paths and the edge lies on one iff
    dist_s(u) + 1 + dist_d(v) = dist_s(d) (Brandes' betweenness construction).
    """
    g = f.graph()
    sigma, dist = {}, {}

    def counts(src):
        if src not in sigma:
            d = nx.single_source_shortest_path_length(g, src)
            s_count = {src: 1}
            for node in sorted(d, key=d.get)[1:]:
                s_count[node] = sum(s_count[u] * g[u][node]["count"] for u in g[node]
                                    if d.get(u) == d[node] - 1)
            sigma[src], dist[src] = s_count, d
        return sigma[src], dist[src]

    load: dict = {}
    for s, d, rate in flows_with_rate:
        ss, ds = counts(("gpu", s))
        sd, dd = counts(("gpu", d))
        length, total = ds[("gpu", d)], ss[("gpu", d)]
        for u, v in g.edges():
            if u[0] != "sw" or v[0] != "sw":
                continue
            for a, b in ((u, v), (v, u)):
                if ds[a] + 1 + dd[b] == length:
                    paths = ss[a] * g[a][b]["count"] * sd[b]
                    load[(a[1], b[1])] = load.get((a[1], b[1]), 0.0) + rate * paths / total
    return load


def _loads_by_switch_pair(f, link_load) -> dict:
    """The router's per-link, per-direction loads summed over parallel links."""
    load: dict = {}
    for i, (a, b) in enumerate(zip(f.link_a.tolist(), f.link_b.tolist(), strict=True)):
        for (u, v), value in (((a, b), link_load[i, 0]), ((b, a), link_load[i, 1])):
            if value:
                load[(u, v)] = load.get((u, v), 0.0) + float(value)
    return load


def _random_jobs(n_endpoints, n_jobs, rng, max_size=24):
    perm = rng.permutation(n_endpoints)
    jobs, at = [], 0
    for _ in range(n_jobs):
        size = int(rng.integers(1, max_size))
        if at + size > n_endpoints:
            break
        jobs.append(np.sort(perm[at:at + size]))
        at += size
    return jobs


def test_routing_doctests_pass():
    assert doctest.testmod(routing).failed == 0


# ------------------------------------------------------------------- routes vs networkx


@pytest.mark.parametrize("name", sorted(SMALL))
def test_route_hops_and_links_equal_the_union_of_networkx_shortest_paths(name):
    f = SMALL[name]
    router = Router(f)
    g = f.graph()
    for s, d in _sample_pairs(f.n_endpoints, 60):
        route = router.route(s, d)
        paths = list(nx.all_shortest_paths(g, ("gpu", s), ("gpu", d)))
        assert route.hops == len(paths[0]) - 1
        expected = {(u[1], v[1]) for p in paths for u, v in itertools.pairwise(p)
                    if u[0] == "sw" and v[0] == "sw"}
        assert _directed_switch_hops(f, route) == expected


def test_route_fractions_split_evenly_per_tier_on_a_fat_tree():
    f = fat_tree(4)
    route = Router(f).route(0, 15)  # pod 0 to pod 3
    kind = f.link_kind[route.link]
    for k, members in ((0, 2), (1, 4)):
        for d in (0, 1):
            frac = route.fraction[(kind == k) & (route.direction == d)]
            assert frac.size == members
            assert np.allclose(frac, 1.0 / members)


def test_same_leaf_route_uses_no_switch_link():
    route = Router(fat_tree(4)).route(0, 1)
    assert route.hops == 2 and route.link.size == 0


# ------------------------------------------------------------------------- conservation


@pytest.mark.parametrize("name", ["fat-tree-8-3pods", "islands-2pods", "rail-3tier",
                                  "dragonfly-8-3groups", "islands-dragonfly"])
def test_every_ring_flow_appears_once_on_each_tier_it_crosses(name):
    f = SMALL[name]
    gpn = 4 if "fat" in name or "dragon" in name else 2
    rng = np.random.default_rng(1)
    jobs = _random_jobs(f.n_endpoints, 8, rng)
    demand = rng.uniform(1.0, 5.0, len(jobs))  # far below capacity: every share is 1
    res = Router(f, gpus_per_node=gpn).update(jobs, demand)
    assert np.all(res.job_share == 1.0)
    leaf = f.endpoint_leaf
    router = Router(f)
    block = router._leaf_block
    expected = {}
    for j, s, d in _reference_ring(jobs, gpn):
        if leaf[s] == leaf[d]:
            continue
        expected[0] = expected.get(0, 0.0) + demand[j]
        if block[leaf[s]] != block[leaf[d]]:
            upper = 2 if f.kind == "dragonfly+" or f.params.get("join") == "dragonfly+" else (
                3 if f.kind == "island" else 1)
            expected[upper] = expected.get(upper, 0.0) + demand[j]
    for k in range(4):
        mask = f.link_kind == k
        if k == 2:  # a global link carries the flow once, in either direction
            assert res.link_load_gbps[mask].sum() == pytest.approx(expected.get(k, 0.0))
        else:
            for col in (0, 1):
                assert res.link_load_gbps[mask, col].sum() == pytest.approx(expected.get(k, 0.0))


@pytest.mark.parametrize("name", ["fat-tree-4", "rail-2tier", "dragonfly-4",
                                  "islands-dragonfly"])
def test_ring_loads_equal_the_sum_of_each_flow_routed_alone(name):
    f = SMALL[name]
    rng = np.random.default_rng(2)
    jobs = _random_jobs(f.n_endpoints, 5, rng, max_size=12)
    demand = rng.uniform(1.0, 3.0, len(jobs))
    router = Router(f, gpus_per_node=2)
    res = router.update(jobs, demand)
    flows = [(s, d, demand[j]) for j, s, d in _reference_ring(jobs, 2)]
    assert np.allclose(res.link_load_gbps, _route_sum(router, flows))


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("pattern", ["ring", "all_to_all"])
def test_link_loads_equal_networkx_shortest_path_counting(name, pattern):
    """Cross-model: the router's ECMP loads against networkx, flow by flow, without using
    Router.route.  Demand is far below capacity, so every job keeps share 1."""
    f = SMALL[name]
    gpn = 2
    rng = np.random.default_rng(8)
    jobs = _random_jobs(f.n_endpoints, 5, rng, max_size=12)
    demand = rng.uniform(1.0, 3.0, len(jobs))
    res = Router(f, gpus_per_node=gpn).update(jobs, demand, pattern=pattern)
    assert np.all(res.job_share == 1.0)
    if pattern == "ring":
        flows = [(s, d, demand[j]) for j, s, d in _reference_ring(jobs, gpn)]
    else:
        flows = []
        for j, gpus in enumerate(jobs):
            for s in gpus:
                peers = [d for d in gpus if d // gpn != s // gpn]
                flows += [(int(s), int(d), demand[j] / len(peers)) for d in peers]
    expected = _networkx_loads(f, flows)
    got = _loads_by_switch_pair(f, res.link_load_gbps)
    assert set(got) == {k for k, v in expected.items() if v > 1e-12}
    for pair, value in expected.items():
        assert got.get(pair, 0.0) == pytest.approx(value, rel=1e-9, abs=1e-9), pair


@pytest.mark.parametrize("name,gpn", [("fat-tree-4", 4), ("fat-tree-8-3pods", 3),
                                      ("rail-2tier", 4), ("dragonfly-4", 3),
                                      ("islands-dragonfly", 8)])
def test_all_to_all_equals_every_gpu_pair_routed_alone(name, gpn):
    # gpn=3 or 4 on these fabrics makes nodes straddle leaves (and groups): the closed forms
    # must subtract the pairs inside a node
    f = SMALL[name]
    rng = np.random.default_rng(3)
    jobs = _random_jobs(f.n_endpoints, 4, rng, max_size=16)
    demand = rng.uniform(1.0, 2.0, len(jobs))
    router = Router(f, gpus_per_node=gpn)
    res = router.update(jobs, demand, pattern="all_to_all")
    flows = []
    for j, gpus in enumerate(jobs):
        for s in gpus:
            peers = [d for d in gpus if d // gpn != s // gpn]
            flows += [(int(s), int(d), demand[j] / len(peers)) for d in peers]
    assert np.all(res.job_share == 1.0)
    assert np.allclose(res.link_load_gbps, _route_sum(router, flows))


def test_jobs_inside_one_leaf_load_no_switch_link():
    res = Router(fat_tree(4), gpus_per_node=1).update([np.array([0, 1]), np.array([2, 3])],
                                                      400.0)
    assert np.all(res.link_load_gbps == 0.0)
    assert res.job_share.tolist() == [1.0, 1.0]


def test_one_node_jobs_send_nothing_on_the_fabric():
    res = Router(fat_tree(4), gpus_per_node=8).update([np.arange(8)], 400.0,
                                                      pattern="all_to_all")
    assert np.all(res.link_load_gbps == 0.0) and res.job_share.tolist() == [1.0]


# ------------------------------------------------------------------------------ max-min


def test_two_jobs_on_one_bottleneck_small_one_full_large_one_gets_the_rest():
    cap, d1, d2 = 400.0, 300.0, 120.0  # d1 > C/2 > d2
    rate = max_min_rates(np.array([0, 1]), np.array([0, 0]), np.array([d1, d2]),
                         np.array([cap]), np.array([d1, d2]))
    assert rate.tolist() == pytest.approx([cap - d2, d2])


def test_two_jobs_sharing_a_leaf_with_one_failed_uplink_share_max_min_fairly():
    f = fat_tree(4)  # leaf 0 holds GPUs 0 and 1 and has two uplinks (links 0 and 1)
    failed = np.zeros(f.link_a.size, bool)
    failed[0] = True  # leaf 0 keeps one 400 Gb/s uplink
    d1, d2 = 350.0, 100.0
    res = Router(f, gpus_per_node=1).update([np.array([0, 8]), np.array([1, 12])],
                                            np.array([d1, d2]), failed_links=failed)
    assert res.job_share[1] == pytest.approx(1.0)
    assert res.job_share[0] == pytest.approx((400.0 - d2) / d1)
    assert res.link_load_gbps[1].tolist() == pytest.approx([400.0, 400.0])


def _is_max_min_fair(job, unit, load, cap, demand, rate) -> bool:
    per = load / demand[job]
    used = np.bincount(unit, weights=per * rate[job], minlength=cap.size)
    if np.any(used > cap * (1 + 1e-9) + 1e-9) or np.any(rate > demand * (1 + 1e-12)):
        return False
    full = used >= cap * (1 - 1e-7)
    for j in np.flatnonzero(rate < demand * (1 - 1e-9)):
        mine = unit[(job == j) & full[unit]]
        # a capped job must cross a full unit on which nobody runs faster than it
        if not any(rate[j] >= rate[job[unit == u]].max() * (1 - 1e-7) for u in mine):
            return False
    return True


@pytest.mark.parametrize("seed", range(20))
def test_max_min_rates_satisfy_the_bottleneck_condition(seed):
    rng = np.random.default_rng(seed)
    n_jobs, n_units = int(rng.integers(2, 30)), int(rng.integers(1, 15))
    rows = int(rng.integers(n_jobs, 4 * n_jobs))
    job = np.concatenate([np.arange(n_jobs), rng.integers(n_jobs, size=rows - n_jobs)])
    unit = rng.integers(n_units, size=rows)
    demand = rng.choice([50.0, 100.0, rng.uniform(1, 400)], size=n_jobs)
    load = demand[job] * rng.uniform(0.1, 3.0, rows)
    cap = rng.uniform(100.0, 2000.0, n_units)
    rate = max_min_rates(job, unit, load, cap, demand)
    assert _is_max_min_fair(job, unit, load, cap, demand, rate)


def test_max_min_rates_give_zero_on_a_dead_unit_and_full_rate_without_rows():
    rate = max_min_rates(np.array([0]), np.array([0]), np.array([10.0]), np.array([0.0]),
                         np.array([10.0, 20.0]))
    assert rate.tolist() == [0.0, 20.0]


@pytest.mark.parametrize("name", ["fat-tree-8-oversub", "islands-2pods", "dragonfly-8-3groups"])
@pytest.mark.parametrize("pattern", ["ring", "all_to_all"])
def test_full_demand_never_overloads_a_link(name, pattern):
    f = SMALL[name]
    jobs = _random_jobs(f.n_endpoints, 12, np.random.default_rng(4), max_size=40)
    for routing_kind in ("minimal", "ugal", "valiant"):
        res = Router(f, gpus_per_node=2, routing=routing_kind).update(jobs, 400.0,
                                                                      pattern=pattern)
        assert np.all(res.utilisation <= 1.0 + 1e-9)
        assert np.all((res.job_share > 0) & (res.job_share <= 1.0))
        assert res.job_rate_gbps == pytest.approx(400.0 * res.job_share)


# ------------------------------------------------------------------- oversubscription


@pytest.mark.parametrize("radix,ratio", [(12, 2.0), (16, 3.0)])
def test_cross_pod_share_falls_by_the_island_oversubscription(radix, ratio):
    # radix 12 gives exactly 8 down / 4 up per spine at 1:2 (radix 8 gives 5:3, 16 gives
    # 11:5), radix 16 exactly 12:4 at 1:3
    shares = {}
    for r in (1.0, ratio):
        island = build_fabric("island", radix=radix, oversubscription=r)
        per = island.params["island_endpoints"]
        f = build_fabric("island", endpoints=2 * per, radix=radix, oversubscription=r)
        # every job: one node in island 0, its twin in island 1: all traffic crosses
        jobs = [np.array([2 * i, 2 * i + 1, per + 2 * i, per + 2 * i + 1])
                for i in range(per // 2)]
        res = Router(f, gpus_per_node=2).update(jobs, f.port_gbps)
        shares[r] = res.job_share
    assert shares[1.0] == pytest.approx(1.0)
    assert shares[ratio] == pytest.approx(1.0 / ratio, rel=0.05)


# ----------------------------------------------------------------------------- failures


def test_failing_one_leaf_uplink_moves_its_load_to_the_other():
    f = fat_tree(4)
    router = Router(f, gpus_per_node=1)
    jobs = [np.array([0, 8]), np.array([1, 12])]
    before = router.update(jobs, 50.0)
    failed = np.zeros(f.link_a.size, bool)
    failed[0] = True
    after = router.update(jobs, 50.0, failed_links=failed)
    assert before.link_load_gbps[[0, 1], 0].tolist() == [50.0, 50.0]
    assert after.link_load_gbps[0].tolist() == [0.0, 0.0]
    assert after.link_capacity_gbps[0] == 0.0
    assert after.link_load_gbps[1].tolist() == [100.0, 100.0]
    # the cached capacity state is rebuilt when the failures clear
    assert np.array_equal(router.update(jobs, 50.0).link_load_gbps, before.link_load_gbps)


def test_a_failed_spine_removes_all_its_links_and_the_other_spine_takes_the_load():
    f = fat_tree(4)
    spine = 8  # first spine of pod 0
    failed = np.zeros(f.n_switches(), bool)
    failed[spine] = True
    res = Router(f, gpus_per_node=1).update([np.array([0, 8]), np.array([2, 12])], 50.0,
                                            failed_switches=failed)
    own = (f.link_a == spine) | (f.link_b == spine)
    assert own.sum() == 4
    assert np.all(res.link_capacity_gbps[own] == 0.0)
    assert np.all(res.link_load_gbps[own] == 0.0)
    other = (f.link_b == 9) & (f.link_kind == 0)
    assert res.link_load_gbps[other, 0].tolist() == [50.0, 50.0]
    assert res.job_share.tolist() == [1.0, 1.0]


def test_a_failed_leaf_cuts_its_jobs_off():
    f = fat_tree(4)
    failed = np.zeros(f.n_switches(), bool)
    failed[0] = True
    res = Router(f, gpus_per_node=1).update([np.array([0, 8]), np.array([4, 12])], 50.0,
                                            failed_switches=failed)
    assert res.job_share.tolist() == [0.0, 1.0]


def test_a_leaf_with_every_uplink_failed_gives_its_cross_leaf_jobs_share_zero():
    f = dragonfly_plus(4)
    failed = (f.link_a == 0) & (f.link_kind == 0)
    res = Router(f, gpus_per_node=1).update([np.array([0, 2]), np.array([4, 6])], 50.0,
                                            failed_links=failed)
    assert res.job_share.tolist() == [0.0, 1.0]


# --------------------------------------------------------------------------- dragonfly+


def test_ugal_beats_minimal_routing_on_adversarial_group_to_group_traffic():
    f = dragonfly_plus(8, groups=5)  # 4 global links between every pair of groups
    per_group = 16
    # every job: one leaf (4 GPUs) of group 0 and the same leaf of group 1
    jobs = [np.concatenate([np.arange(4 * i, 4 * i + 4),
                            per_group + np.arange(4 * i, 4 * i + 4)]) for i in range(4)]
    shares = {r: Router(f, gpus_per_node=4, routing=r).update(jobs, 400.0).job_share
              for r in ("minimal", "ugal", "valiant")}
    # minimal: 16 GPUs x 400 Gb/s through 4 links of 400 Gb/s.  UGAL gains less than the
    # global links alone would allow: this builder lands group 1's four links to group 0 on
    # one spine, so that spine's leaf downlinks become the next bottleneck
    assert shares["minimal"] == pytest.approx(0.25)
    assert np.all(shares["ugal"] > 1.5 * shares["minimal"])
    assert np.all(shares["valiant"] > shares["minimal"])


def test_ugal_routes_a_light_load_minimally():
    f = dragonfly_plus(8, groups=5)
    jobs = [np.array([0, 16])]
    minimal = Router(f, gpus_per_node=1).update(jobs, 100.0)
    ugal = Router(f, gpus_per_node=1, routing="ugal").update(jobs, 100.0)
    assert np.array_equal(minimal.link_load_gbps, ugal.link_load_gbps)


def test_valiant_spreads_over_the_intermediate_groups_global_links():
    f = dragonfly_plus(8, groups=5)
    res = Router(f, gpus_per_node=1, routing="valiant").update([np.array([0, 16])], 90.0)
    glob = f.link_kind == 2
    # each direction: 90 Gb/s over two global hops
    assert res.link_load_gbps[glob].sum() == pytest.approx(2 * 2 * 90.0)
    groups = f.switch_pod[f.link_a[glob]], f.switch_pod[f.link_b[glob]]
    touched = {tuple(sorted(p)) for p, load in zip(zip(*groups, strict=True),
                                                   res.link_load_gbps[glob].sum(1),
                                                   strict=True) if load > 0}
    assert touched == {(0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)}


# ---------------------------------------------------------------------- input checking


def test_router_rejects_bad_arguments():
    f = fat_tree(4)
    with pytest.raises(ValueError, match="routing"):
        Router(f, routing="adaptive")
    router = Router(f)
    with pytest.raises(ValueError, match="pattern"):
        router.update([np.arange(4)], 10.0, pattern="tree")
    with pytest.raises(ValueError, match="demand"):
        router.update([np.arange(4)], 500.0)
    with pytest.raises(ValueError, match="GPU ids"):
        router.update([np.array([0, 16])], 10.0)
    with pytest.raises(ValueError, match="twice"):
        router.update([np.array([3, 1, 3])], 10.0)
    with pytest.raises(ValueError, match="failed_links"):
        router.update([np.arange(4)], 10.0, failed_links=np.zeros(3, bool))


def test_no_jobs_single_gpu_jobs_and_idle_jobs_get_full_share():
    for f in (fat_tree(4), dragonfly_plus(4)):
        router = Router(f, gpus_per_node=1, routing="ugal")
        assert router.update([], 100.0).job_share.size == 0
        res = router.update([np.array([3]), np.array([0, 9]), np.array([], int)],
                            np.array([100.0, 0.0, 5.0]), pattern="all_to_all")
        assert res.job_share.tolist() == [1.0, 1.0, 1.0]
        assert np.all(res.link_load_gbps == 0.0)


def test_demand_needs_one_value_or_one_per_job():
    with pytest.raises(ValueError, match="one value or 2"):
        Router(fat_tree(4)).update([np.arange(2), np.arange(2, 4)], np.array([1.0, 2.0, 3.0]))


def test_unsorted_job_ids_give_the_same_loads():
    router = Router(fat_tree(8, pods=3), gpus_per_node=2)
    jobs = _random_jobs(router.fabric.n_endpoints, 6, np.random.default_rng(5))
    rng = np.random.default_rng(6)
    shuffled = [rng.permutation(j) for j in jobs]
    assert np.array_equal(router.update(jobs, 30.0).link_load_gbps,
                          router.update(shuffled, 30.0).link_load_gbps)


# ---------------------------------------------------------------------------------- scale


def test_hyperscale_update_with_1000_jobs_is_consistent():
    """Functional check at scale (the time it takes is measured by bench/routing.py)."""
    plan = get_preset("hyperscale-100k").plan()
    rng = np.random.default_rng(7)
    nodes = rng.permutation(np.flatnonzero(plan.node_gpus == 8))
    cuts = np.sort(rng.choice(np.arange(1, 8000), 999, replace=False))
    jobs = [plan.node_first_gpu[np.sort(n)][:, None] + np.arange(8)
            for n in np.split(nodes[:8000], cuts)]
    router = Router(plan.fabric)
    router.update([j.ravel() for j in jobs], 200.0)
    res = router.update([j.ravel() for j in jobs], 400.0, pattern="all_to_all")
    assert np.all(res.utilisation <= 1.0 + 1e-9)
    assert res.tier_utilisation["island-uplink"]["max"] == pytest.approx(1.0)
    assert set(res.tier_utilisation) == {"leaf-spine", "island-uplink"}
    assert 0.0 < res.job_share.min() < 1.0


def test_a_strided_ring_joins_nodes_that_far_apart_in_interleaved_rings():
    from scheduler.fabric.flows import _ring_flows
    job, gpu = np.zeros(32, dtype=np.int64), np.arange(32)
    _, src, dst = _ring_flows(job, gpu, 8, np.array([2]))
    pairs = sorted({(int(a) // 8, int(b) // 8) for a, b in zip(src, dst, strict=True)})
    assert pairs == [(0, 2), (1, 3), (2, 0), (3, 1)]  # two rings of two nodes, as DP groups
