"""Collective cost model: nccl-tests closed forms, hierarchy, algorithm choice, refusals."""

import math

import pytest

from scheduler.hardware.catalog import get
from scheduler.physics.fabric.collectives import (
    NIC_EFFICIENCY,
    NVLINK_EFFICIENCY,
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


def flat(op, nbytes, n, **kw):
    """n ranks one per node on identical links: a flat ring."""
    return collective(op, nbytes, n, gpus_per_node=1, scaleup=LINK, scaleout=LINK, **kw)


def h100(op, nbytes, n, **kw):
    return collective(op, nbytes, n, gpus_per_node=8, scaleup=H100_UP, scaleout=NDR, **kw)


@pytest.mark.parametrize("n", [2, 8, 64])
@pytest.mark.parametrize("nbytes", [1024, 2 ** 20, 2 ** 30])
def test_flat_ring_all_reduce_time_is_the_closed_form(n, nbytes):
    r = flat("all_reduce", nbytes, n, algorithm="ring")
    expected = 2 * (n - 1) / n * nbytes / (LINK.bw_gb_s * GB) + 2 * (n - 1) * LINK.alpha_s
    assert r.time_s == pytest.approx(expected, rel=1e-12)
    assert r.algbw_GB_s == pytest.approx(nbytes / expected / GB)
    assert r.busbw_GB_s == pytest.approx(r.algbw_GB_s * 2 * (n - 1) / n)


def test_ring_all_reduce_busbw_reaches_the_link_bandwidth_for_large_messages():
    for n in (4, 16, 128):
        assert flat("all_reduce", 64 * 2 ** 30, n, algorithm="ring").busbw_GB_s == \
            pytest.approx(LINK.bw_gb_s, rel=1e-3)
    assert h100("all_reduce", BIG, 8, algorithm="ring").busbw_GB_s == pytest.approx(
        450 * NVLINK_EFFICIENCY, rel=1e-3)


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_all_gather_and_reduce_scatter_move_n_minus_1_over_n_of_the_total_array(op):
    n, nbytes = 16, 2 ** 30
    r = flat(op, nbytes, n)
    expected = (n - 1) / n * nbytes / (LINK.bw_gb_s * GB) + (n - 1) * LINK.alpha_s
    assert r.algorithm == "ring"
    assert r.time_s == pytest.approx(expected, rel=1e-12)
    assert r.busbw_GB_s == pytest.approx(r.algbw_GB_s * (n - 1) / n)
    assert flat(op, 64 * 2 ** 30, n).busbw_GB_s == pytest.approx(LINK.bw_gb_s, rel=1e-3)


def test_all_to_all_busbw_closed_form_flat_and_across_nodes():
    n, nbytes = 8, 2 ** 30
    r = flat("all_to_all", nbytes, n)
    expected = (n - 1) / n * nbytes / (LINK.bw_gb_s * GB) + (n - 1) * LINK.alpha_s
    assert (r.algorithm, r.time_s) == ("direct", pytest.approx(expected, rel=1e-12))
    assert r.busbw_GB_s == pytest.approx(r.algbw_GB_s * (n - 1) / n)
    # 16 nodes of 8: (n-k)/n of the buffer crosses each GPU's NIC, so busbw -> B_out (n-1)/(n-k)
    big = h100("all_to_all", 64 * 2 ** 30, 128)
    assert big.busbw_GB_s == pytest.approx(NDR.bw_gb_s * 127 / 120, rel=1e-3)


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


def test_one_node_of_h100_uses_nvlink_and_beats_two_nodes_by_far():
    one = h100("all_reduce", BIG, 8)
    two = h100("all_reduce", BIG, 16)
    assert (one.nodes, two.nodes) == (1, 2)
    assert one.algorithm == "nvls" and one.busbw_GB_s == pytest.approx(481, rel=0.01)
    assert two.time_s > 1.2 * one.time_s
    # without NVLink SHARP the intra-node ring rides NVLink at 370 GB/s, 8 NICs cap two nodes
    assert h100("all_reduce", BIG, 8, algorithm="ring").busbw_GB_s == pytest.approx(370, rel=1e-3)
    assert two.busbw_GB_s == pytest.approx(8 * 400 / 8 * NIC_EFFICIENCY, rel=0.01)
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
    kw = {"scaleup": H100_UP, "scaleout": NDR}
    same = collective("p2p", 2 ** 30, 2, gpus_per_node=8, **kw)
    apart = collective("p2p", 2 ** 30, 2, gpus_per_node=1, **kw)
    assert same.time_s == pytest.approx(H100_UP.alpha_s + 2 ** 30 / (H100_UP.bw_gb_s * GB))
    assert apart.time_s == pytest.approx(NDR.alpha_s + 2 ** 30 / (NDR.bw_gb_s * GB))
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
