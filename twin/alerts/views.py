"""The alerts page and API: everyone logged in reads; staff acknowledge (audited).

``GET /api/alerts?state=firing|resolved|acknowledged|unacknowledged&severity=&rule=&limit=``
lists alerts newest first; ``POST /api/alerts/<id>/ack`` (staff, ``application/json``, CSRF)
acknowledges one.  The page posts a form with the same effect.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from twin.alerts import rules as alerts
from twin.alerts import selectors
from twin.alerts.models import Alert
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


@require_GET
def alerts_page(request):
    try:
        shown = selectors.alert_list(**_filters(request.GET), limit=LIMIT)
    except ValueError as exc:
        messages.error(request, str(exc))
        shown = selectors.alert_list(limit=LIMIT)
    return render(request, "twin/alerts.html", {
        "alerts": shown, "firing": selectors.alerts_firing_count(),
        "can_ack": request.user.is_staff, "filters": {k: request.GET.get(k, "")[:64]
                                                       for k in ("state", "severity", "rule")},
        "states": STATES, "severities": list(selectors.SEVERITIES)})


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
                         "alerts": [alerts.alert_json(a)
                                    for a in selectors.alert_list(**filters, limit=limit)]})


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
    return JsonResponse(alerts.alert_json(alert))
