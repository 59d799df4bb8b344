"""The ``llama3-16k`` preset on Meta's 3,072-GPU zones at 1:7 (issue 29, item 4).

Sources: the Llama 3 report (sec. 3.3.1) and Gangidi et al. (SIGCOMM 2024): the 16K-GPU job ran
on Meta's 24K cluster of 3,072-GPU pods (192 racks of 16 GPUs), 1:7 above the pods.  The
preset builds its 2,112 nodes (2,048 for the job, 64 hot spares) on six such zones with the
builder ``meta-24k`` uses.  The counts below are the builder's arithmetic for that shape (a
golden: they move only when the preset or the zone builder changes); the old radix-64 islands
gave 10 islands of 1,792 GPUs, 560 leaves, 320 spines, 64 cores and 37,376 cabled links.
"""

import numpy as np
import pytest

from scheduler.fabric import compute_zones, endpoint_pod
from scheduler.presets import get_preset
from scheduler.workload.scenarios import refabric, scaled_preset

ZONE_GPUS = 3072


@pytest.fixture(scope="module")
def plan():
    return get_preset("llama3-16k").plan()


def test_llama3_preset_is_six_meta_zones_built_as_meta_24k_builds_them(plan):
    """Six zones of 192 leaves x 16 GPUs, 16 chassis spines each with 27 uplinks (7.1 : 1),
    16 aggregation chassis (one per spine plane: 6 x 27 = 162 ports fit a 576-port chassis);
    the same arrays the zone builder gives for six zones."""
    f = plan.fabric
    ref = compute_zones(6)
    for name in ("switch_tier", "switch_pod", "endpoint_leaf", "link_a", "link_b", "link_kind"):
        assert np.array_equal(getattr(f, name), getattr(ref, name)), name
    s = plan.summary()
    assert s["switches"] == {"leaf": 1152, "spine": 96, "core": 16}
    assert f.n_endpoints == 6 * ZONE_GPUS == 18_432
    # 1,152 x 16 leaf-spine + 96 x 27 spine-aggregation links, plus 16,896 GPU links
    assert s["links"] == 1152 * 16 + 96 * 27 + 16_896 == 37_920
    assert s["racks"] == 1056 and s["gpus"] == 16_896


def test_llama3_job_nodes_fill_five_zones_and_a_third_spares_and_empty_ports_in_the_sixth(plan):
    """Nodes are cabled in order: the 2,048 job nodes fill zones 0-4 and 1,024 GPUs (64 racks)
    of zone 5; the 64 spares the next 512 GPUs (32 racks) of zone 5; its last 96 leaves
    (1,536 ports) have no GPU."""
    f = plan.fabric
    pods = endpoint_pod(f)
    gpu_pod = pods[: plan.n_gpus]
    spare_gpu = np.repeat(plan.node_spare, plan.node_gpus)
    assert np.bincount(gpu_pod[~spare_gpu]).tolist() == [ZONE_GPUS] * 5 + [1024]
    assert set(gpu_pod[spare_gpu].tolist()) == {5}
    assert int(spare_gpu.sum()) == 512
    cabled = np.zeros(f.n_switches(), bool)
    cabled[f.endpoint_leaf[: plan.n_gpus]] = True
    empty = np.flatnonzero((f.switch_tier == 0) & ~cabled)
    assert empty.size == 96 and set(f.switch_pod[empty].tolist()) == {5}


@pytest.mark.parametrize(("gpus", "zones"), [(1024, 1), (8448, 3), (12_672, 5)])
def test_scaled_llama3_presets_keep_3072_gpu_zones(gpus, zones):
    """``--gpus`` scales the nodes, not the zone: the fewest 3,072-GPU zones that hold them
    (one zone: no aggregation layer)."""
    preset, _ = scaled_preset("llama3-16k", gpus)
    f = preset.plan().fabric
    assert f.params["zones"] == zones and f.params["island_endpoints"] == ZONE_GPUS
    assert (f.params["cores_per_plane"] > 0) == (zones > 1)


@pytest.mark.parametrize(("ratio", "uplinks"), [(1.0, 192), (3.0, 64), (7.0, 27)])
def test_llama3_oversubscription_what_ifs_resize_the_zone_uplinks(ratio, uplinks):
    """``refabric`` (the CLI's and the studies' ``--oversubscription``) keeps the zones and
    changes the spines' uplinks: 192 / R, rounded."""
    f = refabric(get_preset("llama3-16k"), None, ratio).plan().fabric
    assert f.params["island_endpoints"] == ZONE_GPUS
    assert f.params["spine_uplinks"] == uplinks
