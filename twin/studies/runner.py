"""Run a study's (arm, seed) pairs on Dask and keep each finished run on disk.

By default an embedded ``LocalCluster`` (one single-threaded worker process per core); with
``scheduler="tcp://HOST:8786"`` an existing Dask scheduler and its workers (started by
``dask scheduler`` / ``dask worker``, by dask-jobqueue on Slurm or by the Dask operator on
Kubernetes: docs/studies.md).  The scheduler is reached before any run starts: an
unreachable one is a :class:`StudyError` and nothing runs.

Every finished run is written at once to ``OUT/runs/ARM/seed-N.json`` with the digest of its
scenario (:meth:`~scheduler.study.spec.Arm.key`); a re-run skips the runs whose file holds
the same digest, so an interrupted study resumes where it stopped and an arm whose scenario
changed runs again.  A run that raises is recorded with its arm, seed and error, and the
others go on.  No Django here: ``manage.py study`` and the Studies page both call
:func:`run_study`.
"""

from __future__ import annotations

import json
import logging
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.study.run import run_one
from scheduler.study.spec import Arm, StudySpec

CONNECT_TIMEOUT_S = 10.0
WORKER_ENVIRON = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}
"""Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (glibc gives memory back
to the system eagerly); the engine allocates many short-lived numpy arrays, and under that
setting a run takes 2.2x as long (``bench.study``: a 10-day llama3-16k run 0.35 s in a plain
process, 0.8 s with it).  The embedded cluster's workers keep glibc's default; for workers of
your own, see docs/studies.md."""


class StudyError(RuntimeError):
    """The study cannot start (an unreachable scheduler, an output folder that cannot be
    written); one line."""


@dataclass
class RunRecord:
    arm: str
    seed: int
    status: str                      # "done", "failed" or "kept" (done by an earlier run)
    figures: dict = field(default_factory=dict)
    error: str = ""
    wall_s: float | None = None
    worker: str = ""


@dataclass
class StudyOutcome:
    records: list[RunRecord]
    ran: int
    kept: int
    failed: int
    where: str

    def values(self) -> dict[tuple[str, int], dict]:
        return {(r.arm, r.seed): r.figures for r in self.records if r.status != "failed"}


def run_path(out: Path, arm: Arm, seed: int) -> Path:
    return out / "runs" / arm.slug / f"seed-{seed}.json"


def stored_run(out: Path, arm: Arm, seed: int, figures) -> dict | None:
    """The stored result of (arm, seed) when it ran the same scenario and has the figures."""
    p = run_path(out, arm, seed)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    if data.get("key") != arm.key(seed) or not set(figures) <= set(data.get("figures", {})):
        return None
    return data


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def connect(scheduler: str | None, workers: int | None):
    """A ``distributed.Client``: to ``scheduler`` or to a new ``LocalCluster``."""
    import dask
    from distributed import Client, LocalCluster

    for name in ("distributed", "dask"):  # the cluster's chatter, not the study's
        logging.getLogger(name).setLevel(logging.WARNING)

    if scheduler:
        try:
            return Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise StudyError(f"cannot reach the Dask scheduler at {scheduler} "
                             f"({exc.__class__.__name__}: {str(exc).splitlines()[0][:160]})"
                             ) from None
    n = workers or os.cpu_count() or 1
    with dask.config.set(WORKER_ENVIRON):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               scheduler_kwargs={"dashboard": False}, dashboard_address=None,
                               silence_logs=logging.WARNING)
    return Client(cluster, set_as_default=False)


def run_study(spec: StudySpec, out: str | os.PathLike, *, scheduler: str | None = None,
              workers: int | None = None, serial: bool = False,
              on_run: Callable[[RunRecord, int, int], None] | None = None) -> StudyOutcome:
    """Run every (arm, seed) of ``spec`` not already stored under ``out``.

    Parameters
    ----------
    scheduler : str, optional
        A Dask scheduler's address (``tcp://HOST:8786``); default an embedded LocalCluster.
    workers : int, optional
        The LocalCluster's worker processes (default: one per core).
    serial : bool
        Run in this process, one after the other, without Dask (the benchmark's reference).
    on_run : callable, optional
        ``on_run(record, finished, total)`` after each run (kept ones first).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise StudyError(f"{out} is a file; --out names a folder")
    figures = list(spec.figures)
    records: list[RunRecord] = []
    todo: list[tuple[Arm, int]] = []
    total = len(spec.runs())
    for arm, seed in spec.runs():
        data = stored_run(out, arm, seed, figures)
        if data is None:
            todo.append((arm, seed))
            continue
        rec = RunRecord(arm.name, seed, "kept", data["figures"], wall_s=data.get("wall_s"),
                        worker=data.get("worker", ""))
        records.append(rec)
        if on_run:
            on_run(rec, len(records), total)
    kept = len(records)
    where = "serial (this process)" if todo else "nothing to run (every run kept)"
    client = connect(scheduler, workers) if todo and not serial else None
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "spec.json").write_text(json.dumps(spec.source, indent=1, sort_keys=True))
    except OSError as exc:
        if client is not None:
            _close(client, scheduler)
        raise StudyError(f"cannot write to {out}: {exc.strerror or exc}") from None
    price = spec.energy_price_usd_per_mwh

    def finish(arm: Arm, seed: int, result: dict | None, error: str) -> None:
        if result is not None:
            worker = f"{result['host']}:{result['pid']}"
            _write_json(run_path(out, arm, seed),
                        {"arm": arm.name, "seed": seed, "key": arm.key(seed),
                         "options": arm.options, "figures": result["figures"],
                         "report": result["report"], "wall_s": result["wall_s"],
                         "worker": worker})
            rec = RunRecord(arm.name, seed, "done", result["figures"], wall_s=result["wall_s"],
                            worker=worker)
        else:
            rec = RunRecord(arm.name, seed, "failed", error=error)
        records.append(rec)
        if on_run:
            on_run(rec, len(records), total)

    if todo and serial:
        for arm, seed in todo:
            try:
                finish(arm, seed, run_one(arm.options, seed, figures,
                                          energy_price_usd_per_mwh=price), "")
            except Exception as exc:  # noqa: BLE001 - one run's failure is recorded
                finish(arm, seed, None, _one_line(exc))
    elif todo:
        from distributed import as_completed

        where = scheduler or f"LocalCluster ({len(client.scheduler_info()['workers'])} workers)"
        try:
            futures = {}
            for arm, seed in todo:
                f = client.submit(run_one, arm.options, seed, figures,
                                  energy_price_usd_per_mwh=price, pure=False,
                                  key=f"run-{arm.slug}-{seed}-{arm.key(seed)}")
                futures[f] = (arm, seed)
            for f in as_completed(futures, loop=client.loop):
                arm, seed = futures[f]
                try:
                    result = f.result()
                except Exception as exc:  # noqa: BLE001 - recorded with its arm and seed
                    finish(arm, seed, None, _one_line(exc))
                else:
                    finish(arm, seed, result, "")
                f.release()
        finally:
            _close(client, scheduler)
    order = {(a.name, s): i for i, (a, s) in enumerate(spec.runs())}
    records.sort(key=lambda r: order[(r.arm, r.seed)])
    failed = sum(1 for r in records if r.status == "failed")
    return StudyOutcome(records, ran=len(todo) - failed, kept=kept, failed=failed, where=where)


def _close(client, scheduler: str | None) -> None:
    cluster = client.cluster
    client.close()
    if cluster is not None and not scheduler:
        cluster.close()


def _one_line(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    at = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{exc.__class__.__name__}: {first[:300]}{at}"
