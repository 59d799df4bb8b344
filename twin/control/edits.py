"""Writes to the inventory: status edits of nodes, GPUs, links, switches, feeds, cooling and
storage, each audited and told to the live engine."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import QuerySet

from scheduler.limits.checks import fraction
from scheduler.live import in_ranges
from twin.audit.services import audit_record
from twin.inventory.adapter import EngineIds, storage_command
from twin.inventory.models import (
    Accelerator,
    AcceleratorStatus,
    LinkStatus,
    Node,
    NodeStatus,
    Rack,
    StorageStatus,
)
from twin.live import selectors as live_selectors
from twin.live.broadcast import command_send

logger = logging.getLogger(__name__)


def _live_ids() -> EngineIds | None:
    """Engine ids of the cluster the live engine runs (``None`` if there is none)."""
    cluster = live_selectors.cluster_current()
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


def _nodes_to_engine(command: str, rows: list[tuple[int, str]], user, action: str,
                     reason: str = "") -> None:
    ids = _live_ids()
    audit_record(user, action, [host for _, host in rows], **({"reason": reason} if reason else {}))
    if ids is not None:
        _engine_tell(command, "node", [ids.node(pk) for pk, _ in rows])


@transaction.atomic
def nodes_drain(*, nodes: QuerySet, reason: str = "drained by operator", user=None) -> int:
    """Take ready nodes out of the schedulable pool; failed nodes stay failed."""
    ready = nodes.filter(status=NodeStatus.READY)
    rows = list(ready.order_by("id").values_list("id", "hostname"))
    count = ready.update(status=NodeStatus.DRAINED, status_reason=reason)
    _nodes_to_engine("drain_node", rows, user, "node drained", reason)
    return count


@transaction.atomic
def nodes_undrain(*, nodes: QuerySet, user=None) -> int:
    """Return drained nodes to the pool."""
    drained = nodes.filter(status=NodeStatus.DRAINED)
    rows = list(drained.order_by("id").values_list("id", "hostname"))
    count = drained.update(status=NodeStatus.READY, status_reason="")
    _nodes_to_engine("undrain_node", rows, user, "node undrained")
    return count


@transaction.atomic
def nodes_mark_failed(*, nodes: QuerySet, reason: str = "marked failed by operator",
                      user=None) -> int:
    todo = nodes.exclude(status=NodeStatus.FAILED)
    rows = list(todo.order_by("id").values_list("id", "hostname"))
    count = todo.update(status=NodeStatus.FAILED, status_reason=reason)
    _nodes_to_engine("node_down", rows, user, "node failed", reason)
    return count


@transaction.atomic
def nodes_mark_repaired(*, nodes: QuerySet, user=None) -> int:
    """Repaired nodes come back ready, with their accelerators."""
    failed = nodes.filter(status=NodeStatus.FAILED)
    rows = list(failed.order_by("id").values_list("id", "hostname"))
    count = failed.update(status=NodeStatus.READY, status_reason="")
    # their failed accelerators are repaired with them (the engine's node_up covers them)
    Accelerator.objects.filter(node_id__in=[pk for pk, _ in rows]).update(
        status=AcceleratorStatus.OK)
    _nodes_to_engine("node_up", rows, user, "node repaired")
    return count


@transaction.atomic
def accelerators_set_status(*, accelerators: QuerySet, status: str, user=None) -> int:
    if status not in AcceleratorStatus.values:
        raise ValueError(f"unknown accelerator status {status!r}")
    todo = accelerators.exclude(status=status)
    rows = list(todo.order_by("id").values_list("node_id", "index", "serial"))
    count = todo.update(status=status)
    failed = status == AcceleratorStatus.FAILED
    audit_record(user, "accelerator failed" if failed else "accelerator repaired",
           [serial for *_, serial in rows])
    ids = _live_ids()
    if ids is not None:
        _engine_tell("gpu_down" if failed else "gpu_up", "gpu",
                     [ids.gpu(node, index) for node, index, _ in rows])
    return count


@transaction.atomic
def links_set_status(*, links: QuerySet, status: str, user=None) -> int:
    """Switch-to-switch links go to the engine as links; a NIC link as its GPU's port."""
    if status not in LinkStatus.values:
        raise ValueError(f"unknown link status {status!r}")
    todo = links.exclude(status=status)
    rows = list(todo.order_by("id").values_list("id", "node_id", "node_port", "switch__name",
                                                 "peer_switch__name", "node__hostname"))
    count = todo.update(status=status)
    up = status == LinkStatus.UP
    audit_record(user, "link up" if up else "link down",
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
    if status not in LinkStatus.values:
        raise ValueError(f"unknown switch status {status!r}")
    todo = switches.exclude(status=status)
    rows = list(todo.order_by("index").values_list("index", "name", "cluster_id"))
    count = todo.update(status=status)
    up = status == LinkStatus.UP
    audit_record(user, "switch up" if up else "switch down", [name for _, name, _ in rows])
    live = live_selectors.cluster_current()
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
    audit_record(user, f"{what} {status}", [name for _, name in changed])
    return [pk for pk, _ in changed], count


@transaction.atomic
def power_feeds_set_status(*, feeds: QuerySet, status: str, user=None) -> int:
    """A failed feed takes down the nodes of every rack it feeds (in the live engine)."""
    changed, count = _up_or_down(feeds, status, user, "power feed")
    ids = _live_ids()
    if ids is not None:
        racks = Rack.objects.filter(power_feed_id__in=changed).order_by("id")
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
    if status not in StorageStatus.values:
        raise ValueError(f"unknown storage status {status!r}")
    if factor is not None:
        if status != StorageStatus.DEGRADED:
            raise ValueError(f"a factor applies to degraded storage only, not to {status}")
        factor = fraction("factor", factor)
    same = {"status": status} if factor is None else {"status": status, "degraded_factor": factor}
    todo = systems.exclude(**same)
    rows = list(todo.order_by("id").values_list("id", "name", "degraded_factor"))
    count = todo.update(**same)
    degraded = status == StorageStatus.DEGRADED
    ids = _live_ids()
    for pk, name, own in rows:
        left = factor if factor is not None else own
        audit_record(user, f"storage {status}", [name], **({"factor": left} if degraded else {}))
        tier = ids.storage_tier(pk) if ids is not None else None
        if tier is not None:
            command, params = storage_command(tier, status, left)
            _engine_tell(command, "tier", [params.pop("tier")], **params)
    return count


def node_removal_refusal(*, node: Node) -> str | None:
    """Why ``node`` may not be removed now (``None`` if it may): a node in service must be
    drained (or failed) first, and one the live engine still runs a job on must wait."""
    if node.status == NodeStatus.READY:
        return (f"{node.hostname} is in service: drain it first (its jobs finish, nothing new "
                "starts on it), then remove it")
    live = live_selectors.live_state_get()
    cluster = live_selectors.cluster_current()
    placement = live.placement if live is not None else None
    if cluster is None or placement is None or node.rack.hall.site.cluster_id != cluster.pk:
        return None
    index = EngineIds(cluster).node(node.pk)
    jobs = [name for name, job in placement["jobs"].items()
            if in_ranges(index, job["nodes"])]
    if jobs:
        return (f"{node.hostname} still runs {', '.join(sorted(jobs)[:5])} in the live engine: "
                "remove it once they have finished")
    return None
