"""Writes to the inventory, called by the admin, views and commands.

Each takes keyword-only arguments and plain values or querysets; none holds view logic.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import transaction
from django.db.models import QuerySet

from twin import models as m


def nodes_drain(*, nodes: QuerySet, reason: str = "drained by operator") -> int:
    """Take ready nodes out of the schedulable pool; failed nodes stay failed."""
    return nodes.filter(status=m.NodeStatus.READY).update(
        status=m.NodeStatus.DRAINED, status_reason=reason)


def nodes_undrain(*, nodes: QuerySet) -> int:
    """Return drained nodes to the pool."""
    return nodes.filter(status=m.NodeStatus.DRAINED).update(
        status=m.NodeStatus.READY, status_reason="")


@transaction.atomic
def nodes_mark_failed(*, nodes: QuerySet, reason: str = "marked failed by operator") -> int:
    return nodes.exclude(status=m.NodeStatus.FAILED).update(
        status=m.NodeStatus.FAILED, status_reason=reason)


@transaction.atomic
def nodes_mark_repaired(*, nodes: QuerySet) -> int:
    """Repaired nodes come back ready, with their accelerators."""
    count = nodes.filter(status=m.NodeStatus.FAILED).update(
        status=m.NodeStatus.READY, status_reason="")
    m.Accelerator.objects.filter(node__in=nodes).update(status=m.AcceleratorStatus.OK)
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
    return switches.exclude(status=status).update(status=status)


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
