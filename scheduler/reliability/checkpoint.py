"""Checkpoint write and restore times, and how a job's checkpoints are kept.

Three checkpoint modes (:data:`CHECKPOINT_MODES`):

* ``disk``: synchronous to the central tier; training stalls for the whole write.
* ``async``: asynchronous to disk (CheckFreq, FAST 2021; PyTorch DCP ``async_save``): the stall
  is only the device-to-host snapshot; persisting from host memory runs in the background, and a
  failure before it finishes loses back to the previous persisted checkpoint.
* ``memory``: Gemini (SOSP 2023): the snapshot is replicated to peers' CPU memory, which is
  what a restart restores from; a copy is persisted to disk every :data:`DISK_PERSIST_S`, and a
  failure that takes out a whole replica group falls back to it.

Bandwidth: a job writes (and restores) at its node-weighted share of the central tier among the
jobs expected to use it at the same time (:class:`TierLoad`, with the sharing rule of
:func:`scheduler.physics.storage.checkpoint_share_gb_s`), capped by its nodes' storage NICs: an
idle tier serves one job at the per-node or per-tier limit, not only at its GPU share.

A restart is split into detection (the failure mode's own, :mod:`~scheduler.reliability.failures`,
unless overridden), rescheduling, loading (restore bandwidth as above) and warm-up
(:class:`RestartTimes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scheduler.physics.storage import NODE_STORAGE_GB_S, checkpoint_share_gb_s

RESCHEDULE_S = 120.0
"""Rescheduling: relaunch of the job's processes, rendezvous, NCCL communicator set-up, s
(assumed: the Llama 3 report and MegaScale describe restarts of minutes but give no split)."""

WARMUP_S = 60.0
"""Warm-up: the first slow iterations after a restore (allocator, compile and NCCL caches), s
(assumed; with :data:`RESCHEDULE_S` it keeps the earlier 180 s fixed restart cost)."""

RESTART_FIXED_S = RESCHEDULE_S + WARMUP_S
"""The restart's fixed part (rescheduling plus warm-up) at the defaults, s."""

HOST_COPY_GB_S = 25.0
"""Device-to-host snapshot per GPU, GB/s (PCIe Gen5 x16 at about half its 64 GB/s line rate;
assumed): the only stall of an asynchronous or in-memory checkpoint."""

NODE_RDMA_GB_S = 400.0
"""Peer-to-peer restore bandwidth per node, GB/s: 8 x 400 Gb/s compute NICs (figures.md)."""

REPLICATION_GB_S_PER_NODE = 50.0
"""Bandwidth one node gives to replicating its checkpoint shard to its peers' CPU memory, GB/s
(assumed: Gemini interleaves checkpoint traffic with training traffic in the network's idle
time, so it gets a fraction of the 400 GB/s of compute NICs; one eighth here).  The in-memory
copy of a checkpoint is complete only this long after its snapshot."""

DISK_PERSIST_S = 3 * 3600.0
"""With in-memory checkpoints, how often one is also persisted to the central tier, s (in the
background, as Gemini does); a restore falls back to it when a whole replica group is lost
(assumed: BLOOM-176B's training checkpointed to disk every 3 h, the cadence Gemini cites)."""

CHECKPOINT_MODES = ("disk", "async", "memory")
RECOVERY_MODES = CHECKPOINT_MODES
MODE_ALIASES = {"sync": "disk", "in-memory": "memory"}
"""Other names a user may give a mode (the engine's names are :data:`CHECKPOINT_MODES`)."""
MODE_LABELS = {"disk": "sync (disk)", "async": "async (disk)", "memory": "in-memory"}
REPLICA_GROUP = 2
"""Nodes per in-memory replica group: each node's checkpoint shard also lives on its peer
(Gemini's group placement with two replicas)."""


@dataclass(frozen=True)
class RestartTimes:
    """The fixed parts of a restart, s; loading follows from the checkpoint and the storage.

    Parameters
    ----------
    detect_s : float or None
        Time from a failure to its detection; ``None``: each failure mode's own (Xid and health
        checks about 2 min, the NCCL watchdog 10 min, :mod:`~scheduler.reliability.failures`).
    reschedule_s : float
        Relaunch, rendezvous and communicator set-up (:data:`RESCHEDULE_S`).
    warmup_s : float
        Slow first iterations after the restore (:data:`WARMUP_S`).
    """

    detect_s: float | None = None
    reschedule_s: float = RESCHEDULE_S
    warmup_s: float = WARMUP_S

    @property
    def fixed_s(self) -> float:
        """Rescheduling plus warm-up, s."""
        return self.reschedule_s + self.warmup_s


