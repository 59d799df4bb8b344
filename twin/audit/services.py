"""The audit trail: who asked for what, recorded once per action."""

from __future__ import annotations

from twin.audit.models import AuditEntry


def audit_record(user, action: str, targets: list[str], **detail) -> None:
    """One audit entry per changed row: who, what, when."""
    username = getattr(user, "get_username", lambda: "")() if user is not None else ""
    account = user if getattr(user, "pk", None) is not None else None
    AuditEntry.objects.bulk_create(
        AuditEntry(user=account, username=username, action=action, target=t, detail=detail)
        for t in targets)
