"""One node's GPUs as its DCGM exporter measured them, for the node page of a mirror.

The mirror's poller reads every GPU's series each poll and keeps them in the engine; a web
page runs in another process, so a node page asks Prometheus for that node alone (the same
query, ``Hostname="..."``): a few kilobytes, within the mirror's timeout, never the fleet.
Beside what the overview shows it gives NVLink and PCIe traffic (sent + received, bytes/s),
read where the exporter emits them (``DCGM_FI_PROF_*``, profiling metrics many
deployments leave off: then they are "–").
"""

from __future__ import annotations

import math
import time

from twin import app_setting
from twin.mirror.errors import SourceError
from twin.mirror.prom_source import DCGM_METRICS, prom_view

NODE_TIMEOUT_S = 5.0
"""Longest a node page waits for Prometheus, s (the mirror's timeout when shorter)."""
COLUMNS = {"util_pct": ("DCGM_FI_DEV_GPU_UTIL",), "power_w": ("DCGM_FI_DEV_POWER_USAGE",),
           "temp_c": ("DCGM_FI_DEV_GPU_TEMP",), "xid": ("DCGM_FI_DEV_XID_ERRORS",),
           "tensor_active": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",),
           "nvlink_bytes_s": ("DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"),
           "pcie_bytes_s": ("DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES")}
"""A node page's measured columns and the exporter metrics each sums."""


def measured_node(hostname: str, n_gpus: int, *, clock=time.time) -> dict | None:
    """``{"rows": [per GPU index: column -> value or None], "read_at", "error"}`` for a
    mirror with Prometheus set; ``None`` otherwise (the page shows the model's telemetry).
    A failure is the ``error`` line, with empty rows; GPUs the exporter did not report are
    all ``None``."""
    url = app_setting("PROMETHEUS_URL")
    if app_setting("SOURCE") != "mirror" or not url:
        return None
    rows = [dict.fromkeys(COLUMNS) for _ in range(n_gpus)]
    try:
        view = prom_view(url, token=app_setting("PROMETHEUS_TOKEN") or None,
                         timeout=min(NODE_TIMEOUT_S, float(app_setting("MIRROR_TIMEOUT_S"))),
                         metrics=DCGM_METRICS, hostname=hostname, clock=clock,
                         max_bytes=int(app_setting("MIRROR_MAX_BYTES")))
    except SourceError as exc:
        return {"rows": rows, "read_at": None, "error": str(exc)}
    for row, (host, gpu) in enumerate(zip(view.host_index.tolist(), view.gpu.tolist(),
                                          strict=True)):
        if view.hosts[host] != hostname or not 0 <= gpu < n_gpus:
            continue
        for column, metrics in COLUMNS.items():
            vals = [float(view.values[m][row]) for m in metrics if m in view.values]
            vals = [v for v in vals if math.isfinite(v)]
            if vals:
                rows[gpu][column] = int(sum(vals)) if column == "xid" else sum(vals)
    return {"rows": rows, "read_at": view.read_at, "error": ""}
