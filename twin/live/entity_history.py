"""The twin's history of every node, rack, switch and job: their figures
(:mod:`scheduler.physics.entity_figures`), downsampled as the fleet's history is.

Every ``HISTORY_STEP_S`` simulated seconds the live driver takes the engine's
:class:`~scheduler.physics.entity_figures.EntitySample` and :func:`record` keeps it under the
run's key (the fleet history's): one :class:`~twin.live.models.EntitySample` row per kind,
each figure an array packed by :mod:`twin.live.entity_codec`.  Once :data:`CHUNK_SAMPLES`
samples have gathered they are folded into :class:`~twin.live.models.EntityChunk` rows, one per
figure and block of :data:`BLOCK` entities (jobs: one of :data:`JOB_BUCKETS` buckets by a hash
of their name), so reading one node's month touches a few dozen small rows and never every
sample of the fleet.  As in :mod:`twin.live.history`: samples older than
``HISTORY_RETENTION_S`` simulated seconds are dropped, and when an engine resumes from an older
snapshot (a crash) whatever was kept after its clock is dropped (chunks that straddle it are
cut).

:func:`series` answers ``/api/history?kind=&id=&metric=`` in the fleet series' shape (as
recorded, or in buckets with their mean, minimum and maximum).
"""

from __future__ import annotations

import math
import zlib
from datetime import UTC, datetime

import numpy as np
from django.db import transaction
from django.db.models import Max

from scheduler.physics.entity_figures import KINDS, METRICS, EntitySample
from twin import app_setting
from twin.live import entity_codec as codec
from twin.live import history
from twin.live.models import EntityChunk
from twin.live.models import EntitySample as SampleRow

BLOCK = 256
"""Entities (consecutive engine ids) per chunk."""
JOB_BUCKETS = 16
"""Chunks a fold writes per job figure: a job's is ``crc32(name) % JOB_BUCKETS``."""
CHUNK_SAMPLES = 96
"""Samples folded into one chunk (8 simulated hours at the default 5-minute step)."""
_PRUNE_EVERY = 100
_last: dict[str, float] = {}  # run -> simulated time of its newest sample (this process)
_open: dict[str, int] = {}  # run -> samples not yet folded
_recorded = 0


def forget_process_cache() -> None:
    """Tests (and a new run): forget what this process knows of the stored samples."""
    _last.clear()
    _open.clear()


def newest_kept(run: str) -> float:
    """Simulated time of the newest sample of ``run`` this process knows was kept
    (``-inf``: none known)."""
    return _last.get(run, -math.inf)


def _newest(run: str) -> float:
    a = SampleRow.objects.filter(run=run).aggregate(t=Max("t_sim"))["t"]
    b = EntityChunk.objects.filter(run=run).aggregate(t=Max("t_last"))["t"]
    times = [x for x in (a, b) if x is not None]
    return max(times) if times else -math.inf


def _open_count(run: str) -> int:
    return (SampleRow.objects.filter(run=run).order_by().values("t_sim").distinct().count())


def record(*, run: str, sample: EntitySample) -> bool:
    """Keep ``sample`` if ``HISTORY_STEP_S`` simulated seconds passed since the last sample
    of ``run`` (an older one than the newest kept drops what came after it first); True if
    it was written."""
    global _recorded
    t = float(sample.t)
    last = _last.get(run)
    if last is None:
        last = _newest(run)
    if t < last:  # resumed from an older snapshot: what came after did not happen
        forget_after(run=run, t=t, inclusive=False)
        last = _newest(run)
    if t - last < app_setting("HISTORY_STEP_S"):
        _last[run] = last
        return False
    rows = []
    for kind, figures in sample.kinds.items():
        metrics, ids, data = codec.pack_figures(figures)
        rows.append(SampleRow(run=run, kind=kind, t_sim=t, metrics=metrics, ids=ids, data=data))
    SampleRow.objects.bulk_create(rows)
    _last[run] = t
    _open[run] = (_open[run] + 1) if run in _open else _open_count(run)
    if _open[run] >= CHUNK_SAMPLES:
        fold(run)
    _recorded += 1
    if _recorded % _PRUNE_EVERY == 0:
        prune(run=run, before=t - app_setting("HISTORY_RETENTION_S"))
    return True


def prune(*, run: str, before: float) -> None:
    """Drop what ``run`` kept from before simulated time ``before``."""
    SampleRow.objects.filter(run=run, t_sim__lt=before).delete()
    EntityChunk.objects.filter(run=run, t_last__lt=before).delete()


