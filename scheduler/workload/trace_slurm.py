"""Readers of a Slurm cluster's own job history: a plain CSV and ``sacct --json`` exports.

:func:`~scheduler.workload.traces.read_trace` recognises both (a ``.json`` file or text starting
with ``{`` is ``sacct --json``; the CSV by its header) and returns what these readers return:
a :class:`~scheduler.workload.jobs.Workload` shaped as the other traces' are.

* **Slurm CSV**, header exactly :data:`SLURM_CSV_HEADER`: one row per job, times in seconds from
  the stream's start (kept as they are, not shifted), ``gpus_per_node``, ``partition``,
  ``qos``, ``user`` and ``time_limit_s`` may be empty (``README.md``, "Replaying a cluster's
  own history").
* **sacct --json** (``sacct --json -X``, or slurmrestd's ``/slurmdb/v0.0.3x/jobs``): Slurm 22.05
  (``openapi/dbv0.0.38``: ``state.current`` a string, ``time.limit`` minutes or ``null``) and
  23.02-24.11 (``data_parser`` v0.0.39-v0.0.42: ``state.current`` a list, numbers that may be
  unset or infinite as ``{"set", "infinite", "number"}`` objects).  The GPUs are the ``gres/gpu``
  entries of ``tres.allocated`` (else ``tres.requested``, else ``gres_detail``), the nodes
  ``allocation_nodes``, the duration ``time.end - time.start`` of the job.  A requeued job has a
  record per run (with ``-X`` too): it is replayed as its last run, submitted when its first
  was (the requeue's record has the requeue as its submission).  Job steps are not read.

Each job keeps the trace's own id (``job_id``; Slurm's raw id, an array task's own), and its
name is ``slurm-<id>`` as ``squeue`` shows it (``slurm-92_1`` for an array task,
``slurm-95+1`` for a heterogeneous job's component, replayed as a job of its own).  Durations
are replayed as compute time on the reference model as in ``read_trace``, so a run with physics
and failures off reproduces each job's duration.  A Slurm job asks for what it asks and the
``slurm`` policy decides memory, so these jobs ask no host CPUs, memory or NIC bandwidth
(``cpu_per_gpu = ram_gb_per_gpu = nic_gbps_per_gpu = 0``): sacct's ``cpu`` and ``mem`` TRES
are what Slurm allocated (a node's whole memory when memory is no consumable resource) and a
preset's hosts may be smaller than the real ones.

>>> sample = Path(__file__).parents[2] / "tests" / "fixtures" / "traces" / "slurm_sample.csv"
>>> w = read_slurm_csv(sample)
>>> w.source, w.jobs[0].job_id, w.jobs[0].name, w.jobs[0].nodes, w.jobs[0].time_limit_s
('slurm-csv', 101, 'slurm-101', 1, 120.0)
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from collections import Counter
from pathlib import Path

from scheduler.hardware.catalog import get
from scheduler.limits import checks
from scheduler.limits.bounds import CLUSTER_GPUS, TIME_S, TRACE_DURATION
from scheduler.limits.documents import DocumentError, depth_check
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, Tenant, TrainingJob, Workload
from scheduler.workload.traces import (
    TraceError,
    _bounded,
    _check_width,
    _in_row,
    _integer,
    _number,
)

SLURM_CSV_HEADER = ("job_id", "submit_s", "duration_s", "gpus", "gpus_per_node", "partition",
                    "qos", "user", "time_limit_s")
"""The Slurm CSV's header line, exactly."""

JOB_ID_MAX = 2 ** 32 - 3
"""Largest Slurm job id: ids are ``uint32``, the top two values mean unset and infinite."""

RUNNING_STATES = frozenset(("RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STAGE_OUT",
                            "RESIZING", "SIGNALING", "STOPPED"))
"""Job states of a job that has not ended (``time.end`` not yet set)."""

WAITING_STATES = frozenset(("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"))
"""Job states of a job waiting to (re)start: whatever ``time.start`` says, it is not running."""

_GRES_COUNT = re.compile(r"^gpu(?::[^:(]+)?:(\d+)")
"""A ``gres_detail`` entry's GPU count: ``gpu:8(IDX:0-7)``, ``gpu:h100:4(IDX:0-3)``."""


