"""What NVIDIA's dcgm-exporter would report for the twin's simulated GPUs (``/metrics/dcgm``).

Metric names and labels are dcgm-exporter's, so dashboards and alerts written for it (NVIDIA's
Grafana dashboard 12239 selects by ``Hostname`` and ``gpu``) read the twin unchanged. Every
series carries the exporter's labels: ``gpu`` (index in the node), ``UUID``, ``pci_bus_id``,
``device`` (``nvidiaN``), ``modelName``, ``Hostname``, ``DCGM_FI_DRIVER_VERSION``; a GPU that a
job holds also carries ``hpc_job`` (the job's name), the label dcgm-exporter adds with its
Slurm job mapping (``--hpc-job-mapping-dir``). The exporter's Kubernetes labels (``pod``,
``namespace``, ``container``) come from the kubelet's pod-resources API; the twin's jobs are
batch gangs, not pods, so it sets none of them.

What is reported (the real exporter as the guide):

* Only NVIDIA GPUs: dcgm-exporter runs on NVIDIA nodes only; AMD, Intel, Google and Huawei
  accelerators are absent here.
* A node that is down (``placement["down"]``: failed, drilled, or its feed lost) reports
  nothing: its exporter would not answer. Scraped alone (``?hostname=``) it answers 503, which
  Prometheus records as ``up == 0``. Drained and spare nodes report, idle unless a gang holds
  them.
* A GPU in ``placement["gpus_down"]`` on a node that is up reads idle with
  ``DCGM_FI_DEV_XID_ERRORS`` 79 ("GPU has fallen off the bus"). The placement does not say
  whether the GPU failed or only its NIC link went down, so both read as XID 79.
* Which GPUs of a node a gang holds: the placement's ``gpu_runs`` (the engine's
  ``gpu_owner``). A placement written before it was added (``gpu_runs`` or ``gpus_down``
  null after :mod:`twin.live.stored`) gets no reading at all (:class:`HoldersNotReported`,
  a 503): holders are never guessed. Inference replicas carry no ``hpc_job`` (they are not
  Slurm jobs): their GPUs read idle.

Values: a model, not a measurement. Each figure below is the twin's own where it has one, else
an assumption named here (and in ``docs/live.md``):

=================================  ==========================================================
``DCGM_FI_DEV_GPU_UTIL`` (%)       gang running or draining: ``BUSY_UTIL`` (0.97, assumed: a
                                   training step keeps a kernel on the GPU nearly all the
                                   time); gang detecting a failure (hung in a collective):
                                   100, as a spinning NCCL kernel reads; no gang: 0.
``DCGM_FI_PROF_GR_ENGINE_ACTIVE``  the same as a ratio (0-1).
``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` the gang's MFU from the frame (``running_jobs[].mfu``,
                                   FLOPs-based, a proxy for tensor-pipe cycles); gangs beyond
                                   the frame's list take the mean of the listed ones; hung or
                                   idle: 0.
``DCGM_FI_DEV_POWER_USAGE`` (W)    ``scheduler.hardware.power.gpu_power_w``: linear from the
                                   catalog's ``idle_w`` to its TDP ``power_w``, at load
                                   ``BUSY_UTIL`` (running), ``HUNG_LOAD`` (0.25, assumed) or 0.
``DCGM_FI_DEV_GPU_TEMP`` (C)       cold-aisle supply air (``SUPPLY_AIR_C``, 24) plus
                                   ``TEMP_RISE_AT_TDP_K`` (45 K, assumed) times power / TDP.
``DCGM_FI_DEV_MEMORY_TEMP`` (C)    GPU temperature plus ``MEMORY_TEMP_OFFSET_K`` (6 K, assumed).
``DCGM_FI_DEV_SM_CLOCK`` (MHz)     busy or hung: 1980 (H100 SXM's maximum boost, used for every
                                   model); idle: 345 (assumed idle clock).
``DCGM_FI_DEV_FB_USED/FREE`` (MiB) HBM is the catalog's ``hbm_gb`` x 1024 MiB; a held GPU uses
                                   ``FB_USED_SHARE`` (0.9, assumed: frameworks' caching
                                   allocators hold most of HBM), a free one 0.
``DCGM_FI_DEV_XID_ERRORS``         0, or 79 for a GPU in ``gpus_down`` (see above).
``DCGM_FI_PROF_NVLINK_TX/RX_BYTES`` bytes/s: running gangs ``NVLINK_BUSY_SHARE`` (0.25,
                                   assumed) of the catalog's scale-up bandwidth per direction
                                   (``scaleup_gb_s`` / 2); else 0.
``DCGM_FI_PROF_PCIE_TX/RX_BYTES``  bytes/s: running gangs ``PCIE_BUSY_SHARE`` (0.25, assumed)
                                   of the node's NIC rate per GPU (``nic_gbps`` / 8: scale-out
                                   traffic crosses PCIe to the NIC); else 0.
=================================  ==========================================================

UUIDs are ``uuid5`` of cluster, hostname and index (stable across processes and restarts);
``pci_bus_id`` takes a DGX H100's bus numbers by index; ``DCGM_FI_DRIVER_VERSION`` is
:data:`DRIVER_VERSION`. The exporter types its ``*_BYTES`` fields as counters but fills them
with per-second rates; ``prometheus_client`` would rename a counter ``<name>_total``, so every
family here is a gauge: names, labels and values are the exporter's, only ``# TYPE`` differs.

Two writers give the same bytes: :class:`DcgmCollector` (``prometheus_client``) for a node or a
small cluster, and :func:`dcgm_exposition_chunks`, which writes each label set once and joins
bytes, for whole clusters (100,000 GPUs x 14 families is 1.4 M lines, about 13 s through
``prometheus_client`` and well under 2 s here; ``bench/dcgm_endpoint.py``). A test compares
the two byte for byte.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from scheduler.frame_schema import StoredFrame
from scheduler.hardware.catalog import CATALOG
from scheduler.hardware.power import SUPPLY_AIR_C, gpu_power_w
from scheduler.placement_schema import LivePlacement, PlacedJob

DRIVER_VERSION = "570.133.20"
UUID_NAMESPACE = uuid.UUID("6f1c0d1e-5b0e-4c8e-9a57-2f6d1c3e7a10")
"""Fixed, so a GPU's UUID is the same in every process and after every restart."""
PRODUCT_NAMES = {"H100-SXM": "NVIDIA H100 80GB HBM3", "H200-SXM": "NVIDIA H200",
                 "B200": "NVIDIA B200", "GB200": "NVIDIA GB200"}
