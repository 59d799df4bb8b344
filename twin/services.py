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

from scheduler.control.bounds import drill_params
from scheduler.control.drills import KINDS
from scheduler.control.params import fraction
from scheduler.live import in_ranges
from twin import alerts, history, selectors
from twin import models as m
from twin.broadcast import command_send
from twin.conf import app_setting
from twin.inventory import EngineIds, storage_command

logger = logging.getLogger(__name__)


def _live_ids() -> EngineIds | None:
    """Engine ids of the cluster the live engine runs (``None`` if there is none)."""
    cluster = selectors.cluster_current()
    return None if cluster is None else EngineIds(cluster)


def _engine_tell(command: str, key: str, ids: list, **extra) -> None:
    """Pass an inventory change to the live engine once the transaction commits (rows of a
    cluster the engine does not run have no id and are not sent)."""
    ids = [i for i in ids if i is not None]

    def send() -> None:
        for i in ids:
            try:
                command_send(command, **{key: i}, **extra)
            except Exception:  # the inventory change stands; the engine catches up on restart
                logger.exception("live engine: could not send %s %s", command, i)
    transaction.on_commit(send)


def _audit(user, action: str, targets: list[str], **detail) -> None:
    """One audit entry per changed row: who, what, when."""
    username = getattr(user, "get_username", lambda: "")() if user is not None else ""
    account = user if getattr(user, "pk", None) is not None else None
    m.AuditEntry.objects.bulk_create(
        m.AuditEntry(user=account, username=username, action=action, target=t, detail=detail)
        for t in targets)


def _nodes_to_engine(command: str, rows: list[tuple[int, str]], user, action: str,
                     reason: str = "") -> None:
    ids = _live_ids()
    _audit(user, action, [host for _, host in rows], **({"reason": reason} if reason else {}))
    if ids is not None:
        _engine_tell(command, "node", [ids.node(pk) for pk, _ in rows])


@transaction.atomic
def nodes_drain(*, nodes: QuerySet, reason: str = "drained by operator", user=None) -> int:
    """Take ready nodes out of the schedulable pool; failed nodes stay failed."""
    ready = nodes.filter(status=m.NodeStatus.READY)
    rows = list(ready.order_by("id").values_list("id", "hostname"))
    count = ready.update(status=m.NodeStatus.DRAINED, status_reason=reason)
    _nodes_to_engine("drain_node", rows, user, "node drained", reason)
    return count


@transaction.atomic
def nodes_undrain(*, nodes: QuerySet, user=None) -> int:
    """Return drained nodes to the pool."""
    drained = nodes.filter(status=m.NodeStatus.DRAINED)
    rows = list(drained.order_by("id").values_list("id", "hostname"))
    count = drained.update(status=m.NodeStatus.READY, status_reason="")
    _nodes_to_engine("undrain_node", rows, user, "node undrained")
    return count


@transaction.atomic
def nodes_mark_failed(*, nodes: QuerySet, reason: str = "marked failed by operator",
                      user=None) -> int:
    todo = nodes.exclude(status=m.NodeStatus.FAILED)
    rows = list(todo.order_by("id").values_list("id", "hostname"))
    count = todo.update(status=m.NodeStatus.FAILED, status_reason=reason)
    _nodes_to_engine("node_down", rows, user, "node failed", reason)
    return count


@transaction.atomic
def nodes_mark_repaired(*, nodes: QuerySet, user=None) -> int:
    """Repaired nodes come back ready, with their accelerators."""
    failed = nodes.filter(status=m.NodeStatus.FAILED)
    rows = list(failed.order_by("id").values_list("id", "hostname"))
    count = failed.update(status=m.NodeStatus.READY, status_reason="")
    # their failed accelerators are repaired with them (the engine's node_up covers them)
    m.Accelerator.objects.filter(node_id__in=[pk for pk, _ in rows]).update(
        status=m.AcceleratorStatus.OK)
    _nodes_to_engine("node_up", rows, user, "node repaired")
    return count