def looks_like_sacct(path: Path) -> bool:
    """Whether ``path`` is a ``sacct --json`` export: a ``.json`` name or text opening with
    ``{`` (after white space and a byte-order mark)."""
    if path.suffix.lower() == ".json":
        return True
    with path.open("rb") as f:
        head = f.read(256).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{")


# ----------------------------------------------------------------- the CSV
def read_slurm_csv(path: str | os.PathLike, *, reference_model: str = "H100-SXM",
                   limit: int | None = None) -> Workload:
    """Read a Slurm CSV (header :data:`SLURM_CSV_HEADER`) into a workload.

    Parameters
    ----------
    path : str or path-like
        The CSV file.
    reference_model : str
        Catalog model on which a job's compute time equals its ``duration_s``.
    limit : int, optional
        Keep only the first ``limit`` jobs by submit time (``meta`` counts the whole file).

    Returns
    -------
    Workload
        ``source`` ``"slurm-csv"``; jobs sorted by submit time (ties by job id) with the
        trace's ids, one tenant per user (``"slurm"`` for rows naming none).

    Raises
    ------
    TraceError
        Another header, a duplicate job id, or a bad cell (file and 1-based line named):
        ``job_id`` an integer in [0, :data:`JOB_ID_MAX`], ``submit_s`` in [0, 1e10) s,
        ``duration_s`` in [0, 366 days], ``gpus`` in [0, 4,194,304] (0: a CPU job, skipped and
        counted in ``meta["skipped_cpu_only"]``), ``gpus_per_node`` empty or a positive divisor
        of ``gpus``, ``time_limit_s`` empty or in (0, 366 days].  A duration of 0 s becomes 1 s
        (``meta["zero_duration_rows"]``).
    """
    path = Path(path)
    model = get(reference_model)
    meta: dict = {"file": path.name, "reference_model": model.name, "offset_s": 0.0}
    rows: list[tuple[float, float, int, dict]] = []
    seen: dict[int, int] = {}
    cpu_only = 0
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = tuple(c.strip() for c in next(reader, ()))
        if header != SLURM_CSV_HEADER:
            raise TraceError(f"{path.name}: the Slurm CSV header must be "
                             f"{','.join(SLURM_CSV_HEADER)!r}, got {','.join(header)!r}")
        for row in reader:
            if not row:
                continue  # blank line
            where = f"{path.name} line {reader.line_num}"
            _check_width(row, SLURM_CSV_HEADER, where)
            cells = dict(zip(SLURM_CSV_HEADER, (c.strip() for c in row), strict=True))
            job_id = _in_row(where, checks.integer_from_text, "job_id", cells["job_id"],
                             at_least=0, at_most=JOB_ID_MAX, given="got")
            if job_id in seen:
                raise TraceError(f"{where}: job_id {job_id} is already on line {seen[job_id]}")
            seen[job_id] = reader.line_num
            submit = _number(cells["submit_s"], "submit_s", where, TIME_S)
            duration = _number(cells["duration_s"], "duration_s", where, TRACE_DURATION)
            gpus = _integer(cells["gpus"], "gpus", where, minimum=0, gpus=True)
            per_node = (None if not cells["gpus_per_node"] else
                        _integer(cells["gpus_per_node"], "gpus_per_node", where, minimum=1))
            limit_s = (None if not cells["time_limit_s"] else _in_row(
                where, checks.number_from_text, "time_limit_s", cells["time_limit_s"], above=0,
                bound=TRACE_DURATION, expect="empty or a number of seconds > 0",
                unparsable="empty or a number of seconds", given="got"))
            if gpus == 0:
                cpu_only += 1
                continue
            _whole_nodes(gpus, per_node, where)
            rows.append((submit, duration, job_id, {
                "name": f"slurm-{job_id}", "tenant": cells["user"] or "slurm", "gpus": gpus,
                "gpus_per_node": per_node, "partition": cells["partition"],
                "qos": cells["qos"], "user": cells["user"], "time_limit_s": limit_s}))
    meta.update(jobs_in_file=len(rows) + cpu_only, skipped_cpu_only=cpu_only)
    return _workload(rows, "slurm-csv", meta, model.name, limit, offset=0.0)


def _whole_nodes(gpus: int, per_node: int | None, where: str) -> None:
    if per_node is not None and gpus % per_node:
        raise TraceError(f"{where}: gpus {gpus} is not a whole number of nodes of "
                         f"gpus_per_node {per_node}")


# ----------------------------------------------------------------- sacct --json
def read_sacct_json(path: str | os.PathLike, *, reference_model: str = "H100-SXM",
                    limit: int | None = None, start_offset: bool = True) -> Workload:
    """Read a ``sacct --json`` export into a workload.

    Parameters
    ----------
    path : str or path-like
        The export (the output of ``sacct --json``, best with ``-X``: job steps are not read).
    reference_model : str
        Catalog model on which a job's compute time equals ``end - start``.
    limit : int, optional
        Keep only the first ``limit`` jobs by submit time (``meta`` counts the whole file).
    start_offset : bool
        Measure submit times from the first submission of the export (every record's, skipped
        ones included: the stream's start); when false they stay POSIX seconds.

    Returns
    -------
    Workload
        ``source`` ``"slurm-sacct"``; jobs sorted by submit time (ties by job id) with Slurm's
        ids, one tenant per account (else user).  ``meta`` counts every record
        (``records``), the jobs they are (``jobs_in_file``: a requeued job has a record per
        run, ``requeued_runs`` counts the earlier ones; the last run is replayed, submitted
        when the first was) and those replayed (``jobs_ran``) or skipped:
        ``skipped_never_started`` (pending, requeued and waiting, or cancelled before a node
        was allocated), ``skipped_not_ended`` (still running), ``skipped_cpu_only``; also
        ``array_tasks``, ``het_components``, ``uneven_nodes`` (GPUs not the same on every
        node: ``gpus_per_node`` left unset), ``zero_duration_rows`` (replayed as 1 s), the
        jobs by their last run's state (``states``), and the Slurm ``release`` when the
        export names it.

    Raises
    ------
    TraceError
        Not JSON, no ``jobs`` list, or a bad record: the message names the file and the record
        (``jobs[3] (job 93)``) and the field.
    """
    path = Path(path)
    model = get(reference_model)
    try:
        text = path.read_text(encoding="utf-8-sig")
        depth_check(text, what=path.name)
        doc = json.loads(text)
    except DocumentError as exc:
        raise TraceError(f"{exc}; a Slurm export is sacct --json's output") from None
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path.name}: not JSON ({exc.msg} at line {exc.lineno} column "
                         f"{exc.colno}); a Slurm export is sacct --json's output") from None
    except ValueError as exc:  # an integer of over 4,300 digits (CPython's conversion limit)
        raise TraceError(f"{path.name}: a number Slurm never writes ({exc}); a Slurm export is "
                         "sacct --json's output") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise TraceError(f"{path.name}: not a sacct --json export: no 'jobs' list at the top")
    meta: dict = {"file": path.name, "reference_model": model.name}
    release = _release(doc.get("meta"))
    if release:
        meta["release"] = release
    counts: Counter[str] = Counter()
    states: Counter[str] = Counter()
    rows: list[tuple[float, float, int, dict]] = []
    runs: dict[int, list[tuple[float, int, str, dict]]] = {}  # job id -> its records
    for i, rec in enumerate(doc["jobs"]):
        where = f"{path.name} jobs[{i}]"
        if not isinstance(rec, dict):
            raise TraceError(f"{where}: a job record must be an object, got {_kind(rec)}")
        job_id = _whole(rec.get("job_id"), "job_id", where)
        if job_id is None:
            raise TraceError(f"{where}: job_id is missing")
        where = f"{where} (job {job_id})"
        submit = _stamp(_object(rec.get("time"), "time", where).get("submission"),
                        "time.submission", where)
        if submit is None:
            raise TraceError(f"{where}: time.submission is missing")
        runs.setdefault(job_id, []).append((submit, i, where, rec))
    for job_id, records in runs.items():
        # A requeued job has a record per run (sacct -X too): the last run's is the job's,
        # submitted when the first was (a requeue's record has the requeue as submission).
        _, _, where, rec = max(records, key=lambda r: r[:2])
        counts["requeued_runs"] += len(records) - 1
        submit, duration, _, fields = _sacct_job(rec, job_id, where, counts, states)
        if duration is not None:
            rows.append((min(r[0] for r in records), duration, job_id, fields))
    first_submit = min((r[0] for records in runs.values() for r in records), default=0.0)
    if not rows and counts["cpu_only"]:
        raise TraceError(f"{path.name}: none of the {counts['cpu_only']} jobs that ran names "
                         "GPUs (no gres/gpu TRES: Slurm records them with "
                         "AccountingStorageTRES=gres/gpu)")
    offset = first_submit if start_offset else 0.0
    meta.update(records=len(doc["jobs"]), jobs_in_file=len(runs), jobs_ran=len(rows),
                requeued_runs=counts["requeued_runs"],
                skipped_never_started=counts["never_started"],
                skipped_not_ended=counts["not_ended"], skipped_cpu_only=counts["cpu_only"],
                array_tasks=counts["array"], het_components=counts["het"],
                uneven_nodes=counts["uneven"], states=dict(sorted(states.items())),
                offset_s=offset)
    return _workload(rows, "slurm-sacct", meta, model.name, limit, offset=offset)