def job_bandwidth_gb_s(*, gpus: int, nodes: int, tier_gb_s: float, cluster_gpus: int) -> float:
    """Bandwidth a job got from a storage tier at its GPU share, GB/s (the earlier model, kept
    for callers that have no view of the other jobs).

    >>> round(job_bandwidth_gb_s(gpus=16384, nodes=2048, tier_gb_s=2000.0, cluster_gpus=16896))
    1939
    """
    share = tier_gb_s * gpus / max(1, cluster_gpus)
    return min(share, nodes * NODE_STORAGE_GB_S)


def write_seconds(checkpoint_gb: float, bandwidth_gb_s: float) -> float:
    """Time to move one checkpoint at ``bandwidth_gb_s``, s (zero without checkpoint state)."""
    return checkpoint_gb / bandwidth_gb_s if checkpoint_gb > 0 and bandwidth_gb_s > 0 else 0.0


def restart_seconds(checkpoint_gb: float, read_gb_s: float,
                    times: RestartTimes = RestartTimes()) -> float:
    """Restart overhead after detection: rescheduling, loading the checkpoint, warm-up, s.

    >>> restart_seconds(2000.0, 100.0)  # 120 + 20 + 60
    200.0
    """
    return times.fixed_s + write_seconds(checkpoint_gb, read_gb_s)


def snapshot_seconds(checkpoint_gb: float, gpus: int) -> float:
    """Device-to-host snapshot of each GPU's shard, all in parallel, s.

    >>> snapshot_seconds(500.0, 16)  # 31.25 GB per GPU at 25 GB/s
    1.25
    """
    return checkpoint_gb / max(1, gpus) / HOST_COPY_GB_S if checkpoint_gb > 0 else 0.0


def replication_seconds(checkpoint_gb: float, nodes: int) -> float:
    """Time for every node to send its shard to its replica peer, s (in the background).

    >>> replication_seconds(800.0, 4)  # 200 GB per node at 50 GB/s
    4.0
    """
    return checkpoint_gb / max(1, nodes) / REPLICATION_GB_S_PER_NODE if checkpoint_gb > 0 else 0.0


def gemini_wasted_s(*, checkpoint_s: float, interval_s: float, retrieve_s: float) -> float:
    """Gemini's (SOSP 2023, sec. 2) average time wasted per failure: ``t_ckpt + 1 / (2 f) +
    t_rtvl`` for a checkpoint that takes ``t_ckpt`` to complete, taken every ``1 / f`` and
    retrieved in ``t_rtvl``: on average half an interval is lost, and the checkpoint being
    written when the failure strikes is of no use.  Detection and relaunch are left out.
    It is the ``mttf_s -> inf`` limit of :func:`waste_per_failure_s` for a checkpoint that
    does not stall training (``async``, ``memory``).

    >>> gemini_wasted_s(checkpoint_s=60.0, interval_s=3600.0, retrieve_s=120.0)
    1980.0
    """
    return checkpoint_s + interval_s / 2.0 + retrieve_s


def mode_price(mode: str, *, write_s: float, snapshot_s: float = 0.0,
               replicate_s: float = 0.0) -> CheckpointPrice:
    """Stall, usable-after lag and tier occupancy of one checkpoint in ``mode``, from the time
    the central tier takes to write it (``write_s``), the device-to-host snapshot and the
    replication to a peer's memory: ``disk`` stalls for the write; ``async`` stalls for the
    snapshot and is usable once persisted (the write); ``memory`` stalls for the snapshot and
    is usable once replicated.  Names in :data:`MODE_ALIASES` are accepted.

    >>> mode_price("sync", write_s=2520.0, snapshot_s=0.1)
    CheckpointPrice(stall_s=2520.0, lag_s=0.0, busy_s=2520.0)
    >>> mode_price("async", write_s=2520.0, snapshot_s=0.1).lag_s
    2520.0
    """
    mode = MODE_ALIASES.get(mode, mode)
    if mode == "disk":
        return CheckpointPrice(write_s, 0.0, write_s)
    if mode == "async":
        return CheckpointPrice(snapshot_s, write_s, write_s)
    if mode == "memory":
        return CheckpointPrice(snapshot_s, replicate_s, write_s)
    raise ValueError(f"checkpoint mode must be one of {', '.join(CHECKPOINT_MODES)} (or "
                     f"{', '.join(MODE_ALIASES)}), not {mode!r}")