"""NVML product names (``modelName``); other models read ``NVIDIA <catalog name>``."""
PCI_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
"""A DGX H100's GPU bus numbers by index; further indices continue past them."""

BUSY_UTIL = 0.97
HUNG_LOAD = 0.25
SM_CLOCK_BUSY_MHZ = 1980.0
SM_CLOCK_IDLE_MHZ = 345.0
TEMP_RISE_AT_TDP_K = 45.0
MEMORY_TEMP_OFFSET_K = 6.0
FB_USED_SHARE = 0.9
NVLINK_BUSY_SHARE = 0.25
PCIE_BUSY_SHARE = 0.25
XID_FALLEN_OFF_BUS = 79
HUNG_STATES = frozenset({"detecting"})
"""Gang states that hold GPUs without computing (a failure not yet detected)."""

METRICS = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "Rate of data transmitted over PCIe, bytes per second."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "Rate of data received over PCIe, bytes per second."),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "Rate of data transmitted over NVLink, bytes per second."),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", "Rate of data received over NVLink, bytes per second."),
)
LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
          "DCGM_FI_DRIVER_VERSION")
JOB_LABEL = "hpc_job"


class HostNotFound(LookupError):
    """No node of that hostname with NVIDIA GPUs (no exporter would run there)."""


class HostDown(LookupError):
    """The node is down: its exporter would not answer."""


class HoldersNotReported(LookupError):
    """The placement does not say which GPUs the jobs hold or which are out (an older
    engine's, ``None`` in :mod:`twin.live.stored`): no reading would be honest."""


