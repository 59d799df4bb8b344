"""Shared fixtures: small literal clusters and logged-in clients for each demo role."""

import pytest

from scheduler.hardware.cluster import NodeGroup, plan_cluster


@pytest.fixture
def small_plan():
    """64 H100 GPUs and 32 MI300X GPUs on a radix-8 fat-tree (128 ports)."""
    return plan_cluster("tiny", (NodeGroup("H100-SXM", 8), NodeGroup("MI300X", 4, spares=1)),
                        fabric_kind="fat-tree", fabric_kw={"radix": 8})
