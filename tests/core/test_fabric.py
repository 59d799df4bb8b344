"""Fabric builders: counts against closed forms, graph checks on small instances, errors.

The fat-tree and Dragonfly+ closed forms come from the papers that define the topologies;
the rail builder was written to reproduce the DGX SuperPOD RA's tables, so the tests of those
tables are ``test_regression_*``.  Published figures the builders were not written from:
tests/core/test_validation.py.
"""

from __future__ import annotations

import doctest

import networkx as nx
import numpy as np
import pytest

import scheduler.fabric as fabric_pkg
from scheduler.fabric import (
    build_fabric,
    compute_islands,
    dragonfly,
    dragonfly_plus,
    dragonfly_plus_for,
    endpoint_pod,
    fat_tree,
    fat_tree_for,
    fattree,
    islands,
    islands_for,
    nvlink,
    nvlink_domains,
    rail,
    rail_optimized,
    rail_optimized_for,
    topology,
)


def _endpoint_diameter(f) -> int:
    g = f.graph()
    gpus = [("gpu", i) for i in range(f.n_endpoints)]
    best = 0
    for src in gpus:
        dist = nx.single_source_shortest_path_length(g, src)
        best = max(best, max(dist[t] for t in gpus))
    return best


def _switch_ports_used(f) -> np.ndarray:
    used = np.bincount(f.endpoint_leaf, minlength=f.n_switches())
    used += np.bincount(f.link_a, minlength=f.n_switches())
    used += np.bincount(f.link_b, minlength=f.n_switches())
    return used


def _kind_count(f, code: int) -> int:
    return int(np.count_nonzero(f.link_kind == code))


SMALL = [
    fat_tree(4),
    fat_tree(8, pods=3),
    fat_tree(8, oversubscription=3.0),
    fat_tree(4, pods=1),
    dragonfly_plus(4),
    dragonfly_plus(8, groups=3),
    dragonfly_plus(8, groups=1),
    rail_optimized(1, nodes_per_su=4, gpus_per_node=2, radix=8),
    rail_optimized(2, nodes_per_su=4, gpus_per_node=4, radix=8, nodes=7),
    rail_optimized(3, nodes_per_su=4, gpus_per_node=2, radix=8, su_per_group=2),
    compute_islands(3, radix=8, oversubscription=3.0),
    compute_islands(1, radix=8, oversubscription=3.0),
    compute_islands(4, radix=8, oversubscription=3.0, join="dragonfly+"),
]
SMALL_IDS = [f"{f.kind}-{i}" for i, f in enumerate(SMALL)]


# ------------------------------------------------------------------------------ fat-tree