@transaction.atomic
def accelerators_set_status(*, accelerators: QuerySet, status: str, user=None) -> int:
    if status not in m.AcceleratorStatus.values:
        raise ValueError(f"unknown accelerator status {status!r}")
    todo = accelerators.exclude(status=status)
    rows = list(todo.order_by("id").values_list("node_id", "index", "serial"))
    count = todo.update(status=status)
    failed = status == m.AcceleratorStatus.FAILED
    _audit(user, "accelerator failed" if failed else "accelerator repaired",
           [serial for *_, serial in rows])
    ids = _live_ids()
    if ids is not None:
        _engine_tell("gpu_down" if failed else "gpu_up", "gpu",
                     [ids.gpu(node, index) for node, index, _ in rows])
    return count


@transaction.atomic
def links_set_status(*, links: QuerySet, status: str, user=None) -> int:
    """Switch-to-switch links go to the engine as links; a NIC link as its GPU's port."""
    if status not in m.LinkStatus.values:
        raise ValueError(f"unknown link status {status!r}")
    todo = links.exclude(status=status)
    rows = list(todo.order_by("id").values_list("id", "node_id", "node_port", "switch__name",
                                                 "peer_switch__name", "node__hostname"))
    count = todo.update(status=status)
    up = status == m.LinkStatus.UP
    _audit(user, "link up" if up else "link down",
           [f"{sw} - {peer or f'{host}:{port}'}" for _, _, port, sw, peer, host in rows])
    ids = _live_ids()
    if ids is not None:
        _engine_tell("link_up" if up else "link_down", "link",
                     [ids.link(pk) for pk, node, *_ in rows if node is None])
        _engine_tell("gpu_up" if up else "gpu_down", "gpu",
                     [ids.gpu(node, port) for _, node, port, *_ in rows if node is not None],
                     nic=True)
    return count


@transaction.atomic
def switches_set_status(*, switches: QuerySet, status: str, user=None) -> int:
    if status not in m.LinkStatus.values:
        raise ValueError(f"unknown switch status {status!r}")
    todo = switches.exclude(status=status)
    rows = list(todo.order_by("index").values_list("index", "name", "cluster_id"))
    count = todo.update(status=status)
    up = status == m.LinkStatus.UP
    _audit(user, "switch up" if up else "switch down", [name for _, name, _ in rows])
    live = selectors.cluster_current()
    if live is not None:
        _engine_tell("switch_up" if up else "switch_down", "switch",
                     [index for index, _, cluster in rows if cluster == live.pk])
    return count


def _up_or_down(rows: QuerySet, status: str, user, what: str) -> tuple[list[int], int]:
    """Set ``status`` (``up`` or ``down``) on the rows that differ and audit each; their ids
    (in id order) and how many changed."""
    if status not in ("up", "down"):
        raise ValueError(f"unknown {what} status {status!r}")
    todo = rows.exclude(status=status)
    changed = list(todo.order_by("id").values_list("id", "name"))
    count = todo.update(status=status)
    _audit(user, f"{what} {status}", [name for _, name in changed])
    return [pk for pk, _ in changed], count


@transaction.atomic
def power_feeds_set_status(*, feeds: QuerySet, status: str, user=None) -> int:
    """A failed feed takes down the nodes of every rack it feeds (in the live engine)."""
    changed, count = _up_or_down(feeds, status, user, "power feed")
    ids = _live_ids()
    if ids is not None:
        racks = m.Rack.objects.filter(power_feed_id__in=changed).order_by("id")
        _engine_tell(f"feed_{status}", "rack",
                     [ids.rack(pk) for pk in racks.values_list("id", flat=True)])
    return count


@transaction.atomic
def cooling_loops_set_status(*, loops: QuerySet, status: str, user=None) -> int:
    """A failed cooling loop throttles the racks it cools (in the live engine)."""
    changed, count = _up_or_down(loops, status, user, "cooling loop")
    ids = _live_ids()
    if ids is not None:
        _engine_tell(f"cooling_{status}", "loop", [ids.cooling_loop(pk) for pk in changed])
    return count


