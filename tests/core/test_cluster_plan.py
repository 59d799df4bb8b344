"""The cluster generator lays out nodes, racks and cables consistently."""

import numpy as np
import pytest

from scheduler.hardware import power
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.presets import PRESETS, get_preset


def test_every_gpu_is_cabled_to_one_leaf_port(small_plan):
    leaves = small_plan.fabric.endpoint_leaf[: small_plan.n_gpus]
    assert (small_plan.fabric.switch_tier[leaves] == 0).all()
    assert small_plan.n_gpus == 96
    assert small_plan.gpu_node().size == 96


def test_racks_hold_one_group_and_at_most_their_nodes(small_plan):
    counts = np.bincount(small_plan.node_rack)
    assert counts.max() <= 4
    for rack in range(small_plan.n_racks):
        assert len(set(small_plan.node_model[small_plan.node_rack == rack])) == 1


def test_rack_power_capacity_covers_its_nodes_with_headroom(small_plan):
    load = np.bincount(small_plan.node_rack, weights=small_plan.node_kw())
    assert (small_plan.rack_power_kw >= load * 1.15).all()


def test_summary_counts_links_and_power(small_plan):
    s = small_plan.summary()
    assert s["links"] == small_plan.fabric.link_a.size + 96
    assert s["transceivers"] == 2 * s["links"]
    assert s["gpus_by_model"] == {"H100-SXM": 64, "MI300X": 32}
    assert s["spare_nodes"] == 1
    assert s["it_power_kw"] > float(small_plan.node_kw().sum())


def test_dgx_h100_power_matches_the_published_10_2_kw():
    assert power.node_kw(get("H100-SXM"), 8) == pytest.approx(10.2, abs=0.05)


def test_nvl72_trays_share_one_nvlink_domain_per_rack():
    plan = plan_cluster("nvl", (NodeGroup("GB200", 36, nodes_per_rack=18),),
                        fabric_kind="fat-tree", fabric_kw={"radix": 16})
    assert plan.n_racks == 2
    assert len(set(plan.node_nvlink_domain)) == 2
    assert (plan.node_nvlink_domain == plan.node_rack).all()


def test_bad_group_sizes_are_refused():
    with pytest.raises(ValueError, match="positive"):
        plan_cluster("x", (NodeGroup("H100-SXM", 0),), fabric_kind="fat-tree",
                     fabric_kw={"radix": 8})


@pytest.mark.parametrize("name", ["dev-small", "superpod-h100", "mixed-vendor"])
def test_small_presets_plan(name):
    s = get_preset(name).plan().summary()
    assert s["gpus"] > 0 and s["links"] > s["gpus"]


def test_preset_sizes_follow_their_sources():
    assert abs(get_preset("dev-small").plan().n_gpus - 512) <= 64
    superpod = get_preset("superpod-h100").plan()
    assert superpod.n_nodes == 127
    llama = get_preset("llama3-16k").plan()
    assert llama.n_nodes - int(llama.node_spare.sum()) == 2048


def test_hyperscale_preset_reaches_100k_gpus_in_islands():
    plan = PRESETS["hyperscale-100k"].plan()
    assert plan.n_gpus >= 100_000
    assert plan.fabric.kind == "island"
    assert len(plan.summary()["gpus_by_model"]) == 3


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(KeyError, match="dev-small"):
        get_preset("nope")