def _escape(value: str) -> str:
    """A label value as the text format writes it (as ``prometheus_client`` does)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _pairs(labels: dict) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))


class DcgmInventory:
    """The fixed part of every GPU's readings: labels and figures, built once per inventory.

    ``nodes`` are ``(hostname, catalog model, GPUs, NIC Gb/s)`` in the engine's node order
    (inventory ids), ``cluster`` the cluster's name (it seeds the UUIDs).
    """

    def __init__(self, cluster: str, nodes: tuple[tuple[str, str, int, float], ...]):
        self.cluster = cluster
        self.hostnames = [n[0] for n in nodes]
        self.node_of_host = {h: i for i, h in enumerate(self.hostnames)}
        self.node_gpus = np.array([n[2] for n in nodes], dtype=np.int64)
        self.node_first = np.concatenate([[0], np.cumsum(self.node_gpus)[:-1]]).astype(np.int64)
        self.n_gpus = int(self.node_gpus.sum())
        self.gpu_node = np.repeat(np.arange(len(nodes)), self.node_gpus)
        self.gpu_index = np.arange(self.n_gpus) - self.node_first[self.gpu_node]
        models = [CATALOG.get(n[1]) for n in nodes]
        self.node_nvidia = np.array([m is not None and m.vendor == "NVIDIA" for m in models],
                                    dtype=bool)
        self.models = sorted({m.name: m for m in models if m is not None}.values(),
                             key=lambda m: m.name)
        index = {m.name: i for i, m in enumerate(self.models)}
        node_model = np.array([index[m.name] if m is not None else -1 for m in models],
                              dtype=np.int64)
        self.gpu_model = node_model[self.gpu_node]

        def per_gpu(figure) -> np.ndarray:
            table = np.array([figure(m) for m in self.models] + [0.0], dtype=float)
            return table[self.gpu_model]

        self.tdp_w = per_gpu(lambda m: m.power_w)
        self.fb_total_mib = per_gpu(lambda m: m.hbm_gb * 1024.0)
        self.nvlink_bytes_s = per_gpu(lambda m: m.scaleup_gb_s / 2 * 1e9)
        self.pcie_bytes_s = np.array([n[3] for n in nodes], dtype=float)[self.gpu_node] / 8 * 1e9
        self.gpu_nvidia = self.node_nvidia[self.gpu_node]
        product = [PRODUCT_NAMES.get(m.name, f"NVIDIA {m.name}") if m is not None else ""
                   for m in models]
        self.head: list[str | None] = [None] * self.n_gpus
        self.tail: list[str | None] = [None] * self.n_gpus
        self._fixed: list[dict | None] = [None] * self.n_gpus
        for g in np.flatnonzero(self.gpu_nvidia).tolist():
            labels = self._labels_fixed(g, product[int(self.gpu_node[g])])
            self._fixed[g] = labels
            head = {k: v for k, v in labels.items() if k < JOB_LABEL}
            tail = {k: v for k, v in labels.items() if k > JOB_LABEL}
            self.head[g] = "{" + _pairs(head)
            self.tail[g] = "," + _pairs(tail) + "} "

    def _labels_fixed(self, g: int, product: str) -> dict[str, str]:
        host = self.hostnames[int(self.gpu_node[g])]
        i = int(self.gpu_index[g])
        bus = PCI_BUSES[i] if i < len(PCI_BUSES) else PCI_BUSES[-1] + i
        gpu_uuid = uuid.uuid5(UUID_NAMESPACE, f"{self.cluster}/{host}/{i}")
        return {"gpu": str(i), "UUID": f"GPU-{gpu_uuid}",
                "pci_bus_id": f"00000000:{bus:02X}:00.0", "device": f"nvidia{i}",
                "modelName": product, "Hostname": host, "DCGM_FI_DRIVER_VERSION": DRIVER_VERSION}

    def labels(self, g: int, job: str | None) -> dict[str, str]:
        """The exporter's labels of GPU ``g`` (engine id), with ``hpc_job`` when one holds it."""
        labels = dict(self._fixed[g])
        if job is not None:
            labels[JOB_LABEL] = job
        return labels

    def label_text(self, g: int, job: str | None) -> str:
        """``labels`` as the text format writes them, braces and the space after included."""
        if job is None:
            return self.head[g] + self.tail[g]
        return f'{self.head[g]},{JOB_LABEL}="{_escape(job)}"{self.tail[g]}'


