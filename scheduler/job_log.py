"""The job log of a run (``simulate --job-log PATH``): when each job started and ended.

One CSV row per job submitted by the end of the run, in submission order, with the header
:data:`JOB_LOG_HEADER`; what ``sacct --json`` records of a real cluster's jobs, so that a replay
of its history can be compared with what really happened, job by job:

* ``job_id``: the job's id (a Slurm trace's own, :mod:`scheduler.workload.trace_slurm`);
* ``submit_s``: its submission, s from the start of the run;
* ``start_s``: the start of its last run (as sacct's ``Start`` of a requeued job); empty for a
  job that never started or is back in the queue (or held) at the end;
* ``end_s``: when it ended (finished or cancelled); empty while it runs;
* ``gpus``: its gang's size;
* ``nodes``: the nodes of its last placement; empty when it never ran on the cluster (a job
  that ran in a cloud pool has a start and an end but no nodes).

Times are written to the microsecond, without trailing zeros (``12``, ``17.5``).
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from scheduler.model.job_run import CLOUD, HELD, PENDING, QUEUED

JOB_LOG_HEADER = ("job_id", "submit_s", "start_s", "end_s", "gpus", "nodes")
"""The job log's header line."""

_WAITING = (QUEUED, HELD)


def seconds(t: float | None) -> str:
    """A time as the log writes it: to the microsecond, no trailing zeros; ``""`` if ``None``.

    >>> seconds(12.0), seconds(17.5), seconds(1e-7), seconds(None)
    ('12', '17.5', '0', '')
    """
    if t is None:
        return ""
    text = f"{t:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def job_log_rows(engine) -> list[tuple]:
    """The log's rows (see the module): one per job submitted by now, in submission order.

    ``engine`` is a :class:`scheduler.engine.Engine`.
    """
    rows = []
    for run in engine.runs:
        if run.state == PENDING:  # not submitted yet: not a job of the run so far
            continue
        cloud = run.cloud_pool >= 0 or run.state == CLOUD
        start = None if run.state in _WAITING else (run.first_start if cloud
                                                     else run.last_start)
        nodes = (run.placement.nodes.size if start is not None and not cloud
                 and run.placement is not None else None)
        rows.append((run.spec.job_id, seconds(run.spec.submit_s), seconds(start),
                     seconds(run.end_s), run.gpus, "" if nodes is None else int(nodes)))
    return rows


def job_log_text(engine) -> str:
    """The job log of ``engine``'s run so far, as CSV text (header line first)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(JOB_LOG_HEADER)
    writer.writerows(job_log_rows(engine))
    return out.getvalue()


def write_job_log(engine, path: str | os.PathLike) -> int:
    """Write the job log of ``engine``'s run so far to ``path``; the jobs written."""
    text = job_log_text(engine)
    Path(path).write_text(text, encoding="utf-8")
    return text.count("\n") - 1
