"""The durable command log: what changed the live engine's state, so a crash loses nothing.

The driver writes a row (:class:`twin.models.EngineCommand`) *before* it applies an inventory
command or a drill, and closes it as applied or refused after; the row carries the simulated
time of the application.  Every snapshot records the id of the last row applied before it.  A
restarted (or healed) engine loads the snapshot and replays the applied rows after it at their
simulated times: the engine is deterministic, so it arrives where it was, drills included.
Drills that are still pending (posted while no engine ran, or whose message was lost) are read
from the database and applied, never left pending.
"""

from __future__ import annotations

from django.db import transaction

from twin.live.models import Drill, DrillStatus, EngineCommand

Row = tuple[int, str, dict, float, int | None]  # id, name, params, t_sim, drill id


def command_open(*, run: str, name: str, params: dict, t_sim: float,
                 drill_id: int | None = None) -> int:
    """Log a command about to be applied; returns its id."""
    return EngineCommand.objects.create(run=run, name=name, params=params, t_sim=t_sim,
                                          drill_id=drill_id).pk


def command_close(*, row_id: int, applied: bool, error: str = "") -> None:
    EngineCommand.objects.filter(pk=row_id).update(
        status=EngineCommand.Status.APPLIED if applied else EngineCommand.Status.REFUSED,
        error=error[:2000])


def commands_to_replay(*, run: str, after: int) -> list[Row]:
    """The applied rows of ``run`` after row ``after``, in order."""
    rows = EngineCommand.objects.filter(run=run, pk__gt=after,
                                          status=EngineCommand.Status.APPLIED).order_by("pk")
    return list(rows.values_list("pk", "name", "params", "t_sim", "drill_id"))


def commands_abandoned_refuse(*, run: str) -> int:
    """Rows left ``applying`` by a crash: refused (the engine stopped while applying them),
    with their drills."""
    rows = EngineCommand.objects.filter(run=run, status=EngineCommand.Status.APPLYING)
    return commands_refuse(ids=list(rows.values_list("pk", flat=True)),
                           reason="the engine stopped while applying it")


def commands_refuse(*, ids: list[int], reason: str) -> int:
    """Take back commands the engine failed after (a poisoned state): refused, and their drills
    too, with ``reason``."""
    if not ids:
        return 0
    with transaction.atomic():
        rows = EngineCommand.objects.filter(pk__in=ids)
        drills = [d for d in rows.values_list("drill_id", flat=True) if d is not None]
        n = rows.update(status=EngineCommand.Status.REFUSED, error=reason[:2000])
        Drill.objects.filter(pk__in=drills).update(
            status=DrillStatus.REFUSED, outcome={"error": reason}, applied_at_sim=None)
    return n


def last_command_id() -> int:
    return EngineCommand.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def drills_pending() -> list[dict]:
    """Drills still waiting for the engine, oldest first, as the engine's ``drill`` message.

    A drill whose command row says applied (the process died before the drill's own row was
    updated) is marked applied here, not applied twice: the log replays it."""
    done = EngineCommand.objects.filter(drill__status=DrillStatus.PENDING,
                                          status=EngineCommand.Status.APPLIED)
    for drill_id, t_sim in done.values_list("drill_id", "t_sim"):
        Drill.objects.filter(pk=drill_id, status=DrillStatus.PENDING).update(
            status=DrillStatus.APPLIED, applied_at_sim=t_sim,
            outcome={"note": "applied before the engine restarted; its outcome was not kept"})
    rows = (Drill.objects.filter(status=DrillStatus.PENDING)
            .exclude(kind__startswith="grid_").order_by("pk"))  # run_grid applies those
    return [{"command": "drill", "params": {"drill_id": pk, "kind": kind, "target": target,
                                            "params": params}}
            for pk, kind, target, params in rows.values_list("pk", "kind", "target", "params")]
