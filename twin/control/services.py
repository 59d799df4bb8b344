"""Staff commands to the live engine: drills (validated against the one bounds table, audited,
sent), speed and pause."""

from __future__ import annotations

import logging
import math
import re

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from scheduler.control.drills import KINDS
from scheduler.limits.bounds import drill_params
from twin import app_setting
from twin.inventory.names import Named, Names
from twin.live import selectors as live_selectors
from twin.live.broadcast import command_send
from twin.live.models import Drill, DrillStatus

logger = logging.getLogger(__name__)

# ----------------------------------------------------------------- drills and the live engine
DRILL_TARGET_ALL = frozenset({"inference_surge", "power_cap"})

DRILL_TARGET_NAMED = frozenset({"supply_cut", "cloud_region_loss", "inference_surge"})

_TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/+-]{0,127}$")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/+ –-]{0,127}$")
"""A unit's name or component text (``leaf-00010``, ``host:3``, ``host 100``, ``a – b``)."""

SPEED_MAX = 10_000.0
"""Fastest speed-up an operator may set, simulated seconds per wall second."""


def _require_drill_permission(user, *, staff: bool = False) -> None:
    if user is None or not user.is_authenticated or not user.has_perm("twin.run_drill"):
        raise PermissionDenied("running drills or steering the engine needs the "
                               "twin.run_drill permission")
    if staff and not user.is_staff:
        raise PermissionDenied("only staff may steer the live engine")


def _positive_number(name: str, value, upper: float | None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise ValidationError(f"{name} must be a positive number, not {value!r}")
    if upper is not None and value > upper:
        raise ValidationError(f"{name} must be at most {upper:g}, not {value!r}")
    return float(value)


DRILL_UNITS = {"accelerator": "gpu", "node": "node", "nic": "nic", "optical_link": "link",
               "leaf_switch": "leaf", "spine_switch": "spine", "rack_power": "rack",
               "cooling": "cooling", "power_cap": "rack"}
"""What a drill kind's unit id numbers (a kind of :data:`twin.inventory.names.COMPONENT_KINDS`):
its target may be given by that thing's name."""


def drill_target_named(names: Names, kind: str, target) -> Named | None:
    """The thing a drill's target (a unit id, as the engine takes it) is, by name."""
    unit = DRILL_UNITS.get(kind)
    if unit is None or target is None or not str(target).isdigit():
        return None
    return names.of(unit, int(target))


def _drill_unit(kind: str, target: str) -> int:
    """The unit id that ``target`` (a name: ``leaf-00010``, a hostname, ``host:3``, a rack or
    cooling loop name, or a component text such as ``host 100``) names for a ``kind`` drill."""
    names = Names(live_selectors.cluster_current())
    unit = names.unit(DRILL_UNITS[kind], target)
    if unit is None:
        found = names.resolve(target)
        what = (f"{target!r} is a {found[0].kind}, not a {kind.replace('_', ' ')} target"
                if found else f"{target!r} names nothing in this cluster")
        raise ValidationError(f"a {kind} drill targets 'random', a non-negative id or the "
                              f"name of its {DRILL_UNITS[kind]}: {what}")
    return unit


def _drill_target(kind: str, target) -> int | str:
    """``random``, ``all`` (where the kind allows it), a unit id, or a name (of the unit, for
    kinds of :data:`DRILL_UNITS`: sent to the engine as the unit's id)."""
    if isinstance(target, bool) or not isinstance(target, int | str):
        raise ValidationError(f"target must be 'random', an id or a name, not {target!r}")
    if isinstance(target, str):
        target = target.strip() or "random"
        if target.isdigit():
            target = int(target)
        elif target not in ("random", "all") and kind in DRILL_UNITS:
            if not _UNIT_NAME.match(target):
                raise ValidationError(f"{target[:40]!r} is not a valid name")
            target = _drill_unit(kind, target)
    if isinstance(target, int):
        if target < 0:
            raise ValidationError(f"target must be a non-negative id, not {target}")
        if kind in DRILL_TARGET_NAMED - {"inference_surge"}:
            raise ValidationError(f"a {kind} drill targets a name, not an id")
        return target
    if target == "random":
        return target
    if target == "all":
        if kind not in DRILL_TARGET_ALL:
            raise ValidationError(f"a {kind} drill cannot target 'all'")
        return target
    if kind not in DRILL_TARGET_NAMED:
        raise ValidationError(f"a {kind} drill targets 'random' or a non-negative id, "
                              f"not {target!r}")
    if not _TARGET_NAME.match(target):
        raise ValidationError(f"{target!r} is not a valid name")
    return target


def drill_validate(*, kind, target, params) -> tuple[int | str, dict]:
    """Check a drill request; returns the normalised target and parameters.

    Raises ``ValidationError`` with a message for the person who asked. Parameters are held
    to the core's documented bounds (``scheduler.limits.bounds.DRILL_PARAMS``, the ones the
    engine checks again). Targets that name something (an id out of range, an unknown pool)
    are checked by the engine, which refuses the drill with its own message.
    """
    if kind not in KINDS:
        raise ValidationError(f"unknown drill {kind!r}; choose one of: {', '.join(KINDS)}")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ValidationError("drill parameters must be an object of name: number")
    try:
        clean = drill_params(kind, params)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    return _drill_target(kind, target), clean


def _refuse_if_mirroring(what: str) -> None:
    if app_setting("SOURCE") == "mirror":
        raise ValidationError(f"the live twin mirrors a real cluster, so {what} cannot be set "
                              "on it: run a what-if from now instead")


def drill_request(*, user, kind: str, target="random", params: dict | None = None) -> Drill:
    """Record a drill (pending) and send it to the live engine, which applies or refuses it.

    Raises ``PermissionDenied`` without ``twin.run_drill`` and ``ValidationError`` for a bad
    kind, target or parameter; nothing is created then.
    """
    _require_drill_permission(user, staff=True)  # the page's rule, for every way in
    _refuse_if_mirroring("drills")
    target, params = drill_validate(kind=kind, target=target, params=params)
    drill = Drill.objects.create(kind=kind, target=str(target), params=params,
                                   requested_by=user, status=DrillStatus.PENDING)
    transaction.on_commit(lambda: _drill_dispatch(drill, target))
    return drill


def _drill_dispatch(drill: Drill, target) -> None:
    try:
        command_send("drill", drill_id=drill.pk, kind=drill.kind, target=target,
                     params=drill.params)
    except Exception:  # the channel layer is down: the engine reads pending drills itself
        logger.warning("could not send drill %s to the engine now; it stays pending and the "
                       "engine picks it up from the database", drill.pk, exc_info=True)






def engine_speed_set(*, user, factor) -> float:
    """Set the live engine's speed-up (simulated seconds per wall second, 0 < x <= 10,000)."""
    _require_drill_permission(user, staff=True)
    _refuse_if_mirroring("the speed")
    factor = _positive_number("factor", factor, SPEED_MAX)
    command_send("speed", factor=factor)
    return factor


def engine_pause(*, user, paused) -> bool:
    """Pause (``paused=True``) or resume the live engine."""
    _require_drill_permission(user, staff=True)
    _refuse_if_mirroring("pausing")
    if not isinstance(paused, bool):
        raise ValidationError(f"paused must be true or false, not {paused!r}")
    command_send("pause" if paused else "resume")
    return paused
