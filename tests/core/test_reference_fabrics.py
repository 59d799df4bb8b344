"""Fabrics and hardware the reference architectures build, against their published counts.

Sources (each test names its own, with the tolerance):

* NVIDIA DGX SuperPOD H100 reference architecture, RA-11333-001: Table 4 "Compute fabric
  component count" (1-4 SU: fitted) and the "larger DGX SuperPOD component counts" table
  (8-64 SU: validation; the same QM9700 counts are printed in the DGX SuperPOD B200 RA, Table 3).
* Gangidi et al., "RDMA over Ethernet for Distributed AI Training at Meta Scale", SIGCOMM 2024,
  and the Llama 3 report, section 3.3.1: 24,576 GPUs in 3,072-GPU zones of 192 racks of 16
  GPUs, non-blocking inside a zone, 1:7 above.
* Kim, Dally, Scott, Abts, "Technology-Driven, Highly-Scalable Dragonfly Topology", ISCA 2008.
* figures.md: transceiver power per module type; DGX SuperPOD storage guidance.
"""

import math

import networkx as nx
import numpy as np
import pytest

from scheduler.fabric import (
    build_fabric,
    compute_zones,
    dragonfly_route,
    islands_for,
    plain_dragonfly,
    rail_optimized,
)
from scheduler.fabric.optics import OPTICS, compute_optics
from scheduler.fabric.routing import Router
from scheduler.hardware import power
from scheduler.hardware.catalog import CATALOG, get
from scheduler.hardware.cluster import NodeGroup, StorageSpec, plan_cluster
from scheduler.physics.collectives import algorithms, scaleup_link
from scheduler.physics.storage import StorageModel


def _ports_used(f) -> np.ndarray:
    used = np.bincount(f.endpoint_leaf, minlength=f.n_switches())
    used += np.bincount(f.link_a, minlength=f.n_switches())
    used += np.bincount(f.link_b, minlength=f.n_switches())
    return used


def _counts(f):
    s = f.summary().switches
    return (s["leaf"], s["spine"], s["core"], int(np.count_nonzero(f.link_kind == 0)),
            int(np.count_nonzero(f.link_kind == 1)))


# ----------------------------------------------------------------- DGX SuperPOD, two tiers


@pytest.mark.parametrize("n_su, nodes, leaf, spine, leaf_spine", [
    (1, 31, 8, 4, 256), (2, 63, 16, 8, 512), (3, 95, 24, 16, 768), (4, 127, 32, 16, 1024)])
def test_regression_superpod_ra_table_4_counts(n_su, nodes, leaf, spine, leaf_spine):
    """Regression check, not validation: the RA's Table 4 (1-4 SU, 31/63/95/127 DGX H100;
    one slot per SU goes to UFM) is what the two-tier rule was written from.  Exact.
    The RA's node-leaf column adds 4 UFM cables (252 for 1 SU); UFM is not an endpoint here."""
    f = rail_optimized(n_su, nodes=nodes)
    assert f.n_endpoints == 8 * nodes
    assert _counts(f) == (leaf, spine, 0, leaf_spine, 0)


def test_superpod_8_su_is_two_tier_as_the_ra_builds_it():
    """Validation (not fitted): RA-11333-001 "larger DGX SuperPOD" table, 8 SU / 256 nodes /
    2,048 GPUs: 64 leaves, 32 spines, no core, 2,048 node-leaf and 2,048 leaf-spine cables.
    Exact counts; the two-tier rule was fitted on 1-4 SU only."""
    f = rail_optimized(8)
    assert f.n_endpoints == 2048
    assert _counts(f) == (64, 32, 0, 2048, 0)
    assert f.summary().diameter == 4
    assert (_ports_used(f) <= 64).all()


@pytest.mark.parametrize("n_su, leaf, spine, core", [(16, 128, 128, 64), (32, 256, 256, 128),
                                                     (64, 512, 512, 256)])
def test_superpod_above_8_su_matches_the_ra_three_tier_counts(n_su, leaf, spine, core):
    """Validation: the same RA table for 16, 32 and 64 SU (4,096 / 8,192 / 16,384 GPUs):
    leaves, spines and cores as listed, and node-leaf = leaf-spine = spine-core cables = GPUs.
    Exact counts."""
    f = rail_optimized(n_su)
    gpus = 256 * n_su
    assert _counts(f) == (leaf, spine, core, gpus, gpus)
    assert f.summary().diameter == 6


