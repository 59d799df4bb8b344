"""Storage tiers as a limit on a job's speed: central flash, node-local NVMe cache, GPU memory.

The engine calls :meth:`StorageModel.supply` every few simulated minutes with every running
job at once.  Each job reads its input at ``tokens/s x bytes per token``; the part of its
dataset that fits its nodes' NVMe cache is read locally (after the first pass), the rest from
the central all-flash tier, which all jobs share by weighted max-min fairness together with the
checkpoint writes in flight.  Data lands in GPU memory (the last tier), directly with GPUDirect
Storage or through a bounce buffer in host memory without it.  A job stalls only for the
shortfall: ``data_stall_fraction = max(0, 1 - supply / demand)``.  Units: GB (1e9 bytes), GB/s,
tokens/s.  Figures and formulas: ``docs/storage_power.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.hardware.cluster import ClusterPlan

NODE_STORAGE_GB_S = 100.0
"""Storage bandwidth one node can drive, GB/s: a DGX H100 has two dual-port 400G cards for
storage and in-band traffic (figures.md); one 400 Gb/s port each is 100 GB/s."""

TEXT_BYTES_PER_TOKEN = 2.0
"""Tokenised text: one uint16 id per token, B (Megatron-LM's indexed datasets store uint16 ids
for vocabularies under 65,500 tokens and int32 above; pass 4.0 for Llama 3's 128K vocabulary)."""

VISION_BYTES_PER_SAMPLE = 110e3
"""One JPEG-compressed training image, B: ImageNet-1k's 1,281,167 training images take about
138 GB (the ILSVRC2012 training archive), about 108 KB each; rounded."""

VISION_TOKENS_PER_SAMPLE = 196.0
"""Patch tokens per image: 224 x 224 pixels in 16 x 16 patches (ViT-B/16)."""

VISION_BYTES_PER_TOKEN = VISION_BYTES_PER_SAMPLE / VISION_TOKENS_PER_SAMPLE
"""About 561 B per token, some 280 times tokenised text."""

TEXT_DATASET_CAP_GB = 30_000.0
"""Largest unique text dataset, GB: 15T tokens (the Llama 3 pre-training corpus) x 2 B."""

VISION_DATASET_CAP_GB = 240_000.0
"""Largest unique image dataset, GB (assumed: the order of LAION-5B's images; unconfirmed)."""

BOUNCE_GB_S_PER_NODE = 50.0
"""Read bandwidth of one node without GPUDirect Storage, GB/s: data is staged in a host-memory
bounce buffer, then copied to the GPUs.  NVIDIA's GDS announcement (developer blog, 2019) gives
50 GB/s from system memory to the GPUs of a DGX-2, against over 200 GB/s from drives and NICs
straight to the GPUs; carried over to newer nodes unchanged (assumed)."""

NODE_CEILINGS_GB_S = {"good": (4.0, 2.0), "better": (8.0, 4.0), "best": (40.0, 20.0)}
"""Single-node read / write GB/s a central tier delivers to one node, per storage tier of the
DGX SuperPOD H100 RA (RA-11333-001, storage guidance table; figures.md).  The RA adds that a
GDS-enabled application "should be able to read data at over 40 GBps" from the storage fabric."""

NODE_READ_GB_S, NODE_WRITE_GB_S = NODE_CEILINGS_GB_S["best"]
"""Per-node ceilings used when a plan's central :class:`StorageSpec` gives none: the RA's
"Best" tier, the only one sized for large training jobs.  Both lie below the node's storage
NICs (:data:`NODE_STORAGE_GB_S`, 2 x 400 Gb/s line rate)."""

MIXED_READ_WRITE = True
"""Whether reads and writes share one budget on the central tier: ``read/R + write/W <= 1``.
The DGX SuperPOD RA sizes every tier at a 2:1 read:write ratio, as parity on the storage
servers doubles the cost of a written byte; the servers' time is shared (assumed)."""


@dataclass(frozen=True)
class TierLoad:
    """Demand and supply on one tier, summed over jobs, GB/s."""

    name: str
    demand_gb_s: float
    supply_gb_s: float
    capacity_gb_s: float

    @property
    def utilisation(self) -> float:
        """Supply / capacity (0 for a tier without capacity)."""
        return self.supply_gb_s / self.capacity_gb_s if self.capacity_gb_s > 0 else 0.0


@dataclass(frozen=True)
class StorageResult:
    """Per-job arrays (indexed like the inputs) and tier totals of one :meth:`supply` call.

    ``tiers`` holds ``central_read`` (demand: what the cache did not serve), ``central_write``
    (demand: writes in flight, up to what the jobs' storage NICs carry), ``nvme_read`` (demand:
    the cache hits) and ``gpu``: everything read, delivered into GPU memory, the last tier (its
    capacity is what the tiers above it could deliver together).
    """

    read_demand_gb_s: np.ndarray
    read_supply_gb_s: np.ndarray
    cache_read_gb_s: np.ndarray
    central_read_gb_s: np.ndarray
    hit_rate: np.ndarray
    data_stall_fraction: np.ndarray
    checkpoint_write_gb_s: np.ndarray
    tiers: tuple[TierLoad, ...]

    def tier(self, name: str) -> TierLoad:
        for t in self.tiers:
            if t.name == name:
                return t
        raise KeyError(f"unknown tier {name!r}; tiers: {', '.join(t.name for t in self.tiers)}")


def max_min_share(want, capacity: float, weight=None) -> np.ndarray:
    """Weighted max-min fair shares of ``capacity`` (water-filling), same units as ``want``.

    A claim below its weighted fair level gets all it wants; the rest share what is left in
    proportion to ``weight``.  ``want`` must be finite and non-negative.

    >>> max_min_share([10.0, 1000.0], 100.0).tolist()
    [10.0, 90.0]
    >>> max_min_share([100.0, 100.0], 100.0, weight=[1.0, 3.0]).tolist()
    [25.0, 75.0]
    """
    want = np.asarray(want, dtype=float)
    if capacity <= 0:
        return np.zeros_like(want)
    if want.sum() <= capacity:
        return want.copy()
    weight = np.ones_like(want) if weight is None else np.asarray(weight, dtype=float)
    weight = np.maximum(weight, 1e-12)
    ratio = want / weight
    order = np.argsort(ratio, kind="stable")
    w, wt, r = want[order], weight[order], ratio[order]
    prefix = np.concatenate(([0.0], np.cumsum(w)[:-1]))
    rest_weight = np.cumsum(wt[::-1])[::-1]
    level = (capacity - prefix) / rest_weight
    k = int(np.argmax(level < r))
    return np.minimum(want, level[k] * weight)


def checkpoint_share_gb_s(tier_gb_s: float, *, nodes: int, other_duty_nodes: float,
                          node_cap_gb_s: float) -> float:
    """Bandwidth one job's checkpoint write (or restore) gets from a central tier, GB/s.

    The tier is shared in proportion to nodes (the weights :meth:`StorageModel.supply` uses)
    among the jobs moving checkpoints at the same time; another job that does so a fraction
    ``d`` of the time counts as ``d`` of its nodes (``other_duty_nodes``: the sum over the
    others), the expected contention, so no event per write is needed.  The job never gets
    more than its nodes' storage NICs (``nodes x node_cap_gb_s``).  An idle tier serves one
    job at the per-node or per-tier limit, whichever is lower.

    >>> checkpoint_share_gb_s(2000.0, nodes=16, other_duty_nodes=0.0, node_cap_gb_s=100.0)
    1600.0
    >>> checkpoint_share_gb_s(2000.0, nodes=64, other_duty_nodes=0.0, node_cap_gb_s=100.0)
    2000.0
    >>> checkpoint_share_gb_s(2000.0, nodes=64, other_duty_nodes=64.0, node_cap_gb_s=100.0)
    1000.0
    """
    if tier_gb_s <= 0 or nodes <= 0:
        return 0.0
    share = tier_gb_s * nodes / (nodes + max(0.0, other_duty_nodes))
    return min(share, nodes * node_cap_gb_s)


def token_bytes(vision=None, n: int | None = None) -> np.ndarray:
    """Bytes read per token: text, or images where ``vision`` is true.

    >>> token_bytes([False, True]).round(0).tolist()
    [2.0, 561.0]
    """
    if vision is None:
        return np.full(n or 0, TEXT_BYTES_PER_TOKEN)
    return np.where(np.asarray(vision, dtype=bool), VISION_BYTES_PER_TOKEN, TEXT_BYTES_PER_TOKEN)


def default_dataset_gb(total_tokens, bpt, vision=None) -> np.ndarray:
    """Unique dataset of each job, GB: ``min(total tokens x bytes per token, cap)``.

    A job that reads more tokens than its dataset holds makes several passes; a job of unknown
    size (``total_tokens <= 0``) is given the cap.

    >>> default_dataset_gb([1e12, 0.0], [2.0, 2.0]).tolist()
    [2000.0, 30000.0]
    """
    tokens = np.asarray(total_tokens, dtype=float)
    cap = (np.full(tokens.shape, TEXT_DATASET_CAP_GB) if vision is None else
           np.where(np.asarray(vision, dtype=bool), VISION_DATASET_CAP_GB, TEXT_DATASET_CAP_GB))
    size = tokens * np.asarray(bpt, dtype=float) / 1e9
    return np.where(tokens > 0, np.minimum(size, cap), cap)


def cache_hit_rate(cache_gb, dataset, passes_done) -> np.ndarray:
    """Fraction of a job's reads served by its nodes' NVMe cache.

    The first pass reads everything from the central tier (filling the cache); later passes
    find ``min(1, cache / dataset)`` of the data locally.  That is the hit rate of a cache under
    shuffled access, and of an order-aware prefetcher (the sampler's order is known ahead, so
    the loader keeps what is needed soonest) under any order; prefetch hides the latency of the
    misses, which is why only bandwidth is modelled.

    >>> cache_hit_rate([100.0, 100.0, 100.0], [50.0, 400.0, 400.0], [1.0, 2.0, 0.5]).tolist()
    [1.0, 0.25, 0.0]
    """
    cache = np.asarray(cache_gb, dtype=float)
    data = np.asarray(dataset, dtype=float)
    steady = np.minimum(1.0, cache / np.maximum(data, 1e-12))
    steady = np.where(data > 0, steady, 1.0)
    return np.where(np.asarray(passes_done, dtype=float) >= 1.0, steady, 0.0)


class StorageModel:
    """The storage tiers of one cluster plan.

    Parameters
    ----------
    plan : ClusterPlan
        Its ``"central"`` :class:`StorageSpec` gives the shared tier's read and write GB/s (none:
        no central tier); its ``"nvme"`` spec the node-local read GB/s, split evenly over the
        nodes (none: no cache); node shapes give each node's cache capacity (``nvme_tb``).
    gpudirect : bool, optional
        GPUDirect Storage on every tier; by default each tier's ``StorageSpec.gpudirect``.
        Without it a node reads at most :data:`BOUNCE_GB_S_PER_NODE` in all.

    Examples
    --------
    >>> from scheduler.hardware.cluster import NodeGroup, StorageSpec, plan_cluster
    >>> plan = plan_cluster("t", (NodeGroup("H100-SXM", 2),), fabric_kind="fat-tree",
    ...                     fabric_kw={"radix": 8},
    ...                     storage=(StorageSpec("pfs", "central", 1e3, 10.0, 5.0, True),))
    >>> model = StorageModel(plan)
    >>> gpu_job = np.repeat([0, 1], 8)          # one node each
    >>> r = model.supply(gpu_job, np.array([2e9, 6e9]))   # 4 and 12 GB/s of text
    >>> r.central_read_gb_s.tolist(), r.data_stall_fraction.round(3).tolist()
    ([4.0, 6.0], [0.0, 0.5])
    """

    def __init__(self, plan: ClusterPlan, *, gpudirect: bool | None = None):
        self.plan = plan
        central = next((s for s in plan.storage if s.tier == "central"), None)
        nvme = next((s for s in plan.storage if s.tier == "nvme"), None)
        self.central_read_gb_s = central.read_gb_s if central else 0.0
        self.central_write_gb_s = central.write_gb_s if central else 0.0
        nodes = max(1, plan.n_nodes)
        self.node_nvme_read_gb_s = nvme.read_gb_s / nodes if nvme else 0.0
        ceil_r = getattr(central, "node_read_gb_s", None) or NODE_READ_GB_S
        ceil_w = getattr(central, "node_write_gb_s", None) or NODE_WRITE_GB_S
        self.node_read_gb_s = min(ceil_r, NODE_STORAGE_GB_S)
        """Central-tier read ceiling of one node, GB/s (RA per-node figure, capped by its NICs)."""
        self.node_write_gb_s = min(ceil_w, NODE_STORAGE_GB_S)
        """Central-tier write ceiling of one node, GB/s (checkpoint writes)."""
        self.gpudirect_central = bool(central.gpudirect) if central else False
        self.gpudirect_nvme = bool(nvme.gpudirect) if nvme else False
        if gpudirect is not None:
            self.gpudirect_central = self.gpudirect_nvme = bool(gpudirect)

        # per-GPU shares of its node's resources, so a job's figures are one bincount each
        node_gpus = plan.node_gpus.astype(float)
        gpu_node = plan.gpu_node()
        share = 1.0 / node_gpus[gpu_node]
        nvme_tb = np.array([s.nvme_tb for s in plan.node_shape])[plan.node_model]
        self._gpu_node_share = share
        node_cache_gb = nvme_tb * 1000.0 if nvme else np.zeros(plan.n_nodes)
        self._gpu_cache_gb = node_cache_gb[gpu_node] * share

    def _per_job(self, gpu_job: np.ndarray, n_jobs: int) -> tuple[np.ndarray, np.ndarray]:
        if gpu_job.shape != (self.plan.n_gpus,):
            raise ValueError(f"gpu_job must have one entry per GPU ({self.plan.n_gpus}), "
                             f"not shape {gpu_job.shape}")
        if gpu_job.size and gpu_job.max() >= n_jobs:
            raise ValueError(f"gpu_job names job {int(gpu_job.max())}, but only {n_jobs} "
                             "jobs were given")
        mine = gpu_job >= 0
        jobs = gpu_job[mine]
        nodes = np.bincount(jobs, weights=self._gpu_node_share[mine], minlength=n_jobs)
        cache = np.bincount(jobs, weights=self._gpu_cache_gb[mine], minlength=n_jobs)
        return nodes, cache

    def supply(self, gpu_job, tokens_per_s, *, bytes_per_token=None, vision=None,
               dataset_gb=None, total_tokens=None, passes_done=None,
               checkpoint_write_gb_s=None, central_factor: float = 1.0,
               nvme_factor: float = 1.0) -> StorageResult:
        """Serve every job's input reads and checkpoint writes; return stalls and tier loads.

        Parameters
        ----------
        gpu_job : array of int, one per GPU
            Index of the job holding each GPU (0 .. J-1), negative where none; a job's
            share of a node (its cache capacity, NVMe, NIC and bounce bandwidth) is its GPUs'
            share of the node.
        tokens_per_s : array of float, (J,)
            Unstalled throughput, tokens/s (model FLOP/s / (6 x parameters)).
        bytes_per_token : array of float, (J,), optional
            Bytes read per token, B; by default from ``vision`` (:func:`token_bytes`).
        vision : array of bool, (J,), optional
            Image jobs (much larger samples); text by default.
        dataset_gb : array of float, (J,), optional
            Unique dataset per job, GB; by default :func:`default_dataset_gb` of ``total_tokens``.
        total_tokens : array of float, (J,), optional
            Tokens each job reads in all (for the default dataset size).
        passes_done : array of float, (J,), optional
            Passes over its dataset each job has completed; by default 1 (steady state, the
            cache warm).  Below 1 every read goes to the central tier.
        checkpoint_write_gb_s : array of float, (J,), optional
            Checkpoint writes in flight, GB/s asked for (``np.inf``: as fast as possible).
        central_factor : float
            Multiplier on the central tier's bandwidth (a storage-slowdown drill), in (0, 1].
        nvme_factor : float
            Multiplier on the node-local cache's read bandwidth, in [0, 1]: 0 is a cache that
            is down, whose reads all fall through to the central tier.
        """
        tokens_per_s = np.asarray(tokens_per_s, dtype=float)
        n = tokens_per_s.size
        gpu_job = np.asarray(gpu_job, dtype=np.int64)
        nodes, cache_gb = self._per_job(gpu_job, n)
        if bytes_per_token is None:
            bpt = token_bytes(vision, n)
        else:
            bpt = np.broadcast_to(np.asarray(bytes_per_token, dtype=float), (n,))
        if dataset_gb is None:
            tokens = np.zeros(n) if total_tokens is None else total_tokens
            data = default_dataset_gb(tokens, bpt, vision)
        else:
            data = np.broadcast_to(np.asarray(dataset_gb, dtype=float), (n,))
        passes = np.ones(n) if passes_done is None else passes_done
        write_ask = (np.zeros(n) if checkpoint_write_gb_s is None
                     else np.broadcast_to(np.asarray(checkpoint_write_gb_s, dtype=float), (n,)))
        if not central_factor >= 0:
            raise ValueError(f"central_factor must be >= 0, not {central_factor!r}")
        if not 0 <= nvme_factor <= 1:
            raise ValueError(f"nvme_factor must be in [0, 1], not {nvme_factor!r}")
        node_nvme = self.node_nvme_read_gb_s * nvme_factor

        demand = tokens_per_s * bpt / 1e9
        hit = cache_hit_rate(cache_gb, data, passes)
        nic = nodes * self.node_read_gb_s
        bounce = nodes * BOUNCE_GB_S_PER_NODE
        cache_ask = hit * demand
        cache_got = np.minimum(cache_ask, nodes * node_nvme)
        if not self.gpudirect_nvme:
            cache_got = np.minimum(cache_got, bounce)
        central_ask = demand - cache_got
        central_want = np.minimum(central_ask, nic)
        if not self.gpudirect_central:
            bounced = cache_got if not self.gpudirect_nvme else 0.0
            central_want = np.minimum(central_want, np.maximum(bounce - bounced, 0.0))
        write_want = np.minimum(write_ask, nic)

        r_cap = self.central_read_gb_s * central_factor
        w_cap = self.central_write_gb_s * central_factor
        if MIXED_READ_WRITE and r_cap > 0 and w_cap > 0:
            # one budget in read-equivalent GB/s: a written byte costs R / W read bytes
            cost = r_cap / w_cap
            got = max_min_share(np.concatenate((central_want, write_want * cost)), r_cap,
                                np.concatenate((nodes, nodes)))
            central_got, write_got = got[:n], got[n:] / cost
        else:
            central_got = max_min_share(central_want, r_cap, nodes)
            write_got = max_min_share(write_want, w_cap, nodes)

        supplied = cache_got + central_got
        with np.errstate(divide="ignore", invalid="ignore"):
            stall = np.where(demand > 0, np.maximum(0.0, 1.0 - supplied / demand), 0.0)
        nvme_cap = node_nvme * self.plan.n_nodes
        tiers = (
            TierLoad("central_read", float(central_ask.sum()), float(central_got.sum()), r_cap),
            TierLoad("central_write", float(write_want.sum()), float(write_got.sum()), w_cap),
            TierLoad("nvme_read", float(cache_ask.sum()), float(cache_got.sum()), nvme_cap),
            TierLoad("gpu", float(demand.sum()), float(supplied.sum()), r_cap + nvme_cap),
        )
        return StorageResult(read_demand_gb_s=demand, read_supply_gb_s=supplied,
                             cache_read_gb_s=cache_got, central_read_gb_s=central_got,
                             hit_rate=hit, data_stall_fraction=stall,
                             checkpoint_write_gb_s=write_got, tiers=tiers)
