"""DCGM-exporter GPU telemetry, read from Prometheus's HTTP API as numpy columns.

One instant query (``GET /api/v1/query``) asks for every metric at once::

    max by (__name__, Hostname, gpu, UUID) ({__name__=~"DCGM_FI_DEV_GPU_UTIL|..."})

dcgm-exporter labels each GPU's series with ``Hostname`` (the node), ``gpu`` (the index on
the node), ``UUID``, ``device``, ``modelName``, ``pci_bus_id`` and more; some metrics carry
extra labels (``DCGM_FI_DEV_XID_ERRORS`` has ``err_code``/``err_msg`` in recent exporters, and
Kubernetes adds ``pod``/``namespace``), which would give one GPU several series.  ``max by``
keeps one sample per metric and GPU and drops the other labels, which also cuts the answer to
about 110 bytes a sample (500,000 samples for 100,000 GPUs).  Prometheus drops the series of a
target it can no longer scrape (staleness markers), so a node whose exporter stopped is simply
absent from the answer: :attr:`PromView.stale` lists the expected hosts with no sample.

Rows are GPUs, sorted by host name then GPU index; the lead maps them to the twin's GPU arrays
by ``(hosts[host_index], gpu)``.  Samples without ``Hostname`` or an integer ``gpu``, or whose
value is not a number, are counted in ``rejected`` (with the first one's reason), never
stored as zeros.  Anything else wrong with the answer raises :class:`SourceError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlencode

import numpy as np

from twin.mirror.errors import MAX_BYTES, SourceError, gc_paused, http_get, json_load

DCGM_METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",             # %, 0-100
    "DCGM_FI_DEV_POWER_USAGE",          # W
    "DCGM_FI_DEV_GPU_TEMP",             # deg C
    "DCGM_FI_DEV_XID_ERRORS",           # the last XID error code (0: none)
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",  # fraction of cycles the tensor pipes were busy, 0-1
    "DCGM_FI_PROF_NVLINK_TX_BYTES",     # B/s sent over NVLink
    "DCGM_FI_PROF_NVLINK_RX_BYTES",     # B/s received over NVLink
    "DCGM_FI_PROF_PCIE_TX_BYTES",       # B/s sent over PCIe
    "DCGM_FI_PROF_PCIE_RX_BYTES",       # B/s received over PCIe
)
"""Metrics read by default; the last four are read where the exporter is set to emit them."""
GROUP_BY = ("__name__", "Hostname", "gpu", "UUID")
_GPU_SPAN = 1 << 16


@dataclass(slots=True)
class PromView:
    """One Prometheus answer, a row per GPU.

    ``read_at``: ``clock()`` when the answer was in.  ``eval_time``: the time Prometheus
    evaluated the query at (epoch s; every sample of an instant query carries it), None when
    no sample came back.  ``hosts``: the ``Hostname`` labels seen, sorted.  ``host_index``
    (int32) and ``gpu`` (int32, dcgm-exporter's ``gpu`` label): each row's host (into
    ``hosts``) and GPU index, rows sorted by host then GPU.  ``uuid``: each row's ``UUID``
    label ("" when absent), an object array.  ``values``: metric name -> float64 per row,
    NaN where that GPU had no sample of it (every requested metric has a column).
    ``stale``: the expected hosts (``expect_hosts``) with no sample at all.  ``rejected``:
    samples left out (no ``Hostname``, a ``gpu`` that is not an integer, a value that is not
    a number, a metric not asked for); ``rejected_note``: why the first one was.
    """

    read_at: float
    eval_time: float | None
    hosts: tuple[str, ...]
    host_index: np.ndarray
    gpu: np.ndarray
    uuid: np.ndarray
    values: dict[str, np.ndarray]
    stale: list[str] = field(default_factory=list)
    rejected: int = 0
    rejected_note: str = ""

    def __len__(self) -> int:
        return int(self.gpu.size)


def dcgm_query(metrics: Iterable[str] = DCGM_METRICS, *, hostname: str | None = None) -> str:
    """The PromQL of one instant query for ``metrics`` (see the module docstring); with
    ``hostname``, that node's GPUs only.

    >>> dcgm_query(["DCGM_FI_DEV_GPU_UTIL"], hostname='gpu-"7"')[40:]
    '{__name__=~"DCGM_FI_DEV_GPU_UTIL", Hostname="gpu-\\\\"7\\\\""})'

    >>> dcgm_query(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP"])[:40]
    'max by (__name__, Hostname, gpu, UUID) ('
    >>> dcgm_query(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP"])[40:]
    '{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_GPU_TEMP"})'
    """
    host = "" if hostname is None else \
        ', Hostname="' + hostname.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f'max by ({", ".join(GROUP_BY)}) ({{__name__=~"{"|".join(metrics)}"{host}}})'


def prom_view(url: str, *, token: str | None = None, timeout: float = 10.0,
              clock: Callable[[], float] = time.time,
              metrics: Iterable[str] = DCGM_METRICS,
              expect_hosts: Iterable[str] | None = None,
              max_bytes: int = MAX_BYTES, hostname: str | None = None) -> PromView:
    """One instant query of the Prometheus at ``url`` (``http://host:9090``) for ``metrics``.

    ``token``: sent as ``Authorization: Bearer``.  ``timeout``: seconds to connect and for
    each read.  ``expect_hosts``: the hosts that should report (the inventory's), for
    ``stale``.  ``max_bytes``: the cap on the answer (decompressed).  Raises
    :class:`SourceError` (source ``prometheus <url>``) when Prometheus is unreachable, slow,
    answers an HTTP error, an answer over the cap, ``"status": "error"``, or not a vector.
    ``hostname``: ask for that node's GPUs only (a node page).
    """
    metrics = tuple(metrics)
    base = url.rstrip("/")
    source = f"prometheus {base}"
    query = urlencode({"query": dcgm_query(metrics, hostname=hostname)})
    headers = {"Accept": "application/json", "Accept-Encoding": "gzip",
               **({"Authorization": f"Bearer {token}"} if token else {})}
    raw = http_get(f"{base}/api/v1/query?{query}", headers=headers, timeout=timeout,
                   source=source, max_bytes=max_bytes)
    doc = json_load(raw, source=source, what="GET /api/v1/query")
    return parse_prom(doc, metrics=metrics, expect_hosts=expect_hosts, read_at=clock(),
                      source=source)


def _answer(doc, source: str) -> list:
    if not isinstance(doc, dict):
        raise SourceError(source, f"/api/v1/query: expected a JSON object, got "
                                  f"{type(doc).__name__}")
    if doc.get("status") != "success":
        why = doc.get("error") or "no error message"
        raise SourceError(source, f"/api/v1/query answered status {doc.get('status')!r} "
                                  f"({doc.get('errorType', 'no errorType')}: {why})")
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise SourceError(source, f"/api/v1/query: unexpected JSON at data.resultType: "
                                  f"expected 'vector', got {kind!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise SourceError(source, "/api/v1/query: unexpected JSON at data.result: expected "
                                  "a list")
    return result


@gc_paused
def parse_prom(doc: dict, *, metrics: Iterable[str] = DCGM_METRICS,
               expect_hosts: Iterable[str] | None = None, read_at: float = 0.0,
               source: str = "prometheus") -> PromView:
    """A :class:`PromView` of a ``/api/v1/query`` answer (see :func:`prom_view`)."""
    metrics = tuple(metrics)
    column = {name: k for k, name in enumerate(metrics)}
    result = _answer(doc, source)
    row_of: dict[str, dict[str, int]] = {}           # host -> gpu label -> row (first seen)
    row_host, row_gpu, row_uuid = [], [], []
    kinds, rows, texts = [], [], []
    rejected, note, stamp = 0, "", None
    for i, sample in enumerate(result):
        try:
            labels = sample["metric"]
            stamp, text = sample["value"]
            kind = column[labels["__name__"]]
            host, gpu = labels["Hostname"], labels["gpu"]
            gpus = row_of.get(host)
            if gpus is None:
                if not (isinstance(host, str) and host):
                    raise ValueError(host)
                gpus = row_of[host] = {}
            row = gpus.get(gpu)
            if row is None:
                index = int(gpu)
                if not (0 <= index < _GPU_SPAN and isinstance(gpu, str)):
                    raise ValueError(gpu)
                row = gpus[gpu] = len(row_gpu)
                row_host.append(host)
                row_gpu.append(index)
                row_uuid.append(labels.get("UUID", ""))
        except (KeyError, TypeError, ValueError):
            rejected += 1
            note = note or f"data.result[{i}]: {_why(sample, column)}"
            continue
        kinds.append(kind)
        rows.append(row)
        texts.append(text)
    vals, bad = _floats(texts)
    if bad.any():
        rejected += int(bad.sum())
        first = texts[int(np.flatnonzero(bad)[0])]
        note = note or f"a sample's value is not a number ({first!r})"
    names = sorted(row_of)
    rank = {host: k for k, host in enumerate(names)}
    host_index = np.array([rank[h] for h in row_host], np.int32)
    gpu = np.array(row_gpu, np.int32)
    order = np.lexsort((gpu, host_index))            # rows sorted by host, then GPU
    position = np.empty(order.size, np.int64)
    position[order] = np.arange(order.size)
    kinds, at = np.array(kinds, np.int64), position[np.array(rows, np.int64)]
    table = {}
    for k, name in enumerate(metrics):
        pick = (kinds == k) & ~bad
        table[name] = np.full(order.size, np.nan)
        np.fmax.at(table[name], at[pick], vals[pick])   # duplicate series: the largest
    try:
        eval_time = None if stamp is None else float(stamp)
    except (TypeError, ValueError):
        eval_time = None
    expected = set(expect_hosts or ())
    return PromView(read_at=read_at, eval_time=eval_time, hosts=tuple(names),
                    host_index=host_index[order], gpu=gpu[order],
                    uuid=np.array(row_uuid, dtype=object)[order] if row_uuid else
                    np.zeros(0, dtype=object), values=table,
                    stale=sorted(expected - row_of.keys()), rejected=rejected,
                    rejected_note=note)


def _floats(texts: list) -> tuple[np.ndarray, np.ndarray]:
    """(values, not-a-number mask) of Prometheus's value strings ("1.5", "NaN", "+Inf")."""
    try:
        return np.asarray(texts, dtype=np.float64), np.zeros(len(texts), bool)
    except (TypeError, ValueError):
        pass
    vals, bad = np.full(len(texts), np.nan), np.zeros(len(texts), bool)
    for i, text in enumerate(texts):
        try:
            if isinstance(text, bool) or not isinstance(text, (str, int, float)):
                raise TypeError
            vals[i] = float(text)
        except (TypeError, ValueError):
            bad[i] = True
    return vals, bad


def _why(sample, column: dict[str, int]) -> str:
    """Why a sample was left out (only called for those)."""
    if not isinstance(sample, dict) or not isinstance(sample.get("metric"), dict):
        return "not an object with metric labels"
    value = sample.get("value")
    if not (isinstance(value, list) and len(value) == 2):
        return f"value {value!r} is not a [time, value] pair"
    labels = sample["metric"]
    if labels.get("__name__") not in column:
        return f"metric {labels.get('__name__')!r} was not asked for"
    if not isinstance(labels.get("Hostname"), str) or not labels["Hostname"]:
        return "no 'Hostname' label"
    return f"gpu label {labels.get('gpu')!r} is not a GPU index"
