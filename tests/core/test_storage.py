"""The storage tiers limit a job's input reads and checkpoint writes.

Module: scheduler/physics/storage.py.  Expected values are worked by hand in comments (text
2 bytes per token, a node's storage NICs 2 x 400 Gb/s = 100 GB/s, the DGX SuperPOD RA's "Best"
single-node read of 40 GB/s, a bounce buffer 50 GB/s per node), not read back from the
module's constants.
"""

import numpy as np
import pytest

from scheduler.hardware.cluster import NodeGroup, StorageSpec, plan_cluster
from scheduler.physics.storage import (
    TEXT_BYTES_PER_TOKEN,
    VISION_BYTES_PER_TOKEN,
    StorageModel,
    max_min_share,
)

NVME_TB = 30.72  # per node (NodeShape default: a DGX H100's 8 x 3.84 TB)


def plan(nodes=4, *, read=10.0, write=5.0, gpudirect=True, nvme_read_per_node=None,
         node_read=None):
    storage = [StorageSpec("pfs", "central", 1000.0, read, write, gpudirect,
                           node_read_gb_s=node_read)]
    if nvme_read_per_node is not None:
        storage.append(StorageSpec("nvme", "nvme", nodes * NVME_TB, nodes * nvme_read_per_node,
                                   nodes * 12.0, gpudirect))
    return plan_cluster("t", (NodeGroup("H100-SXM", nodes),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8}, storage=tuple(storage))


def one_node_each(p, jobs):
    """Job i on node i (8 GPUs), the other nodes free."""
    gpu_job = np.full(p.n_gpus, -1)
    gpu_job[: 8 * jobs] = np.repeat(np.arange(jobs), 8)
    return gpu_job


def tokens_for(gb_s, bpt=TEXT_BYTES_PER_TOKEN):
    return np.asarray(gb_s, dtype=float) * 1e9 / bpt


def test_jobs_without_cache_starve_when_demand_exceeds_the_central_tier():
    p = plan(read=10.0)
    r = StorageModel(p).supply(one_node_each(p, 2), tokens_for([8.0, 8.0]))
    assert r.read_supply_gb_s.tolist() == [5.0, 5.0]
    assert np.allclose(r.data_stall_fraction, 0.375)  # 5 of the 8 GB/s asked: 3/8 stalled
    central = r.tier("central_read")
    assert (central.demand_gb_s, central.supply_gb_s, central.capacity_gb_s) == (16.0, 10.0, 10.0)


def test_a_job_whose_demand_is_met_does_not_stall():
    p = plan(read=10.0)
    r = StorageModel(p).supply(one_node_each(p, 1), tokens_for([4.0]))
    assert r.data_stall_fraction.tolist() == [0.0]
    assert r.tier("gpu").supply_gb_s == 4.0


def test_a_cached_dataset_is_read_from_node_nvme_after_the_first_pass():
    p = plan(read=10.0, nvme_read_per_node=25.0)
    model = StorageModel(p)
    args = (one_node_each(p, 1), tokens_for([20.0]))
    warm = model.supply(*args, dataset_gb=[10_000.0], passes_done=[1.0])
    assert warm.hit_rate.tolist() == [1.0]
    assert warm.cache_read_gb_s.tolist() == [20.0]
    assert warm.central_read_gb_s.tolist() == [0.0]
    assert warm.data_stall_fraction.tolist() == [0.0]
    first = model.supply(*args, dataset_gb=[10_000.0], passes_done=[0.5])
    assert first.cache_read_gb_s.tolist() == [0.0]
    assert first.central_read_gb_s.tolist() == [10.0]
    assert first.data_stall_fraction.tolist() == [0.5]


def test_a_dataset_twice_the_cache_hits_half_and_reads_the_rest_centrally():
    p = plan(read=100.0, nvme_read_per_node=25.0)
    r = StorageModel(p).supply(one_node_each(p, 1), tokens_for([20.0]),
                               dataset_gb=[2 * NVME_TB * 1000.0], passes_done=[3.0])
    assert r.hit_rate.tolist() == [0.5]
    assert r.cache_read_gb_s.tolist() == [10.0]
    assert r.central_read_gb_s.tolist() == [10.0]


