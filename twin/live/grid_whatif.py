"""Grid what-ifs from the web (issue 30; docs/grid_whatif.md): asked on the grid page, stored
as ``GridWhatIf`` rows, run by whoever holds the grid's "now".

* ``simulated``: the grid's ``run_grid`` (:class:`twin.live.grid_run.LiveGrid`) serves its
  pending rows between two frames: it forks its federation there (a deep copy, the instant on
  screen) and runs :func:`scheduler.grid.whatif.what_if` on that copy in a daemon **thread**,
  so frames keep flowing (the copy is the thread's alone; the live grid is never advanced or
  changed by it).  The thread shares the process's GIL: a long what-if slows the frames'
  stepping somewhat, never stops it.
* ``mirrored``: ``manage.py grid_whatif --id N`` polls the grid's Slurms once (as
  ``mirror_grid`` does), builds the federation at that instant
  (:func:`scheduler.grid.mirror_start.grid_from_mirror`) and runs the what-if in its own
  process; without ``--id`` it serves every pending mirrored row once.
"""

from __future__ import annotations

import math
import threading

from django.core.exceptions import ValidationError
from django.db import close_old_connections, connection
from django.utils import timezone

from scheduler.grid.whatif import SEEDS_MAX, SEEDS_MIN, change_check, fork, horizon_check, what_if
from twin.live.models import GridStateSource, GridWhatIf, GridWhatIfStatus

FIRST_SEED = 1
"""The seeds of a what-if of ``n`` seeds are ``FIRST_SEED .. FIRST_SEED + n - 1``."""
MAX_HOURS = 720.0
SOURCES = (GridStateSource.SIMULATED.value, GridStateSource.MIRRORED.value)
_threads: dict[int, threading.Thread] = {}


def _number(what: str, v, *, integer: bool = False):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValidationError(f"{what} must be a number, not {v!r}") from None
    if not math.isfinite(x):
        raise ValidationError(f"{what} must be a finite number, not {v!r}")
    if integer:
        if x != int(x):
            raise ValidationError(f"{what} must be a whole number, not {v!r}")
        return int(x)
    return x


def change_from_form(post) -> dict:
    """The change a form asks for (``change`` and its fields), unchecked against a grid."""
    kind = (post.get("change") or "none").strip()
    dur = post.get("duration_h") or None
    duration_s = None if dur is None else _number("duration (h)", dur) * 3600.0
    if kind == "policy":
        return {"kind": kind, "policy": post.get("policy", "")}
    if kind == "replication":
        iv = post.get("interval_h") or None
        return {"kind": kind,
                "interval_s": None if iv is None else _number("interval (h)", iv) * 3600.0}
    if kind == "region_loss":
        return {"kind": kind, "place": post.get("place", ""), "duration_s": duration_s}
    if kind == "wan_cut":
        a, _, b = (post.get("link") or "").partition("|")
        return {"kind": kind, "a": a, "b": b, "duration_s": duration_s}
    if kind == "load":
        return {"kind": kind, "factor": _number("load factor", post.get("factor"))}
    return {"kind": kind}


def grid_whatif_request(*, user, grid, source: str, horizon_h, seeds, change: dict
                        ) -> GridWhatIf:
    """Check and store a what-if (``pending``); one ``ValidationError``, nothing stored, for
    a bad one.  The change is checked against the grid's places and links."""
    if source not in SOURCES:
        raise ValidationError(f"source must be one of {', '.join(SOURCES)}, not {source!r}")
    hours = _number("horizon (h)", horizon_h)
    n = _number("seeds", seeds, integer=True)
    if not SEEDS_MIN <= n <= SEEDS_MAX:
        raise ValidationError(f"seeds must be {SEEDS_MIN} to {SEEDS_MAX}, not {n}")
    if not 0 < hours <= MAX_HOURS:
        raise ValidationError(f"horizon must be in (0, {MAX_HOURS:g}] hours, not {hours:g}")
    try:
        horizon_check(hours * 3600.0)
        checked = change_check(change, _checker(grid))
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    return GridWhatIf.objects.create(
        grid=grid, requested_by=user, status=GridWhatIfStatus.PENDING,
        params={"source": source, "horizon_h": hours,
                "seeds": list(range(FIRST_SEED, FIRST_SEED + n)), "change": checked})


class _Places:
    """Enough of a grid for :func:`change_check`: its places and WAN links."""

    def __init__(self, grid):
        from scheduler.grid.wan import Wan
        from twin.inventory.grid import grid_spec_read
        spec, _ = grid_spec_read(grid=grid)
        self.spec = spec
        self.places = dict.fromkeys(spec.places())
        self.wan = Wan(spec.links, spec.places())


def _checker(grid):
    return _Places(grid)


