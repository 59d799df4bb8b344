"""Shared fixtures: small literal clusters and logged-in clients for each demo role."""

import pytest

from scheduler.hardware.cluster import NodeGroup, plan_cluster

LONG_POLES = (
    "tests/slurm/test_slurm_agreement.py",  # four real Slurms replaying a minute each: ~4.6 min
    "tests/browser/test_one_world.py",
    "tests/faults/test_crash.py",
    "tests/browser/test_layout.py",
    "tests/browser/test_incidents.py",
    "tests/browser/test_incidents_noc.py",
    "tests/web/test_shutdown.py",
    "tests/prometheus/test_twin_scrape.py",
)
"""The modules that take longest (``--durations``), longest first: ``make test`` hands whole
modules to its workers in collection order (``--dist loadfile --no-loadscope-reorder``), and
starting the long poles first keeps one of them from being the last thing running."""


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONG_POLES)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))



@pytest.fixture
def small_plan():
    """64 H100 GPUs and 32 MI300X GPUs on a radix-8 fat-tree (128 ports)."""
    return plan_cluster("tiny", (NodeGroup("H100-SXM", 8), NodeGroup("MI300X", 4, spares=1)),
                        fabric_kind="fat-tree", fabric_kw={"radix": 8})
