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

Workers come and go.  A worker lost in the middle of a run (killed, its host gone) costs only
that run's time: Dask's scheduler gives the run to another worker, and as a run is a
function of its arm and seed alone (:func:`~scheduler.study.run.run_one`) the retried run
gives the very same result.  A run that takes its worker down each time it is tried (more
than ``distributed.scheduler.allowed-failures``, 3 by default) is recorded as failed.  With no
worker at all for ``CLUSTERTWIN_STUDY_NO_WORKER_S`` seconds (default 120), or no scheduler,
the study stops with :class:`StudyStopped`: its finished runs are on disk and a resume (or the
same command again) runs the rest.
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.limits import checks
from scheduler.study.run import run_one
from scheduler.study.spec import Arm, StudySpec

CONNECT_TIMEOUT_S = 10.0
WORKER_ENVIRON = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}
"""Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (glibc gives memory back
to the system eagerly); the engine allocates many short-lived numpy arrays, and under that
setting a run takes 2.2x as long (``bench.study``: a 10-day llama3-16k run 0.35 s in a plain
process, 0.8 s with it).  The embedded cluster's workers keep glibc's default; for workers of
your own, see docs/studies.md."""
NO_WORKER_ENV = "CLUSTERTWIN_STUDY_NO_WORKER_S"
NO_WORKER_S = 120.0
"""How long a study waits with no Dask worker (or no scheduler) before it stops, s."""
POLL_S = 0.5
"""How often the study looks at the scheduler's workers while no run finishes, s."""
RESUBMITS = 3
"""How often a run whose future the scheduler lost (a scheduler restart) is sent again."""


class StudyError(RuntimeError):
    """The study cannot start (an unreachable scheduler, an output folder that cannot be
    written); one line."""


class StudyStopped(StudyError):
    """The study stopped before every run finished: no Dask worker was left (or no scheduler)
    for :func:`no_worker_timeout_s` seconds.  The finished runs are kept on disk."""

    def __init__(self, message: str, *, finished: int, total: int):
        super().__init__(message)
        self.finished = finished
        self.total = total