def grid_whatifs_recent(*, grid, limit: int = 10) -> list[dict]:
    """The grid's latest what-ifs with their verdict rows, newest first."""
    out = []
    for row in GridWhatIf.objects.filter(grid=grid).select_related("requested_by")[:limit]:
        summary = (row.result or {}).get("summary") or {}
        out.append({"pk": row.pk, "status": row.status, "params": row.params,
                    "by": getattr(row.requested_by, "username", ""),
                    "error": (row.result or {}).get("error", ""),
                    "change": _said(row.params.get("change") or {}),
                    "rows": [{"metric": m, "baseline": v["baseline"]["mean"],
                              "change": v["change"]["mean"],
                              "difference": v["difference"]["mean"],
                              "low": v["difference"]["low"], "high": v["difference"]["high"],
                              "verdict": v["verdict"]} for m, v in summary.items()]})
    return out


def _said(change: dict) -> str:
    rest = ", ".join(f"{k}={v}" for k, v in change.items() if k != "kind")
    return f"{change.get('kind', 'none')}{f' ({rest})' if rest else ''}"


# ----------------------------------------------------------------- running
def grid_whatif_run(*, row: GridWhatIf, grid) -> GridWhatIf:
    """Run ``row`` on the federation ``grid`` (already a copy, or one that may be forked:
    :func:`what_if` only forks it) and record the result; returns the row."""
    p = row.params
    GridWhatIf.objects.filter(pk=row.pk).update(status=GridWhatIfStatus.RUNNING)
    try:
        result = what_if(grid, horizon_s=p["horizon_h"] * 3600.0, seeds=p["seeds"],
                         change=p["change"])
        status = GridWhatIfStatus.DONE
    except Exception as exc:  # noqa: BLE001 - a failed what-if says why in its row
        result, status = {"error": f"{type(exc).__name__}: {exc}"}, GridWhatIfStatus.FAILED
    GridWhatIf.objects.filter(pk=row.pk).update(status=status, result=result,
                                                finished_at=timezone.now())
    row.refresh_from_db()
    return row


def grid_whatifs_serve_live(live) -> int:
    """Start a thread for each of ``live``'s pending simulated what-ifs (each on a fork of
    its federation taken now); returns how many were started."""
    started = 0
    rows = GridWhatIf.objects.filter(grid=live.row, status=GridWhatIfStatus.PENDING,
                                     params__source=GridStateSource.SIMULATED.value)
    for row in rows.order_by("pk"):
        if row.pk in _threads and _threads[row.pk].is_alive():
            continue
        GridWhatIf.objects.filter(pk=row.pk).update(status=GridWhatIfStatus.RUNNING)
        copy = fork(live.grid)  # the instant on screen, taken here, between two frames
        thread = threading.Thread(target=_in_thread, args=(row.pk, copy), daemon=True,
                                  name=f"grid-whatif-{row.pk}")
        _threads[row.pk] = thread
        thread.start()
        started += 1
    return started


def _in_thread(pk: int, copy) -> None:
    close_old_connections()
    try:
        grid_whatif_run(row=GridWhatIf.objects.get(pk=pk), grid=copy)
    finally:
        connection.close()


def grid_whatif_run_mirrored(*, row: GridWhatIf, doc: dict, jobs: dict,
                             unread: tuple = ()) -> GridWhatIf:
    """Run a mirrored what-if from the overview ``doc`` and per-site ``jobs`` (as
    :func:`twin.mirror.grid_sites.job_rows` gives them).  ``unread``: sites whose Slurm did
    not answer (they start empty, and the result names them); when no site answered the
    what-if fails: there is no "now" to start from."""
    from scheduler.grid.mirror_start import grid_from_mirror
    from twin.inventory.grid import grid_settings_read, grid_spec_read
    try:
        if unread and not jobs:
            raise ValueError(f"no site's Slurm answered ({', '.join(unread)}): no state to "
                             "start from")
        spec, plans = grid_spec_read(grid=row.grid)
        s = grid_settings_read(grid=row.grid)
        base = grid_from_mirror(
            spec, plans, doc, {k: v for k, v in jobs.items() if k in spec.places()},
            policy={"cost": s["weight_cost"], "start": s["weight_start"],
                    "gravity": s["weight_gravity"]},
            replication_s=s["checkpoint_replication_s"] or None)
    except (ValueError, KeyError) as exc:
        GridWhatIf.objects.filter(pk=row.pk).update(
            status=GridWhatIfStatus.FAILED, result={"error": f"mirrored grid: {exc}"},
            finished_at=timezone.now())
        row.refresh_from_db()
        return row
    row = grid_whatif_run(row=row, grid=base)
    if unread and row.status == GridWhatIfStatus.DONE:
        GridWhatIf.objects.filter(pk=row.pk).update(
            result={**row.result, "unread_sites": list(unread)})
        row.refresh_from_db()
    return row
