"""Named cluster presets: what ``build_cluster --preset NAME`` builds.

Sources for the shapes (see ``../shared/reference/figures.md``):

* ``superpod-h100``: NVIDIA DGX SuperPOD H100 reference architecture (RA-11333-001), 4 scalable
  units of 32 slots with one slot per SU given to UFM, 127 DGX nodes, rail-optimised NDR fabric,
  storage sized to the RA's "Better" column (160 / 80 GB/s read/write for 4 SU).
* ``llama3-16k``: "The Llama 3 Herd of Models" (Meta, 2024): 16,384 H100 GPUs on 2,048 nodes, on
  Meta's RoCE cluster (SIGCOMM 2024) of 3,072-GPU pods, 16 GPUs per rack, 1:7 oversubscription
  above the pods; Tectonic storage of 240 PB at 2 TB/s sustained (7 TB/s peak).  Built as
  ``meta-24k`` builds its zones (:mod:`scheduler.fabric.zones`), six of them: the job's 2,048
  nodes fill zones 0-4 (15,360 GPUs) and 64 racks (1,024 GPUs) of zone 5, so it spans 5 1/3
  zones as Meta's did; the 64 hot spares fill the next 32 racks of zone 5, and its last 96
  leaves (1,536 ports) stay empty, the share of Meta's sixth pod that other work held.
* ``superpod-h100-8su``: the same RA's larger two-tier build, 8 SU of 32 DGX H100 (256 nodes,
  64 leaves, 32 spines, no core: the RA's "larger DGX SuperPOD" component table); storage at
  twice the RA's "Best" 4-SU figures (500 / 250 GB/s).
* ``meta-24k``: Meta's 24,576-GPU RoCE cluster (SIGCOMM 2024; Llama 3 report): 8 zones of
  3,072 H100 GPUs on chassis spines, 16 GPUs per rack, 1:7 above the zones.
* ``dragonfly-16k``: 16,384 H100 GPUs on the balanced radix-64 plain Dragonfly of Kim, Dally,
  Scott, Abts (ISCA 2008, section 3: p = h = 16, a = 32, 63 ports used): 32 groups of 512
  GPUs; storage at the 1 GB/s-per-GPU rule of thumb below; the capacity is assumed.
* ``noc-4k``: the default live twin: the same RA's 16-SU three-tier build (the "larger DGX
  SuperPOD" component table: 128 leaves, 128 spines, 64 cores), all 512 slots given to DGX H100
  nodes (4,096 GPUs; the UFM appliances assumed outside the SU racks), 32 of them hot spares
  (two per SU, assumed: 6 %, twice Llama 3's 64 of 2,112, so a failed node is swapped at
  once); storage at the vendors' 1 GB/s-per-GPU rule of thumb below.
  Its workload (:mod:`scheduler.workload.scenarios`) keeps it busy from the first frame.
* ``hyperscale-100k``: compute islands of the same kind, sized past 100,000 GPUs; storage at the
  vendors' rule of thumb of 1 GB/s read per GPU, half that for writes (the RA's 2:1 ratio).
Cloud prices are assumptions (editable in the admin), not quotes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.hardware.cluster import (
    CloudPoolSpec,
    ClusterPlan,
    NodeGroup,
    NodeShape,
    StorageSpec,
    plan_cluster,
)

LIVE_SPEEDUP = 60.0
"""The live twin's default speed-up, simulated s per wall s (``CLUSTERTWIN_SPEEDUP``)."""

NVME_READ_GB_S = 25.0   # per node: 8 Gen4 U.2 drives, assumed (typical datasheet class)
NVME_WRITE_GB_S = 12.0


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    groups: tuple[NodeGroup, ...]
    fabric_kind: str
    fabric_kw: dict = field(default_factory=dict)
    central_read_gb_s: float = 0.0
    central_write_gb_s: float = 0.0
    central_capacity_tb: float = 0.0
    gpudirect: bool = True
    cloud_pools: tuple[CloudPoolSpec, ...] = ()
    warmup_s: float = 0.0
    """Simulated seconds the live twin runs its scenario before the first frame (a fresh
    build only), so the dashboard opens on a fleet in mid-life: full, with a queue and some
    failures behind it, rather than on an empty cluster filling up."""

    def plan(self, name: str | None = None) -> ClusterPlan:
        nodes = sum(g.nodes for g in self.groups)
        nvme_tb = sum(g.nodes * g.shape.nvme_tb for g in self.groups)
        storage = (
            StorageSpec("central-pfs", "central", self.central_capacity_tb,
                        self.central_read_gb_s, self.central_write_gb_s, self.gpudirect),
            StorageSpec("node-nvme", "nvme", nvme_tb, nodes * NVME_READ_GB_S,
                        nodes * NVME_WRITE_GB_S, False),
        )
        return plan_cluster(name or self.name, self.groups, fabric_kind=self.fabric_kind,
                            fabric_kw=self.fabric_kw, storage=storage,
                            cloud_pools=self.cloud_pools, preset=self.name)