@functools.lru_cache(maxsize=4)
def dcgm_inventory(cluster: str, nodes: tuple[tuple[str, str, int, float], ...]) -> DcgmInventory:
    """:class:`DcgmInventory`, kept while the inventory's rows are unchanged (the key is the
    rows themselves, so a renamed node or a new one builds a fresh one)."""
    return DcgmInventory(cluster, nodes)


@dataclass(frozen=True)
class DcgmReadings:
    """One scrape: the GPUs reported (engine ids, ascending), the job holding each (or None)
    and every metric's value per GPU, in the order of ``gpus``."""

    gpus: np.ndarray
    jobs: list[str | None]
    values: dict[str, np.ndarray]


def _runs(runs, n: int) -> np.ndarray:
    """``[[first, last], ...]`` as a boolean mask over ``n`` ids (ids past ``n`` ignored)."""
    mask = np.zeros(n, dtype=bool)
    for a, b in runs or ():
        mask[max(0, int(a)):min(n, int(b) + 1)] = True
    return mask


def _holders(inv: DcgmInventory, jobs: dict[str, PlacedJob]) -> tuple[np.ndarray, list[str]]:
    """Each GPU's gang (index into the returned names; -1 for none): the GPUs a gang's
    ``gpu_runs`` name (the engine's own GPU ids)."""
    owner = np.full(inv.n_gpus, -1, dtype=np.int64)
    names = sorted(jobs)
    for j, name in enumerate(names):
        owner[_runs(jobs[name]["gpu_runs"], inv.n_gpus)] = j
    return owner, names


def _tensor_activity(frame: StoredFrame | None, names: list[str]) -> np.ndarray:
    """Per gang (plus a trailing 0 for "none"): its MFU from the frame's running jobs, else
    the mean of the listed ones, else the fleet's (0 with no frame)."""
    rows = frame["running_jobs"] if frame is not None else ()
    listed = {r["name"]: float(r["mfu"]) for r in rows}
    busy = [v for v in listed.values() if v > 0]
    default = float(np.mean(busy)) if busy else float(frame["mfu"] if frame is not None else 0.0)
    return np.array([listed.get(n, default) for n in names] + [0.0], dtype=float)