def _sacct_job(rec: dict, job_id: int, where: str, counts: Counter,
               states: Counter) -> tuple[float, float | None, int, dict]:
    """One record as ``(submit, duration, job_id, fields)``; ``duration`` ``None`` for a job
    skipped (counted in ``counts``)."""
    state = _state(rec.get("state"), where)
    states[state] += 1
    time = _object(rec.get("time"), "time", where)
    submit = _stamp(time.get("submission"), "time.submission", where)
    start = _stamp(time.get("start"), "time.start", where)
    end = _stamp(time.get("end"), "time.end", where)
    if submit is None:
        raise TraceError(f"{where}: time.submission is missing")
    nodes = _whole(rec.get("allocation_nodes"), "allocation_nodes", where)
    if start is None or state in WAITING_STATES or (state == "CANCELLED" and not nodes):
        counts["never_started"] += 1
        return submit, None, job_id, {}
    if end is None or state in RUNNING_STATES:
        counts["not_ended"] += 1
        return submit, None, job_id, {}
    if start < submit:
        raise TraceError(f"{where}: time.start {start:g} is before time.submission {submit:g}")
    if end < start:
        raise TraceError(f"{where}: time.end {end:g} is before time.start {start:g}")
    duration = _bounded(end - start, "duration (time.end - time.start)", where, TRACE_DURATION)
    gpus = _gpus(rec, where)
    if gpus == 0:
        counts["cpu_only"] += 1
        return submit, None, job_id, {}
    per_node = gpus // nodes if nodes and gpus % nodes == 0 else None
    counts["uneven"] += bool(nodes) and per_node is None
    limit_min = _limit(time.get("limit"), where)
    account, user = _text(rec, "account", where), _text(rec, "user", where)
    return submit, duration, job_id, {
        "name": f"slurm-{_display_id(rec, job_id, where, counts)}",
        "tenant": account or user or "slurm", "gpus": gpus, "gpus_per_node": per_node,
        "partition": _text(rec, "partition", where), "qos": _text(rec, "qos", where),
        "user": user, "time_limit_s": None if limit_min is None else 60.0 * limit_min}