_GB200_TRAY = NodeShape(cpu_cores=144, ram_gb=960.0, nic_gbps=800.0, nvme_tb=15.36)

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset(
        "dev-small", "512 H100 GPUs in 2 rail-optimised SUs: keeps the dashboard lively",
        (NodeGroup("H100-SXM", 64, spares=2),), "rail",
        central_read_gb_s=80.0, central_write_gb_s=40.0, central_capacity_tb=2000.0,
        cloud_pools=(CloudPoolSpec("aws", "us-east-1", "H100-SXM", 256, 4.0, 900),),
    ),
    Preset(
        "noc-4k", "4,096 H100 GPUs in 16 rail-optimised SUs: a busy multi-tenant default twin",
        (NodeGroup("H100-SXM", 512, spares=32),), "rail", {"nodes_per_su": 32},
        central_read_gb_s=4096.0, central_write_gb_s=2048.0, central_capacity_tb=40_000.0,
        cloud_pools=(CloudPoolSpec("aws", "us-east-1", "H100-SXM", 1024, 4.0, 900),),
        warmup_s=3 * 86400.0,
    ),
    Preset(
        "superpod-h100", "DGX SuperPOD H100: 4 SUs, 127 nodes, rail-optimised NDR",
        (NodeGroup("H100-SXM", 127),), "rail", {"nodes_per_su": 32},
        central_read_gb_s=160.0, central_write_gb_s=80.0, central_capacity_tb=5000.0,
    ),
    Preset(
        "llama3-16k", "Llama 3 405B pre-training: 2,048 H100 nodes plus 64 hot spares",
        (NodeGroup("H100-SXM", 2112, spares=64, nodes_per_rack=2),), "island",
        {"zone_gpus": 3072, "gpus_per_leaf": 16, "oversubscription": 7.0},
        central_read_gb_s=2000.0, central_write_gb_s=2000.0, central_capacity_tb=240_000.0,
    ),
    Preset(
        "hyperscale-100k", "101,120 GPUs (H100, H200, GB200 NVL72) in compute islands",
        (NodeGroup("H100-SXM", 8192, spares=82, nodes_per_rack=2),
         NodeGroup("H200-SXM", 3584, spares=36, nodes_per_rack=2),
         NodeGroup("GB200", 1728, spares=18, shape=_GB200_TRAY, nodes_per_rack=18)),
        "island", {"oversubscription": 7.0},
        central_read_gb_s=101_120.0, central_write_gb_s=50_560.0,
        central_capacity_tb=1_000_000.0,
        cloud_pools=(CloudPoolSpec("azure", "eastus", "H100-SXM", 4096, 4.0, 1200),
                     CloudPoolSpec("gcp", "us-central1", "H200-SXM", 2048, 5.0, 1200)),
    ),
    Preset(
        "mixed-vendor", "H100, MI300X and Ascend 910B nodes on one fat-tree, plus a cloud pool",
        (NodeGroup("H100-SXM", 64), NodeGroup("MI300X", 64), NodeGroup("Ascend910B", 32)),
        "fat-tree", {"radix": 32},
        central_read_gb_s=160.0, central_write_gb_s=80.0, central_capacity_tb=5000.0,
        cloud_pools=(CloudPoolSpec("aws", "us-west-2", "H100-SXM", 512, 4.0, 900),),
    ),
    Preset(
        "superpod-h100-8su", "DGX SuperPOD H100: 8 SUs, 256 nodes, two-tier rail NDR",
        (NodeGroup("H100-SXM", 256),), "rail", {"nodes_per_su": 32},
        central_read_gb_s=1000.0, central_write_gb_s=500.0, central_capacity_tb=10_000.0,
    ),
    Preset(
        "meta-24k", "Meta RoCE cluster: 8 zones of 3,072 H100 GPUs on chassis spines, 1:7 above",
        (NodeGroup("H100-SXM", 3072, nodes_per_rack=2),), "island",
        {"zone_gpus": 3072, "gpus_per_leaf": 16, "oversubscription": 7.0},
        central_read_gb_s=2000.0, central_write_gb_s=2000.0, central_capacity_tb=240_000.0,
    ),
    Preset(
        "dragonfly-16k", "16,384 H100 GPUs on a balanced radix-64 plain Dragonfly, 32 groups",
        (NodeGroup("H100-SXM", 2048, nodes_per_rack=2),), "dragonfly", {"p": 16},
        central_read_gb_s=16_384.0, central_write_gb_s=8_192.0, central_capacity_tb=100_000.0,
    ),
)}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}") from None
