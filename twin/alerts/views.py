"""The alerts page and API: everyone logged in reads; staff acknowledge and silence (audited).

``GET /api/alerts?state=firing|resolved|acknowledged|unacknowledged&severity=&rule=&limit=``
lists alerts newest first (values with units, labels as named entities with links, silenced
or not) and the active silences; ``POST /api/alerts/<id>/ack`` (staff, ``application/json``,
CSRF) acknowledges one.  The page posts forms with the same effect, and staff's forms to
create a silence (``POST /alerts/silences``) and to end one (``POST
/alerts/silences/<id>/expire``).  ``/alerts/runbooks/`` shows ``docs/runbooks.md``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from twin.alerts import rules as alerts
from twin.alerts import runbooks, selectors
from twin.alerts import silences as silencing
from twin.alerts.models import Alert, Silence
from twin.alerts.selectors import STATES

LIMIT = 100
LIMIT_MAX = 1000
ACK_DENIED = "acknowledging alerts is for staff"


def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _filters(params) -> dict:
    """The ``state``, ``severity`` and ``rule`` filters of ``params`` (a QueryDict)."""
    return {"state": params.get("state", "").strip(),
            "severity": params.get("severity", "").strip(),
            "rule": params.get("rule", "").strip()[:64]}


SILENCE_HOURS = 4
"""A new silence's default length (the form's ``until``)."""


def _silence_prefill(request) -> str:
    """``?silence=<alert id>``: the alert's labels as the silence form's matchers."""
    raw = request.GET.get("silence", "")
    alert = selectors.alert_get(pk=int(raw)) if raw.isdigit() and len(raw) < 19 else None
    if alert is None:
        return ""
    pairs = {"alertname": alert.rule.name, **(alert.labels or {})}
    return ", ".join(f"{k}={v}" for k, v in pairs.items())


@require_GET
def alerts_page(request):
    try:
        shown = selectors.alert_list(**_filters(request.GET), limit=LIMIT)
    except ValueError as exc:
        messages.error(request, str(exc))
        shown = selectors.alert_list(limit=LIMIT)
    until = timezone.localtime(timezone.now() + timedelta(hours=SILENCE_HOURS))
    return render(request, "twin/alerts.html", {
        "alerts": selectors.alerts_shown(shown), "firing": selectors.alerts_firing_count(),
        "can_ack": request.user.is_staff, "filters": {k: request.GET.get(k, "")[:64]
                                                       for k in ("state", "severity", "rule")},
        "states": STATES, "severities": list(selectors.SEVERITIES),
        "silences": selectors.silences_shown(), "silence_matchers": _silence_prefill(request),
        "silence_until": until.strftime("%Y-%m-%dT%H:%M")})


def _until(raw: str) -> datetime:
    """The form's ``until`` (``YYYY-MM-DDTHH:MM``, the site's time zone)."""
    try:
        when = datetime.fromisoformat(raw.strip()[:32])
    except ValueError:
        raise ValueError(f"until must be a date and time (YYYY-MM-DDTHH:MM), not {raw[:40]!r}"
                         ) from None
    return timezone.make_aware(when) if timezone.is_naive(when) else when


@require_POST
def silence_create_form(request):
    """The page's silence form: matchers, until, why (staff; the CSRF token)."""
    if not request.user.is_staff:
        raise PermissionDenied(silencing.SILENCE_DENIED)
    try:
        silence = silencing.silence_create(
            user=request.user, matchers=silencing.matchers_parse(request.POST.get("matchers", "")),
            ends_at=_until(request.POST.get("until", "")),
            comment=request.POST.get("comment", "")[:2000])
        messages.success(request, f"Silence {silence.pk} holds notifications of matching alerts "
                                  f"until {timezone.localtime(silence.ends_at):%Y-%m-%d %H:%M}.")
    except ValueError as exc:
        messages.error(request, f"No silence created: {exc}")
    return redirect("alerts")


@require_POST
def silence_expire_form(request, pk: int):
    if not request.user.is_staff:
        raise PermissionDenied(silencing.SILENCE_DENIED)
    try:
        silencing.silence_expire(user=request.user, silence_id=pk)
        messages.success(request, f"Silence {pk} ended.")
    except Silence.DoesNotExist:
        messages.error(request, f"silence {pk} does not exist")
    except ValueError as exc:
        messages.error(request, str(exc))
    return redirect("alerts")


@require_GET
def runbooks_page(request):
    """``docs/runbooks.md``, one section per shipped rule (anchors are the rules' names)."""
    sections = runbooks.runbook_sections()
    if sections is None:
        raise Http404("docs/runbooks.md is not installed with this copy of the twin")
    return render(request, "twin/runbooks.html", {"sections": sections})


@require_POST
def alert_ack_form(request, pk: int):
    """The page's Acknowledge button (a form POST with the CSRF token)."""
    try:
        alert = alerts.alert_acknowledge(alert_id=pk, user=request.user)
        messages.success(request, f"Alert {alert.pk} ({alert.rule.name}) acknowledged.")
    except PermissionDenied:
        raise PermissionDenied(ACK_DENIED) from None
    except Alert.DoesNotExist:
        messages.error(request, f"alert {pk} does not exist")
    except ValueError as exc:
        messages.error(request, str(exc))
    return redirect("alerts")


@require_GET
def api_alerts(request):
    filters = _filters(request.GET)
    error = selectors.alert_filter_problem(state=filters["state"],
                                           severity=filters["severity"])
    if error:
        return _error(error, 400)
    try:
        limit = int(request.GET.get("limit", LIMIT))
    except ValueError:
        return _error("limit must be an integer", 400)
    if not 1 <= limit <= LIMIT_MAX:
        return _error(f"limit must be between 1 and {LIMIT_MAX}", 400)
    return JsonResponse({"firing": selectors.alerts_firing_count(),
                         "alerts": selectors.alerts_json(
                             selectors.alert_list(**filters, limit=limit)),
                         "silences": [{"id": s.pk, "matchers": s.matchers,
                                       "starts_at": s.starts_at.isoformat(),
                                       "ends_at": s.ends_at.isoformat(),
                                       "by": s.created_by_name, "comment": s.comment}
                                      for s in selectors.silences_shown()]})


@require_http_methods(["POST"])
def api_alert_ack(request, pk: int):
    """Body: ``{}`` (``application/json``); 200 with the alert, 409 if acknowledged already."""
    if not request.user.is_staff:
        return _error(ACK_DENIED, 403)
    if request.content_type != "application/json":
        return _error(f"send application/json, not {request.content_type or 'no Content-Type'}",
                      415)
    try:
        alert = alerts.alert_acknowledge(alert_id=pk, user=request.user)
    except Alert.DoesNotExist:
        return _error(f"alert {pk} does not exist", 404)
    except ValueError as exc:
        return _error(str(exc), 409)
    return JsonResponse(selectors.alerts_json([alert])[0])
