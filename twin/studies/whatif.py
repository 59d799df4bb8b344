"""What-ifs from the live twin's "now", run in a worker process (never in the web process).

"Now" is the live engine's newest stored snapshot (``EngineSnapshot``, written every
``CLUSTERTWIN_SNAPSHOT_INTERVAL_S`` wall seconds): a what-if forks that state, so it starts
up to one snapshot interval behind the frame on screen; the row records the snapshot's
simulated time (``t_sim``), the live frame's ``seq`` when it was asked for, and the
snapshot's age (``params["snapshot"]``: wall seconds since it was written, simulated seconds
behind the live frame).

:func:`whatif_start` checks the parameters (one ``ValidationError``, nothing written on bad
input), writes a ``WhatIf`` row and hands the snapshot to a small module-level pool of
"spawn" processes, one fresh process per what-if (``max_tasks_per_child=1``: a 100k-GPU
engine's memory goes back when it is done).  The child unpickles the engine and runs
:func:`scheduler.control.whatif.whatif`; the result, an exception or the death of the process
ends the row ``done`` or ``error`` from a short-lived thread of the web process.  A row left
``pending``/``running`` by a web process that died is marked ``error`` by the next start or
read (:func:`whatif_reap`): at once when its process is gone from this host, otherwise once it
is older than :data:`TIMEOUT_S`.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import uuid
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import timedelta

import django
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connections
from django.utils import timezone

from scheduler.control.whatif import HOURS, SEED, SEEDS, action_check, whatif
from scheduler.snapshot import loads as engine_loads
from twin.live import selectors
from twin.live.models import EngineSnapshot
from twin.studies.models import WhatIf

WORKERS = 2
"""Processes in the pool: what-ifs run two at a time, the rest wait (shown ``running``)."""
TIMEOUT_S = 6 * 3600.0
"""A row still pending or running this long after it started is given up (``error``)."""
WHATIF_DENIED = "what-ifs are started by staff with the twin.run_drill permission"
TOKEN = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
"""This web process, as the rows it runs name it (the pid alone may be reused)."""

_OPEN = (WhatIf.Status.PENDING, WhatIf.Status.RUNNING)
_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_done: dict[int, threading.Event] = {}


def can_start_whatif(user) -> bool:
    """The one rule: staff with ``twin.run_drill`` start what-ifs; everyone logged in reads
    them."""
    return bool(user.is_staff and user.has_perm("twin.run_drill"))


# ----------------------------------------------------------------- parameters
def whatif_params_check(params) -> dict:
    """``{"action": ..., "hours": ..., "seeds": N, "first_seed": S}`` checked and normalised
    (``seeds`` becomes the list ``S .. S+N-1``); one ``ValidationError`` otherwise.  Targets
    are checked against the engine in the worker (a bad one ends the row in ``error``)."""
    if not isinstance(params, dict):
        raise ValidationError('send an object: {"action": {"kind": ...}, "hours": 24, '
                              '"seeds": 3}')
    unknown = sorted(set(params) - {"action", "hours", "seeds", "first_seed"})
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}; a what-if takes "
                              "action, hours, seeds and first_seed")
    try:
        action = action_check(params.get("action"))
        hours = HOURS.check("hours", params.get("hours", 24.0))
        n = SEEDS.check("seeds", params.get("seeds", 3))
        first = SEED.check("first_seed", params.get("first_seed", 1))
        SEED.check("last seed", first + n - 1)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    return {"action": action, "hours": hours, "seeds": list(range(first, first + n))}


# ----------------------------------------------------------------- the snapshot
def whatif_snapshot_latest() -> EngineSnapshot | None:
    """The live engine's newest snapshot (its data deferred): what a what-if forks."""
    return EngineSnapshot.objects.defer("data").order_by("-id").first()


def snapshot_age(snap, live) -> dict:
    """How far behind the live twin ``snap`` is: wall seconds since it was written and
    simulated seconds behind the live frame (``None`` with no live frame)."""
    return {"id": snap.pk, "t_sim": snap.t_sim, "preset": snap.preset, "seed": snap.seed,
            "created_at": snap.created_at.isoformat(),
            "age_s": round((timezone.now() - snap.created_at).total_seconds(), 1),
            "behind_live_sim_s": None if live is None else round(live.t_sim - snap.t_sim, 1)}


# ----------------------------------------------------------------- start
def whatif_start(*, user, params) -> WhatIf:
    """Check ``params`` (:func:`whatif_params_check`), record a ``WhatIf`` and run it in the
    worker pool; returns the row (``running``).  ``PermissionDenied`` for a user who may not
    start one, ``ValidationError`` (one message, nothing written) for bad parameters or when
    the live engine has stored no snapshot yet (code ``no_snapshot``)."""
    if not can_start_whatif(user):
        raise PermissionDenied(WHATIF_DENIED)
    checked = whatif_params_check(params)
    whatif_reap()
    snap = whatif_snapshot_latest()
    if snap is None:
        raise ValidationError("the live engine has stored no snapshot yet: a what-if forks "
                              "the newest one (try again after the first snapshot interval)",
                              code="no_snapshot")
    live = selectors.live_state_get()
    row = WhatIf.objects.create(
        requested_by=user, params={**checked, "snapshot": snapshot_age(snap, live)},
        status=WhatIf.Status.RUNNING, started_at=timezone.now(), t_sim=snap.t_sim,
        seq=None if live is None else live.seq, owner=TOKEN)
    blob = EngineSnapshot.objects.filter(pk=snap.pk).values_list("data", flat=True).first()
    submit(row.pk, bytes(blob or b""), checked)
    return row


