"""Reads of the alerts: the alerts matching a filter, newest first, and how many fire.

The alerts page and ``/api/alerts`` (``twin.alerts.views``) parse the request and call these."""

from __future__ import annotations

from twin.alerts.models import Alert, AlertRule

STATES = ("firing", "resolved", "acknowledged", "unacknowledged")
"""The ``state`` filters: an alert's state, or whether staff acknowledged it."""
SEVERITIES = tuple(AlertRule.Severity.values)


def alert_filter_problem(*, state: str = "", severity: str = "") -> str | None:
    """Why ``state`` or ``severity`` filters nothing (``None`` when each is empty or known)."""
    if state and state not in STATES:
        return f"state must be one of {', '.join(STATES)}, not {state[:40]!r}"
    if severity and severity not in SEVERITIES:
        return f"severity must be one of {', '.join(SEVERITIES)}, not {severity[:40]!r}"
    return None


def alert_list(*, state: str = "", severity: str = "", rule: str = "",
               limit: int) -> list[Alert]:
    """The newest ``limit`` alerts in ``state`` (one of :data:`STATES`), of rules of
    ``severity`` and of the rule named ``rule`` (each: any when empty), with their rule and
    who acknowledged them.  ``ValueError`` for an unknown state or severity
    (:func:`alert_filter_problem`)."""
    problem = alert_filter_problem(state=state, severity=severity)
    if problem is not None:
        raise ValueError(problem)
    qs = Alert.objects.select_related("rule", "acknowledged_by")
    if state in ("firing", "resolved"):
        qs = qs.filter(state=state)
    elif state == "acknowledged":
        qs = qs.filter(acknowledged_at__isnull=False)
    elif state == "unacknowledged":
        qs = qs.filter(acknowledged_at__isnull=True)
    if severity:
        qs = qs.filter(rule__severity=severity)
    if rule:
        qs = qs.filter(rule__name=rule)
    return list(qs[:limit])


def alerts_firing_count() -> int:
    """How many alerts fire now."""
    return Alert.objects.filter(state=Alert.State.FIRING).count()
