"""Writes to the inventory, called by the admin, views and commands.

Each takes keyword-only arguments and plain values or querysets; none holds view logic.
"""

from __future__ import annotations

import logging
import math
import re

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from scheduler.control.drills import KINDS
from twin import models as m
from twin.broadcast import command_send

logger = logging.getLogger(__name__)


def _engine_node_ids(nodes) -> list[int]:
    """The core's node ids of inventory nodes (``build_cluster`` names them ``<name>-nNNNNNN``);
    nodes added by hand have none and are not known to the live engine."""
    ids = []
    for hostname in nodes:
        head, sep, tail = hostname.rpartition("-n")
        if sep and tail.isdigit():
            ids.append(int(tail))
    return ids


def _engine_tell(command: str, key: str, ids: list[int]) -> None:
    """Pass an inventory change to the live engine once the transaction commits."""
    def send() -> None:
        for i in ids:
            try:
                command_send(command, **{key: i})
            except Exception:  # the inventory change stands; the engine catches up on restart
                logger.exception("live engine: could not send %s %s", command, i)
    transaction.on_commit(send)


def nodes_drain(*, nodes: QuerySet, reason: str = "drained by operator") -> int:
    """Take ready nodes out of the schedulable pool; failed nodes stay failed."""
    hosts = list(nodes.filter(status=m.NodeStatus.READY).values_list("hostname", flat=True))
    count = nodes.filter(status=m.NodeStatus.READY).update(
        status=m.NodeStatus.DRAINED, status_reason=reason)
    _engine_tell("drain_node", "node", _engine_node_ids(hosts))
    return count


def nodes_undrain(*, nodes: QuerySet) -> int:
    """Return drained nodes to the pool."""
    hosts = list(nodes.filter(status=m.NodeStatus.DRAINED).values_list("hostname", flat=True))
    count = nodes.filter(status=m.NodeStatus.DRAINED).update(
        status=m.NodeStatus.READY, status_reason="")
    _engine_tell("undrain_node", "node", _engine_node_ids(hosts))
    return count


@transaction.atomic
def nodes_mark_failed(*, nodes: QuerySet, reason: str = "marked failed by operator") -> int:
    hosts = list(nodes.exclude(status=m.NodeStatus.FAILED).values_list("hostname", flat=True))
    count = nodes.exclude(status=m.NodeStatus.FAILED).update(
        status=m.NodeStatus.FAILED, status_reason=reason)
    _engine_tell("node_down", "node", _engine_node_ids(hosts))
    return count


@transaction.atomic
def nodes_mark_repaired(*, nodes: QuerySet) -> int:
    """Repaired nodes come back ready, with their accelerators."""
    hosts = list(nodes.filter(status=m.NodeStatus.FAILED).values_list("hostname", flat=True))
    count = nodes.filter(status=m.NodeStatus.FAILED).update(
        status=m.NodeStatus.READY, status_reason="")
    m.Accelerator.objects.filter(node__in=nodes).update(status=m.AcceleratorStatus.OK)
    _engine_tell("node_up", "node", _engine_node_ids(hosts))
    return count


def accelerators_set_status(*, accelerators: QuerySet, status: str) -> int:
    if status not in m.AcceleratorStatus.values:
        raise ValueError(f"unknown accelerator status {status!r}")
    return accelerators.exclude(status=status).update(status=status)


def links_set_status(*, links: QuerySet, status: str) -> int:
    if status not in m.LinkStatus.values:
        raise ValueError(f"unknown link status {status!r}")
    return links.exclude(status=status).update(status=status)


def switches_set_status(*, switches: QuerySet, status: str) -> int:
    if status not in m.LinkStatus.values:
        raise ValueError(f"unknown switch status {status!r}")
    changed = list(switches.exclude(status=status).values_list("index", flat=True))
    count = switches.exclude(status=status).update(status=status)
    _engine_tell("switch_up" if status == m.LinkStatus.UP else "switch_down", "switch", changed)
    return count


DEMO_ACCOUNTS = (
    ("admin", "superuser: edits inventory in the admin"),
    ("staff", "staff with twin.run_drill: runs drills"),
    ("operator", "view only"),
)


@transaction.atomic
def demo_accounts_seed(*, password: str) -> list[str]:
    """Create or reset the demo accounts; idempotent."""
    users = get_user_model()
    drill = Permission.objects.get(codename="run_drill", content_type__app_label="twin")
    created = []
    for username, _ in DEMO_ACCOUNTS:
        user, new = users.objects.get_or_create(username=username)
        user.is_superuser = username == "admin"
        user.is_staff = username in ("admin", "staff")
        user.set_password(password)
        user.save()
        if username == "staff":
            user.user_permissions.add(drill)
        if new:
            created.append(username)
    return created


# ----------------------------------------------------------------- drills and the live engine
DRILL_PARAMS: dict[str, dict[str, float | None]] = {
    "storage_slowdown": {"factor": 1.0, "duration_s": None},
    "inference_surge": {"factor": None, "duration_s": None},
    "power_cap": {"fraction": 1.0},
}
"""Parameters each drill kind takes, with an upper bound (None: any positive number)."""

DRILL_TARGET_ALL = frozenset({"inference_surge", "power_cap"})
DRILL_TARGET_NAMED = frozenset({"supply_cut", "cloud_region_loss", "inference_surge"})
_TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/+-]{0,127}$")
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