def dcgm_readings(inv: DcgmInventory, *, placement: LivePlacement, frame: StoredFrame | None,
                  hostname: str | None = None) -> DcgmReadings:
    """What the exporters of the cluster (or of node ``hostname``) would report now.

    ``placement`` and ``frame`` are the ``LiveState`` row's (engine ids), as
    :mod:`twin.live.stored` upgrades them. Raises :class:`HostNotFound` or :class:`HostDown`
    for a ``hostname`` with no exporter to answer, :class:`HoldersNotReported` when the
    placement does not say which GPUs the jobs hold or which are out.
    """
    jobs = placement["jobs"]
    if placement["gpus_down"] is None or any(j["gpu_runs"] is None for j in jobs.values()):
        raise HoldersNotReported("the live engine does not report which GPUs its jobs hold")
    node_up = ~_runs(placement["down"], inv.node_gpus.size)
    selected = inv.gpu_nvidia & node_up[inv.gpu_node]
    if hostname is not None:
        node = inv.node_of_host.get(hostname)
        if node is None or not inv.node_nvidia[node]:
            raise HostNotFound(hostname)
        if not node_up[node]:
            raise HostDown(hostname)
        selected &= inv.gpu_node == node
    gpus = np.flatnonzero(selected)
    owner, names = _holders(inv, jobs)
    gpu_ok = ~_runs(placement["gpus_down"], inv.n_gpus)[gpus]
    held = np.where(gpu_ok, owner[gpus], -1)
    states = np.array([jobs[n]["state"] in HUNG_STATES for n in names] + [False])
    hung = (held >= 0) & states[held]
    busy = (held >= 0) & ~hung
    util = np.where(busy, BUSY_UTIL, np.where(hung, 1.0, 0.0))
    load = np.where(busy, BUSY_UTIL, np.where(hung, HUNG_LOAD, 0.0))
    power = np.zeros(gpus.size)
    model = inv.gpu_model[gpus]
    for i, m in enumerate(inv.models):
        mask = model == i
        if mask.any():
            power[mask] = gpu_power_w(m, load[mask])
    tdp = inv.tdp_w[gpus]
    temp = np.round(SUPPLY_AIR_C + TEMP_RISE_AT_TDP_K * power / tdp)
    fb_total = inv.fb_total_mib[gpus]
    fb_used = np.where(held >= 0, np.round(FB_USED_SHARE * fb_total), 0.0)
    nvlink = np.where(busy, np.round(NVLINK_BUSY_SHARE * inv.nvlink_bytes_s[gpus]), 0.0)
    pcie = np.where(busy, np.round(PCIE_BUSY_SHARE * inv.pcie_bytes_s[gpus]), 0.0)
    values = {
        "DCGM_FI_DEV_SM_CLOCK": np.where(busy | hung, SM_CLOCK_BUSY_MHZ, SM_CLOCK_IDLE_MHZ),
        "DCGM_FI_DEV_MEMORY_TEMP": temp + MEMORY_TEMP_OFFSET_K,
        "DCGM_FI_DEV_GPU_TEMP": temp,
        "DCGM_FI_DEV_POWER_USAGE": np.round(power, 3),
        "DCGM_FI_DEV_GPU_UTIL": np.round(util * 100.0),
        "DCGM_FI_DEV_XID_ERRORS": np.where(gpu_ok, 0.0, float(XID_FALLEN_OFF_BUS)),
        "DCGM_FI_DEV_FB_FREE": fb_total - fb_used,
        "DCGM_FI_DEV_FB_USED": fb_used,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": util,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": np.where(
            busy, np.round(_tensor_activity(frame, names)[held], 4), 0.0),
        "DCGM_FI_PROF_PCIE_TX_BYTES": pcie,
        "DCGM_FI_PROF_PCIE_RX_BYTES": pcie,
        "DCGM_FI_PROF_NVLINK_TX_BYTES": nvlink,
        "DCGM_FI_PROF_NVLINK_RX_BYTES": nvlink,
    }
    return DcgmReadings(gpus=gpus, jobs=[names[h] if h >= 0 else None for h in held.tolist()],
                        values=values)


class DcgmCollector:
    """The readings as ``prometheus_client`` metric families (none when no GPU reports)."""

    def __init__(self, inv: DcgmInventory, readings: DcgmReadings):
        self.inv, self.readings = inv, readings

    def collect(self) -> Iterator[Metric]:
        r = self.readings
        if r.gpus.size == 0:
            return
        labels = [self.inv.labels(g, job) for g, job in zip(r.gpus.tolist(), r.jobs,
                                                            strict=True)]
        for name, help_text in METRICS:
            family = Metric(name, help_text, "gauge")
            for lab, value in zip(labels, r.values[name].tolist(), strict=True):
                family.add_sample(name, lab, value)
            yield family


def dcgm_exposition_chunks(inv: DcgmInventory, readings: DcgmReadings) -> Iterator[bytes]:
    """The same text as :class:`DcgmCollector` through ``generate_latest``, one family per
    chunk: each GPU's label text is written once and reused by every family, each distinct
    value formatted once (with ``prometheus_client``'s own float formatting)."""
    r = readings
    n = int(r.gpus.size)
    if n == 0:
        return
    pieces: list = [None] * (3 * n)
    pieces[1::3] = [inv.label_text(g, job).encode()
                    for g, job in zip(r.gpus.tolist(), r.jobs, strict=True)]
    for name, help_text in METRICS:
        distinct, which = np.unique(r.values[name], return_inverse=True)
        text = np.array([f"{floatToGoString(v)}\n".encode() for v in distinct.tolist()],
                        dtype=object)
        pieces[0::3] = [name.encode()] * n
        pieces[2::3] = text[which].tolist()
        yield f"# HELP {name} {help_text}\n# TYPE {name} gauge\n".encode() + b"".join(pieces)