def forget_after(*, run: str, t: float, inclusive: bool = True) -> None:
    """Drop what ``run`` kept from simulated time ``t`` on (``inclusive``; else after it):
    a fresh engine's warm-up replaces it, or a resumed engine never lived it.  Chunks that
    straddle ``t`` keep their samples before it."""
    cut = "gte" if inclusive else "gt"  # what goes: samples at (or after) t
    with transaction.atomic():
        SampleRow.objects.filter(run=run, **{f"t_sim__{cut}": t}).delete()
        EntityChunk.objects.filter(run=run, **{f"t_first__{cut}": t}).delete()
        straddle = (EntityChunk.objects.filter(run=run, t_first__lt=t, t_last__gte=t)
                    if inclusive else
                    EntityChunk.objects.filter(run=run, t_first__lte=t, t_last__gt=t))
        for chunk in straddle:
            times, walls = codec.unpack_times(chunk.times)
            keep = times < t if inclusive else times <= t
            matrix = codec.unpack_matrix(chunk.data, chunk.metric, times.size)[keep]
            chunk.times = codec.pack_times(times[keep], walls[keep])
            chunk.data = codec.pack_matrix(matrix, chunk.metric)
            chunk.t_last = float(times[keep][-1])
            chunk.save(update_fields=["times", "data", "t_last"])
    _last.pop(run, None)
    _open.pop(run, None)


def job_bucket(name: str) -> int:
    return zlib.crc32(name.encode("utf-8")) % JOB_BUCKETS


# ----------------------------------------------------------------- folding samples into chunks
def fold(run: str) -> int:
    """Fold the oldest :data:`CHUNK_SAMPLES` samples of ``run`` into chunks; returns the
    chunks written."""
    times = list(SampleRow.objects.filter(run=run).order_by("t_sim")
                 .values_list("t_sim", flat=True).distinct()[:CHUNK_SAMPLES])
    if not times:
        return 0
    rows = list(SampleRow.objects.filter(run=run, t_sim__lte=times[-1])
                .order_by("kind", "t_sim")
                .values_list("kind", "t_sim", "recorded_at", "metrics", "ids", "data"))
    chunks: list[EntityChunk] = []
    for kind in KINDS:
        mine = [r for r in rows if r[0] == kind]
        if mine:
            chunks += _chunks(run, kind, mine)
    with transaction.atomic():
        EntityChunk.objects.bulk_create(chunks, batch_size=500)
        SampleRow.objects.filter(run=run, t_sim__lte=times[-1]).delete()
    _open[run] = max(0, _open.get(run, len(times)) - len(times))
    return len(chunks)


def _chunks(run: str, kind: str, rows: list[tuple]) -> list[EntityChunk]:
    t = np.array([r[1] for r in rows], dtype=float)
    wall = np.array([r[2].timestamp() for r in rows], dtype=float)
    figures = [codec.unpack_figures(r[3], r[5]) for r in rows]
    packed_times = codec.pack_times(t, wall)
    metrics = [m for m in METRICS[kind] if any(m in f for f in figures)]
    head = {"run": run, "kind": kind, "t_first": float(t[0]), "t_last": float(t[-1]),
            "times": packed_times}
    out = []
    if kind == "job":
        names = [codec.unpack_names(r[4]) for r in rows]
        everyone = sorted({n for row in names for n in row})
        where = {n: k for k, n in enumerate(everyone)}
        columns = [np.array([where[n] for n in row], dtype=np.int64) for row in names]
        buckets: dict[int, list[int]] = {}
        for k, name in enumerate(everyone):
            buckets.setdefault(job_bucket(name), []).append(k)
        for metric in metrics:
            matrix = np.full((t.size, len(everyone)), np.nan, dtype=np.float32)
            for i, (cols, f) in enumerate(zip(columns, figures, strict=True)):
                if metric in f:
                    matrix[i, cols] = f[metric]
            for b, members in sorted(buckets.items()):
                out.append(EntityChunk(**head, metric=metric, block=b,
                                       ids=codec.pack_names([everyone[k] for k in members]),
                                       data=codec.pack_matrix(matrix[:, members], metric)))
        return out
    width = max((v.size for f in figures for v in f.values()), default=0)
    for metric in metrics:
        matrix = np.full((t.size, width), np.nan, dtype=np.float32)
        for i, f in enumerate(figures):
            values = f.get(metric)
            if values is not None:
                matrix[i, :values.size] = values
        for b in range(math.ceil(width / BLOCK)):
            part = matrix[:, b * BLOCK:(b + 1) * BLOCK]
            if not np.isnan(part).all():
                out.append(EntityChunk(**head, metric=metric, block=b,
                                       data=codec.pack_matrix(part, metric)))
    return out