@transaction.atomic
def storage_systems_set_status(*, systems: QuerySet, status: str, factor: float | None = None,
                               user=None) -> int:
    """Mark storage systems up, degraded or down; the live engine's tier follows (see
    :mod:`scheduler.control.storage_status` for what each status does there).

    ``factor`` (degraded only) is the share of bandwidth left, 0 < factor < 1, kept as each
    system's ``degraded_factor``; without it each system keeps its own.  Raises ``ValueError``
    for an unknown status or a bad factor, and nothing changes then.
    """
    if status not in m.StorageStatus.values:
        raise ValueError(f"unknown storage status {status!r}")
    if factor is not None:
        if status != m.StorageStatus.DEGRADED:
            raise ValueError(f"a factor applies to degraded storage only, not to {status}")
        factor = fraction("factor", factor)
    same = {"status": status} if factor is None else {"status": status, "degraded_factor": factor}
    todo = systems.exclude(**same)
    rows = list(todo.order_by("id").values_list("id", "name", "degraded_factor"))
    count = todo.update(**same)
    degraded = status == m.StorageStatus.DEGRADED
    ids = _live_ids()
    for pk, name, own in rows:
        left = factor if factor is not None else own
        _audit(user, f"storage {status}", [name], **({"factor": left} if degraded else {}))
        tier = ids.storage_tier(pk) if ids is not None else None
        if tier is not None:
            command, params = storage_command(tier, status, left)
            _engine_tell(command, "tier", [params.pop("tier")], **params)
    return count


DEMO_ACCOUNTS = (
    ("admin", "superuser: edits inventory in the admin"),
    ("staff", "staff with twin.run_drill: runs drills"),
    ("operator", "view only"),
)


@transaction.atomic
def demo_accounts_seed(*, password: str, reset_passwords: bool = False) -> list[str]:
    """Create the missing demo accounts with ``password``; returns the usernames created.

    An existing account is left alone (its password, its roles) unless ``reset_passwords``:
    an operator who changed a demo password keeps it across ``make run``.
    """
    users = get_user_model()
    drill = Permission.objects.get(codename="run_drill", content_type__app_label="twin")
    created = []
    for username, _ in DEMO_ACCOUNTS:
        user, new = users.objects.get_or_create(username=username)
        if not (new or reset_passwords):
            continue
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

    Raises ``ValidationError`` with a message for the person who asked. Parameters are held
    to the core's documented bounds (``scheduler.control.bounds.DRILL_PARAMS``, the ones the
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


def drill_request(*, user, kind: str, target="random", params: dict | None = None) -> m.Drill:
    """Record a drill (pending) and send it to the live engine, which applies or refuses it.

    Raises ``PermissionDenied`` without ``twin.run_drill`` and ``ValidationError`` for a bad
    kind, target or parameter; nothing is created then.
    """
    _require_drill_permission(user, staff=True)  # the page's rule, for every way in
    _refuse_if_mirroring("drills")
    target, params = drill_validate(kind=kind, target=target, params=params)
    drill = m.Drill.objects.create(kind=kind, target=str(target), params=params,
                                   requested_by=user, status=m.DrillStatus.PENDING)
    transaction.on_commit(lambda: _drill_dispatch(drill, target))
    return drill


def _drill_dispatch(drill: m.Drill, target) -> None:
    try:
        command_send("drill", drill_id=drill.pk, kind=drill.kind, target=target,
                     params=drill.params)
    except Exception:  # the channel layer is down: the engine reads pending drills itself
        logger.warning("could not send drill %s to the engine now; it stays pending and the "
                       "engine picks it up from the database", drill.pk, exc_info=True)


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


def live_state_write(*, seq: int, t_sim: float, frame: dict, health: str, last_error: str,
                     speed: float, paused: bool, inventory: str = "",
                     placement: dict | None = None) -> None:
    """The engine's latest frame and status, in one UPDATE of the single LiveState row."""
    alerts.evaluate(frame=frame, t_sim=t_sim)  # adds frame["alerts"] before it is stored and sent
    fields = {"seq": seq, "t_sim": t_sim, "frame": frame, "health": health,
              "last_error": last_error, "speed": speed, "paused": paused,
              "inventory": inventory, "updated_at": timezone.now()}
    if placement is not None:
        fields["placement"] = placement
    if not m.LiveState.objects.filter(pk=m.LiveState.SINGLETON_PK).update(**fields):
        m.LiveState.objects.update_or_create(pk=m.LiveState.SINGLETON_PK, defaults=fields)
    if inventory and frame.get("util"):
        history.record(run=inventory, t_sim=t_sim, frame=frame)


