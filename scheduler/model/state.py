"""Columnar cluster state: who holds which GPU, and what each node has left.

Per-GPU and per-node numpy arrays indexed by the integer ids of the
:class:`~scheduler.hardware.cluster.ClusterPlan`.  An *allocation* (a training gang or one
inference replica) is a set of GPUs on whole or partial nodes; its integer id is written in
``gpu_owner``.  Nothing here knows about jobs or time: the engine does.

Every change goes through a method here and bumps :attr:`ClusterState.version`, so a reader
(the scheduler, a cached capacity count) knows whether anything moved since it last looked.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from scheduler.hardware.cluster import ClusterPlan

FREE = -1
REPLICA_BASE = 1 << 40
"""Owner ids of inference replicas start here, above any training job's index."""
LEVELS = ("nvlink", "leaf", "pod")
"""Topology levels below the whole cluster, tightest first (as ``workload.jobs.AFFINITIES``)."""


@dataclass(frozen=True)
class Placement:
    """Where a gang goes: ``counts[i]`` GPUs on node ``nodes[i]``, all of model ``model``."""

    nodes: np.ndarray
    counts: np.ndarray
    model: int

    @property
    def gpus(self) -> int:
        return int(self.counts.sum())


def _dense(ids: np.ndarray) -> np.ndarray:
    """Renumber ids to 0 .. D-1 (order kept)."""
    return np.unique(ids, return_inverse=True)[1].astype(np.int32)


