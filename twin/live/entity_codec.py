"""How per-entity figures are packed for the database: arrays, not JSON keys.

A figure of a kind (``util_pct`` of every node ...) is one array of half-precision floats
(``float16``: 2 bytes a value, about three significant digits, enough for a percentage, a
rack's kW or a temperature; a job's GPU count, which may pass float16's 65,504, is
``float32``), and a stored value is a zlib stream of those arrays laid end to end.  One
sample of the 100,000-GPU preset (13,504 nodes, 5,984 racks, 5,272 switches) is then under
200 kB before compression, not a JSON object of a hundred thousand keys.  Jobs' names travel
beside their figures, NUL-separated and compressed.  NaN marks an entity without a value.
"""

from __future__ import annotations

import zlib

import numpy as np

from scheduler.physics.entity_figures import Figures

WIDE = {"gpus": np.dtype(np.float32)}
"""Figures kept in single precision (the rest in half)."""
HALF = np.dtype(np.float16)
HALF_MAX = float(np.finfo(np.float16).max)
LEVEL = 6
_SEP = "\x00"


def dtype_of(metric: str) -> np.dtype:
    return WIDE.get(metric, HALF)


def _cast(values: np.ndarray, metric: str) -> np.ndarray:
    dtype = dtype_of(metric)
    values = np.asarray(values, dtype=float)
    if dtype == HALF:  # beyond half precision's range: the largest it holds, not infinity
        values = np.clip(values, -HALF_MAX, HALF_MAX)
    return values.astype(dtype)


def pack_names(names) -> bytes:
    """Names (jobs'), compressed; ``b""`` for none."""
    return zlib.compress(_SEP.join(names).encode("utf-8"), LEVEL) if names else b""


def unpack_names(blob: bytes) -> list[str]:
    return zlib.decompress(bytes(blob)).decode("utf-8").split(_SEP) if blob else []


def pack_figures(figures: Figures) -> tuple[str, bytes, bytes]:
    """``(metrics, ids, data)`` of one kind's figures: the metrics' names comma-separated,
    the jobs' names (:func:`pack_names`) and the arrays, one after another, compressed.

    >>> m, ids, data = pack_figures(Figures({"util_pct": np.array([50.0, 0.0])}))
    >>> m, ids, unpack_figures(m, data)["util_pct"].tolist()
    ('util_pct', b'', [50.0, 0.0])
    """
    metrics = list(figures.columns)
    raw = b"".join(_cast(figures.columns[m], m).tobytes() for m in metrics)
    return ",".join(metrics), pack_names(figures.ids or ()), zlib.compress(raw, LEVEL)


def _split(metrics: str, raw: bytes) -> dict[str, np.ndarray]:
    names = [m for m in metrics.split(",") if m]
    width = sum(dtype_of(m).itemsize for m in names)
    n = len(raw) // width if width else 0
    out, at = {}, 0
    for m in names:
        dtype = dtype_of(m)
        out[m] = np.frombuffer(raw, dtype=dtype, count=n, offset=at)
        at += n * dtype.itemsize
    return out


def unpack_figures(metrics: str, data: bytes) -> dict[str, np.ndarray]:
    """Each figure's values (read-only arrays in their stored precision)."""
    return _split(metrics, zlib.decompress(bytes(data)))


def pack_matrix(values: np.ndarray, metric: str) -> bytes:
    """A samples x entities matrix of one figure, compressed."""
    return zlib.compress(np.ascontiguousarray(_cast(values, metric)).tobytes(), LEVEL)


def unpack_matrix(blob: bytes, metric: str, rows: int) -> np.ndarray:
    flat = np.frombuffer(zlib.decompress(bytes(blob)), dtype=dtype_of(metric))
    return flat.reshape(rows, -1) if rows else flat.reshape(0, 0)


def pack_times(t_sim: np.ndarray, wall: np.ndarray) -> bytes:
    """Each sample's simulated time (s) and wall time (epoch s), compressed."""
    return zlib.compress(np.stack([np.asarray(t_sim, float), np.asarray(wall, float)])
                         .tobytes(), LEVEL)


def unpack_times(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    both = np.frombuffer(zlib.decompress(bytes(blob)), dtype=np.float64).reshape(2, -1)
    return both[0], both[1]


def packed_bytes(sample) -> int:
    """Bytes one :class:`~scheduler.physics.entity_figures.EntitySample` takes packed."""
    return sum(len(ids) + len(data) + len(metrics)
               for metrics, ids, data in (pack_figures(f) for f in sample.kinds.values()))