@pytest.mark.parametrize("k", [4, 8, 16, 48])
def test_full_fat_tree_counts_match_al_fares_closed_forms(k):
    f = fat_tree(k)
    s = f.summary()
    assert f.n_endpoints == k**3 // 4
    assert s.switches == {"leaf": k * k // 2, "spine": k * k // 2, "core": k * k // 4}
    assert _kind_count(f, 0) == k**3 // 4
    assert _kind_count(f, 1) == k**3 // 4
    assert s.links == 3 * k**3 // 4
    assert s.transceivers == 2 * s.links
    assert s.diameter == 6
    assert s.bisection_gbps == pytest.approx(400.0 * k**3 / 8)
    assert (_switch_ports_used(f) <= k).all()


def test_oversubscribed_fat_tree_gives_48_down_16_up_at_k64_ratio3():
    f = fat_tree(64, oversubscription=3)
    assert f.params["hosts_per_leaf"] == 48 and f.params["leaf_uplinks"] == 16
    assert f.n_endpoints == 64 * 32 * 48
    assert f.summary().switches == {"leaf": 2048, "spine": 64 * 16, "core": 16 * 32}
    assert f.summary().bisection_gbps == pytest.approx(400.0 * 2048 * 16 / 2)
    assert (_switch_ports_used(f) <= 64).all()


def test_partial_fat_tree_shrinks_the_core_and_keeps_ports_within_radix():
    f = fat_tree(16, pods=5)
    assert f.n_endpoints == 5 * 8 * 8
    # cores per plane: smallest divisor of 8 that is >= ceil(5/2) = 3 -> 4
    assert f.summary().switches["core"] == 8 * 4
    assert (_switch_ports_used(f) <= 16).all()


def test_fat_tree_for_builds_fewest_pods():
    f = fat_tree_for(100, radix=8)
    assert f.params["pods"] == 7 and f.n_endpoints == 112
    assert fat_tree_for(65536).n_endpoints == 65536


@pytest.mark.parametrize("bad", [5, 2, 0, -4, 4.0, True, "8"])
def test_fat_tree_rejects_bad_radix(bad):
    with pytest.raises(ValueError, match="k must"):
        fat_tree(bad)


def test_fat_tree_for_too_large_names_the_maximum():
    with pytest.raises(ValueError, match="at most 128 endpoints"):
        fat_tree_for(129, radix=8)


def test_fat_tree_rejects_too_many_pods_and_undersubscription():
    with pytest.raises(ValueError, match="at most 8 pods"):
        fat_tree(8, pods=9)
    with pytest.raises(ValueError, match="oversubscription"):
        fat_tree(8, oversubscription=0.5)


def test_k4_fat_tree_bisection_equals_networkx_minimum_cut():
    f = fat_tree(4)
    g = nx.DiGraph()
    for u, v, d in f.graph().edges(data=True):
        g.add_edge(u, v, capacity=d["gbps"])
        g.add_edge(v, u, capacity=d["gbps"])
    half = f.n_endpoints // 2
    for i in range(f.n_endpoints):
        if i < half:
            g.add_edge("src", ("gpu", i), capacity=float("inf"))
        else:
            g.add_edge(("gpu", i), "dst", capacity=float("inf"))
    cut, _ = nx.minimum_cut(g, "src", "dst")
    assert cut == pytest.approx(f.summary().bisection_gbps)


# ------------------------------------------------------------------------------ dragonfly+


@pytest.mark.parametrize("r", [4, 8, 16])
def test_full_dragonfly_plus_counts_match_closed_forms(r):
    h = r // 2
    groups = h * h + 1
    f = dragonfly_plus(r)
    s = f.summary()
    assert f.n_endpoints == groups * h * h
    assert s.switches == {"leaf": groups * h, "spine": groups * h, "core": 0}
    assert _kind_count(f, 0) == groups * h * h
    assert _kind_count(f, 2) == groups * (groups - 1) // 2
    assert s.diameter == 5
    assert (_switch_ports_used(f) <= r).all()
    # exactly one global link between every pair of groups
    ga, gb = f.switch_pod[f.link_a[f.link_kind == 2]], f.switch_pod[f.link_b[f.link_kind == 2]]
    pairs = {(min(a, b), max(a, b)) for a, b in zip(ga.tolist(), gb.tolist(), strict=True)}
    assert len(pairs) == groups * (groups - 1) // 2


def test_partial_radix64_dragonfly_plus_spreads_global_ports_evenly():
    f = dragonfly_plus(64, groups=10)
    assert f.n_endpoints == 10 * 1024
    glob = f.link_kind == 2
    ga, gb = f.switch_pod[f.link_a[glob]], f.switch_pod[f.link_b[glob]]
    lo, hi = np.minimum(ga, gb), np.maximum(ga, gb)
    _, per_pair = np.unique(lo * 10 + hi, return_counts=True)
    assert per_pair.size == 45
    assert per_pair.min() >= 1024 // 9 and per_pair.max() - per_pair.min() <= 1
    # each spine uses at most r/2 global ports, each group at most r^2/4
    spine_global = np.bincount(np.concatenate([f.link_a[glob], f.link_b[glob]]),
                               minlength=f.n_switches())
    assert spine_global.max() <= 32
    assert (_switch_ports_used(f) <= 64).all()


def test_dragonfly_plus_group_split_crosses_a_times_g_minus_a_times_m_links():
    f = dragonfly_plus(8, groups=9)  # 16 ports / 8 peers: 2 links per pair, none spare
    glob = f.link_kind == 2
    ga, gb = f.switch_pod[f.link_a[glob]], f.switch_pod[f.link_b[glob]]
    crossing = int(np.count_nonzero((ga < 4) != (gb < 4)))
    assert crossing == 4 * 5 * 2
    assert f.summary().bisection_gbps == pytest.approx(400.0 * 72 * 9 / 16)


def test_dragonfly_plus_for_and_its_limits():
    assert dragonfly_plus_for(100, radix=8).params["groups"] == 7
    with pytest.raises(ValueError, match="at most 272 endpoints"):
        dragonfly_plus_for(273, radix=8)
    with pytest.raises(ValueError, match="at most 17 groups"):
        dragonfly_plus(8, groups=18)


# ------------------------------------------------------------------------------ rail


@pytest.mark.parametrize("n_su,spines", [(1, 4), (2, 8), (3, 16), (4, 16)])
def test_regression_rail_su_counts_follow_the_superpod_reference_architecture(n_su, spines):
    """Regression check, not validation.

    Fitted: the rail builder's spine rule was written to reproduce the DGX SuperPOD H100 RA
    (RA-11333-001) compute-fabric tables for 1-4 SU (8/16/24/32 leaves, 4/8/16/16 spines).
    """
    f = rail_optimized(n_su)
    s = f.summary()
    assert f.n_endpoints == n_su * 32 * 8
    assert s.switches == {"leaf": n_su * 8, "spine": spines, "core": 0}
    assert _kind_count(f, 0) == n_su * 8 * 32
    assert s.diameter == 4
    assert (_switch_ports_used(f) <= 64).all()


def test_regression_rail_four_su_with_127_nodes_matches_ra_cabling():
    """Regression check, not validation.

    Fitted: the RA's 4-SU build (127 DGX nodes, 1,016 GPU cables, 1,024 leaf-spine cables)
    is the case the rail builder was written from (see ``rail.py``).
    """
    f = rail_optimized(4, nodes=127)
    assert f.n_endpoints == 1016
    assert f.links_total() == 1016 + 1024
    assert f.summary().bisection_gbps == pytest.approx(400.0 * 1016 / 2)
    # GPU i of a node sits on rail i, the same-rail leaf of its SU
    rails = f.switch_rail[f.endpoint_leaf]
    assert (rails == np.arange(1016) % 8).all()
    assert (endpoint_pod(f) == np.arange(1016) // 256).all()


def test_rail_above_eight_su_adds_a_core_layer():
    f = rail_optimized(16)
    s = f.summary()
    assert s.switches == {"leaf": 128, "spine": 4 * 32, "core": 32 * 2}
    assert s.diameter == 6
    assert s.bisection_gbps == pytest.approx(400.0 * f.n_endpoints / 2)
    assert (_switch_ports_used(f) <= 64).all()
    assert rail_optimized_for(65536).summary().switches["core"] == 1024


def test_rail_rejects_node_counts_that_leave_an_su_empty_or_overflow():
    with pytest.raises(ValueError, match="nodes"):
        rail_optimized(4, nodes=96)
    with pytest.raises(ValueError, match="nodes"):
        rail_optimized(4, nodes=129)
    with pytest.raises(ValueError, match="at most 65536 GPUs"):
        rail_optimized_for(65537)


# ------------------------------------------------------------------------------ islands


def test_island_shape_at_radix64_ratio7():
    f = compute_islands(2)
    assert f.params["island_endpoints"] == 56 * 32
    assert f.summary().switches == {"leaf": 112, "spine": 64, "core": 32}
    # 1:7 above the islands: uplinks = endpoints * 8 / 56
    assert _kind_count(f, 3) == f.n_endpoints // 7
    assert f.summary().bisection_gbps == pytest.approx(400.0 * f.n_endpoints / 7 / 2)
    assert (_switch_ports_used(f) <= 64).all()


def test_hyperscale_island_fabric_holds_100k_gpus():
    """Functional check at scale (build time is measured in bench/, not here)."""
    f = islands_for(100_000)
    s = f.summary()
    assert f.n_endpoints >= 100_000
    assert s.diameter == 6
    assert (_switch_ports_used(f) <= 64).all()
    assert len(np.unique(endpoint_pod(f))) == f.params["n_islands"]


def test_island_dragonfly_join_links_every_island_pair():
    f = compute_islands(5, radix=8, oversubscription=3.0, join="dragonfly+")
    glob = f.link_kind == 2
    ga, gb = f.switch_pod[f.link_a[glob]], f.switch_pod[f.link_b[glob]]
    pairs = {(min(a, b), max(a, b)) for a, b in zip(ga.tolist(), gb.tolist(), strict=True)}
    assert len(pairs) == 10
    assert f.summary().diameter == 5


def test_islands_reject_bad_join_and_oversize():
    with pytest.raises(ValueError, match="join"):
        compute_islands(2, join="torus")
    with pytest.raises(ValueError, match="at most 64 islands"):
        compute_islands(65)
    with pytest.raises(ValueError, match="at most"):
        islands_for(10**6)


# ------------------------------------------------------------------------------ graph


@pytest.mark.parametrize("f", SMALL, ids=SMALL_IDS)
def test_small_fabric_graph_is_connected_and_within_radix(f):
    g = f.graph()
    assert nx.is_connected(g)
    assert g.number_of_nodes() == f.n_endpoints + f.n_switches()
    assert sum(d["count"] for _, _, d in g.edges(data=True)) == f.links_total()
    for node, tier in g.nodes(data="tier"):
        if tier != "gpu":
            assert sum(d["count"] for _, _, d in g.edges(node, data=True)) <= f.radix


@pytest.mark.parametrize("f", SMALL, ids=SMALL_IDS)
def test_summary_diameter_equals_networkx_endpoint_diameter(f):
    assert f.summary().diameter == _endpoint_diameter(f)


def test_graph_is_built_once_and_arrays_are_read_only():
    f = fat_tree(4)
    assert f.graph() is f.graph()
    with pytest.raises(ValueError):
        f.link_a[0] = 3


def test_copper_endpoint_links_drop_their_transceivers():
    assert fat_tree(4, copper_endpoint_links=True).summary().transceivers == 2 * 32
    assert fat_tree(4).summary().as_dict()["transceivers"] == 2 * 48


# ------------------------------------------------------------------------------ dispatcher


def test_build_fabric_radix_alone_builds_full_size():
    assert build_fabric("fat-tree", radix=8).n_endpoints == 128
    assert build_fabric("dragonfly+", radix=8).n_endpoints == 16 * 17
    assert build_fabric("rail", radix=64).n_endpoints == rail.rail_capacity(64) == 65536
    assert build_fabric("rail", radix=16).n_endpoints == rail.rail_capacity(16, su_per_group=1)
    assert build_fabric("island", radix=8, oversubscription=3.0).params["n_islands"] == 8


def test_build_fabric_endpoints_sizes_each_kind():
    for kind in ("fat-tree", "dragonfly+", "rail", "island"):
        f = build_fabric(kind, endpoints=3000)
        assert f.kind == kind and f.n_endpoints >= 3000


@pytest.mark.parametrize("kind,kw", [
    ("mesh", {"radix": 8}),
    ("fat-tree", {}),
    ("fat-tree", {"endpoints": -5}),
    ("fat-tree", {"endpoints": 10.5}),
    ("fat-tree", {"radix": 7}),
    ("fat-tree", {"endpoints": 10**7}),
    ("dragonfly+", {"radix": 8, "colour": "red"}),
])
def test_build_fabric_rejects_bad_input_with_one_line_value_error(kind, kw):
    with pytest.raises(ValueError) as err:
        build_fabric(kind, **kw)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------ nvlink


def test_nvlink_domains_keep_a_remainder_domain():
    d = nvlink_domains(150, 72)
    assert d.dtype == np.int32
    assert np.bincount(d).tolist() == [72, 72, 6]
    assert nvlink_domains(0, 8).size == 0
    with pytest.raises(ValueError):
        nvlink_domains(8, 0)


@pytest.mark.parametrize("module", [fabric_pkg, topology, fattree, dragonfly, rail, islands,
                                    nvlink])
def test_docstring_examples_run(module):
    result = doctest.testmod(module)
    assert result.failed == 0
