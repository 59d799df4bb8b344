"""The incidents page, an incident's page and ``/api/incidents``: what is broken, since when,
what it hurts (:mod:`twin.pages.incident_rows`).

``GET /api/incidents?state=open|resolved&q=`` lists them (open worst first, then resolved
newest first; 400 for a bad filter); ``GET /api/incidents/<id>`` one with its timeline;
``POST /api/incidents/<id>/ack`` (staff, ``application/json``, CSRF) acknowledges one, as the
pages' Acknowledge button does with a form.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from twin.api.bodies import json_error, json_object
from twin.pages import incident_rows
from twin.pages.incident_rows import ACK_DENIED, STATES, IncidentFilterError


def _params(request) -> dict:
    return {"state": request.GET.get("state", ""), "q": request.GET.get("q", "")}


@require_GET
def incidents_page(request):
    params = _params(request)
    error = ""
    try:
        shown = incident_rows.incidents_get(**params)
    except IncidentFilterError as exc:
        error = str(exc)
        shown = incident_rows.incidents_get()
    return render(request, "twin/incidents.html", {
        **shown, "error": error, "states": STATES, "can_ack": request.user.is_staff,
        "filters": {k: v[:incident_rows.QUERY_MAX] for k, v in params.items()}},
        status=400 if error else 200)


@require_GET
def incident_page(request, pk: int):
    incident = incident_rows.incident_get(incident_id=pk)
    if incident is None:
        raise Http404(f"incident {pk} is not in the live twin (open, or among the last "
                      "resolved ones)")
    return render(request, "twin/incident.html", {"incident": incident,
                                                  "can_ack": request.user.is_staff})


@require_POST
def incident_ack_form(request, pk: int):
    """The pages' Acknowledge button (a form POST with the CSRF token)."""
    try:
        incident_rows.incident_acknowledge(incident_id=pk, user=request.user)
        messages.success(request, f"Incident {pk} acknowledged.")
    except PermissionDenied:
        raise PermissionDenied(ACK_DENIED) from None
    except (LookupError, ValueError) as exc:
        messages.error(request, str(exc))
    return redirect("incident", pk=pk)


@require_GET
def api_incidents(request):
    try:
        return JsonResponse(incident_rows.incidents_get(**_params(request)))
    except IncidentFilterError as exc:
        return json_error(str(exc), 400)


@require_GET
def api_incident(request, pk: int):
    incident = incident_rows.incident_get(incident_id=pk)
    if incident is None:
        return json_error(f"incident {pk} is not in the live twin", 404)
    return JsonResponse(incident)


@require_POST
def api_incident_ack(request, pk: int):
    """Body: ``{}`` (``application/json``); 200 with the incident, 409 if acknowledged."""
    if not request.user.is_staff:
        return json_error(ACK_DENIED, 403)
    body = json_object(request, what="the acknowledgement", shape="send {}")
    if isinstance(body, JsonResponse):
        return body
    try:
        return JsonResponse(incident_rows.incident_acknowledge(incident_id=pk,
                                                               user=request.user))
    except LookupError as exc:
        return json_error(str(exc), 404)
    except ValueError as exc:
        return json_error(str(exc), 409)