def test_build_fabric_sizes_a_2048_gpu_superpod_without_a_core():
    """The path ``plan_cluster`` takes: a rail fabric sized by GPU count (8 SU, as above)."""
    assert build_fabric("rail", endpoints=2048).summary().switches["core"] == 0
    assert build_fabric("rail", endpoints=2049).summary().switches["core"] > 0


# ----------------------------------------------------------------- Meta zones


def test_meta_24k_cluster_is_eight_3072_gpu_zones_of_192_racks():
    """Validation: Meta RoCE, SIGCOMM 2024 / Llama 3 report: 24,576 GPUs = 8 zones of 3,072,
    192 rack switches of 16 GPUs per zone, 1,536 racks.  Exact counts."""
    f = build_fabric("island", endpoints=24_576, zone_gpus=3072, gpus_per_leaf=16)
    assert f.n_endpoints == 24_576
    assert f.params["zones"] == 8
    leaves = f.switch_tier == 0
    assert np.bincount(f.switch_pod[leaves]).tolist() == [192] * 8
    assert (np.bincount(f.endpoint_leaf) == 16).all()


def test_meta_zone_is_non_blocking_inside_and_one_to_seven_above():
    """Validation: same sources: non-blocking inside a zone, 1:7 oversubscription above it.
    Tolerance: the ratio of zone GPU ports to zone uplinks within 2 % of 7 (whole ports)."""
    f = compute_zones(8)
    rtsw = f.switch_tier == 0
    up = np.bincount(f.link_a[f.link_kind == 0], minlength=f.n_switches())
    assert (up[rtsw] == 16).all()                       # 16 GPUs down, 16 up
    zone_up = np.count_nonzero(f.link_kind == 3) / 8
    assert 3072 / zone_up == pytest.approx(7.0, rel=0.02)
    assert (_ports_used(f)[f.switch_tier > 0] <= 576).all()


def test_a_3072_gpu_zone_needs_chassis_spines_not_radix_64():
    """A 64-port island holds 1,792 GPUs at 1:7 (the old limit); zones of 3,072 refuse to
    build on spines too small for 192 leaves, with one clear line."""
    assert islands_for(3072).params["island_endpoints"] == 1792
    with pytest.raises(ValueError, match="chassis"):
        compute_zones(2, spine_radix=128)


def test_meta_preset_plans_and_routes():
    """The zone fabric goes through the cluster planner and the job router like islands."""
    plan = plan_cluster("z", (NodeGroup("H100-SXM", 96, nodes_per_rack=2),),
                        fabric_kind="island", fabric_kw={"zone_gpus": 256, "gpus_per_leaf": 16})
    assert plan.n_gpus == 768 and plan.fabric.params["zones"] == 3
    r = Router(plan.fabric).route(0, 767)
    assert r.hops == 6


# ----------------------------------------------------------------- plain Dragonfly


def test_dragonfly_paper_example_counts_and_diameter():
    """Validation: Kim et al., ISCA 2008, Figure 5: p = h = 2, a = 4, radix-7 routers scale to
    9 groups and 72 terminals.  Exact; diameter by networkx on the built graph (5 links:
    terminal, local, global, local, terminal)."""
    f = plain_dragonfly(2, 4, 2)
    assert (f.n_endpoints, f.n_switches(), f.params["groups"], f.radix) == (72, 36, 9, 7)
    assert f.params["global_links"] == 9 * 8 // 2          # one per group pair
    assert f.params["local_links"] == 9 * 4 * 3 // 2
    assert (_ports_used(f) <= 7).all()
    assert nx.diameter(f.graph()) == f.summary().diameter == 5


def test_dragonfly_radix_64_scales_past_256k_terminals():
    """Validation: Kim et al., ISCA 2008 (section 3): with radix-64 routers a balanced
    dragonfly (p = h = 16, a = 32) scales to over 256K nodes: 32 x 16 x 513 = 262,656.
    Exact."""
    f = plain_dragonfly(16)
    assert f.radix == 16 + 31 + 16 <= 64 - 1
    assert f.n_endpoints == 262_656 > 256_000


def test_dragonfly_minimal_route_crosses_one_global_link_and_matches_networkx():
    """ECMP over minimal routes: one global hop between groups, traffic conserved; the route's
    shortest path length agrees with networkx on the graph."""
    f = plain_dragonfly(2, 4, 2)
    g = f.graph()
    for src, dst in ((0, 71), (0, 3), (0, 1), (5, 40)):
        r = dragonfly_route(f, src, dst)
        assert r.hops == nx.shortest_path_length(g, ("gpu", src), ("gpu", dst))
        glob = f.link_kind[r.link] == 2
        same_group = f.switch_pod[f.endpoint_leaf[src]] == f.switch_pod[f.endpoint_leaf[dst]]
        assert r.fraction[glob].sum() == pytest.approx(0.0 if same_group else 1.0)