class ClusterState:
    """Free capacity per node and owner per GPU, with allocation and release.

    Parameters
    ----------
    plan : ClusterPlan
        The inventory; its node shapes give CPU cores, RAM (GB) and NIC bandwidth (Gb/s per
        accelerator) per node.
    """

    def __init__(self, plan: ClusterPlan):
        self.plan = plan
        self.models = plan.models
        self.n_models = len(plan.models)
        self.node_model = plan.node_model.astype(np.int64)
        self.node_gpus = plan.node_gpus.astype(np.int64)
        self.node_first_gpu = plan.node_first_gpu.astype(np.int64)
        self.gpu_node = plan.gpu_node().astype(np.int64)
        self.gpu_model = self.node_model[self.gpu_node]
        shapes = plan.node_shape
        self.node_cpu = np.array([shapes[m].cpu_cores for m in self.node_model], dtype=float)
        self.node_ram = np.array([shapes[m].ram_gb for m in self.node_model], dtype=float)
        self.node_nic = np.array([shapes[m].nic_gbps for m in self.node_model],
                                 dtype=float) * self.node_gpus
        self.node_spare = plan.node_spare.astype(bool).copy()
        self.node_up = np.ones(plan.n_nodes, dtype=bool)
        self.node_drained = np.zeros(plan.n_nodes, dtype=bool)
        self.gpu_up = np.ones(plan.n_gpus, dtype=bool)
        self._schedulable = self.node_up & ~self.node_spare
        self.model_mask = [self.node_model == m for m in range(len(plan.models))]

        self.node_free = self.node_gpus.copy()
        self.node_whole = np.ones(self.node_gpus.size, dtype=bool)  # node_free == node_gpus
        self.node_free_cpu = self.node_cpu.copy()
        self.node_free_ram = self.node_ram.copy()
        self.node_free_nic = self.node_nic.copy()
        self.gpu_owner = np.full(plan.n_gpus, FREE, dtype=np.int64)

        leaf = plan.fabric.endpoint_leaf[plan.node_first_gpu]
        self.domain = {
            "nvlink": _dense(plan.node_nvlink_domain),
            "leaf": _dense(leaf),
            "pod": _dense(plan.fabric.switch_pod[leaf]),
        }
        self.n_domains = {k: int(v.max()) + 1 for k, v in self.domain.items()}
        self.model_gpus = np.bincount(self.node_model, weights=self.node_gpus,
                                      minlength=self.n_models).astype(np.int64)
        self.version = 0
        self.flags_version = 0  # bumped by every change of node flags (up, drained, spare)
        # per model, bumped whenever capacity there can grow (GPUs released, a node becomes
        # schedulable): until it moves, a gang that did not fit on that model still does not
        self.grown = [0] * self.n_models
        # free GPUs by node category (0 schedulable, 1 hot spare, 2 down or drained) and model,
        # kept up to date by every change instead of recounted
        self._cat = self._categories(slice(None))
        self._counts = np.zeros((3, self.n_models), dtype=np.int64)
        np.add.at(self._counts, (self._cat, self.node_model), self.node_free)

    # ----------------------------------------------------------------- capacity views
    @property
    def n_gpus(self) -> int:
        return int(self.gpu_owner.size)

    def schedulable(self) -> np.ndarray:
        """Nodes the scheduler may place on: up, not drained, not a hot spare (read-only)."""
        return self._schedulable

    def free_counts(self) -> np.ndarray:
        """Free GPUs per model on schedulable, spare and unavailable nodes (3 x models).

        Kept current by every change (no recount); treat the result as read-only.
        """
        return self._counts

    def recount(self) -> np.ndarray:
        """:meth:`free_counts` counted afresh from the node columns (for checks)."""
        up = self.node_up & ~self.node_drained
        w = self.node_free
        return np.stack([
            np.bincount(self.node_model, weights=w * self._schedulable, minlength=self.n_models),
            np.bincount(self.node_model, weights=w * (up & self.node_spare),
                        minlength=self.n_models),
            np.bincount(self.node_model, weights=w * ~up, minlength=self.n_models),
        ]).astype(np.int64)

    def _categories(self, nodes) -> np.ndarray:
        up = self.node_up[nodes] & ~self.node_drained[nodes]
        return np.where(up, self.node_spare[nodes].astype(np.int64), 2)

    def hold_spares(self, fraction: float) -> None:
        """Make ``fraction`` of each model's nodes hot spares, spread evenly (every pod some)."""
        if isinstance(fraction, bool) or not 0 <= fraction < 1:
            raise ValueError(f"spares must be a fraction in [0, 1), not {fraction!r}")
        spare = np.zeros(self.plan.n_nodes, dtype=bool)
        for m in range(self.n_models):
            nodes = np.flatnonzero(self.model_mask[m])
            k = int(round(fraction * nodes.size))
            if k:
                spare[nodes[np.linspace(0, nodes.size - 1, k).round().astype(int)]] = True
        self.set_node_flags(slice(None), spare=False)
        self.set_node_flags(spare, spare=True)

    def set_gpu_up(self, gids, up: bool) -> None:
        """Record a GPU's health as observed (a node with a GPU down is taken out by its owner)."""
        self.version += 1
        self.gpu_up[gids] = up

    def set_node_flags(self, nodes, *, up: bool | None = None, drained: bool | None = None,
                       spare: bool | None = None) -> None:
        """Change node status; the only way to, so the schedulable mask and the free counts
        stay current."""
        self.version += 1
        self.flags_version += 1
        idx = np.arange(self.node_up.size)[nodes]
        if up is not None:
            self.node_up[idx] = up
        if drained is not None:
            self.node_drained[idx] = drained
        if spare is not None:
            self.node_spare[idx] = spare
        self._schedulable = self.node_up & ~self.node_drained & ~self.node_spare
        old, new = self._cat[idx], self._categories(idx)
        moved = old != new
        if moved.any():
            for g in np.unique(self.node_model[idx[moved & (new == 0)]]).tolist():
                self.grown[g] += 1
            m, free = self.node_model[idx[moved]], self.node_free[idx[moved]]
            np.subtract.at(self._counts, (old[moved], m), free)
            np.add.at(self._counts, (new[moved], m), free)
            self._cat[idx[moved]] = new[moved]

    # ----------------------------------------------------------------- mutation
    def allocate(self, owner: int, placement: Placement, *, cpu_per_gpu: float,
                 ram_gb_per_gpu: float, nic_gbps_per_gpu: float) -> np.ndarray:
        """Give ``placement``'s GPUs to ``owner``; return their ids.

        Raises ``ValueError`` (and changes nothing) if a node lacks any resource.
        """
        nodes, counts = placement.nodes, placement.counts
        if nodes.size == 1:
            return self._allocate_one(owner, placement, cpu_per_gpu, ram_gb_per_gpu,
                                      nic_gbps_per_gpu)
        if np.any(self.node_free[nodes] < counts):
            raise ValueError(f"allocation {owner}: a node has too few free GPUs")
        for free, need in ((self.node_free_cpu, cpu_per_gpu), (self.node_free_ram, ram_gb_per_gpu),
                           (self.node_free_nic, nic_gbps_per_gpu)):
            if np.any(free[nodes] + 1e-9 < counts * need):
                raise ValueError(f"allocation {owner}: a node lacks CPU, RAM or NIC bandwidth")
        whole = counts == self.node_free[nodes]
        parts = []
        if whole.any():
            # every free GPU of these nodes: a vectorised gather over the node's GPU range
            wn = nodes[whole]
            span = int(self.node_gpus[wn].max())
            ids = self.node_first_gpu[wn][:, None] + np.arange(span)
            ids = ids[np.arange(span) < self.node_gpus[wn][:, None]]
            parts.append(ids[self.gpu_owner[ids] == FREE])
        for n, c in zip(nodes[~whole].tolist(), counts[~whole].tolist(), strict=True):
            first = int(self.node_first_gpu[n])
            ids = first + np.flatnonzero(self.gpu_owner[first:first + self.node_gpus[n]] == FREE)
            parts.append(ids[:c])
        gids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        self.version += 1
        self.gpu_owner[gids] = owner
        self.node_free[nodes] -= counts
        self.node_whole[nodes] = False
        self.node_free_cpu[nodes] -= counts * cpu_per_gpu
        self.node_free_ram[nodes] -= counts * ram_gb_per_gpu
        self.node_free_nic[nodes] -= counts * nic_gbps_per_gpu
        np.subtract.at(self._counts, (self._cat[nodes], self.node_model[nodes]), counts)
        return gids

    def _allocate_one(self, owner: int, placement: Placement, cpu: float, ram: float,
                      nic: float) -> np.ndarray:
        """:meth:`allocate` on one node, with scalars (most gangs of a trace fit one node)."""
        n, c = int(placement.nodes[0]), int(placement.counts[0])
        if self.node_free[n] < c:
            raise ValueError(f"allocation {owner}: a node has too few free GPUs")
        if (self.node_free_cpu[n] + 1e-9 < c * cpu or self.node_free_ram[n] + 1e-9 < c * ram
                or self.node_free_nic[n] + 1e-9 < c * nic):
            raise ValueError(f"allocation {owner}: a node lacks CPU, RAM or NIC bandwidth")
        first = int(self.node_first_gpu[n])
        gids = first + np.flatnonzero(self.gpu_owner[first:first + int(self.node_gpus[n])]
                                      == FREE)[:c]
        self.version += 1
        self.gpu_owner[gids] = owner
        self.node_free[n] -= c
        self.node_whole[n] = False
        self.node_free_cpu[n] -= c * cpu
        self.node_free_ram[n] -= c * ram
        self.node_free_nic[n] -= c * nic
        self._counts[self._cat[n], self.node_model[n]] -= c
        return gids

    @contextmanager
    def freed(self, allocations):
        """Within the block, node capacity is as if ``allocations`` were released.

        ``allocations`` is ``[(placement, cpu_per_gpu, ram_gb_per_gpu, nic_gbps_per_gpu)]``.
        Only what placement reads changes (free GPUs, cores, RAM and NIC per node), and it is
        restored exactly afterwards: no GPU changes owner, :attr:`version` does not move.
        """
        if not allocations:
            yield
            return
        nodes = np.concatenate([p.nodes for p, *_ in allocations])
        counts = np.concatenate([p.counts for p, *_ in allocations])
        per = np.repeat(np.array([[c, r, n] for _, c, r, n in allocations], dtype=float),
                        [p.nodes.size for p, *_ in allocations], axis=0)
        columns = (self.node_free_cpu, self.node_free_ram, self.node_free_nic)
        saved = [self.node_free[nodes].copy()] + [col[nodes].copy() for col in columns]
        np.add.at(self.node_free, nodes, counts)
        saved_whole = self.node_whole[nodes].copy()
        self.node_whole[nodes] = self.node_free[nodes] == self.node_gpus[nodes]
        for k, col in enumerate(columns):
            np.add.at(col, nodes, counts * per[:, k])
        try:
            yield
        finally:
            self.node_free[nodes] = saved[0]
            self.node_whole[nodes] = saved_whole
            for col, before in zip(columns, saved[1:], strict=True):
                col[nodes] = before

    def release(self, owner: int, gids: np.ndarray, placement: Placement, *, cpu_per_gpu: float,
                ram_gb_per_gpu: float, nic_gbps_per_gpu: float) -> None:
        """Return an allocation's GPUs and host resources."""
        if np.any(self.gpu_owner[gids] != owner):
            raise ValueError(f"allocation {owner} does not hold all of the GPUs it releases")
        self.version += 1
        self.grown[placement.model] += 1
        self.gpu_owner[gids] = FREE
        nodes, counts = placement.nodes, placement.counts
        if nodes.size == 1:  # scalars: most gangs and replicas hold one node
            n, c = int(nodes[0]), int(counts[0])
            self.node_free[n] += c
            self.node_whole[n] = self.node_free[n] == self.node_gpus[n]
            self.node_free_cpu[n] += c * cpu_per_gpu
            self.node_free_ram[n] += c * ram_gb_per_gpu
            self.node_free_nic[n] += c * nic_gbps_per_gpu
            self._counts[self._cat[n], self.node_model[n]] += c
            return
        self.node_free[nodes] += counts
        self.node_whole[nodes] = self.node_free[nodes] == self.node_gpus[nodes]
        self.node_free_cpu[nodes] += counts * cpu_per_gpu
        self.node_free_ram[nodes] += counts * ram_gb_per_gpu
        self.node_free_nic[nodes] += counts * nic_gbps_per_gpu
        np.add.at(self._counts, (self._cat[nodes], self.node_model[nodes]), counts)
