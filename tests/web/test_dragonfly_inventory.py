"""A plain Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008) in the inventory: written and read
back exactly, local links as local links; built by ``build_cluster --fabric dragonfly``."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.management import call_command

from scheduler.fabric.routing import Router
from scheduler.fabric.topology import LINK_KINDS
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.presets import get_preset
from scheduler.snapshot import plan_digest
from twin import models as m
from twin.inventory.adapter import cluster_plan_read, cluster_plan_write

FABRIC = ("switch_tier", "switch_pod", "switch_rail", "endpoint_leaf", "link_a", "link_b",
          "link_kind")


def _small_plan(name="df-small"):
    # p = 2 terminals per router, a = 4, h = 2: 9 groups of 8 GPUs at most (Kim et al., Fig. 5)
    return plan_cluster(name, (NodeGroup("H100-SXM", 8),), fabric_kind="dragonfly",
                        fabric_kw={"p": 2})


@pytest.mark.parametrize("plan", [_small_plan(), get_preset("dragonfly-16k").plan()],
                         ids=["p2-64gpus", "dragonfly-16k"])
def test_a_plain_dragonfly_reads_back_array_for_array_with_its_link_kinds(db, plan):
    read = cluster_plan_read(cluster=cluster_plan_write(plan))
    for name in FABRIC:
        np.testing.assert_array_equal(getattr(read.fabric, name), getattr(plan.fabric, name),
                                      err_msg=name)
    assert (read.fabric.kind, read.fabric.radix, read.fabric.port_gbps) == (
        "dragonfly", plan.fabric.radix, plan.fabric.port_gbps)
    kinds = read.fabric.link_kind
    assert set(np.unique(kinds).tolist()) == {LINK_KINDS.index("local"),
                                                LINK_KINDS.index("global")}
    assert plan_digest(read) == plan_digest(plan)


def test_local_links_read_back_inside_one_group_and_global_links_between_groups(db):
    """The reviewer's mutation: reading every same-tier link as global (the old behaviour)
    fails here, because a plain Dragonfly's routers are all one tier."""
    f = cluster_plan_read(cluster=cluster_plan_write(_small_plan())).fabric
    pod_a, pod_b = f.switch_pod[f.link_a], f.switch_pod[f.link_b]
    local = f.link_kind == LINK_KINDS.index("local")
    assert local.sum() == 8 * (4 * 3 // 2)       # 8 groups of 4 routers joined all-to-all
    assert np.all(pod_a[local] == pod_b[local]) and np.all(pod_a[~local] != pod_b[~local])


def test_the_read_back_plan_routes_jobs_like_the_written_one(db):
    plan = _small_plan()
    read = cluster_plan_read(cluster=cluster_plan_write(plan))
    jobs = [np.arange(0, 32), np.arange(32, 64)]
    a = Router(plan.fabric, gpus_per_node=8).update(jobs, 400.0)
    b = Router(read.fabric, gpus_per_node=8).update(jobs, 400.0)
    np.testing.assert_allclose(b.link_load_gbps, a.link_load_gbps)
    np.testing.assert_allclose(b.job_share, a.job_share)


def test_build_cluster_builds_a_plain_dragonfly(db):
    call_command("build_cluster", "--fabric", "dragonfly", "--gpus", "1024")
    cluster = m.Cluster.objects.get(name="dragonfly-1024")
    assert cluster.fabric_kind == "dragonfly"
    plan = cluster_plan_read(cluster=cluster)
    assert plan.n_gpus == 1024 and plan.fabric.params.get("p", 16) == 16
    assert (plan.fabric.link_kind == LINK_KINDS.index("local")).any()


def test_build_cluster_dragonfly_preset(db):
    call_command("build_cluster", "--preset", "dragonfly-16k", "--dry-run")
    assert m.Cluster.objects.count() == 0