def test_cache_reads_are_limited_by_node_nvme_bandwidth_and_the_rest_goes_central():
    p = plan(read=100.0, nvme_read_per_node=25.0)
    r = StorageModel(p).supply(one_node_each(p, 1), tokens_for([40.0]), dataset_gb=[1000.0])
    assert r.cache_read_gb_s.tolist() == [25.0]
    assert r.central_read_gb_s.tolist() == [15.0]
    assert r.tier("nvme_read").capacity_gb_s == 100.0


def test_without_gpudirect_reads_bounce_through_host_memory_and_a_node_reads_less():
    p = plan(read=1000.0, gpudirect=True, node_read=100.0)  # up to the NICs
    args = (one_node_each(p, 1), tokens_for([80.0]))
    direct = StorageModel(p).supply(*args)
    bounced = StorageModel(p, gpudirect=False).supply(*args)
    assert direct.read_supply_gb_s.tolist() == [80.0]
    assert bounced.read_supply_gb_s.tolist() == [50.0]  # the host bounce buffer of a node
    assert bounced.read_supply_gb_s[0] < direct.read_supply_gb_s[0]


def test_gpudirect_defaults_to_the_storage_spec():
    assert StorageModel(plan(gpudirect=False)).gpudirect_central is False
    assert StorageModel(plan(gpudirect=True)).gpudirect_central is True


def test_a_job_reads_no_faster_than_its_storage_nics():
    p = plan(read=1000.0, node_read=1000.0)
    r = StorageModel(p).supply(one_node_each(p, 1), tokens_for([500.0]))
    assert r.central_read_gb_s.tolist() == [100.0]  # 2 x 400 Gb/s storage ports


def test_a_node_reads_no_faster_than_the_reference_single_node_figure():
    """Validation of the default: DGX SuperPOD H100 RA (RA-11333-001), storage guidance,
    "Best" single-node read 40 GB/s; exact (the figure is the default, a regression check)."""
    p = plan(read=1000.0)
    r = StorageModel(p).supply(one_node_each(p, 1), tokens_for([500.0]))
    assert r.central_read_gb_s.tolist() == [40.0]


def test_two_jobs_writing_checkpoints_get_half_the_write_bandwidth_each():
    p = plan(write=40.0)
    r = StorageModel(p).supply(one_node_each(p, 2), np.zeros(2),
                               checkpoint_write_gb_s=[np.inf, np.inf])
    assert r.checkpoint_write_gb_s.tolist() == [20.0, 20.0]
    assert r.tier("central_write").supply_gb_s == 40.0


def test_checkpoint_writes_share_the_central_budget_with_reads():
    # read/R + write/W <= 1: reading half of R leaves half of W to write
    p = plan(read=20.0, write=10.0)
    r = StorageModel(p).supply(one_node_each(p, 2), tokens_for([10.0, 0.0]),
                               checkpoint_write_gb_s=[0.0, np.inf])
    assert r.central_read_gb_s.tolist() == [10.0, 0.0]
    assert r.checkpoint_write_gb_s.tolist() == [0.0, 5.0]


def test_max_min_a_small_job_gets_its_full_demand_and_a_large_one_the_rest():
    p = plan(nodes=9, read=100.0)
    gpu_job = np.repeat([0, 1, 1, 1, 1, 1, 1, 1, 1], 8)      # 1 node and 8 nodes
    r = StorageModel(p).supply(gpu_job, tokens_for([4.0, 1000.0]))
    assert r.central_read_gb_s.tolist() == [4.0, 96.0]
    assert r.data_stall_fraction[0] == 0.0


def test_max_min_share_is_weighted_water_filling():
    assert max_min_share([5.0, 50.0, 50.0], 45.0).tolist() == [5.0, 20.0, 20.0]
    assert max_min_share([5.0, 50.0], 100.0).tolist() == [5.0, 50.0]
    assert max_min_share([30.0, 30.0], 30.0, weight=[1.0, 2.0]).tolist() == [10.0, 20.0]
    assert max_min_share([1.0], 0.0).tolist() == [0.0]


