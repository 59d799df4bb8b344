"""The inventory is the twin: the plan the engine runs is read back from the database rows.

A preset's plan written with ``cluster_plan_write`` and read with ``cluster_plan_read`` must be
the same cluster, array for array, for every fabric kind; an edit to the rows must show in the
plan read next; and an inventory the engine cannot run is refused with the row named.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.snapshot import plan_digest
from scheduler.workload.scenarios import refabric, scaled_preset
from twin import models as m
from twin.inventory.adapter import cluster_plan_read, cluster_plan_write

ARRAYS = ("node_model", "node_gpus", "node_first_gpu", "node_rack", "node_slot", "node_spare",
          "node_nvlink_domain", "rack_hall", "rack_row", "rack_col", "rack_power_kw")
FABRIC = ("switch_tier", "switch_pod", "switch_rail", "endpoint_leaf", "link_a", "link_b",
          "link_kind")


def same_plan(a, b) -> None:
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in FABRIC:
        np.testing.assert_array_equal(getattr(a.fabric, name), getattr(b.fabric, name),
                                      err_msg=name)
    assert [x.name for x in a.models] == [x.name for x in b.models]
    assert a.node_shape == b.node_shape
    assert (a.fabric.kind, a.fabric.radix, a.fabric.port_gbps) == (
        b.fabric.kind, b.fabric.radix, b.fabric.port_gbps)
    assert a.storage == b.storage and a.cloud_pools == b.cloud_pools
    assert plan_digest(a) == plan_digest(b)


def preset_plan(preset: str, gpus: int, fabric: str | None = None):
    spec, _ = scaled_preset(preset, gpus)
    return refabric(spec, fabric, None).plan(name=f"{preset}-{fabric or 'own'}")


@pytest.mark.parametrize("preset,gpus,fabric", [
    ("dev-small", 256, None),
    ("mixed-vendor", 512, None),
    ("dev-small", 256, "dragonfly+"),
    ("dev-small", 256, "rail"),
    ("dev-small", 512, "island"),
])
def test_a_written_plan_reads_back_as_the_same_cluster(db, preset, gpus, fabric):
    plan = preset_plan(preset, gpus, fabric)
    cluster = cluster_plan_write(plan)
    same_plan(cluster_plan_read(cluster=cluster), plan)


def test_an_edit_to_the_rows_is_in_the_next_plan(db, small_plan):
    cluster = cluster_plan_write(small_plan)
    before = cluster_plan_read(cluster=cluster)
    node = m.Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")[2]
    node.is_spare = True
    node.save()
    after = cluster_plan_read(cluster=cluster)
    assert after.node_spare[2] and not before.node_spare[2]
    assert plan_digest(after) != plan_digest(before)


def test_a_node_without_nic_links_is_refused_by_name(db, small_plan):
    cluster = cluster_plan_write(small_plan)
    node = m.Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")[1]
    m.Link.objects.filter(node=node, node_port=3).delete()
    with pytest.raises(ValueError, match=rf"{node.hostname}: accelerator 3 has no NIC link"):
        cluster_plan_read(cluster=cluster)


def test_a_cluster_without_nodes_is_refused(db):
    cluster = m.Cluster.objects.create(name="empty", fabric_kind="fat-tree")
    with pytest.raises(ValueError, match="has no nodes"):
        cluster_plan_read(cluster=cluster)


def test_plans_of_two_clusters_differ_in_fingerprint(db):
    a = plan_cluster("a", (NodeGroup("H100-SXM", 8),), fabric_kind="fat-tree",
                     fabric_kw={"radix": 8})
    b = replace(a, name="b", node_spare=np.array([True] + [False] * 7))
    assert plan_digest(a) != plan_digest(b)
