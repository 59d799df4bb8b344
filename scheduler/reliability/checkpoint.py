"""Checkpoint write and restore times, uncontended.

A job's share of the central tier is proportional to its GPUs (the tier is sized per GPU, the
vendors' rule of thumb of about 1 GB/s per GPU, figures.md), capped by the storage NICs of its
nodes.  Contention between jobs is the storage model's business (a later layer); this module
gives the per-job figures the engine books.
"""

from __future__ import annotations

import numpy as np

NODE_STORAGE_GB_S = 100.0
"""Storage bandwidth one node can drive, GB/s: a DGX H100 has two dual-port 400G cards for
storage and in-band traffic (figures.md); one 400 Gb/s port each is 100 GB/s."""

RESTART_FIXED_S = 180.0
"""Relaunch, rendezvous and NCCL communicator set-up before the restore, s (assumed: the
Llama 3 report and MegaScale describe restarts of minutes but give no split)."""


def job_bandwidth_gb_s(*, gpus: int, nodes: int, tier_gb_s: float, cluster_gpus: int) -> float:
    """Bandwidth a job gets from a storage tier, GB/s.

    >>> round(job_bandwidth_gb_s(gpus=16384, nodes=2048, tier_gb_s=2000.0, cluster_gpus=16896))
    1939
    """
    share = tier_gb_s * gpus / max(1, cluster_gpus)
    return min(share, nodes * NODE_STORAGE_GB_S)


def write_seconds(checkpoint_gb: float, bandwidth_gb_s: float) -> float:
    """Time to write one checkpoint, s (zero for a job without checkpoint state)."""
    return checkpoint_gb / bandwidth_gb_s if checkpoint_gb > 0 and bandwidth_gb_s > 0 else 0.0


def restart_seconds(checkpoint_gb: float, read_gb_s: float) -> float:
    """Restart overhead: relaunch plus restore of the last checkpoint, s."""
    return RESTART_FIXED_S + write_seconds(checkpoint_gb, read_gb_s)


HOST_COPY_GB_S = 25.0
"""GPU-to-host copy per GPU, GB/s (PCIe Gen5 x16 at about half its 64 GB/s line rate; assumed):
the only stall of an in-memory checkpoint, whose replication to peers overlaps training."""

NODE_RDMA_GB_S = 400.0
"""Peer-to-peer restore bandwidth per node, GB/s: 8 x 400 Gb/s compute NICs (figures.md)."""

DISK_PERSIST_S = 3 * 3600.0
"""With in-memory checkpoints, how often one is also persisted to the central tier, s (in the
background, as Gemini does); a restore falls back to it when a whole replica group is lost."""

RECOVERY_MODES = ("disk", "memory")
REPLICA_GROUP = 2
"""Nodes per in-memory replica group: each node's checkpoint shard also lives on its peer
(Gemini's group placement with two replicas)."""