def expected_lost_s(*, interval_s: float, stall_s: float, lag_s: float,
                    mttf_s: float = math.inf) -> float:
    """Compute lost per failure on average, s, exact under exponential failures of mean
    ``mttf_s``: a job restarted from a usable checkpoint computes ``interval_s``, stalls
    ``stall_s`` for the next checkpoint, which becomes usable ``lag_s`` after the stall ends;
    a failure loses the compute since the last usable checkpoint (the engine's books,
    ``segment_books``).  A lag past one cycle is booked as one cycle, as the engine does.

    With ``tau`` the interval, ``P = tau + stall``, ``q = e^(-P/M)``:
    ``A / (1 - q) + tau (1 - e^(-L/M)) q / (1 - q)`` where ``A = E[min(u, tau); u < P]``
    over the exponential density: the first term the compute since the last checkpoint taken,
    the second the cycle lost when the failure comes before that checkpoint is usable.  As
    ``M -> inf`` it is ``(tau^2 / 2 + tau stall) / P + tau L / P``: Gemini's ``t_ckpt +
    1/(2f)`` when the stall is nil.  Failures during a restart are left out.

    >>> round(expected_lost_s(interval_s=2520.0, stall_s=0.0, lag_s=2520.0) / 60, 1)
    63.0
    >>> round(expected_lost_s(interval_s=2520.0, stall_s=2520.0, lag_s=0.0) / 60, 1)
    31.5
    """
    tau, s = float(interval_s), float(stall_s)
    if not tau > 0 or s < 0 or lag_s < 0:
        raise ValueError("interval must be > 0 s, stall and lag >= 0 s")
    p = tau + s
    lag = min(float(lag_s), p)
    if not math.isfinite(mttf_s):
        return (tau * tau / 2.0 + tau * s) / p + tau * lag / p
    lam = 1.0 / float(mttf_s)
    one_q = -math.expm1(-lam * p)  # 1 - q
    a = (-math.expm1(-lam * tau) - lam * tau * math.exp(-lam * tau)) / lam \
        + tau * (math.exp(-lam * tau) - math.exp(-lam * p))
    return (a + tau * -math.expm1(-lam * lag) * (1.0 - one_q)) / one_q


def waste_per_failure_s(*, interval_s: float, stall_s: float, lag_s: float,
                        retrieve_s: float, mttf_s: float = math.inf) -> float:
    """Gemini's measure of a failure's cost, s: compute lost (:func:`expected_lost_s`) plus
    the checkpoint's retrieval; detection and relaunch left out, as Gemini does.

    >>> waste_per_failure_s(interval_s=2520.0, stall_s=0.0, lag_s=2520.0,
    ...                     retrieve_s=2520.0) / 60  # Gemini's MT-NLG: 42 + 21 + 42 min
    105.0
    """
    return expected_lost_s(interval_s=interval_s, stall_s=stall_s, lag_s=lag_s,
                           mttf_s=mttf_s) + retrieve_s


class TierLoad:
    """Who is expected to use the central tier for checkpoints, as node-weighted duty.

    A job that moves its checkpoint for ``busy_s`` of every ``cycle_s`` uses the tier a
    fraction ``busy_s / cycle_s`` of the time; the sum over running jobs of that fraction
    times their nodes is what a newcomer shares the tier with.  Updated when a gang starts,
    is re-costed or releases its GPUs: O(1), no per-second ticking.
    """

    def __init__(self):
        self.duty_nodes = 0.0
        self._of: dict[int, float] = {}

    def set(self, key: int, duty_nodes: float) -> None:
        """Record ``key``'s node-weighted duty (replacing any earlier one)."""
        self.duty_nodes = max(0.0, self.duty_nodes + duty_nodes - self._of.get(key, 0.0))
        self._of[key] = duty_nodes

    def drop(self, key: int) -> None:
        """``key`` no longer uses the tier."""
        self.duty_nodes = max(0.0, self.duty_nodes - self._of.pop(key, 0.0))

    def others(self, key: int) -> float:
        """Node-weighted duty of everyone but ``key``."""
        return max(0.0, self.duty_nodes - self._of.get(key, 0.0))


@dataclass(frozen=True)
class CheckpointPrice:
    """What one gang's checkpoints cost on this cluster, now (seconds).

    ``stall_s`` is the time training stops per checkpoint; ``lag_s`` how long after the stall
    the checkpoint becomes usable for a restart (persisted or replicated); ``busy_s`` how long
    each write to the central tier occupies it (every checkpoint on disk, one every
    :data:`DISK_PERSIST_S` in memory).
    """

    stall_s: float
    lag_s: float
    busy_s: float


