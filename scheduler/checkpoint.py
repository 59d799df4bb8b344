"""Checkpoint write and restore times, uncontended.

A job's share of the central tier is proportional to its GPUs (the tier is sized per GPU, the
vendors' rule of thumb of about 1 GB/s per GPU, figures.md), capped by the storage NICs of its
nodes.  Contention between jobs is the storage model's business (a later layer); this module
gives the per-job figures the engine books.
"""

from __future__ import annotations

NODE_STORAGE_GB_S = 100.0
"""Storage bandwidth one node can drive, GB/s: a DGX H100 has two dual-port 400G cards for
storage and in-band traffic (figures.md); one 400 Gb/s port each is 100 GB/s."""

RESTART_FIXED_S = 180.0
"""Relaunch, rendezvous and NCCL communicator set-up before the restore, s (assumed: the
Llama 3 report and MegaScale describe restarts of minutes but give no split)."""


def job_bandwidth_gb_s(*, gpus: int, nodes: int, tier_gb_s: float, cluster_gpus: int) -> float:
    """Bandwidth a job gets from a storage tier, GB/s.

    >>> job_bandwidth_gb_s(gpus=16384, nodes=2048, tier_gb_s=2000.0, cluster_gpus=16896)
    1939.3939393939393
    """
    share = tier_gb_s * gpus / max(1, cluster_gpus)
    return min(share, nodes * NODE_STORAGE_GB_S)


def write_seconds(checkpoint_gb: float, bandwidth_gb_s: float) -> float:
    """Time to write one checkpoint, s (zero for a job without checkpoint state)."""
    return checkpoint_gb / bandwidth_gb_s if checkpoint_gb > 0 and bandwidth_gb_s > 0 else 0.0


def restart_seconds(checkpoint_gb: float, read_gb_s: float) -> float:
    """Restart overhead: relaunch plus restore of the last checkpoint, s."""
    return RESTART_FIXED_S + write_seconds(checkpoint_gb, read_gb_s)