def _display_id(rec: dict, job_id: int, where: str, counts: Counter) -> str:
    """``123``, ``120_3`` (an array's task) or ``130+1`` (a heterogeneous job's component)."""
    array = rec.get("array") or {}
    het = rec.get("het") or {}
    array_id = _whole(_object(array, "array", where).get("job_id"), "array.job_id", where)
    task = _whole(array.get("task_id"), "array.task_id", where)
    if array_id and task is not None:
        counts["array"] += 1
        return f"{array_id}_{task}"
    het_id = _whole(_object(het, "het", where).get("job_id"), "het.job_id", where)
    offset = _whole(het.get("job_offset"), "het.job_offset", where)
    if het_id and offset is not None:
        counts["het"] += 1
        return f"{het_id}+{offset}"
    return str(job_id)


def _gpus(rec: dict, where: str) -> int:
    """GPUs of the job: the ``gres/gpu`` TRES allocated (else requested), else ``gres_detail``."""
    tres = _object(rec.get("tres") or {}, "tres", where)
    for side in ("allocated", "requested"):
        entries = tres.get(side) or []
        if not isinstance(entries, list):
            raise TraceError(f"{where}: tres.{side} must be a list, got {_kind(entries)}")
        plain = typed = 0
        for k, e in enumerate(entries):
            e = _object(e, f"tres.{side}[{k}]", where)
            if e.get("type") != "gres" or not str(e.get("name", "")).startswith("gpu"):
                continue
            n = _whole(e.get("count"), f"tres.{side}[{k}].count", where) or 0
            if e.get("name") == "gpu":
                plain += n
            else:  # gres/gpu:h100, counted again under its type
                typed += n
        if plain or typed:
            return _gpu_bound(plain or typed, where)
    detail = rec.get("gres_detail") or []
    if not isinstance(detail, list):
        raise TraceError(f"{where}: gres_detail must be a list, got {_kind(detail)}")
    total = 0
    for k, entry in enumerate(detail):
        for part in str(entry).split(","):
            m = _GRES_COUNT.match(part.strip())
            if part.strip().startswith("gpu") and m is None:
                raise TraceError(f"{where}: gres_detail[{k}] {entry!r} names GPUs without a "
                                 "count (gpu:N or gpu:TYPE:N)")
            total += int(m.group(1)) if m else 0
    return _gpu_bound(total, where)


def _gpu_bound(gpus: int, where: str) -> int:
    if gpus > CLUSTER_GPUS.high:
        raise TraceError(f"{where}: {gpus:,} GPUs is more than {CLUSTER_GPUS.high:,} (the GPUs "
                         "of the largest cluster the twin builds)")
    return gpus


