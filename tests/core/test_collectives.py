"""Collective cost model: nccl-tests closed forms, hierarchy, algorithm choice, refusals.

Times are checked against models written out here, not against the module's formulas: a ring
collective run step by step on real data, NCCL's rail-aligned rings counted link by link, an
all-to-all counted peer by peer, and small cases worked by hand.  ``test_regression_*`` tests
compare with the nccl-tests figures the link efficiencies were fitted to; validations against
figures not used in the fit are in ``tests/core/test_validation.py``.
"""

import math

import numpy as np
import pytest

from scheduler.hardware.catalog import get
from scheduler.physics.collectives import (
    LinkClass,
    algorithms,
    collective,
    scaleout_link,
    scaleup_link,
)

GB = 1e9
LINK = LinkClass("flat", 50.0, 5e-6)
H100_UP = scaleup_link(get("H100-SXM"))
NDR = scaleout_link(400)
BIG = 8 * 2 ** 30
HUGE = 64 * 2 ** 30  # latency below 0.2 % of the time: bandwidth alone decides


def flat(op, nbytes, n, **kw):
    """n ranks one per node on identical links: a flat ring."""
    return collective(op, nbytes, n, gpus_per_node=1, scaleup=LINK, scaleout=LINK, **kw)


def h100(op, nbytes, n, **kw):
    return collective(op, nbytes, n, gpus_per_node=8, scaleup=H100_UP, scaleout=NDR, **kw)


def ring_simulation(op: str, nbytes: float, n: int, bw_gb_s: float, alpha_s: float):
    """Run a ring collective step by step on real data; return (seconds, bytes per rank, ok).

    ``nbytes`` is split into ``n`` chunks; every rank sends one chunk per step to its right
    neighbour over its own link, as soon as the link is free and the chunk has arrived; a
    send costs ``alpha_s + chunk / bandwidth``.  Reduce-scatter: rank r sends chunk r - s at
    step s and the receiver adds it; after n - 1 steps rank r holds the sum of chunk r + 1.
    All-gather: rank r forwards the chunk it holds complete.  All-reduce is the two in turn.
    ``ok`` says whether every rank ends with the right values (checked, not assumed).
    """
    rng = np.random.default_rng(n)
    data = rng.integers(0, 1000, size=(n, n)).astype(float)  # data[rank, chunk]
    original = data.copy()
    ranks = np.arange(n)
    right = (ranks + 1) % n
    send_s = alpha_s + nbytes / n / (bw_gb_s * GB)
    ready = np.zeros((n, n))      # when rank r received the current value of chunk c
    link_free = np.zeros(n)
    sent = np.zeros(n)

    def phase(first_chunk, reduce):
        for step in range(n - 1):
            c = (first_chunk - step) % n
            done = np.maximum(link_free, ready[ranks, c]) + send_s
            values = data[ranks, c]
            data[right, c] = data[right, c] + values if reduce else values
            ready[right, c] = done
            link_free[:] = done
            sent[:] += nbytes / n

    total = original.sum(axis=0)
    if op == "all_reduce":
        phase(ranks, reduce=True)
        phase(ranks + 1, reduce=False)
        ok = bool((data == total).all())
    elif op == "reduce_scatter":
        phase(ranks, reduce=True)
        ok = bool((data[ranks, right] == total[right]).all())
    else:  # all_gather: rank r starts with chunk r only
        data[:] = np.where(np.eye(n, dtype=bool), original, np.nan)
        phase(ranks, reduce=False)
        ok = bool((data == np.diag(original)[None, :]).all())
    return float(ready.max() if n > 1 else 0.0), float(sent[0]), ok


def nccl_rings_seconds(op: str, nbytes: float, nodes: int, k: int, up_gb_s: float,
                       out_gb_s: float) -> float:
    """Bandwidth-bound time of NCCL's ``k`` rail-aligned rings, counted link by link.

    Ring j visits each node's GPUs from local rank j and leaves the node from local rank
    j - 1 through that GPU's own NIC, so each NIC serves one ring.  Each ring carries
    ``nbytes / k``; each of its hops carries what one rank sends in :func:`ring_simulation`.
    The time is the busiest link's bytes over its bandwidth (links run in parallel).
    """
    n = nodes * k
    _, per_hop, ok = ring_simulation(op, nbytes / k, n, 1.0, 0.0)
    assert ok
    nvlink, nic = np.zeros(n), np.zeros(n)
    for j in range(k):
        ring = [node * k + (j + i) % k for node in range(nodes) for i in range(k)]
        for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
            if a // k == b // k:
                nvlink[a] += per_hop
            else:
                nic[a] += per_hop
    return max(nvlink.max() / (up_gb_s * GB), nic.max() / (out_gb_s * GB))