def no_worker_timeout_s() -> float:
    """``CLUSTERTWIN_STUDY_NO_WORKER_S``, read when a study starts: seconds without a worker
    before it stops (default :data:`NO_WORKER_S`); a value that is no number in (0, 86400]
    is a :class:`StudyError` and nothing runs."""
    raw = os.environ.get(NO_WORKER_ENV, "")
    if not raw.strip():
        return NO_WORKER_S
    try:
        return checks.number_from_text(NO_WORKER_ENV, raw, above=0, at_most=86_400.0,
                                       expect="a number of seconds in (0, 86400]")
    except ValueError as exc:
        raise StudyError(str(exc)) from None


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
              on_run: Callable[[RunRecord, int, int], None] | None = None,
              no_worker_s: float | None = None) -> StudyOutcome:
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
    no_worker_s : float, optional
        Stop (:class:`StudyStopped`) after this long with no Dask worker, s (default:
        :func:`no_worker_timeout_s`).

    Raises
    ------
    StudyError
        Before any run: an unreachable scheduler, an output folder that cannot be written.
    StudyStopped
        No worker left for ``no_worker_s``: the runs finished so far are kept.
    """
    out = Path(out)
    if no_worker_s is None and not serial:
        no_worker_s = no_worker_timeout_s()
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
                                          energy_price_usd_per_mwh=price, grid=spec.grid), "")
            except Exception as exc:  # noqa: BLE001 - one run's failure is recorded
                finish(arm, seed, None, _one_line(exc))
    elif todo:
        where = scheduler or f"LocalCluster ({len(client.scheduler_info()['workers'])} workers)"
        try:
            _on_dask(client, todo, figures, price, finish, no_worker_s=no_worker_s,
                     where=where, total=total, grid=spec.grid,
                     done=lambda: sum(r.status != "failed" for r in records))
        finally:
            _close(client, scheduler)
    order = {(a.name, s): i for i, (a, s) in enumerate(spec.runs())}
    records.sort(key=lambda r: order[(r.arm, r.seed)])
    failed = sum(1 for r in records if r.status == "failed")
    return StudyOutcome(records, ran=len(todo) - failed, kept=kept, failed=failed, where=where)


def _on_dask(client, todo: list[tuple[Arm, int]], figures: list[str], price: float | None,
             finish: Callable, *, no_worker_s: float, where: str, total: int,
             done: Callable[[], int], grid=None) -> None:
    """Send ``todo`` to the client's workers and ``finish`` each run as it comes back
    (``grid``: an inventory grid's ``(GridSpec, plans)`` for a grid study's runs).

    Between runs it watches the scheduler: no worker (or no scheduler) for ``no_worker_s``
    cancels what is left and raises :class:`StudyStopped`."""
    from distributed import KilledWorker, as_completed

    runs: dict[str, tuple[Arm, int]] = {}
    sent: dict[str, int] = {}

    def submit(arm: Arm, seed: int):
        key = f"run-{arm.slug}-{seed}-{arm.key(seed)}"
        runs[key] = (arm, seed)
        sent[key] = sent.get(key, 0) + 1
        return client.submit(run_one, arm.options, seed, figures,
                             energy_price_usd_per_mwh=price, grid=grid, pure=False, key=key)

    ac = as_completed([submit(a, s) for a, s in todo], loop=client.loop)
    lost: list[tuple[Arm, int]] = []
    alone_since: float | None = None
    while not ac.is_empty() or lost:
        for f in ac.next_batch(block=False):
            arm, seed = runs[f.key]
            if f.status == "cancelled":  # the scheduler forgot it: send it again
                if sent[f.key] > RESUBMITS:
                    finish(arm, seed, None, f"its result was lost {sent[f.key]} times (the "
                                            "Dask scheduler restarted?)")
                else:
                    lost.append((arm, seed))
                continue
            try:
                result = f.result()
            except KilledWorker as exc:
                finish(arm, seed, None, f"KilledWorker: the Dask workers running it died "
                                        f"{exc.allowed_failures + 1} times (out of memory, "
                                        "or a crash); it is not tried again")
            except Exception as exc:  # noqa: BLE001 - recorded with its arm and seed
                finish(arm, seed, None, _one_line(exc))
            else:
                finish(arm, seed, result, "")
            f.release()
        if _workers(client):
            alone_since = None
            while lost:
                ac.add(submit(*lost.pop()))
        else:
            now = time.monotonic()
            alone_since = now if alone_since is None else alone_since
            if now - alone_since >= no_worker_s:
                client.cancel(list(ac.futures))
                finished = done()
                raise StudyStopped(
                    f"stopped: no Dask worker on {where} for {no_worker_s:g} s "
                    f"({NO_WORKER_ENV}); {finished} of {total} runs done and kept: resume "
                    f"the study (or run the same command again) to run the other "
                    f"{total - finished}", finished=finished, total=total)
        if not ac.has_ready():
            with ac.thread_condition:
                ac.thread_condition.wait(timeout=POLL_S)


def _workers(client) -> int:
    """The workers the client's scheduler has now (0: none, or no scheduler reached)."""
    if client.status != "running":
        return 0
    try:
        return int(client.scheduler_info(n_workers=0).get("n_workers", 0))
    except (OSError, TimeoutError):
        return 0


def _close(client, scheduler: str | None) -> None:
    cluster = client.cluster
    log = logging.getLogger("distributed.client")
    level = log.level
    if client.status != "running":  # the scheduler is gone: closing cancels the client's
        log.setLevel(logging.CRITICAL)  # reconnecting, which it would log as a traceback
    try:
        client.close()
    finally:
        log.setLevel(level)
    if cluster is not None and not scheduler:
        cluster.close()


def _one_line(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    at = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{exc.__class__.__name__}: {first[:300]}{at}"
