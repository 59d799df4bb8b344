"""Readers that replay real public GPU-cluster traces as the twin's training jobs.

Two public formats are recognised by their CSV header line (a Slurm cluster's own history, as
a plain CSV or a ``sacct --json`` export, is read by :mod:`scheduler.workload.trace_slurm`):

* **Philly** (``timestamp,duration,num_gpus,gpu_time,cluster``): 82,247 jobs from Microsoft's
  Philly cluster, 2017.  Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
  Training Workloads", USENIX ATC 2019; traces msr-fiddle/philly-traces, CC-BY-4.0, as reduced
  to this table by the Pollux authors (petuum/adaptdl, osdi21-artifact, Apache-2.0; Qiao et al.,
  OSDI 2021).
* **Alibaba PAI openb pod lists** (``name,cpu_milli,memory_mib,num_gpu,...``), in the full
  11-column form and the 5-column ``openb_pod_list_multigpu50.csv`` form.  alibaba/clusterdata,
  cluster-trace-gpu-v2023; Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
  Workloads with Fragmentation Gradient Descent", USENIX ATC 2023 (no licence file; cite it).

A trace gives durations measured on long-retired GPUs, not model FLOPs, so each job's duration
is replayed as compute time on a *reference model* from the catalog: ``work_flops = duration *
gpus * peak * DEFAULT_EFFICIENCY``, hence ``job.runtime_s(get(reference_model)) == duration`` and
the job runs proportionally faster or slower on other models.  Times are seconds.

>>> sample = Path(__file__).parents[2] / "tests" / "fixtures" / "traces" / "philly_sample.csv"
>>> w = read_trace(sample, limit=3)
>>> w.source, len(w.jobs), w.jobs[0].submit_s
('philly', 3, 0.0)
"""

from __future__ import annotations

import csv
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from scheduler.hardware.catalog import CATALOG, get
from scheduler.limits import checks
from scheduler.limits.bounds import CLUSTER_GPUS, TIME_S, TRACE_DURATION, Bound
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, Requirement, Tenant, TrainingJob, Workload

PHILLY_HEADER = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
OPENB_HEADER = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
                "pod_phase", "creation_time", "deletion_time", "scheduled_time")
OPENB_SHORT_HEADER = OPENB_HEADER[:5]
ACCEPTED_HEADERS = (PHILLY_HEADER, OPENB_HEADER, OPENB_SHORT_HEADER)

QOS_PRIORITY = {"LS": 10, "Guaranteed": 10, "Burstable": 0, "BE": -10}
"""Priority per Alibaba QoS class.  LS (latency-sensitive) and Kubernetes' Guaranteed class (7
pods in openb) both hold reserved resources, so they rank alike; BE (best effort) ranks last."""

ARRIVAL_INTERVAL_S = 60.0
"""Gap between arrivals given to the 5-column openb form, which carries no times at all."""


class TraceError(ValueError):
    """A trace file that cannot be read: unknown header or a bad row (file and line named)."""


