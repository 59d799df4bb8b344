"""Studies in the app: launch (staff), follow, record, resume, and what-ifs saved as studies.

:func:`study_launch` checks the spec (one ``ValidationError``, nothing written on bad input),
writes the ``Study`` and its ``StudyRun`` rows and runs it in a thread of the web process that
drives Dask (``CLUSTERTWIN_STUDY_SCHEDULER``, or an embedded LocalCluster): the simulations
run in Dask's worker processes, never in the web process, and each finished run updates its
row, so the page shows progress as it comes.  Files go to ``CLUSTERTWIN_STUDY_DIR``/ID and
finished runs are kept there: a study left ``running`` by a web process that died, or stopped
because no Dask worker was left (``CLUSTERTWIN_STUDY_NO_WORKER_S``, the reason in its
``error``), reads ``interrupted`` (:func:`study_reap`) and :func:`study_resume` runs only what
is missing.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import close_old_connections, connections, transaction
from django.utils import timezone

from scheduler.control.whatif import METRICS
from scheduler.study.figures import whatif_figures
from scheduler.study.spec import SpecError, StudySpec, check_spec, load_spec_text
from scheduler.study.summary import summarise_values
from twin import app_setting
from twin.studies.grids import inventory_grid
from twin.studies.models import Study, StudyRun, WhatIf
from twin.studies.report import write_all
from twin.studies.runner import RunRecord, StudyError, StudyOutcome, StudyStopped, run_study
from twin.studies.whatif import owner_gone

STUDY_DENIED = "studies are started by staff with the twin.run_drill permission"
TOKEN = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
_OPEN = (Study.Status.PENDING, Study.Status.RUNNING)
_threads: dict[int, threading.Thread] = {}


def can_start_study(user) -> bool:
    """The one rule (as for what-ifs): staff with ``twin.run_drill``; everyone reads."""
    return bool(user.is_staff and user.has_perm("twin.run_drill"))


def spec_check(*, text: str | None = None, data: dict | None = None) -> StudySpec:
    """A spec from its text (YAML or JSON) or a parsed dict; else a ``ValidationError`` with
    one message per mistake (``line N: ...``), every mistake of the spec at once.

    Paths to files of the server (a ``trace``, a ``slurm_conf``, a failure profile
    ``.toml``) are refused before anything looks at them: the web is not a way to read the
    server's files."""
    try:
        if text is not None:
            return load_spec_text(text, origin="spec", read_files=False, grids=inventory_grid)
        return check_spec(data, read_files=False, grids=inventory_grid)
    except SpecError as exc:
        raise ValidationError(exc.messages()) from None


def _study_dir(pk: int) -> Path:
    return Path(app_setting("STUDY_DIR")) / str(pk)


def study_launch(*, user, spec: StudySpec, origin: str = Study.Origin.SPEC) -> Study:
    """Record ``spec`` as a study and start it in the background (staff only)."""
    if not can_start_study(user):
        raise PermissionDenied(STUDY_DENIED)
    with transaction.atomic():
        study = Study.objects.create(
            name=spec.name, description=spec.description, origin=origin, spec=spec.source,
            requested_by=user, total_runs=len(spec.runs()))
        study.out_dir = str(_study_dir(study.pk))
        study.save(update_fields=["out_dir"])
        StudyRun.objects.bulk_create(StudyRun(study=study, arm=a.name, seed=s)
                                       for a, s in spec.runs())
    _start(study, spec)
    return study


def study_resume(*, user, study: Study) -> Study:
    """Run again what an interrupted or failed study has not finished (staff only)."""
    if not can_start_study(user):
        raise PermissionDenied(STUDY_DENIED)
    if study.origin == Study.Origin.WHATIF or not study.out_dir:
        raise ValidationError("this study has no runs of its own to resume")
    if study.status in _OPEN:
        raise ValidationError("this study is still running")
    spec = spec_check(data=study.spec)
    StudyRun.objects.filter(study=study).exclude(status__in=("done", "kept")).update(
        status=StudyRun.Status.PENDING, error="")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.PENDING, error="",
                                               finished_at=None)
    _start(study, spec)
    study.refresh_from_db()
    return study


def _start(study: Study, spec: StudySpec) -> None:
    t = threading.Thread(target=_run, args=(study.pk, spec), name=f"study-{study.pk}",
                         daemon=True)
    _threads[study.pk] = t
    t.start()


def _run(pk: int, spec: StudySpec) -> None:
    close_old_connections()
    try:
        Study.objects.filter(pk=pk).update(status=Study.Status.RUNNING, owner=TOKEN,
                                             started_at=timezone.now())
        workers = app_setting("STUDY_WORKERS") or max(1, (os.cpu_count() or 2) - 1)

        def on_run(rec: RunRecord, done: int, total: int) -> None:
            _record_run(pk, rec)

        try:
            outcome = run_study(spec, _study_dir(pk),
                                scheduler=app_setting("STUDY_SCHEDULER") or None,
                                workers=workers, on_run=on_run)
        except StudyStopped as exc:  # no worker left: what finished is kept; resume later
            Study.objects.filter(pk=pk).update(status=Study.Status.INTERRUPTED,
                                                 error=str(exc), finished_at=timezone.now())
            return
        except StudyError as exc:
            Study.objects.filter(pk=pk).update(status=Study.Status.ERROR, error=str(exc),
                                                 finished_at=timezone.now())
            return
        res = write_all(spec, outcome, _study_dir(pk))
        Study.objects.filter(pk=pk).update(
            status=Study.Status.PARTIAL if outcome.failed else Study.Status.DONE,
            summary=res["summary"], where=outcome.where[:200], finished_at=timezone.now(),
            failed_runs=outcome.failed)
    except Exception as exc:  # noqa: BLE001 - the row says why; the web process goes on
        Study.objects.filter(pk=pk).update(status=Study.Status.ERROR,
                                             error=f"{exc.__class__.__name__}: {exc}"[:2000],
                                             finished_at=timezone.now())
    finally:
        _threads.pop(pk, None)
        connections.close_all()


