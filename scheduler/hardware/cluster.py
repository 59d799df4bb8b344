"""The cluster generator: from a preset (or a fabric and a size) to columnar inventory.

A :class:`ClusterPlan` is what ``build_cluster`` writes into the database and what the engine
later reads back: numpy arrays indexed by integer ids for GPUs, nodes and racks, the
:class:`~scheduler.fabric.topology.Fabric` that joins them, storage systems and cloud pools.
GPU ``g`` is endpoint ``g`` of the compute fabric: GPU ``i`` of node ``n`` is NIC port ``i``,
which on a rail-optimised fabric lands on rail ``i``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from scheduler.fabric import build_fabric
from scheduler.fabric.optics import COMPUTE_MODULE, compute_optics, support_fabrics
from scheduler.fabric.topology import TIERS, Fabric
from scheduler.hardware import power
from scheduler.hardware.catalog import Accelerator, get

RACKS_PER_ROW = 16
ROWS_PER_HALL = 20


@dataclass(frozen=True)
class NodeShape:
    """Host resources of one node (DGX H100 figures by default, figures.md)."""

    cpu_cores: int = 112
    ram_gb: float = 2048.0
    nic_gbps: float = 400.0
    nvme_tb: float = 30.72


@dataclass(frozen=True)
class NodeGroup:
    """``nodes`` nodes of one accelerator model; ``spares`` of them are hot spares."""

    model: str
    nodes: int
    spares: int = 0
    shape: NodeShape = NodeShape()
    nodes_per_rack: int = 4


@dataclass(frozen=True)
class StorageSpec:
    """One storage system: aggregate read/write GB/s, and (central tier) per-node ceilings.

    ``node_read_gb_s`` / ``node_write_gb_s``: what the tier delivers to one node, GB/s; ``None``
    takes the DGX SuperPOD RA's "Best" single-node figures
    (:data:`scheduler.physics.storage.NODE_CEILINGS_GB_S`).
    """

    name: str
    tier: str  # "central" or "nvme"
    capacity_tb: float
    read_gb_s: float
    write_gb_s: float
    gpudirect: bool = False
    node_read_gb_s: float | None = None
    node_write_gb_s: float | None = None


@dataclass(frozen=True)
class CloudPoolSpec:
    provider: str
    region: str
    model: str
    max_gpus: int
    price_per_gpu_hour: float
    provisioning_delay_s: int = 600


@dataclass(frozen=True)
class ClusterPlan:
    """Columnar inventory of one cluster (ids are positions in the arrays)."""

    name: str
    fabric: Fabric
    models: tuple[Accelerator, ...]
    node_model: np.ndarray        # int16 per node: index into ``models``
    node_gpus: np.ndarray         # int16 per node
    node_first_gpu: np.ndarray    # int32 per node: id of its GPU 0
    node_rack: np.ndarray         # int32 per node
    node_slot: np.ndarray         # int16 per node: slot in its rack
    node_spare: np.ndarray        # bool per node
    node_nvlink_domain: np.ndarray  # int32 per node
    node_shape: tuple[NodeShape, ...]  # per model, like ``models``
    rack_hall: np.ndarray         # int32 per rack
    rack_row: np.ndarray          # int32 per rack (within its hall)
    rack_col: np.ndarray          # int32 per rack
    rack_power_kw: np.ndarray     # float per rack: capacity, kW
    storage: tuple[StorageSpec, ...] = ()
    cloud_pools: tuple[CloudPoolSpec, ...] = ()
    preset: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return int(self.node_model.size)

    @property
    def n_gpus(self) -> int:
        return int(self.node_gpus.sum())

    @property
    def n_racks(self) -> int:
        return int(self.rack_hall.size)

    @property
    def n_halls(self) -> int:
        return int(self.rack_hall.max()) + 1 if self.rack_hall.size else 0

    def gpu_node(self) -> np.ndarray:
        """Node id of every GPU (int32)."""
        return np.repeat(np.arange(self.n_nodes, dtype=np.int32), self.node_gpus)

    def node_kw(self) -> np.ndarray:
        """Peak IT power of every node, kW."""
        per_model = np.array([power.node_kw(m, 1) for m in self.models])
        return per_model[self.node_model] * self.node_gpus

    def cabled_links(self) -> int:
        """Switch-to-switch links plus one NIC link per GPU."""
        return int(self.fabric.link_a.size) + self.n_gpus

    def summary(self) -> dict:
        """The JSON summary printed by ``build_cluster --json``."""
        tiers = np.bincount(self.fabric.switch_tier, minlength=len(TIERS))
        links = self.cabled_links()
        transceivers = self.fabric.transceivers()
        modules, _ = compute_optics(self.fabric)
        support = support_fabrics(self.n_nodes)
        by_model = {m.name: int(self.node_gpus[self.node_model == i].sum())
                    for i, m in enumerate(self.models)}
        return {
            "name": self.name,
            "preset": self.preset,
            "fabric": self.fabric.kind,
            "gpus": self.n_gpus,
            "gpus_by_model": by_model,
            "nodes": self.n_nodes,
            "spare_nodes": int(self.node_spare.sum()),
            "racks": self.n_racks,
            "halls": self.n_halls,
            "switches": {tier: int(n) for tier, n in zip(TIERS, tiers, strict=True)},
            "links": links,
            "transceivers": transceivers,
            "optic_modules": {COMPUTE_MODULE: modules},
            "support_switches": {f.name: f.switches for f in support},
            "storage": [{"name": s.name, "tier": s.tier, "capacity_tb": s.capacity_tb,
                         "read_gb_s": s.read_gb_s, "write_gb_s": s.write_gb_s}
                        for s in self.storage],
            "cloud_pools": [{"provider": c.provider, "region": c.region, "model": c.model,
                             "max_gpus": c.max_gpus} for c in self.cloud_pools],
            "network_kw": round(power.network_kw(self), 1),
            "it_power_kw": round(float(self.node_kw().sum()) + power.network_kw(self), 1),
        }


def plan_cluster(name: str, groups: tuple[NodeGroup, ...], *, fabric_kind: str,
                 fabric_kw: dict | None = None, storage: tuple[StorageSpec, ...] = (),
                 cloud_pools: tuple[CloudPoolSpec, ...] = (), preset: str = "") -> ClusterPlan:
    """Lay out nodes in racks, racks in halls, and cable every GPU to the compute fabric.

    Parameters
    ----------
    name : str
        Cluster name.
    groups : tuple of NodeGroup
        Node groups, laid out in order; a rack holds nodes of one group only.
    fabric_kind : str
        ``"fat-tree"``, ``"dragonfly+"``, ``"rail"`` or ``"island"``.
    fabric_kw : dict, optional
        Extra arguments for :func:`scheduler.fabric.build_fabric`.

    Examples
    --------
    >>> plan = plan_cluster("t", (NodeGroup("H100-SXM", 8),), fabric_kind="fat-tree",
    ...                     fabric_kw={"radix": 8})
    >>> plan.n_gpus, plan.n_nodes, plan.n_racks
    (64, 8, 2)
    """
    if not groups:
        raise ValueError("a cluster needs at least one node group")
    names = []
    for g in groups:
        if g.nodes <= 0:
            raise ValueError(f"node group {g.model}: node count must be positive, not {g.nodes}")
        if not 0 <= g.spares <= g.nodes:
            raise ValueError(f"node group {g.model}: spares must be between 0 and {g.nodes}")
        if g.model not in names:
            names.append(g.model)
    models = tuple(get(n) for n in names)
    shapes = tuple(next(g.shape for g in groups if g.model == n) for n in names)

    node_model, node_gpus, node_rack, node_slot, node_spare, node_domain = [], [], [], [], [], []
    rack_count, domain_base = 0, 0
    for g in groups:
        m = get(g.model)
        idx = names.index(g.model)
        n = np.arange(g.nodes)
        node_model.append(np.full(g.nodes, idx, dtype=np.int16))
        node_gpus.append(np.full(g.nodes, m.per_node, dtype=np.int16))
        node_rack.append((rack_count + n // g.nodes_per_rack).astype(np.int32))
        node_slot.append((n % g.nodes_per_rack).astype(np.int16))
        spare = np.zeros(g.nodes, dtype=bool)
        if g.spares:
            spare[-g.spares:] = True
        node_spare.append(spare)
        nodes_per_domain = max(1, m.scaleup_domain // m.per_node)
        node_domain.append((domain_base + n // nodes_per_domain).astype(np.int32))
        rack_count += math.ceil(g.nodes / g.nodes_per_rack)
        domain_base += math.ceil(g.nodes / nodes_per_domain)

    node_model_a = np.concatenate(node_model)
    node_gpus_a = np.concatenate(node_gpus)
    node_rack_a = np.concatenate(node_rack)
    first_gpu = np.zeros(node_gpus_a.size, dtype=np.int32)
    np.cumsum(node_gpus_a[:-1], out=first_gpu[1:])
    n_gpus = int(node_gpus_a.sum())

    fabric = build_fabric(fabric_kind, endpoints=n_gpus, **(fabric_kw or {}))
    if fabric.n_endpoints < n_gpus:
        raise ValueError(f"the {fabric_kind} fabric has {fabric.n_endpoints} endpoint ports, "
                         f"fewer than the {n_gpus} GPUs to cable")

    racks = np.arange(rack_count)
    per_hall = RACKS_PER_ROW * ROWS_PER_HALL
    rack_hall = (racks // per_hall).astype(np.int32)
    rack_row = ((racks % per_hall) // RACKS_PER_ROW).astype(np.int32)
    rack_col = (racks % RACKS_PER_ROW).astype(np.int32)
    kw = np.array([power.node_kw(m, m.per_node) for m in models])[node_model_a]
    rack_load = np.bincount(node_rack_a, weights=kw, minlength=rack_count)
    # Capacity with 15 % headroom, in whole 5 kW steps (how PDUs are bought).
    rack_power = np.ceil(rack_load * 1.15 / 5.0) * 5.0

    return ClusterPlan(
        name=name, fabric=fabric, models=models, node_model=node_model_a,
        node_gpus=node_gpus_a, node_first_gpu=first_gpu, node_rack=node_rack_a,
        node_slot=np.concatenate(node_slot), node_spare=np.concatenate(node_spare),
        node_nvlink_domain=np.concatenate(node_domain), node_shape=shapes,
        rack_hall=rack_hall, rack_row=rack_row, rack_col=rack_col, rack_power_kw=rack_power,
        storage=storage, cloud_pools=cloud_pools, preset=preset,
    )