def read_trace(path: str | os.PathLike, *, reference_model: str = "H100-SXM",
               limit: int | None = None, start_offset: bool = True,
               default_duration_s: float = 3600.0) -> Workload:
    """Read a Philly, Alibaba openb or Slurm trace into a :class:`~.jobs.Workload`.

    Parameters
    ----------
    path : str or path-like
        CSV file; its header line selects the format (see :data:`ACCEPTED_HEADERS`, and
        :data:`~scheduler.workload.trace_slurm.SLURM_CSV_HEADER`: read by
        :func:`~scheduler.workload.trace_slurm.read_slurm_csv`).  A ``.json`` file, or one
        whose text opens with ``{``, is a ``sacct --json`` export
        (:func:`~scheduler.workload.trace_slurm.read_sacct_json`).
    reference_model : str
        Catalog model on which a job's compute time equals its trace duration.
    limit : int, optional
        Keep only the first ``limit`` jobs by submit time.  ``meta`` counts cover the whole file.
    start_offset : bool
        Shift submit times so the earliest is 0 s.  When false they stay as in the trace: POSIX
        seconds (timestamps read as UTC) for Philly, trace seconds for openb.
    default_duration_s : float
        Duration of every job of the 5-column openb form, which records no times, s.

    Returns
    -------
    Workload
        Jobs with ids ``0..n-1`` in submit order (ties keep file order), one ``Tenant`` per
        tenant with ``quota_gpus=0`` (no guarantee; quotas are assigned later), ``source``
        ``"philly"`` or ``"alibaba-openb"``, and counts of what was skipped or adapted in
        ``meta``.  A Slurm trace's jobs keep its own ids (``source`` ``"slurm-csv"`` or
        ``"slurm-sacct"``; ties in submit time by id).

    Raises
    ------
    TraceError
        Unknown header, or a bad row, a number outside its documented bound included (a
        duration above 366 days, a time stamp from 1e10 s, more than 4,194,304 GPUs:
        :mod:`scheduler.limits.bounds`); the message names the file and the 1-based line.

    Notes
    -----
    How rows are adapted, with the ``meta`` key counting each over the whole file:

    * a duration of 0 s becomes 1 s, because a job needs positive work (``zero_duration_rows``);
    * openb pods asking for no GPU are CPU tasks and skipped (``skipped_cpu_only``); GPU-sharing
      pods become 1-GPU jobs (``fractional_gpu_rows``); pods with no deletion time never ended
      and are skipped (``skipped_no_deletion``); pods never scheduled run from creation to
      deletion (``never_scheduled``); ``gpu_spec`` values naming no catalog model are counted
      in ``gpu_spec_unmapped`` (spec -> rows) and the job accepts any model;
    * the 5-column openb form has no times: pods arrive one per :data:`ARRIVAL_INTERVAL_S` in
      file order and last ``default_duration_s`` (``synthetic_times``).
    """
    from scheduler.workload import trace_slurm  # it reads this module's helpers

    path = Path(path)
    model = get(reference_model)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if trace_slurm.looks_like_sacct(path):
        return trace_slurm.read_sacct_json(path, reference_model=reference_model, limit=limit,
                                           start_offset=start_offset)
    meta: dict = {"file": path.name, "reference_model": model.name}
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = tuple(c.strip() for c in next(reader, ()))
        if header == trace_slurm.SLURM_CSV_HEADER:
            return trace_slurm.read_slurm_csv(path, reference_model=reference_model,
                                              limit=limit)
        if header == PHILLY_HEADER:
            source, rows = "philly", _philly(reader, path.name)
        elif header in (OPENB_HEADER, OPENB_SHORT_HEADER):
            source = "alibaba-openb"
            rows = _openb(reader, path.name, len(header), default_duration_s, meta)
        else:
            accepted = "; ".join(",".join(h) for h in (*ACCEPTED_HEADERS,
                                                          trace_slurm.SLURM_CSV_HEADER))
            raise TraceError(f"{path.name}: unrecognised header {','.join(header)!r}; "
                             f"accepted headers: {accepted} (or a sacct --json export)")
    meta["jobs_in_file"] = len(rows)
    # The job model needs positive work; a 0 s job becomes the smallest trace unit, 1 s.
    meta["zero_duration_rows"] = sum(1 for r in rows if r[1] == 0)
    offset = min((r[0] for r in rows), default=0.0) if start_offset else 0.0
    meta["offset_s"] = offset
    rows.sort(key=lambda r: r[0])  # list.sort is stable: ties keep file order
    peak_flops = model.bf16_tflops * 1e12
    jobs = []
    for job_id, (submit, duration, fields) in enumerate(rows[:limit]):
        work = (duration or 1.0) * fields["gpus"] * peak_flops * DEFAULT_EFFICIENCY
        jobs.append(TrainingJob(job_id=job_id, submit_s=submit - offset, work_flops=work,
                                efficiency=DEFAULT_EFFICIENCY, **fields))
    tenants = tuple(Tenant(name, quota_gpus=0) for name in dict.fromkeys(j.tenant for j in jobs))
    return Workload(jobs=tuple(jobs), tenants=tenants, source=source, meta=meta)