def _record_run(pk: int, rec: RunRecord) -> None:
    StudyRun.objects.filter(study_id=pk, arm=rec.arm, seed=rec.seed).update(
        status=rec.status, figures=rec.figures, error=rec.error[:2000], wall_s=rec.wall_s,
        worker=rec.worker[:200])
    runs = StudyRun.objects.filter(study_id=pk)
    Study.objects.filter(pk=pk).update(
        done_runs=runs.filter(status__in=("done", "kept")).count(),
        failed_runs=runs.filter(status="failed").count())


def study_wait(pk: int, timeout: float | None = None) -> bool:
    """Wait for this process's thread of study ``pk`` (tests, the CLI); True when done."""
    t = _threads.get(pk)
    if t is not None:
        t.join(timeout)
        return not t.is_alive()
    return True


def study_reap() -> int:
    """Open studies whose web process is gone from this host read ``interrupted``."""
    reaped = 0
    for row in Study.objects.filter(status__in=_OPEN).only("pk", "owner"):
        if row.owner and owner_gone(row.owner, TOKEN):
            reaped += Study.objects.filter(pk=row.pk, status__in=_OPEN).update(
                status=Study.Status.INTERRUPTED, finished_at=timezone.now(),
                error="the web process running it stopped; resume runs what is missing")
    return reaped


def study_record(*, spec: StudySpec, outcome: StudyOutcome, results: dict,
                 user=None) -> Study:
    """Store a study run elsewhere (``manage.py study run --save``) with its runs."""
    with transaction.atomic():
        study = Study.objects.create(
            name=spec.name, description=spec.description, origin=Study.Origin.CLI,
            spec=spec.source, requested_by=user, total_runs=len(spec.runs()),
            done_runs=len(outcome.records) - outcome.failed, failed_runs=outcome.failed,
            summary=results["summary"], where=outcome.where[:200],
            status=Study.Status.PARTIAL if outcome.failed else Study.Status.DONE,
            started_at=timezone.now(), finished_at=timezone.now())
        StudyRun.objects.bulk_create(
            StudyRun(study=study, arm=r.arm, seed=r.seed, status=r.status,
                       figures=r.figures, error=r.error, wall_s=r.wall_s, worker=r.worker)
            for r in outcome.records)
    return study


def whatif_save_as_study(*, user, whatif: WhatIf) -> Study:
    """A finished what-if as a two-arm study (baseline, action) with intervals and verdicts;
    its seeds are the what-if's seeds, and both arms of a seed fork the same state."""
    if not can_start_study(user):
        raise PermissionDenied(STUDY_DENIED)
    if whatif.status != WhatIf.Status.DONE or not whatif.result.get("per_seed"):
        raise ValidationError("only a finished what-if can be saved as a study")
    res = whatif.result
    seeds = [s["seed"] for s in res["per_seed"]]
    figs = whatif_figures(res.get("metrics", METRICS))
    values = {}
    for s in res["per_seed"]:
        for arm in ("baseline", "action"):
            values[(arm, s["seed"])] = {f.name: s[arm].get(f.name) for f in figs}
    action = res.get("action")
    summary = summarise_values([("baseline", {}), ("action", {"action": action})], seeds,
                               figs, values)
    name = f"what-if #{whatif.pk}"
    with transaction.atomic():
        study = Study.objects.create(
            name=name, origin=Study.Origin.WHATIF, whatif=whatif, requested_by=user,
            description=(f"forked from the live twin {_forked_at(whatif, res['from']['t_sim'])}, "
                         f"{res['hours']:g} h forward; action: {action}"),
            spec={"whatif": whatif.pk, "action": action, "hours": res["hours"],
                  "seeds": seeds}, total_runs=2 * len(seeds), done_runs=2 * len(seeds),
            summary=summary, status=Study.Status.DONE, where="what-if worker",
            started_at=whatif.started_at, finished_at=whatif.finished_at)
        StudyRun.objects.bulk_create(
            StudyRun(study=study, arm=arm, seed=seed, status=StudyRun.Status.DONE,
                       figures=values[(arm, seed)])
            for (arm, seed) in values)
    return study


def _forked_at(whatif, t_sim: float) -> str:
    """When a what-if forked, as the pages say it: wall clock first, the engine's clock after
    ("on 2026-12-05 13:02 (simulated day 3, 05:18)")."""
    s = max(0, int(float(t_sim)))
    day, rest = divmod(s, 86400)
    sim = f"simulated day {day}, {rest // 3600:02d}:{rest % 3600 // 60:02d}"
    wall = whatif.started_at or whatif.requested_at
    return f"on {timezone.localtime(wall):%Y-%m-%d %H:%M} ({sim})" if wall else f"at {sim}"
