"""Staff actions: the job page's and node page's buttons, the drills page's End button and the
JSON API (``POST /api/jobs/<name>/actions``, ``POST /api/drills/<id>/end``).

Thin: each view parses the request and calls ``twin.control.actions``, which decides.  Forms
answer with a message and a redirect to the page they came from; the API with JSON, 202 when
the command is on its way to the live engine, 400, 403, 404, 415 or 503 otherwise.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied, ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from twin.api.bodies import json_object
from twin.control import actions
from twin.inventory import selectors as inventory_selectors
from twin.live import selectors as live_selectors


def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _message(exc: Exception) -> str:
    return "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)


def _form_priority(raw: str | None):
    """The form's priority as an integer (the service holds it to its bound), or the raw text
    when it is not one, so that the service names it in its refusal."""
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return raw


# ----------------------------------------------------------------- a job
@require_POST
def job_action_form(request, name: str):
    """The job page's buttons: ``action`` (and ``priority``)."""
    if not actions.can_act(request.user):
        raise PermissionDenied(actions.ACTIONS_DENIED)
    action = request.POST.get("action", "")
    try:
        done = actions.job_action_request(user=request.user, job=name, action=action,
                                          priority=_form_priority(request.POST.get("priority")))
    except ObjectDoesNotExist as exc:
        raise Http404(str(exc)) from None
    except (ValidationError, actions.EngineUnreachable) as exc:
        messages.error(request, f"{action or 'action'} of {name} refused: {_message(exc)}")
    else:
        extra = f" (priority {done['priority']})" if "priority" in done else ""
        messages.success(request, f"{action}{extra} of {name} sent to the live engine by "
                                  f"{request.user.get_username()}; the page follows its state.")
    return redirect(reverse("job", args=[name]))


def _json_body(request) -> dict | JsonResponse:
    return json_object(request, shape='send a JSON object, e.g. {"action": "hold"}')


@require_POST
def api_job_action(request, name: str):
    """Body: ``{"action": "hold"|"release"|"cancel"|"requeue"|"priority", "priority": N}``."""
    if not actions.can_act(request.user):
        return _error(actions.ACTIONS_DENIED, 403)
    body = _json_body(request)
    if isinstance(body, JsonResponse):
        return body
    unknown = sorted(set(body) - {"action", "priority"})
    if unknown:
        return _error(f"unknown field(s): {', '.join(unknown)}; send action (and priority)", 400)
    try:
        done = actions.job_action_request(user=request.user, job=name,
                                          action=body.get("action"),
                                          priority=body.get("priority"))
    except PermissionDenied as exc:
        return _error(str(exc), 403)
    except ObjectDoesNotExist as exc:
        return _error(str(exc), 404)
    except ValidationError as exc:
        return _error(_message(exc), 400)
    except actions.EngineUnreachable as exc:
        return _error(str(exc), 503)
    return JsonResponse({**done, "status": "sent"}, status=202)


# ----------------------------------------------------------------- a node
def _node_rows(index: int):
    cluster = live_selectors.cluster_current()
    if cluster is None:
        raise Http404("no cluster built yet; run build_cluster")
    nodes = inventory_selectors.node_rows_by_engine_id(cluster=cluster, index=index)
    if nodes is None:
        raise Http404(f"node {index} does not exist in cluster {cluster.name}")
    return nodes


@require_POST
def node_action_form(request, index: int, action: str):
    """The node page's Drain and Resume buttons."""
    if not actions.can_act(request.user):
        raise PermissionDenied(actions.ACTIONS_DENIED)
    nodes = _node_rows(index)
    service = {"drain": actions.node_drain_request, "resume": actions.node_resume_request}
    try:
        service[action](user=request.user, nodes=nodes)
    except ValidationError as exc:
        messages.error(request, f"{action} refused: {_message(exc)}")
    else:
        messages.success(request, f"{nodes.first().hostname}: {action} sent to the live engine "
                                  f"by {request.user.get_username()}.")
    return redirect(reverse("node", args=[index]))


# ----------------------------------------------------------------- a drill
@require_POST
def drill_end_form(request, pk: int):
    """The drills page's End button."""
    if not actions.can_act(request.user):
        raise PermissionDenied(actions.ACTIONS_DENIED)
    try:
        drill = actions.drill_end_request(user=request.user, drill_id=pk)
    except ObjectDoesNotExist as exc:
        raise Http404(str(exc)) from None
    except (ValidationError, actions.EngineUnreachable) as exc:
        messages.error(request, f"Drill #{pk} not ended: {_message(exc)}")
    else:
        messages.success(request, f"Drill #{drill.pk} ({drill.kind.replace('_', ' ')}) ended by "
                                  f"{request.user.get_username()}: the engine reverts it now.")
    return redirect("drills")


@require_POST
def api_drill_end(request, pk: int):
    """No body: end drill ``pk`` now (202), as if its duration had run out."""
    if not actions.can_act(request.user):
        return _error(actions.ACTIONS_DENIED, 403)
    try:
        drill = actions.drill_end_request(user=request.user, drill_id=pk)
    except ObjectDoesNotExist as exc:
        return _error(str(exc), 404)
    except ValidationError as exc:
        return _error(_message(exc), 400)
    except actions.EngineUnreachable as exc:
        return _error(str(exc), 503)
    return JsonResponse({"id": drill.pk, "kind": drill.kind, "status": "ending",
                         "ended": drill.outcome["ended"]}, status=202)