# ----------------------------------------------------------------- reading one entity
def known(run: str, kind: str) -> dict[str, tuple[str, str]]:
    """The figures ``kind`` has in ``run``'s newest sample (all of :data:`METRICS` for the
    kind when none is kept yet): name -> (label, unit)."""
    newest = (SampleRow.objects.filter(run=run, kind=kind).order_by("-t_sim")
              .values_list("metrics", flat=True).first())
    if newest is None:
        newest = ",".join(EntityChunk.objects.filter(run=run, kind=kind).order_by("metric")
                          .values_list("metric", flat=True).distinct())
    have = set(newest.split(",")) if newest else set(METRICS[kind])
    return {m: v for m, v in METRICS[kind].items() if m in have}


def has_job(run: str, name: str) -> bool:
    """Whether any kept sample of ``run`` names job ``name``."""
    if any(name in codec.unpack_names(ids) for ids in SampleRow.objects.filter(
            run=run, kind="job").values_list("ids", flat=True).iterator()):
        return True
    return any(name in codec.unpack_names(ids) for ids in EntityChunk.objects.filter(
        run=run, kind="job", metric="gpus", block=job_bucket(name))
        .values_list("ids", flat=True).iterator())


def values(*, run: str, kind: str, entity: int | str, metric: str,
           t_from: float | None = None,
           t_to: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``metric`` of one entity (engine id; a job's name) between two simulated times: its
    samples' simulated times, values and wall times (epoch s), those with a value only."""
    lo = -math.inf if t_from is None else t_from
    hi = math.inf if t_to is None else t_to
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    block = job_bucket(entity) if kind == "job" else int(entity) // BLOCK
    chunks = EntityChunk.objects.filter(run=run, kind=kind, metric=metric, block=block)
    if t_from is not None:
        chunks = chunks.filter(t_last__gte=t_from)
    if t_to is not None:
        chunks = chunks.filter(t_first__lte=t_to)
    for times, ids, data in chunks.order_by("t_first").values_list("times", "ids", "data"):
        t, wall = codec.unpack_times(times)
        if kind == "job":
            names = codec.unpack_names(ids)
            if entity not in names:
                continue
            col = names.index(entity)
        else:
            col = int(entity) % BLOCK
        matrix = codec.unpack_matrix(data, metric, t.size)
        if col < matrix.shape[1]:
            parts.append((t, matrix[:, col].astype(float), wall))
    rows = SampleRow.objects.filter(run=run, kind=kind)
    if t_from is not None:
        rows = rows.filter(t_sim__gte=t_from)
    if t_to is not None:
        rows = rows.filter(t_sim__lte=t_to)
    t_open, v_open, w_open = [], [], []
    for t, at, metrics, ids, data in (rows.order_by("t_sim").values_list(
            "t_sim", "recorded_at", "metrics", "ids", "data").iterator()):
        if metric not in metrics.split(","):
            continue
        if kind == "job":
            names = codec.unpack_names(ids)
            if entity not in names:
                continue
            col = names.index(entity)
        else:
            col = int(entity)
        column = codec.unpack_figures(metrics, data)[metric]
        if col < column.size:
            t_open.append(t)
            v_open.append(float(column[col]))
            w_open.append(at.timestamp())
    parts.append((np.array(t_open, dtype=float), np.array(v_open, dtype=float),
                  np.array(w_open, dtype=float)))
    t = np.concatenate([p[0] for p in parts])
    v = np.concatenate([p[1] for p in parts])
    wall = np.concatenate([p[2] for p in parts])
    keep = np.isfinite(v) & (t >= lo) & (t <= hi)
    return t[keep], v[keep], wall[keep]


def series(*, run: str, kind: str, entity: int | str, metric: str,
           t_from: float | None = None, t_to: float | None = None,
           bucket: float | None = None, wall_clock: bool = False) -> dict:
    """``metric`` of one entity as :func:`twin.live.history.series` answers a fleet
    series; ``ValueError`` with one line for an unknown kind or metric, a bad range or a
    bucket too narrow for the span."""
    if kind not in METRICS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    if metric not in METRICS[kind]:
        raise ValueError(f"unknown metric {metric!r} for a {kind}; known: "
                         f"{', '.join(METRICS[kind])}")
    if t_from is not None and t_to is not None and t_to < t_from:
        raise ValueError(f"'to' ({t_to:g}) is before 'from' ({t_from:g})")
    t, v, wall = values(run=run, kind=kind, entity=entity, metric=metric, t_from=t_from,
                        t_to=t_to)
    points = history.aggregate(t, v, t_from=t_from, t_to=t_to, bucket=bucket)
    label, unit = METRICS[kind][metric]
    return history.answer(metric=metric, label=label, unit=unit, wall_clock=wall_clock,
                          points=points,
                          wall=[datetime.fromtimestamp(w, tz=UTC).isoformat()
                                for w in wall[points.last_of].tolist()])
