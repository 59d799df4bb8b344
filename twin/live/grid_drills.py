"""Grid drills (issue 30): a region loss, a WAN cut or a supply cut, asked for by staff on the
grid page and applied by the grid's ``run_grid`` process.

A drill is a :class:`~twin.live.models.Drill` row like every other drill (the audit: who, when,
what, and the outcome the running grid records), of kind ``grid_region_loss`` (target: the
place), ``grid_wan_cut`` (target ``"a – b"``, ends in ``params``) or ``grid_supply_cut``
(target: an accelerator model of the grid's places; see
:meth:`scheduler.grid.federation.Grid.supply_cut`), with the grid's name in ``params["grid"]``.
The cluster's live engine leaves these kinds to ``run_grid``
(:func:`twin.live.command_log.drills_pending` skips them).  A bad request (no such grid, place,
link or model, a bad duration) is refused with one ``ValidationError`` and writes nothing.
"""

from __future__ import annotations

import math

from django.core.exceptions import PermissionDenied, ValidationError

from twin.inventory.grid import grid_spec_read
from twin.live.models import Drill, DrillStatus

GRID_DRILL_KINDS = ("grid_region_loss", "grid_wan_cut", "grid_supply_cut")
DRILLS_DENIED = "drills are for staff with the twin.run_drill permission"
DURATION_MAX_S = 30 * 86400.0
"""Longest drill, simulated seconds (none given: until the grid is restarted afresh)."""


def _duration(raw) -> float | None:
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValidationError(f"duration must be a number of seconds, not {raw!r}") from None
    if not (math.isfinite(value) and 0 < value <= DURATION_MAX_S):
        raise ValidationError(f"duration must be in (0, {DURATION_MAX_S:g}] seconds, not {raw}")
    return value


def _model(grid, model) -> str:
    """The catalog name of ``model`` if a place of ``grid`` has it (any case)."""
    try:
        _, plans = grid_spec_read(grid=grid)
    except ValueError as exc:
        raise ValidationError(f"grid {grid.name} cannot run: {exc}") from None
    models = sorted({m.name for plan in plans.values() for m in plan.models})
    text = model.strip().lower() if isinstance(model, str) else None
    found = [m for m in models if m.lower() == text]
    if not found:
        raise ValidationError(f"no place of grid {grid.name} has accelerator model {model!r} "
                              f"(models: {', '.join(models)})")
    return found[0]


def grid_drill_request(*, user, grid, kind: str, place: str = "", a: str = "", b: str = "",
                       model: str = "", duration_s=None) -> Drill:
    """Record a pending grid drill on ``grid`` (an inventory ``Grid``) for its ``run_grid``.

    Raises ``PermissionDenied`` without staff and ``twin.run_drill``, ``ValidationError`` for
    a bad kind, place, link, model or duration; nothing is written then.
    """
    # the rule of twin.control.permissions.can_run_drills (twin.live sits below twin.control)
    if user is None or not (user.is_staff and user.has_perm("twin.run_drill")):
        raise PermissionDenied(DRILLS_DENIED)
    if kind not in GRID_DRILL_KINDS:
        raise ValidationError(f"unknown grid drill {kind!r}; choose one of: "
                              f"{', '.join(GRID_DRILL_KINDS)}")
    duration = _duration(duration_s)
    places = grid.places()
    params = {"grid": grid.name, "duration_s": duration}
    if kind == "grid_region_loss":
        if place not in places:
            raise ValidationError(f"no place {place!r} in grid {grid.name} (places: "
                                  f"{', '.join(places)})")
        target = place
    elif kind == "grid_supply_cut":
        target = _model(grid, model)
    else:
        if not any({w.a, w.b} == {a, b} for w in grid.wan_links.all()):
            raise ValidationError(f"no WAN link joins {a!r} and {b!r} in grid {grid.name}")
        target = f"{a} – {b}"
        params.update(a=a, b=b)
    return Drill.objects.create(kind=kind, target=target[:128], params=params,
                                requested_by=user, status=DrillStatus.PENDING)


def grid_drills_recent(*, grid, limit: int = 10) -> list[Drill]:
    """This grid's latest drills, newest first."""
    drills = list(Drill.objects.filter(kind__in=GRID_DRILL_KINDS, params__grid=grid.name)
                  .select_related("requested_by").order_by("-pk")[:limit])
    for d in drills:  # what the page says of it: its effect, or why it was refused
        out = d.outcome or {}
        d.outcome_text = str(out.get("effect") or out.get("error") or "")
        d.by = d.requested_by.get_username() if d.requested_by else "–"
    return drills