def test_a_storage_slowdown_halves_the_central_supply():
    p = plan(read=10.0, write=4.0)
    model = StorageModel(p)
    args = (one_node_each(p, 2), tokens_for([8.0, 8.0]))
    full = model.supply(*args, checkpoint_write_gb_s=[np.inf, 0.0])
    slow = model.supply(*args, checkpoint_write_gb_s=[np.inf, 0.0], central_factor=0.5)
    assert slow.tier("central_read").capacity_gb_s == 5.0
    assert slow.tier("central_read").supply_gb_s == pytest.approx(
        full.tier("central_read").supply_gb_s / 2)
    assert slow.checkpoint_write_gb_s[0] == pytest.approx(full.checkpoint_write_gb_s[0] / 2)


def test_vision_jobs_read_far_more_bytes_per_token_than_text():
    p = plan(read=1000.0)
    r = StorageModel(p).supply(one_node_each(p, 2), [1e6, 1e6], vision=[False, True])
    # 1e6 tokens/s: text at 2 bytes per token (uint16 ids) is 2 MB/s; vision at 110 KB per
    # ImageNet JPEG over 196 patches (224 x 224 in 16 x 16) is 561.2 bytes per token
    assert r.read_demand_gb_s.tolist() == pytest.approx([0.002, 0.5612], rel=1e-3)


def test_regression_vision_bytes_per_token_is_the_imagenet_archive_rounded():
    """Regression check, not validation.

    Fitted: the 110 KB per sample behind ``VISION_BYTES_PER_TOKEN`` is the ILSVRC2012
    training archive, about 138 GB for 1,281,167 images (107.7 KB each), rounded; per
    ViT-B/16 token (196 patches) that is 549.6 bytes.  The rounding must stay within 3 %.
    """
    assert VISION_BYTES_PER_TOKEN == pytest.approx(138e9 / 1_281_167 / 196, rel=0.03)
    assert TEXT_BYTES_PER_TOKEN == 2


def test_a_job_sharing_a_node_gets_its_gpus_share_of_the_node():
    p = plan(nodes=1, read=1000.0)
    gpu_job = np.repeat([0, 1], 4)
    r = StorageModel(p).supply(gpu_job, tokens_for([500.0, 0.0]))
    assert r.central_read_gb_s.tolist() == [20.0, 0.0]  # half the node's 40 GB/s


def test_the_gpu_job_map_must_cover_every_gpu_and_name_given_jobs():
    p = plan()
    model = StorageModel(p)
    with pytest.raises(ValueError, match="one entry per GPU"):
        model.supply(np.zeros(3, dtype=int), [1.0])
    with pytest.raises(ValueError, match="only 1 jobs"):
        model.supply(one_node_each(p, 2), [1.0])


def test_a_plan_without_storage_serves_nothing():
    p = plan_cluster("t", (NodeGroup("H100-SXM", 1),), fabric_kind="fat-tree",
                     fabric_kw={"radix": 8})
    r = StorageModel(p).supply(np.zeros(8, dtype=int), [1e9])
    assert r.data_stall_fraction.tolist() == [1.0]


def test_a_thousand_jobs_on_a_hundred_thousand_gpus_share_the_tiers():
    """Functional check at scale (the time it takes is measured in bench/, not here)."""
    from scheduler.presets import get_preset
    p = get_preset("hyperscale-100k").plan()
    model = StorageModel(p)
    rng = np.random.default_rng(0)
    gpu_job = np.full(p.n_gpus, -1)
    gpu_job[:96_000] = np.repeat(np.arange(1000), 96)
    kw = dict(vision=rng.random(1000) < 0.2, passes_done=2 * rng.random(1000),
              checkpoint_write_gb_s=np.where(rng.random(1000) < 0.1, np.inf, 0.0))
    tokens = rng.uniform(1e5, 1e8, 1000)
    r = model.supply(gpu_job, tokens, **kw)
    assert r.tier("central_write").supply_gb_s <= p.storage[0].write_gb_s + 1e-6
    assert np.all(r.read_supply_gb_s <= r.read_demand_gb_s + 1e-9)
    assert np.all((r.data_stall_fraction >= 0) & (r.data_stall_fraction <= 1))
    # a repeated call gives the same answer (no state carried between calls)
    assert np.array_equal(model.supply(gpu_job, tokens, **kw).read_supply_gb_s,
                          r.read_supply_gb_s)
