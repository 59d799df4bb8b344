"""The drills API: ``GET /api/drills`` (the history, for everyone logged in: what was injected
and its effect) and ``POST /api/drills`` (staff with ``twin.run_drill``; JSON only).  Thin: the
services validate and send (``twin.control.services``)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import JsonResponse
from django.views.decorators.http import require_http_methods

from twin.api.bodies import json_body, json_error
from twin.control import selectors as control_selectors
from twin.control import services
from twin.control.permissions import DRILLS_DENIED, can_run_drills
from twin.inventory.names import Names
from twin.live import selectors as live_selectors

DRILLS_LIMIT = 50
DRILLS_LIMIT_MAX = 200


def _named(names: Names | None, kind: str, target) -> dict | None:
    if names is None or target is None:
        return None
    found = services.drill_target_named(names, kind, target)
    return None if found is None else found.as_json()


def drill_json(drill, *, viewer, names: Names | None = None) -> dict:
    """A drill as the API shows it to ``viewer``: everyone sees what was injected and its
    effect; who asked is shown to staff, and to the requester, only (None otherwise).  With
    ``names``, the target (a unit id) by name (``target_named``) and the unit the engine
    chose for a random one (``chosen_named``)."""
    named = drill.requested_by is not None and (viewer.is_staff
                                                or drill.requested_by_id == viewer.pk)
    chosen = (drill.outcome or {}).get("target")
    return {"id": drill.pk, "kind": drill.kind, "target": drill.target,
            "target_named": _named(names, drill.kind, drill.target),
            "chosen_named": _named(names, drill.kind, chosen),
            "params": drill.params,
            "status": drill.status,
            "requested_by": drill.requested_by.username if named else None,
            "requested_at": drill.requested_at.isoformat(),
            "applied_at_sim": drill.applied_at_sim, "outcome": drill.outcome}


@require_http_methods(["GET", "POST"])
def api_drills(request):
    """GET: recent drills (``?limit=``, newest first). POST: request one (202 when sent)."""
    if request.method == "POST":
        return _api_drill_request(request)
    try:
        limit = int(request.GET.get("limit", DRILLS_LIMIT))
    except ValueError:
        return json_error("limit must be an integer", 400)
    if not 1 <= limit <= DRILLS_LIMIT_MAX:
        return json_error(f"limit must be between 1 and {DRILLS_LIMIT_MAX}", 400)
    names = Names(live_selectors.cluster_current())
    return JsonResponse({"drills": [drill_json(d, viewer=request.user, names=names)
                                    for d in control_selectors.drills_recent(limit)]})


def _api_drill_request(request):
    """Body (``application/json``): ``{"kind": ..., "target": ..., <parameter>: <number>}``."""
    if not can_run_drills(request.user):
        return json_error(DRILLS_DENIED, 403)
    if request.content_type != "application/json":
        return json_error(f"send the drill as application/json, not "
                      f"{request.content_type or 'no Content-Type'}", 415)
    body = json_body(request)
    if isinstance(body, JsonResponse):
        return body
    if not isinstance(body, dict) or not isinstance(body.get("kind"), str):
        return json_error('send a JSON object with a "kind", e.g. {"kind": "node", '
                      '"target": "random"}', 400)
    params = {k: v for k, v in body.items() if k not in ("kind", "target")}
    try:
        drill = services.drill_request(user=request.user, kind=body["kind"],
                                       target=body.get("target", "random"), params=params)
    except PermissionDenied as exc:
        return json_error(str(exc) or "permission denied", 403)
    except ValidationError as exc:
        return json_error("; ".join(exc.messages), 400)
    return JsonResponse({"id": drill.pk, "status": drill.status, "kind": drill.kind,
                         "target": drill.target}, status=202)
