"""Job routing on a plain Dragonfly (Kim, Dally, Scott, Abts, "Technology-Driven,
Highly-Scalable Dragonfly Topology", ISCA 2008): minimal routes, link loads under uniform and
adversarial traffic, Valiant spreading, failures, and the engine on a Dragonfly preset.

The expected loads are derived by hand from the topology (counted in each docstring), not
from the router's code; the single-flow routes are checked against an independent
implementation (:func:`dragonfly_route`) and against networkx shortest paths.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from scheduler.fabric import plain_dragonfly
from scheduler.fabric.dragonfly import dragonfly_route
from scheduler.fabric.routing import Router
from scheduler.fabric.topology import LINK_KINDS
from scheduler.simulate import Scenario, run_scenario

LOCAL, GLOBAL = LINK_KINDS.index("local"), LINK_KINDS.index("global")
PORT = 400.0


def _pairs_as_jobs(pairs):
    """Two-GPU jobs: with one GPU per node each is a flow both ways."""
    return [np.array(p) for p in pairs]


def _loads_of_one_flow(router, src, dst):
    res = router.update([np.array([src, dst])], 1.0)
    return res.link_load_gbps


@pytest.fixture(scope="module")
def fig5():
    """Kim et al., Figure 5: p = h = 2, a = 4, 9 groups, 72 terminals."""
    return plain_dragonfly(2, 4, 2)


def test_one_flow_loads_match_the_independent_route_and_sum_to_one_global_hop(fig5):
    """Every ordered pair of terminals 0..15 and a sample of far ones: the router's loads for a
    flow both ways equal two :func:`dragonfly_route` results; a flow between groups puts
    exactly one unit on global links, a flow inside a group none."""
    router = Router(fig5, gpus_per_node=1)
    pairs = list(itertools.combinations(range(16), 2)) + [(0, 71), (3, 40), (17, 66)]
    for s, d in pairs:
        got = _loads_of_one_flow(router, s, d)
        want = np.zeros_like(got)
        for a, b in ((s, d), (d, s)):
            r = dragonfly_route(fig5, a, b)
            np.add.at(want, (r.link, r.direction), r.fraction)
        np.testing.assert_allclose(got, want, atol=1e-12, err_msg=f"{s}->{d}")
        cross = fig5.switch_pod[fig5.endpoint_leaf[s]] != fig5.switch_pod[fig5.endpoint_leaf[d]]
        assert got[fig5.link_kind == GLOBAL].sum() == pytest.approx(2.0 if cross else 0.0)


def test_minimal_routes_are_shortest_paths_and_the_router_diameter_is_3(fig5):
    """Kim et al. §3: minimal routing takes at most local, global, local: 3 router-to-router
    hops (5 links terminal to terminal), 1 inside a group.  Checked for every terminal pair
    from every third source against networkx on the two groups' subgraph (their local links and
    the global links joining them: minimal routes never leave the two groups; on the whole
    graph a path over two global links can be shorter).  Exact."""
    g = fig5.graph()
    router = Router(fig5, gpus_per_node=1)
    pod = fig5.switch_pod
    worst = 0
    for s in range(0, 72, 3):
        for d in range(72):
            r = router.route(s, d)
            groups = {int(pod[fig5.endpoint_leaf[s]]), int(pod[fig5.endpoint_leaf[d]])}
            sub = g.subgraph([v for v in g if v[0] == "gpu" and int(pod[fig5.endpoint_leaf[v[1]]])
                              in groups or v[0] != "gpu" and int(pod[v[1]]) in groups])
            assert r.hops == nx.shortest_path_length(sub, ("gpu", s), ("gpu", d))
            assert r.hops <= nx.shortest_path_length(g, ("gpu", s), ("gpu", d)) + 1
            if fig5.endpoint_leaf[s] != fig5.endpoint_leaf[d]:
                worst = max(worst, r.hops - 2)
                assert r.hops - 2 == 1 if len(groups) == 1 else 1 <= r.hops - 2 <= 3
    assert worst == 3


def _uniform(f, d):
    """All-to-all among every terminal: each sends ``d`` in total, ``d / (N - 1)`` to each."""
    n = f.n_endpoints
    jobs = _pairs_as_jobs(itertools.combinations(range(n), 2))
    return jobs, d / (n - 1)


def test_uniform_traffic_on_the_balanced_dragonfly_loads_no_channel_past_capacity(fig5):
    """Kim et al. §3.1: the balanced choice a = 2p = 2h balances channel load on uniform
    (load-balanced) traffic, so minimal routing sustains full injection.  Counted by hand for
    Figure 5 (p = h = 2, a = 4, G = 9, N = 72, one global link per group pair), every terminal
    injecting ``d`` = the port rate:

    * a global channel carries one group's 8 terminals to another's 8: ``64 d / 71``;
    * a local channel r -> s carries r's 2 terminals to s's 2 (4), r's terminals to the 2 groups
      s's global links reach (2 x 2 x 8 = 32) and what r's 2 global links bring in for s's
      terminals (2 x 8 x 2 = 32): ``68 d / 71``.

    Both below 1 (exact to 1e-9), every job at full rate."""
    jobs, rate = _uniform(fig5, PORT)
    res = Router(fig5, gpus_per_node=1).update(jobs, rate)
    load = res.link_load_gbps / PORT
    np.testing.assert_allclose(load[fig5.link_kind == GLOBAL], 64 / 71, rtol=1e-9)
    np.testing.assert_allclose(load[fig5.link_kind == LOCAL], 68 / 71, rtol=1e-9)
    assert np.all(res.job_share == pytest.approx(1.0))


def test_adversarial_traffic_is_bottlenecked_on_the_single_global_link_under_minimal(fig5):
    """Kim et al. §4: on worst-case traffic (every terminal of group i sends to group i + 1)
    minimal routing is limited by the one global channel between the two groups: its a p = 8
    terminals share it, throughput 1/8 of injection (derived; exact).  Valiant routing spreads
    the traffic over the G - 2 = 7 other groups and lifts throughput to over 3x that (a
    qualitative check: the paper's own WC figures were not fitted or compared)."""
    pairs = [(t, t + 8) for g in (0, 2, 4, 6) for t in range(g * 8, g * 8 + 8)]
    jobs = _pairs_as_jobs(pairs)
    minimal = Router(fig5, gpus_per_node=1).update(jobs, PORT)
    np.testing.assert_allclose(minimal.job_share, 1 / 8, rtol=1e-9)
    busy = minimal.utilisation[fig5.link_kind == GLOBAL]
    assert busy.max() == pytest.approx(1.0) and (busy > 0).sum() == 4
    valiant = Router(fig5, gpus_per_node=1, routing="valiant").update(jobs, PORT)
    assert valiant.job_share.min() > 3 * minimal.job_share.max()
    ugal = Router(fig5, gpus_per_node=1, routing="ugal").update(jobs, PORT)
    assert ugal.job_share.min() > 2 * minimal.job_share.max()


def test_valiant_doubles_global_load_on_uniform_traffic(fig5):
    """Valiant routing sends every inter-group flow over two global hops: on uniform traffic
    the total global load doubles (exact), while UGAL keeps uniform traffic minimal."""
    jobs, rate = _uniform(fig5, PORT / 2)
    glob = fig5.link_kind == GLOBAL
    tot = {r: Router(fig5, gpus_per_node=1, routing=r).update(jobs, rate)
           .link_load_gbps[glob].sum() for r in ("minimal", "valiant", "ugal")}
    assert tot["valiant"] == pytest.approx(2 * tot["minimal"])
    assert tot["ugal"] == pytest.approx(tot["minimal"])


@pytest.mark.parametrize("failed", [1, 2, 3])
def test_failed_global_links_slow_only_the_jobs_crossing_them(failed):
    """Three groups (p = h = 2, a = 4: 4 global links per group pair).  Eight flows from
    group 0 to group 1 at a quarter of the port offer 2 ports' worth to the pair's 4 links:
    with ``failed`` of them down, the 4 - failed live links carry it at
    ``min(1, (4 - failed) / 2)`` of demand; a job inside group 2 keeps full rate."""
    f = plain_dragonfly(2, 4, 2, groups=3)
    pair = np.flatnonzero((f.link_kind == GLOBAL)
                          & (np.sort(f.switch_pod[np.c_[f.link_a, f.link_b]], 1)
                             == [0, 1]).all(1))
    assert pair.size == 4
    jobs = _pairs_as_jobs([(t, t + 8) for t in range(8)]) + [np.arange(16, 24)]
    down = np.zeros(f.link_a.size, bool)
    down[pair[:failed]] = True
    router = Router(f, gpus_per_node=1)
    res = router.update(jobs, PORT / 4, failed_links=down)
    np.testing.assert_allclose(res.job_share[:8], min(1.0, (4 - failed) / 2), rtol=1e-9)
    assert res.job_share[8] == pytest.approx(1.0)
    assert res.link_load_gbps[down].sum() == 0.0


def test_a_failed_local_link_detours_through_the_group():
    """Inside a group a flow takes its direct local link; with it down, the two-hop detours
    through the group's other a - 2 = 2 routers, evenly, and the job keeps its rate."""
    f = plain_dragonfly(2, 4, 2, groups=3)
    link = int(np.flatnonzero((f.link_kind == LOCAL) & (f.link_a == 0) & (f.link_b == 1))[0])
    router = Router(f, gpus_per_node=1)
    intact = router.update([np.array([0, 2])], 100.0)          # router 0 <-> router 1
    assert intact.link_load_gbps[link].tolist() == [100.0, 100.0]
    down = np.zeros(f.link_a.size, bool)
    down[link] = True
    res = router.update([np.array([0, 2])], 100.0, failed_links=down)
    assert res.job_share[0] == pytest.approx(1.0)
    used = res.link_load_gbps.max(1) > 0
    assert used.sum() == 4 and np.allclose(res.link_load_gbps[used].max(1), 50.0)


def test_all_to_all_pattern_is_refused_with_one_line(fig5):
    with pytest.raises(ValueError, match="plain Dragonfly"):
        Router(fig5).update([np.arange(16)], 100.0, pattern="all_to_all")


def test_the_engine_runs_on_a_plain_dragonfly_with_physics():
    """``Scenario(fabric="dragonfly")`` refabrics the preset and routes its gangs; the network
    report has the Dragonfly's two link kinds."""
    eng, rep = run_scenario(Scenario(preset="llama3-16k", gpus=2048, days=1,
                                        fabric="dragonfly", seed=3))
    assert eng.plan.fabric.kind == "dragonfly"
    assert set(rep["network"]["link_utilisation"]) == {"local", "global"}
    assert rep["network"]["samples"] > 0


def test_the_dragonfly_16k_preset_is_the_papers_balanced_radix_64_build():
    """Kim et al. §3: radix-64 routers, p = h = 16, a = 32 (63 ports used); 16,384 GPUs fill
    32 of the up to 513 groups."""
    from scheduler.presets import get_preset
    f = get_preset("dragonfly-16k").plan().fabric
    assert (f.kind, f.params["p"], f.params["a"], f.params["h"], f.radix) == (
        "dragonfly", 16, 32, 16, 63)
    assert f.params["groups"] == 32 and f.n_endpoints == 16_384