def all_to_all_seconds(nbytes: float, nodes: int, k: int, up_gb_s: float,
                       out_gb_s: float) -> float:
    """Bandwidth-bound all-to-all, peer by peer: each of n ranks sends ``nbytes / n`` to every
    other rank, over NVLink to its own node's GPUs and over its own NIC to the others."""
    n = nodes * k
    node = np.arange(n) // k
    same = node[:, None] == node[None, :]
    piece = nbytes / n
    nvlink = (same.sum(axis=1) - 1) * piece
    nic = (~same).sum(axis=1) * piece
    return max(nvlink.max() / (up_gb_s * GB), nic.max() / (out_gb_s * GB))


# ------------------------------------------------------------------------- flat rings


@pytest.mark.parametrize("n", [2, 3, 8, 64])
@pytest.mark.parametrize("nbytes", [1024, 2 ** 20, 2 ** 30])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_flat_ring_time_equals_a_step_by_step_ring_simulation(op, n, nbytes):
    seconds, per_rank, ok = ring_simulation(op, nbytes, n, LINK.bw_gb_s, LINK.alpha_s)
    assert ok
    r = flat(op, nbytes, n, algorithm="ring")
    assert r.algorithm == "ring"
    assert r.time_s == pytest.approx(seconds, rel=1e-9)
    # busbw is what one rank's link carried per second: the nccl-tests meaning of busbw
    assert r.busbw_GB_s == pytest.approx(per_rank / seconds / GB, rel=1e-9)


def test_algbw_and_busbw_of_a_hand_worked_ring():
    """4 ranks, S = 10^9 bytes, 50 GB/s links, 5 us per step, worked by hand.

    All-reduce: each rank sends 2 x 3 chunks of 250 MB, each 5 us + 250e6 / 50e9 s =
    5.005 ms: 30.03 ms.  algbw = 1 GB / 30.03 ms = 33.300 GB/s; busbw = algbw x 2 x 3/4 =
    49.950 GB/s, just under the link's 50.  All-gather of a 1 GB total array: 3 sends,
    15.015 ms, algbw 66.600, busbw x 3/4 = 49.950.
    """
    r = flat("all_reduce", 1e9, 4, algorithm="ring")
    assert r.time_s == pytest.approx(0.03003, rel=1e-9)
    assert r.algbw_GB_s == pytest.approx(33.300, abs=1e-3)
    assert r.busbw_GB_s == pytest.approx(49.950, abs=1e-3)
    g = flat("all_gather", 1e9, 4)
    assert g.time_s == pytest.approx(0.015015, rel=1e-9)
    assert (round(g.algbw_GB_s, 3), round(g.busbw_GB_s, 3)) == (66.6, 49.95)


def test_ring_all_reduce_busbw_reaches_the_link_bandwidth_for_large_messages():
    for n in (4, 16, 128):
        assert flat("all_reduce", HUGE, n, algorithm="ring").busbw_GB_s == \
            pytest.approx(LINK.bw_gb_s, rel=1e-3)
    for op in ("all_gather", "reduce_scatter"):
        assert flat(op, HUGE, 16).busbw_GB_s == pytest.approx(LINK.bw_gb_s, rel=1e-3)