def submit(pk: int, blob: bytes, checked: dict) -> None:
    """Run what-if ``pk`` on the snapshot ``blob`` in the pool; its end is recorded."""
    _done[pk] = threading.Event()
    pool = None
    try:
        pool = _executor()
        future = pool.submit(_work, blob, checked["action"], checked["hours"],
                                    checked["seeds"])
    except (BrokenProcessPool, RuntimeError, OSError) as exc:
        _pool_drop(pool)
        _record(pk, error=f"the what-if worker could not start: {exc}")
        return
    future.add_done_callback(lambda f: _finished(pk, f, pool))


def _executor() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            # spawn, not fork: a forked child would inherit the web server's threads, sockets
            # and event loop; the child sets Django up before it unpickles ``_work``
            _pool = ProcessPoolExecutor(max_workers=WORKERS,
                                        mp_context=multiprocessing.get_context("spawn"),
                                        initializer=django.setup, max_tasks_per_child=1)
        return _pool


def _pool_drop(broken: ProcessPoolExecutor | None) -> None:
    """Forget the pool if it is still ``broken``; the next start makes a new one."""
    global _pool
    with _lock:
        if _pool is not None and _pool is broken:
            _pool.shutdown(wait=False, cancel_futures=False)
            _pool = None


def _work(blob: bytes, action, hours: float, seeds: list[int]) -> dict:
    """In the worker process: the snapshot's engine and the what-if's report."""
    try:
        engine = engine_loads(blob)
    except Exception as exc:  # any corruption of the blob: zlib, pickle, missing classes
        raise ValueError(f"the snapshot cannot be loaded ({type(exc).__name__}: {exc})") from None
    return whatif(engine, action, hours=hours, seeds=seeds)


def _finished(pk: int, future, pool: ProcessPoolExecutor) -> None:
    exc = future.exception()
    if isinstance(exc, BrokenProcessPool):
        _pool_drop(pool)
        outcome = {"error": "the what-if process died before it finished (killed, out of "
                            "memory or crashed)"}
    elif exc is not None:
        outcome = {"error": " ".join(f"{exc}".split()) or type(exc).__name__}
    else:
        outcome = {"result": future.result()}
    # the database write happens in a thread of its own, which closes its connection
    threading.Thread(target=_record_closing, args=(pk,), kwargs=outcome, daemon=True,
                     name=f"whatif-{pk}").start()


def _record_closing(pk: int, **outcome) -> None:
    try:
        _record(pk, **outcome)
    finally:
        connections.close_all()


def _record(pk: int, *, result: dict | None = None, error: str = "") -> None:
    """End what-if ``pk`` (unless something already did): done with ``result``, or error."""
    fields = {"finished_at": timezone.now()}
    if error:
        fields.update(status=WhatIf.Status.ERROR, error=error[:2000])
    else:
        fields.update(status=WhatIf.Status.DONE, result=result)
    try:
        WhatIf.objects.filter(pk=pk, status__in=_OPEN).update(**fields)
    finally:
        event = _done.pop(pk, None)
        if event is not None:
            event.set()


def whatif_wait(pk: int, timeout: float | None = None) -> bool:
    """Wait until what-if ``pk`` started by this process has ended (True), or ``timeout``
    seconds (False).  For the command line and tests; the web pages never wait."""
    event = _done.get(pk)
    return True if event is None else event.wait(timeout)


# ----------------------------------------------------------------- rows left behind
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_gone(owner: str, token: str) -> bool:
    """Whether the web process ``owner`` (``host:pid:token``) is gone from this host; a pid
    this process now has (containers restart as the same pid) is gone as well, unless the
    token is this process's ``token``."""
    owner_host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return (owner != token and owner_host == socket.gethostname() and pid.isdigit()
            and (int(pid) == os.getpid() or not _alive(int(pid))))


def whatif_reap() -> int:
    """Mark ``error`` the open rows nobody will finish: those of a web process gone from this
    host, and any older than :data:`TIMEOUT_S`.  Returns how many."""
    cutoff = timezone.now() - timedelta(seconds=TIMEOUT_S)
    reaped = 0
    for row in WhatIf.objects.filter(status__in=_OPEN).only("pk", "owner", "started_at",
                                                              "requested_at"):
        why = ""
        if owner_gone(row.owner, TOKEN):
            pid = row.owner.split(":")[1]
            why = f"the web process that ran it (pid {pid}) stopped"
        if not why and (row.started_at or row.requested_at) < cutoff:
            why = f"no result after {TIMEOUT_S / 3600:g} hours"
        if why:
            reaped += WhatIf.objects.filter(pk=row.pk, status__in=_OPEN).update(
                status=WhatIf.Status.ERROR, error=f"abandoned: {why}",
                finished_at=timezone.now())
    return reaped


# ----------------------------------------------------------------- reads
def whatif_recent(limit: int = 20) -> list[WhatIf]:
    """The newest what-ifs (stale open rows marked failed first)."""
    whatif_reap()
    return list(WhatIf.objects.select_related("requested_by").defer("result")[:limit])


def whatif_get(pk: int) -> WhatIf | None:
    whatif_reap()
    return WhatIf.objects.select_related("requested_by").filter(pk=pk).first()


def whatif_json(row: WhatIf, *, viewer, result: bool = True) -> dict:
    """A what-if as the API shows it; who asked is shown to staff and the requester only."""
    named = row.requested_by is not None and (viewer.is_staff
                                              or row.requested_by_id == viewer.pk)
    out = {"id": row.pk, "status": row.status, "params": row.params, "error": row.error,
           "requested_by": row.requested_by.username if named else None,
           "requested_at": row.requested_at.isoformat(),
           "started_at": row.started_at and row.started_at.isoformat(),
           "finished_at": row.finished_at and row.finished_at.isoformat(),
           "t_sim": row.t_sim, "seq": row.seq}
    if result:
        out["result"] = row.result or None
    return out