def test_dragonfly_job_router_gives_the_single_flow_route():
    """The job router routes a plain Dragonfly (tests/core/test_dragonfly_routing.py)."""
    f = plain_dragonfly(2, 4, 2)
    assert Router(f).route(0, 71).hops == dragonfly_route(f, 0, 71).hops == 5


# ----------------------------------------------------------------- hardware


def test_nvls_only_on_nvswitch_generation_3_and_later():
    """NVLS (NVLink SHARP) needs a third-generation NVSwitch or later (NVIDIA Hopper
    whitepaper): H100/H200/B200/GB200 yes; A100 (NVSwitch 2) and non-NVIDIA parts no."""
    allowed = {m.name for m in CATALOG.values() if scaleup_link(m).nvls_gb_s > 0}
    assert {"H100-SXM", "H200-SXM", "B200", "GB200"} <= allowed
    assert not allowed & {"A100-SXM4-40GB", "A100-SXM4-80GB", "MI300X", "MI325X", "Gaudi3",
                          "Ascend910B", "TPUv5p"}
    for name, nvls in (("A100-SXM4-80GB", False), ("H100-SXM", True)):
        algos = algorithms("all_reduce", gpus=8, gpus_per_node=8,
                           scaleup=scaleup_link(get(name)))
        assert ("nvls" in algos) is nvls


def test_a100_figures_match_the_datasheet():
    """A100 SXM4 datasheet (NVIDIA, r4): BF16 312 TFLOPS dense, 40 GB at 1,555 GB/s and 80 GB
    at 2,039 GB/s, NVLink 600 GB/s, 400 W.  Exact (catalog entries, a regression check)."""
    a40, a80 = get("A100-SXM4-40GB"), get("A100-SXM4-80GB")
    assert (a40.bf16_tflops, a40.hbm_gb, a40.hbm_tb_s, a40.tdp_w) == (312, 40, 1.555, 400)
    assert (a80.hbm_gb, a80.hbm_tb_s, a80.scaleup_gb_s) == (80, 2.039, 600)


def test_optics_power_is_per_module_type():
    """figures.md: 400G single-port 8-9 W; 800G twin-port 15 W multimode, 17 W single-mode.
    A twin-port module serves two link ends: 96 ends of fat_tree(4) are 48 modules."""
    f = build_fabric("fat-tree", radix=4)
    assert 8.0 <= OPTICS["400G-SR4"].watts <= 9.0
    assert compute_optics(f, "800G-2xSR4") == (48, pytest.approx(48 * 15 / 1000))
    assert compute_optics(f, "800G-2xDR4") == (48, pytest.approx(48 * 17 / 1000))
    assert compute_optics(f, "400G-SR4")[0] == 96
    with pytest.raises(ValueError, match="unknown optic module"):
        compute_optics(f, "1.6T")


def test_power_rollup_includes_storage_and_management_fabrics():
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 127),), fabric_kind="rail")
    with_support = power.network_kw(plan)
    compute_only = power.network_kw(plan, support=False)
    assert with_support > compute_only
    assert plan.summary()["support_switches"]["storage"] > 0


def test_a_node_reads_and_writes_no_faster_than_the_ra_single_node_figures():
    """Validation: DGX SuperPOD H100 RA storage guidance, "Best" single node 40 GB/s read and
    20 GB/s write (figures.md); the RA also says a GDS application reads "over 40 GBps".
    Exact: a one-node job asking 500 GB/s of a 1 TB/s tier gets 40."""
    storage = (StorageSpec("pfs", "central", 1000.0, 1000.0, 500.0, True),)
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8}, storage=storage)
    model = StorageModel(plan)
    gpu_job = np.full(plan.n_gpus, -1)
    gpu_job[:8] = 0
    r = model.supply(gpu_job, np.array([500e9 / 2]))
    assert r.central_read_gb_s.tolist() == [40.0]
    assert (model.node_read_gb_s, model.node_write_gb_s) == (40.0, 20.0)
    assert math.isclose(StorageModel(plan_cluster(
        "t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree", fabric_kw={"radix": 8},
        storage=(StorageSpec("pfs", "central", 1e3, 1e3, 5e2, True, 8.0, 4.0),))
    ).node_read_gb_s, 8.0)