def live_state_health_set(*, health: str, last_error: str | None = None) -> None:
    fields = {"health": health, "updated_at": timezone.now()}
    if last_error is not None:
        fields["last_error"] = last_error
    if not m.LiveState.objects.filter(pk=m.LiveState.SINGLETON_PK).update(**fields):
        m.LiveState.objects.update_or_create(pk=m.LiveState.SINGLETON_PK, defaults=fields)


def engine_snapshot_save(*, data: bytes, t_sim: float, preset: str, seed: int,
                         inventory: str = "", log_seq: int = 0, keep: int = 3) -> int:
    """Store a pickled engine (``log_seq``: the last logged command in it); only the newest
    ``keep`` snapshots are kept."""
    with transaction.atomic():
        snap = m.EngineSnapshot.objects.create(data=data, t_sim=t_sim, preset=preset, seed=seed,
                                               inventory=inventory, log_seq=log_seq)
        old = list(m.EngineSnapshot.objects.order_by("-id")
                   .values_list("id", flat=True)[keep:])
        if old:
            m.EngineSnapshot.objects.filter(id__in=old).delete()
    return snap.pk


# ----------------------------------------------------------------- the stored event log
def _component(event: dict) -> str:
    if event.get("component"):
        return str(event["component"])[:64]
    for key in ("switch", "link", "node"):
        if event.get(key) is not None:
            return f"{key} {event[key]}"
    return ""


def _jobs(event: dict) -> str:
    names = list(event.get("jobs") or [])
    if event.get("job"):
        names.append(event["job"])
    return "," + ",".join(dict.fromkeys(str(n) for n in names)) + "," if names else ""


def engine_events_store(*, inventory: str, first_seq: int, events: list[dict]) -> int:
    """Keep engine log lines ``first_seq``, ``first_seq + 1``, ...; lines already kept stay."""
    m.EngineEvent.objects.bulk_create(
        (m.EngineEvent(inventory=inventory, seq=first_seq + k, t_sim=float(e.get("t", 0.0)),
                       kind=str(e.get("kind", ""))[:32], component=_component(e),
                       jobs=_jobs(e), text=str(e.get("text", "")))
         for k, e in enumerate(events)), batch_size=1000, ignore_conflicts=True)
    return len(events)


@transaction.atomic
def engine_events_resume(*, inventory: str, have: int) -> int:
    """The engine (built or restored) holds ``have`` log lines: forget kept lines past them
    (a future the restored engine did not live) and return the first line still to keep."""
    kept = m.EngineEvent.objects.filter(inventory=inventory)
    kept.filter(seq__gte=have).delete()
    last = kept.order_by("-seq").values_list("seq", flat=True).first()
    return 0 if last is None else min(last + 1, have)


def node_removal_refusal(*, node: m.Node) -> str | None:
    """Why ``node`` may not be removed now (``None`` if it may): a node in service must be
    drained (or failed) first, and one the live engine still runs a job on must wait."""
    if node.status == m.NodeStatus.READY:
        return (f"{node.hostname} is in service: drain it first (its jobs finish, nothing new "
                "starts on it), then remove it")
    live = selectors.live_state_get()
    cluster = selectors.cluster_current()
    placement = live.placement if live is not None else {}
    if cluster is None or not placement or node.rack.hall.site.cluster_id != cluster.pk:
        return None
    index = EngineIds(cluster).node(node.pk)
    jobs = [name for name, job in placement.get("jobs", {}).items()
            if in_ranges(index, job["nodes"])]
    if jobs:
        return (f"{node.hostname} still runs {', '.join(sorted(jobs)[:5])} in the live engine: "
                "remove it once they have finished")
    return None