# --------------------------------------------------------------- two-level (H100 nodes)


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("gpus", [8, 16, 64, 128])
def test_h100_ring_time_equals_nccls_rings_counted_link_by_link(op, gpus):
    r = h100(op, HUGE, gpus, algorithm="ring")
    expected = nccl_rings_seconds(op, HUGE, gpus // 8, 8, H100_UP.bw_gb_s, NDR.bw_gb_s)
    assert r.time_s == pytest.approx(expected, rel=2e-3)


def test_rings_across_nodes_are_bound_by_nvlink_when_the_nics_are_faster():
    """With 8 x 800 GB/s NICs per node, the NVLink hops of the other 7 rings bind: each GPU
    forwards 7/8 of the data at 370 GB/s, so the rings run at 8/7 x 370 = 423 GB/s."""
    fast = LinkClass("fast NIC", 800.0, NDR.alpha_s)
    r = collective("all_reduce", HUGE, 32, gpus_per_node=8, scaleup=H100_UP, scaleout=fast,
                   algorithm="ring")
    assert r.time_s == pytest.approx(
        nccl_rings_seconds("all_reduce", HUGE, 4, 8, H100_UP.bw_gb_s, 800.0), rel=2e-3)
    assert r.busbw_GB_s == pytest.approx(8 / 7 * 370, rel=2e-3)


def test_flat_all_to_all_is_one_message_per_peer_in_turn():
    """8 ranks, 1 GiB send buffer each: 7 messages of 1 GiB / 8 on the rank's own link, one
    after another, each 5 us + 134.2 MB / 50 GB/s."""
    n, nbytes = 8, 2 ** 30
    per_message = LINK.alpha_s + nbytes / n / (LINK.bw_gb_s * GB)
    r = flat("all_to_all", nbytes, n)
    assert r.algorithm == "direct"
    assert r.time_s == pytest.approx((n - 1) * per_message, rel=1e-9)
    assert r.time_s == pytest.approx(0.018826, rel=1e-4)  # 7 x 2.6894 ms, by hand


@pytest.mark.parametrize("gpus", [16, 64, 128])
def test_h100_all_to_all_equals_the_peer_by_peer_count(gpus):
    r = h100("all_to_all", HUGE, gpus)
    assert r.time_s == pytest.approx(
        all_to_all_seconds(HUGE, gpus // 8, 8, H100_UP.bw_gb_s, NDR.bw_gb_s), rel=1e-3)


def test_all_to_all_busbw_across_16_nodes_by_hand():
    """128 GPUs on 16 nodes: 120 of each GPU's 128 pieces leave through its one 47 GB/s NIC,
    so algbw = 47 x 128/120 and busbw = algbw x 127/128 = 47 x 127/120 = 49.74 GB/s."""
    assert h100("all_to_all", HUGE, 128).busbw_GB_s == pytest.approx(49.74, rel=1e-3)


def test_tree_wins_small_messages_and_ring_large_ones_at_eight_nodes_and_more():
    for nodes in (8, 16, 128):
        n = 8 * nodes
        assert h100("all_reduce", 64 * 2 ** 10, n).algorithm == "tree"
        assert h100("all_reduce", BIG, n).algorithm == "ring"
        small = {a: h100("all_reduce", 2 ** 16, n, algorithm=a).time_s for a in ("ring", "tree")}
        assert small["tree"] < small["ring"] / 3


def test_auto_takes_the_fastest_usable_algorithm():
    for nbytes in (2 ** 10, 2 ** 20, 2 ** 26, BIG):
        for n in (8, 16, 256):
            best = min(h100("all_reduce", nbytes, n, algorithm=a).time_s
                       for a in algorithms("all_reduce", gpus=n, gpus_per_node=8,
                                           scaleup=H100_UP))
            assert h100("all_reduce", nbytes, n).time_s == best


def test_regression_h100_nccl_tests_figures_the_link_efficiencies_were_fitted_to():
    """Regression check, not validation.

    Fitted (docs/collectives.md, calibration constants): NVLINK_EFFICIENCY = 370/450 from
    "effective NVLink bandwidth of 370GB/s" and NVLS_EFFICIENCY = 275/450 from "peak busBw of
    ~480GB/s (algbw ~275GB/s)" (nccl-tests #212), NIC_EFFICIENCY = 47/50 from "46-48GB/s per
    NIC" for NDR (nccl-tests #290): the first three rows of the docs' comparison table.
    """
    one = h100("all_reduce", BIG, 8)
    two = h100("all_reduce", BIG, 16)
    assert (one.nodes, two.nodes) == (1, 2)
    assert one.algorithm == "nvls" and one.busbw_GB_s == pytest.approx(481, rel=0.01)
    assert two.time_s > 1.2 * one.time_s
    # without NVLink SHARP the intra-node ring rides NVLink at 370 GB/s
    assert h100("all_reduce", BIG, 8, algorithm="ring").busbw_GB_s == pytest.approx(370, rel=1e-3)
    # two nodes: 8 NICs x 47 GB/s = 376 GB/s (published 8 x 46-48 = 368-384)
    assert two.busbw_GB_s == pytest.approx(376, rel=0.01)
    one_a2a, two_a2a = h100("all_to_all", BIG, 8), h100("all_to_all", BIG, 16)
    assert two_a2a.time_s > 3 * one_a2a.time_s


def test_half_the_scaleout_share_halves_inter_node_busbw_for_large_messages():
    for op in ("all_reduce", "all_gather", "all_to_all"):
        full = h100(op, 64 * 2 ** 30, 128)
        half = h100(op, 64 * 2 ** 30, 128, scaleout_share=0.5)
        assert half.busbw_GB_s == pytest.approx(full.busbw_GB_s / 2, rel=0.02)
    inside = h100("all_reduce", BIG, 8)
    assert h100("all_reduce", BIG, 8, scaleout_share=0.5).time_s == inside.time_s


def test_p2p_uses_the_link_that_joins_the_two_ranks():
    """By hand, 1 GiB = 1,073,741,824 bytes: over NVLink 1.9 us + 1 GiB / 370 GB/s =
    2.9039 ms; over the NIC 4 us + 1 GiB / 47 GB/s = 22.8496 ms."""
    kw = {"scaleup": H100_UP, "scaleout": NDR}
    same = collective("p2p", 2 ** 30, 2, gpus_per_node=8, **kw)
    apart = collective("p2p", 2 ** 30, 2, gpus_per_node=1, **kw)
    assert same.time_s == pytest.approx(2.9039e-3, rel=1e-4)
    assert apart.time_s == pytest.approx(22.8496e-3, rel=1e-5)
    assert apart.busbw_GB_s == apart.algbw_GB_s


def test_scale_up_and_scale_out_links_scale_with_the_catalog():
    assert scaleup_link(get("B200")).bw_gb_s == pytest.approx(2 * H100_UP.bw_gb_s)
    assert scaleup_link(get("MI300X")).nvls_gb_s == 0.0
    assert scaleout_link(800).bw_gb_s == pytest.approx(2 * NDR.bw_gb_s)
    mi = scaleup_link(get("MI300X"))
    assert algorithms("all_reduce", gpus=8, gpus_per_node=8, scaleup=mi) == ("ring", "tree")


def test_a_single_rank_moves_nothing():
    r = h100("all_reduce", 2 ** 20, 1)
    assert (r.time_s, r.algbw_GB_s, r.busbw_GB_s, r.algorithm) == (0.0, 0.0, 0.0, "none")


@pytest.mark.parametrize("args, kw, message", [
    (("broadcast", 1024, 8), {}, "unknown collective"),
    (("all_reduce", 0, 8), {}, "bytes must be a positive"),
    (("all_reduce", -5, 8), {}, "bytes must be a positive"),
    (("all_reduce", math.inf, 8), {}, "bytes must be a positive"),
    (("all_reduce", 1024, 0), {}, "gpus must be an integer >= 1"),
    (("all_reduce", 1024, 2.5), {}, "gpus must be an integer >= 1"),
    (("p2p", 1024, 4), {}, "between 2 GPUs"),
    (("all_reduce", 1024, 8), {"algorithm": "bruck"}, "unknown algorithm"),
    (("all_gather", 1024, 8), {"algorithm": "tree"}, "usable here: ring"),
    (("all_reduce", 1024, 16), {"algorithm": "nvls"}, "usable here: ring, tree"),
    (("all_reduce", 1024, 8), {"scaleout_share": 0}, "scaleout_share"),
    (("all_reduce", 1024, 8), {"scaleout_share": 1.5}, "scaleout_share"),
])
def test_bad_input_raises_a_clear_value_error(args, kw, message):
    with pytest.raises(ValueError, match=message):
        h100(*args, **kw)


def test_bad_links_are_refused():
    with pytest.raises(ValueError, match="bw_gb_s"):
        LinkClass("x", 0.0, 1e-6)
    with pytest.raises(ValueError, match="alpha_s"):
        LinkClass("x", 1.0, -1.0)
    with pytest.raises(ValueError, match="nic_gbps"):
        scaleout_link(0)