def _philly(reader, fname: str) -> list[tuple[float, float, dict]]:
    rows = []
    for row in reader:
        if not row:
            continue  # blank line
        where = f"{fname} line {reader.line_num}"
        _check_width(row, PHILLY_HEADER, where)
        stamp, duration, gpus, _gpu_time, cluster = (c.strip() for c in row)
        try:
            # Philly stamps are naive local times; reading them as UTC keeps differences exact.
            submit = datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()
        except ValueError:
            raise TraceError(f"{where}: timestamp must be 'YYYY-MM-DD HH:MM:SS', "
                             f"got {stamp!r}") from None
        gpus_n = _integer(gpus, "num_gpus", where, minimum=1, gpus=True)
        if not cluster:
            raise TraceError(f"{where}: cluster is empty")
        rows.append((submit, _number(duration, "duration", where, TRACE_DURATION), {
            "name": f"philly-{reader.line_num}", "tenant": f"vc-{cluster}", "gpus": gpus_n,
            # A Philly job may span servers, so only gangs under one 8-GPU server roam freely.
            "affinity": "any" if gpus_n < 8 else "pod", "checkpoint_gb": 0.0}))
    return rows


def _openb(reader, fname: str, width: int, default_duration_s: float,
           meta: dict) -> list[tuple[float, float, dict]]:
    if not default_duration_s > 0:
        raise ValueError(f"default_duration_s must be positive, got {default_duration_s}")
    header = OPENB_HEADER[:width]
    cpu_only = fractional = no_deletion = never_scheduled = 0
    unmapped: Counter[str] = Counter()
    rows = []
    for row in reader:
        if not row:
            continue  # blank line
        where = f"{fname} line {reader.line_num}"
        _check_width(row, header, where)
        cells = dict(zip(header, (c.strip() for c in row), strict=True))
        gpus = _integer(cells["num_gpu"], "num_gpu", where, minimum=0, gpus=True)
        milli = _integer(cells["gpu_milli"], "gpu_milli", where, minimum=0)
        if gpus == 0 and milli == 0:
            cpu_only += 1
            continue
        if milli > 1000 or gpus == 0 or (gpus > 1 and milli != 1000):
            raise TraceError(f"{where}: num_gpu {gpus} with gpu_milli {milli}: sharing tasks "
                             "use num_gpu 1 and gpu_milli 1..1000, others gpu_milli 1000")
        # A GPU-sharing task holds part of one GPU; the job model counts whole GPUs, so it
        # becomes a 1-GPU job (host resources below are then per that one GPU).
        fractional += milli < 1000
        fields = {
            "name": cells["name"], "gpus": gpus, "checkpoint_gb": 0.0,
            "cpu_per_gpu": _number(cells["cpu_milli"], "cpu_milli", where) / 1000 / gpus,
            "ram_gb_per_gpu": _number(cells["memory_mib"], "memory_mib", where) / 1024 / gpus,
            # A Kubernetes pod lives on one node, so a multi-GPU pod stays in one NVLink domain.
            "affinity": "any" if gpus == 1 else "nvlink",
        }
        if width == len(OPENB_SHORT_HEADER):
            fields["tenant"] = "alibaba"
            rows.append((ARRIVAL_INTERVAL_S * len(rows), default_duration_s, fields))
            continue
        if not cells["deletion_time"]:
            no_deletion += 1
            continue
        qos = _in_row(where, checks.one_of, "qos", cells["qos"], QOS_PRIORITY, given="got")
        created = _number(cells["creation_time"], "creation_time", where, TIME_S)
        deleted = _number(cells["deletion_time"], "deletion_time", where, TIME_S)
        scheduled = (_number(cells["scheduled_time"], "scheduled_time", where, TIME_S)
                     if cells["scheduled_time"] else 0.0)
        # Time the pod held its GPUs; a pod never scheduled (Pending) is replayed for its life.
        never_scheduled += not cells["scheduled_time"]
        start, start_name = (scheduled, "scheduled_time") if scheduled > 0 else (
            created, "creation_time")
        if deleted < start:
            raise TraceError(f"{where}: deletion_time {deleted:g} is before "
                             f"{start_name} {start:g}")
        _bounded(deleted - start, "duration (deletion_time - " + start_name + ")", where,
                 TRACE_DURATION)
        fields.update(tenant=f"alibaba-{qos.lower()}", priority=QOS_PRIORITY[qos],
                      burstable=qos == "Burstable",
                      requirement=_requirement(cells["gpu_spec"], unmapped))
        rows.append((created, deleted - start, fields))
    meta.update(skipped_cpu_only=cpu_only, fractional_gpu_rows=fractional)
    if width == len(OPENB_SHORT_HEADER):
        meta.update(synthetic_times=True, arrival_interval_s=ARRIVAL_INTERVAL_S,
                    default_duration_s=default_duration_s)
    else:
        meta.update(skipped_no_deletion=no_deletion, never_scheduled=never_scheduled,
                    gpu_spec_unmapped=dict(unmapped))
    return rows