def _limit(raw, where: str) -> float | None:
    """``time.limit`` in minutes; ``None`` for unlimited or unset (and for 0: no limit)."""
    minutes = _value(raw, "time.limit", where)
    if minutes is None or math.isinf(minutes) or minutes == 0:
        return None
    return _bounded(minutes * 60.0, "time.limit (s)", where, TRACE_DURATION) / 60.0


def _state(raw, where: str) -> str:
    """``state.current``: a string (22.05) or a list of flags, the base state first."""
    current = _object(raw, "state", where).get("current")
    if isinstance(current, list) and current and all(isinstance(s, str) for s in current):
        return current[0].upper()
    if isinstance(current, str) and current:
        return current.split()[0].upper()
    raise TraceError(f"{where}: state.current must be a state name or a list of them, "
                     f"got {_shown(current)}")


def _stamp(raw, what: str, where: str) -> float | None:
    """A time stamp, s; ``None`` when unset (0, null or an unset object)."""
    value = _value(raw, what, where)
    if value is None or value == 0:
        return None
    if math.isinf(value):
        raise TraceError(f"{where}: {what} must be a time stamp, got infinite")
    return float(_bounded(value, what, where, TIME_S))


def _whole(raw, what: str, where: str) -> int | None:
    value = _value(raw, what, where)
    if value is None:
        return None
    if math.isinf(value) or value != int(value) or value < 0:
        raise TraceError(f"{where}: {what} must be an integer >= 0, got {_shown(raw)}")
    return int(value)


def _value(raw, what: str, where: str) -> float | None:
    """A number as Slurm writes it: plain (``null`` when unset, 22.05) or an object
    ``{"set": bool, "infinite": bool, "number": n}`` (23.02 on); ``None`` when unset,
    ``inf`` when infinite."""
    if isinstance(raw, dict) and {"set", "number"} <= raw.keys():
        if raw.get("infinite") is True:
            return math.inf
        if raw["set"] is not True:
            return None
        raw = raw["number"]
    if raw is None:
        return None
    if not checks.is_finite(raw):
        raise TraceError(f"{where}: {what} must be a number or a {{set, infinite, number}} "
                         f"object, got {_shown(raw)}")
    return float(raw)


def _object(raw, what: str, where: str) -> dict:
    if not isinstance(raw, dict):
        raise TraceError(f"{where}: {what} must be an object, got {_kind(raw)}")
    return raw


def _text(rec: dict, key: str, where: str) -> str:
    value = rec.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TraceError(f"{where}: {key} must be a string, got {_kind(value)}")
    return value


def _kind(value) -> str:
    return "null" if value is None else type(value).__name__


def _shown(value) -> str:
    """``value`` as JSON, cut to :data:`~scheduler.limits.checks.SHOWN_CHARS` characters."""
    text = json.dumps(value)
    return text if len(text) <= checks.SHOWN_CHARS else text[:checks.SHOWN_CHARS] + "..."


def _release(meta) -> str | None:
    """The Slurm release an export names (``meta.Slurm.release`` or ``meta.slurm.release``)."""
    if not isinstance(meta, dict):
        return None
    slurm = meta.get("Slurm") or meta.get("slurm")
    release = slurm.get("release") if isinstance(slurm, dict) else None
    return release if isinstance(release, str) else None


# ----------------------------------------------------------------- both
def _workload(rows: list[tuple[float, float, int, dict]], source: str, meta: dict,
              reference_model: str, limit: int | None, *, offset: float) -> Workload:
    """Jobs in submit order (ties by job id), each a gang whose compute time on the reference
    model is its duration (0 s becomes 1 s), with no host demand (see the module's notes)."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    meta["zero_duration_rows"] = sum(1 for r in rows if r[1] == 0)
    rows.sort(key=lambda r: (r[0], r[2]))
    peak_flops = get(reference_model).bf16_tflops * 1e12
    jobs = []
    for submit, duration, job_id, fields in rows[:limit]:
        work = (duration or 1.0) * fields["gpus"] * peak_flops * DEFAULT_EFFICIENCY
        jobs.append(TrainingJob(job_id=job_id, submit_s=submit - offset, work_flops=work,
                                efficiency=DEFAULT_EFFICIENCY, checkpoint_gb=0.0,
                                cpu_per_gpu=0.0, ram_gb_per_gpu=0.0, nic_gbps_per_gpu=0.0,
                                **fields))
    tenants = tuple(Tenant(name, quota_gpus=0) for name in dict.fromkeys(j.tenant for j in jobs))
    return Workload(jobs=tuple(jobs), tenants=tenants, source=source, meta=meta)