def _drill_target(kind: str, target) -> int | str:
    """``random``, ``all`` (where the kind allows it), a unit id, or a name."""
    if isinstance(target, bool) or not isinstance(target, int | str):
        raise ValidationError(f"target must be 'random', an id or a name, not {target!r}")
    if isinstance(target, str):
        target = target.strip() or "random"
        if target.isdigit():
            target = int(target)
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

    Raises ``ValidationError`` with a message for the person who asked. Targets that name
    something (an id out of range, an unknown pool) are checked by the engine, which refuses
    the drill with its own message.
    """
    if kind not in KINDS:
        raise ValidationError(f"unknown drill {kind!r}; choose one of: {', '.join(KINDS)}")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ValidationError("drill parameters must be an object of name: number")
    allowed = DRILL_PARAMS.get(kind, {})
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) or "no parameters"
        raise ValidationError(f"a {kind} drill takes {takes}; not {', '.join(unknown)}")
    clean = {name: _positive_number(name, value, allowed[name]) for name, value in params.items()}
    return _drill_target(kind, target), clean


def drill_request(*, user, kind: str, target="random", params: dict | None = None) -> m.Drill:
    """Record a drill (pending) and send it to the live engine, which applies or refuses it.

    Raises ``PermissionDenied`` without ``twin.run_drill`` and ``ValidationError`` for a bad
    kind, target or parameter; nothing is created then.
    """
    _require_drill_permission(user)
    target, params = drill_validate(kind=kind, target=target, params=params)
    drill = m.Drill.objects.create(kind=kind, target=str(target), params=params,
                                   requested_by=user, status=m.DrillStatus.PENDING)
    transaction.on_commit(lambda: _drill_dispatch(drill, target))
    return drill


def _drill_dispatch(drill: m.Drill, target) -> None:
    try:
        command_send("drill", drill_id=drill.pk, kind=drill.kind, target=target,
                     params=drill.params)
    except Exception as exc:  # the channel layer is down: say so on the drill's row
        logger.exception("could not send drill %s to the engine", drill.pk)
        drill.status = m.DrillStatus.REFUSED
        drill.outcome = {"error": f"the live engine could not be reached: {exc}"}
        m.Drill.objects.filter(pk=drill.pk).update(status=drill.status, outcome=drill.outcome)


def drill_claim(*, drill_id: int) -> bool:
    """True if the drill exists and is still pending (the engine applies each drill once)."""
    return m.Drill.objects.filter(pk=drill_id, status=m.DrillStatus.PENDING).exists()


def drill_outcome_record(*, drill_id: int, applied: bool, outcome: dict,
                         t_sim: float | None) -> int:
    """The engine's verdict on a pending drill: applied (with its effect) or refused."""
    return m.Drill.objects.filter(pk=drill_id, status=m.DrillStatus.PENDING).update(
        status=m.DrillStatus.APPLIED if applied else m.DrillStatus.REFUSED,
        outcome=outcome, applied_at_sim=t_sim if applied else None)


def engine_speed_set(*, user, factor) -> float:
    """Set the live engine's speed-up (simulated seconds per wall second, 0 < x <= 10,000)."""
    _require_drill_permission(user, staff=True)
    factor = _positive_number("factor", factor, SPEED_MAX)
    command_send("speed", factor=factor)
    return factor


def engine_pause(*, user, paused) -> bool:
    """Pause (``paused=True``) or resume the live engine."""
    _require_drill_permission(user, staff=True)
    if not isinstance(paused, bool):
        raise ValidationError(f"paused must be true or false, not {paused!r}")
    command_send("pause" if paused else "resume")
    return paused


def live_state_write(*, seq: int, t_sim: float, frame: dict, health: str, last_error: str,
                     speed: float, paused: bool) -> None:
    """The engine's latest frame and status, in one UPDATE of the single LiveState row."""
    fields = {"seq": seq, "t_sim": t_sim, "frame": frame, "health": health,
              "last_error": last_error, "speed": speed, "paused": paused,
              "updated_at": timezone.now()}
    if not m.LiveState.objects.filter(pk=m.LiveState.SINGLETON_PK).update(**fields):
        m.LiveState.objects.update_or_create(pk=m.LiveState.SINGLETON_PK, defaults=fields)


def live_state_health_set(*, health: str, last_error: str | None = None) -> None:
    fields = {"health": health, "updated_at": timezone.now()}
    if last_error is not None:
        fields["last_error"] = last_error
    if not m.LiveState.objects.filter(pk=m.LiveState.SINGLETON_PK).update(**fields):
        m.LiveState.objects.update_or_create(pk=m.LiveState.SINGLETON_PK, defaults=fields)


def engine_snapshot_save(*, data: bytes, t_sim: float, preset: str, seed: int,
                         inventory: str = "", keep: int = 3) -> int:
    """Store a pickled engine; only the newest ``keep`` snapshots are kept."""
    with transaction.atomic():
        snap = m.EngineSnapshot.objects.create(data=data, t_sim=t_sim, preset=preset, seed=seed,
                                               inventory=inventory)
        old = list(m.EngineSnapshot.objects.order_by("-id")
                   .values_list("id", flat=True)[keep:])
        if old:
            m.EngineSnapshot.objects.filter(id__in=old).delete()
    return snap.pk