def _requirement(spec: str, unmapped: Counter[str]) -> Requirement:
    """Map a ``|``-separated ``gpu_spec`` onto catalog models.

    The traces' GPUs (P100, T4, V100M16/M32, A10, undisclosed G1-G3) predate the catalog, so
    most specs name no catalog model; restricting such a job to nothing would make it
    unplaceable, so it accepts any model and the spec is counted in ``unmapped`` instead.  A
    spec naming some catalog models is narrowed to those: the others cannot exist in the twin.
    """
    if not spec:
        return Requirement()
    known = {name.lower(): name for name in CATALOG}
    models = tuple(known[n.strip().lower()] for n in spec.split("|") if n.strip().lower() in known)
    if models:
        return Requirement(models=models)
    unmapped[spec] += 1
    return Requirement()


def _check_width(row: list[str], header: tuple[str, ...], where: str) -> None:
    if len(row) != len(header):
        raise TraceError(f"{where}: expected {len(header)} columns ({','.join(header)}), "
                         f"got {len(row)}")


def _in_row(where: str, parse, *args, **kwargs):
    """``parse(*args, **kwargs)`` (:mod:`scheduler.limits.checks`); its refusal as a
    :class:`TraceError` naming the file and line."""
    try:
        return parse(*args, **kwargs)
    except ValueError as exc:
        raise TraceError(f"{where}: {exc}") from None


def _number(text: str, what: str, where: str, bound: Bound | None = None) -> float:
    """A finite non-negative number: seconds, millicores or MiB (within ``bound``)."""
    return _in_row(where, checks.number_from_text, what, text, at_least=0, bound=bound,
                   expect="finite and >= 0", unparsable="a number", given="got")


def _bounded(value: float, what: str, where: str, bound: Bound) -> float:
    """``value`` within its documented bound (:mod:`scheduler.limits.bounds`)."""
    return _in_row(where, checks.within, what, value, bound)


def _integer(text: str, what: str, where: str, *, minimum: int, gpus: bool = False) -> int:
    """An integer >= ``minimum``; a GPU count (``gpus``) at most the GPUs of the largest cluster
    the twin builds (:data:`~scheduler.limits.bounds.CLUSTER_GPUS`)."""
    value = _in_row(where, checks.integer_from_text, what, text, at_least=minimum, given="got")
    if gpus and value > CLUSTER_GPUS.high:
        raise TraceError(f"{where}: {what} must be at most {CLUSTER_GPUS.high:,} (the GPUs of "
                         f"the largest cluster the twin builds), got {text!r}")
    return value
