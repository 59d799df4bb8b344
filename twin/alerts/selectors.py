"""Reads of the alerts: the alerts matching a filter, newest first, how many fire, the active
silences, and each alert as the page and the API show it (values with units, entities by name
with links, silenced or not).

The alerts page and ``/api/alerts`` (``twin.alerts.views``) parse the request and call these."""

from __future__ import annotations

from django.utils import timezone

from twin.alerts import silences as silencing
from twin.alerts.entities import entities_fallback
from twin.alerts.figures import duration_text, value_text
from twin.alerts.models import Alert, AlertRule, Silence

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
    qs = Alert.objects.select_related("rule", "acknowledged_by", "silence")
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


def alert_get(*, pk: int) -> Alert | None:
    return Alert.objects.select_related("rule").filter(pk=pk).first()


def silences_shown(*, limit: int = 50) -> list[Silence]:
    """Silences active now or starting later, soonest ending first."""
    return list(Silence.objects.filter(ends_at__gt=timezone.now()).order_by("ends_at")[:limit])


def rule_text(rule: AlertRule) -> str:
    """``"> 1.00 (ratio of quota) for 30 min"``: the rule's condition with units."""
    text = f"{rule.comparison} {value_text(rule.figure, rule.threshold)}"
    if rule.window_s:
        text += f" within {duration_text(rule.window_s)}"
    if rule.for_s:
        text += f" for {duration_text(rule.for_s)}"
    return text


def alerts_shown(alerts: list[Alert]) -> list[dict]:
    """Each alert as the page and ``/api/alerts`` show it."""
    active = silencing.silences_active()
    out = []
    for a in alerts:
        rule = a.rule
        full = {"alertname": rule.name, "severity": rule.severity, **(a.labels or {})}
        silence = a.silence if a.silence is not None and a.silence.ends_at > timezone.now() \
            else silencing.silence_matching(full, active)
        out.append({
            "id": a.pk, "rule": rule.name, "figure": rule.figure,
            "comparison": rule.comparison, "threshold": rule.threshold,
            "condition": rule_text(rule), "description": rule.description,
            "runbook_url": rule.runbook_url, "severity": rule.severity, "state": a.state,
            "labels": a.labels, "entities": a.entities or entities_fallback(a.labels),
            "value": a.value, "value_text": value_text(rule.figure, a.value),
            "t_sim": a.t_sim, "started_at": a.started_at.isoformat(),
            "resolved_at": a.resolved_at and a.resolved_at.isoformat(),
            "t_sim_resolved": a.t_sim_resolved,
            "acknowledged_by": a.acknowledged_by.get_username() if a.acknowledged_by else None,
            "acknowledged_at": a.acknowledged_at and a.acknowledged_at.isoformat(),
            "notified": a.notified,
            "silenced": None if silence is None else {
                "id": silence.pk, "until": silence.ends_at.isoformat(),
                "by": silence.created_by_name, "comment": silence.comment},
            "alert": a})
    return out


def alerts_json(alerts: list[Alert]) -> list[dict]:
    """Alerts as ``/api/alerts`` gives them."""
    return [{k: v for k, v in shown.items() if k != "alert"} for shown in alerts_shown(alerts)]