class CheckpointCosts:
    """What checkpoint writes and restarts cost a gang on this cluster, now.

    The one place these are computed: the engine's starts, the backfill estimate (before a job
    ever ran) and the reports all ask here.  A storage slowdown scales the central tier's
    bandwidth through :meth:`scale_storage` until it is undone.

    Parameters
    ----------
    recovery : {"disk", "async", "memory"}
        Synchronous or asynchronous checkpoints to the central tier, or to peers' memory
        (Gemini) with disk as fallback.
    write_gb_s, read_gb_s : float
        The central tier's write and read bandwidth, GB/s (0 if there is none).
    cluster_gpus : int
        GPUs sharing the tier.
    restart : RestartTimes, optional
        Detection override, rescheduling and warm-up.

    Examples
    --------
    >>> c = CheckpointCosts("disk", write_gb_s=1000.0, read_gb_s=2000.0, cluster_gpus=1000)
    >>> c.write_s(checkpoint_gb=800.0, gpus=100, nodes=13)  # idle tier: all 1,000 GB/s
    0.8
    >>> c.load.set(1, 13.0)  # another 13-node job is always writing: half each
    >>> c.write_s(checkpoint_gb=800.0, gpus=100, nodes=13)
    1.6
    >>> c.scale_storage(0.5); c.write_s(checkpoint_gb=800.0, gpus=100, nodes=13)
    3.2
    """

    def __init__(self, recovery: str, *, write_gb_s: float, read_gb_s: float,
                 cluster_gpus: int, restart: RestartTimes | None = None):
        if recovery not in RECOVERY_MODES:
            raise ValueError(f"recovery must be one of {RECOVERY_MODES}, not {recovery!r}")
        self.recovery = recovery
        self.write_gb_s = float(write_gb_s)
        self.read_gb_s = float(read_gb_s)
        self.cluster_gpus = int(cluster_gpus)
        self.storage_factor = 1.0
        self.restart = restart if restart is not None else RestartTimes()
        self.load = TierLoad()

    def scale_storage(self, factor: float) -> None:
        """Multiply the central tier's bandwidth by ``factor`` (a slowdown starts)."""
        self.storage_factor *= factor

    def restore_storage(self, factor: float) -> None:
        """Undo a :meth:`scale_storage` by ``factor`` (the slowdown is over)."""
        self.storage_factor /= factor

    def _bandwidth(self, tier_gb_s: float, nodes: int, key: int | None) -> float:
        others = self.load.duty_nodes if key is None else self.load.others(key)
        return checkpoint_share_gb_s(tier_gb_s * self.storage_factor, nodes=nodes,
                                     other_duty_nodes=others,
                                     node_cap_gb_s=NODE_STORAGE_GB_S)

    def price(self, *, checkpoint_gb: float, gpus: int, nodes: int,
              key: int | None = None) -> CheckpointPrice:
        """Stall, usable-after lag and tier occupancy of one checkpoint of a gang (``key``:
        its id in :attr:`load`, so that it does not contend with itself)."""
        disk_s = write_seconds(checkpoint_gb, self._bandwidth(self.write_gb_s, nodes, key))
        # memory: usable once replicated; the tier sees one persist per DISK_PERSIST_S
        return mode_price(self.recovery, write_s=disk_s,
                          snapshot_s=snapshot_seconds(checkpoint_gb, gpus),
                          replicate_s=replication_seconds(checkpoint_gb, nodes))

    def write_s(self, *, checkpoint_gb: float, gpus: int, nodes: int,
                key: int | None = None) -> float:
        """Stall of one checkpoint of a gang of ``gpus`` GPUs on ``nodes`` nodes, s."""
        return self.price(checkpoint_gb=checkpoint_gb, gpus=gpus, nodes=nodes, key=key).stall_s

    def restart_s(self, *, checkpoint_gb: float, gpus: int, nodes: int,
                  from_disk: bool = False, key: int | None = None) -> float:
        """Rescheduling, loading and warm-up, s: from peers' memory, or from the central tier
        (detection is booked before, while the gang hangs)."""
        if self.recovery == "memory" and not from_disk:
            return self.restart.fixed_s + checkpoint_gb / max(1, nodes) / NODE_RDMA_GB_S
        return restart_seconds(checkpoint_gb, self._bandwidth(self.read_gb_s, nodes, key),
                               self.restart)


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