class CheckpointCosts:
    """What a checkpoint write and a restart cost a gang on this cluster, now.

    The one place these are computed: the engine's starts, the backfill estimate (before a job
    ever ran) and the reports all ask here.  A storage slowdown scales the central tier's
    bandwidth through :meth:`scale_storage` until it is undone.

    Parameters
    ----------
    recovery : {"disk", "memory"}
        Checkpoint to the central tier, or to peers' memory (Gemini) with disk as fallback.
    write_gb_s, read_gb_s : float
        The central tier's write and read bandwidth, GB/s (0 if there is none).
    cluster_gpus : int
        GPUs sharing the tier.

    Examples
    --------
    >>> c = CheckpointCosts("disk", write_gb_s=1000.0, read_gb_s=2000.0, cluster_gpus=1000)
    >>> c.write_s(checkpoint_gb=800.0, gpus=100, nodes=13)  # 100 of 1,000 GPUs: 100 GB/s
    8.0
    >>> c.scale_storage(0.5); c.write_s(checkpoint_gb=800.0, gpus=100, nodes=13)
    16.0
    """

    def __init__(self, recovery: str, *, write_gb_s: float, read_gb_s: float,
                 cluster_gpus: int):
        if recovery not in RECOVERY_MODES:
            raise ValueError(f"recovery must be one of {RECOVERY_MODES}, not {recovery!r}")
        self.recovery = recovery
        self.write_gb_s = float(write_gb_s)
        self.read_gb_s = float(read_gb_s)
        self.cluster_gpus = int(cluster_gpus)
        self.storage_factor = 1.0

    def scale_storage(self, factor: float) -> None:
        """Multiply the central tier's bandwidth by ``factor`` (a slowdown starts)."""
        self.storage_factor *= factor

    def restore_storage(self, factor: float) -> None:
        """Undo a :meth:`scale_storage` by ``factor`` (the slowdown is over)."""
        self.storage_factor /= factor

    def _bandwidth(self, tier_gb_s: float, gpus: int, nodes: int) -> float:
        return job_bandwidth_gb_s(gpus=gpus, nodes=nodes, tier_gb_s=tier_gb_s,
                                  cluster_gpus=self.cluster_gpus) * self.storage_factor

    def write_s(self, *, checkpoint_gb: float, gpus: int, nodes: int) -> float:
        """Stall of one checkpoint of a gang of ``gpus`` GPUs on ``nodes`` nodes, s."""
        if self.recovery == "memory":
            return memory_write_seconds(checkpoint_gb, gpus)
        return write_seconds(checkpoint_gb, self._bandwidth(self.write_gb_s, gpus, nodes))

    def restart_s(self, *, checkpoint_gb: float, gpus: int, nodes: int,
                  from_disk: bool = False) -> float:
        """Relaunch plus restore, s: from peers' memory, or from the central tier."""
        if self.recovery == "memory" and not from_disk:
            return memory_restore_seconds(checkpoint_gb, nodes)
        return restart_seconds(checkpoint_gb, self._bandwidth(self.read_gb_s, gpus, nodes))


def young_interval(cost_s: float, mttf_s: float) -> float:
    """Young (1974): ``sqrt(2 C M)`` for checkpoint cost ``C`` and mean time to failure ``M``.

    >>> young_interval(100.0, 20000.0)
    2000.0
    """
    return (2.0 * cost_s * mttf_s) ** 0.5


def daly_interval(cost_s: float, mttf_s: float) -> float:
    """Daly (FGCS 22(3), 2006) higher-order optimum compute time between checkpoints, s.

    ``sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + (C / 2M) / 9) - C`` for ``C < 2M``, else ``M``.
    It tends to Young's form when ``C / M`` is small.

    >>> round(daly_interval(100.0, 20000.0), 1)
    1933.9
    >>> daly_interval(50000.0, 20000.0)
    20000.0
    """
    if cost_s <= 0:
        return 60.0
    if cost_s >= 2.0 * mttf_s:
        return mttf_s
    x = cost_s / (2.0 * mttf_s)
    return young_interval(cost_s, mttf_s) * (1.0 + x ** 0.5 / 3.0 + x / 9.0) - cost_s


def memory_write_seconds(checkpoint_gb: float, gpus: int) -> float:
    """Stall of an in-memory checkpoint: each GPU copies its shard to host memory, s."""
    return checkpoint_gb / max(1, gpus) / HOST_COPY_GB_S if checkpoint_gb > 0 else 0.0


def memory_restore_seconds(checkpoint_gb: float, nodes: int) -> float:
    """Restart from a peer's in-memory replica: relaunch plus an RDMA copy per node, s."""
    return RESTART_FIXED_S + checkpoint_gb / max(1, nodes) / NODE_RDMA_GB_S


def replica_group_lost(job_nodes, failed_nodes) -> bool:
    """Whether every node of one replica group (consecutive ranks) of a gang has failed.

    >>> replica_group_lost([10, 11, 12, 13], [11])
    False
    >>> replica_group_lost([10, 11, 12, 13], [12, 13])
    True
    """
    nodes = np.asarray(job_nodes)
    if nodes.size < REPLICA_GROUP:
        return bool(np.isin(nodes, failed_nodes).all())
    down = np.isin(nodes, failed_nodes)
    full = (nodes.size // REPLICA_GROUP) * REPLICA_GROUP
    groups = down[:full].reshape(-1, REPLICA_GROUP).all(axis=1)
    return bool(groups.any() or (full < nodes.size and down[full:].all()))


def disk_persisted_s(computed_s: float) -> float:
    """Compute of a segment already persisted to disk with in-memory checkpointing, s.

    >>> disk_persisted_s(4 * 3600.0) / 3600
    3.0
    """
    return (computed_s // DISK_PERSIST_S) * DISK_PERSIST_S
