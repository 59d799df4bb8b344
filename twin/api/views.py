"""The JSON API under /api/: state, jobs, events, history, drills, racks, nodes, jobs by name. Views parse and answer; selectors and services do the work."""

from __future__ import annotations

import json
import math

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import JsonResponse
from django.views.decorators.http import require_GET, require_http_methods

from scheduler.live import in_ranges
from twin.api.bodies import json_error
from twin.control import selectors as control_selectors
from twin.control import services
from twin.control.permissions import DRILLS_DENIED, can_run_drills
from twin.inventory import floor
from twin.inventory import selectors as inventory_selectors
from twin.inventory.adapter import EngineIds
from twin.live import history
from twin.live import selectors as live_selectors

DRILLS_LIMIT = 50

DRILLS_LIMIT_MAX = 200

PAGE_MAX = 10**9
"""More pages than any event log holds; beyond it the SQL OFFSET would overflow 64 bits."""

NO_FRAME = "the live engine has not published a frame yet"


# ----------------------------------------------------------------- JSON API
@require_GET
def api_inventory(request):
    cluster = inventory_selectors.cluster_current()
    if cluster is None:
        return json_error("no cluster built yet; run build_cluster", 404)
    return JsonResponse({"cluster": cluster.name, **cluster.summary})


def _live_head(live) -> dict:
    return {"seq": live.seq, "t": live.t_sim, "health": live.health,
            "last_error": live.last_error, "speed": live.speed, "paused": live.paused,
            "updated_at": live.updated_at.isoformat() if live.updated_at else None}


def _live_orjson_error():
    live = live_selectors.live_state_get()
    if live is None:
        return None, json_error(NO_FRAME, 503, health=None)
    return live, None


@require_GET
def api_state(request):
    live, error = _live_orjson_error()
    if error:
        return error
    return JsonResponse({**_live_head(live), "frame": live.frame})


@require_GET
def api_jobs(request):
    live, error = _live_orjson_error()
    if error:
        return error
    frame = live.frame
    return JsonResponse({**_live_head(live), "jobs": frame.get("jobs", {}),
                         "queue": frame.get("queue", []),
                         "running_jobs": frame.get("running_jobs", []),
                         "tenants": frame.get("tenants", [])})


@require_GET
def api_events(request):
    """The stored event log of the engine now running, newest first: ``?kind=``,
    ``?component=`` (e.g. ``switch 12``), ``?job=``, ``?page=`` (from 1), ``?per_page=``
    (1-500, default 100)."""
    live, error = _live_orjson_error()
    if error:
        return error
    try:
        page = int(request.GET.get("page", 1))
        per_page = int(request.GET.get("per_page", 100))
    except ValueError:
        return json_error("page and per_page must be integers", 400)
    if not 1 <= page <= PAGE_MAX or not 1 <= per_page <= live_selectors.EVENTS_PER_PAGE_MAX:
        return json_error(f"page must be between 1 and {PAGE_MAX} and per_page between 1 and "
                      f"{live_selectors.EVENTS_PER_PAGE_MAX}", 400)
    filters = {k: request.GET.get(k, "")[:200] for k in ("kind", "component", "job")}
    return JsonResponse({**_live_head(live), **live_selectors.engine_events_page(
        inventory=live.inventory, page=page, per_page=per_page, **filters)})


@require_GET
def api_history(request):
    """``?metric=`` of the run now live between ``?from=`` and ``?to=`` (simulated seconds;
    default the whole run; ``?last=S``: the last S seconds), averaged into ``?step=`` seconds
    (``twin.live.history``).  Without ``metric``: the series this run has."""
    live, error = _live_orjson_error()
    if error:
        return error
    metric = request.GET.get("metric", "")[:200]
    if not metric:
        return JsonResponse({**_live_head(live), "metrics": {
            k: {"label": label, "unit": unit}
            for k, (label, unit) in history.known(live.inventory).items()}})
    try:
        numbers = {k: _finite(request.GET[k], k) for k in ("from", "to", "last", "step")
                   if request.GET.get(k, "") != ""}
        if "last" in numbers:
            if "from" in numbers:
                raise ValueError("give 'from' or 'last', not both")
            numbers["from"] = live.t_sim - numbers.pop("last")
        if numbers.get("step", 1.0) <= 0:
            raise ValueError("step must be a positive number of seconds")
        answer = history.series(run=live.inventory, metric=metric, t_from=numbers.get("from"),
                                t_to=numbers.get("to"), step=numbers.get("step"))
    except ValueError as exc:
        return json_error(str(exc), 400)
    return JsonResponse({**_live_head(live), **answer})


def _finite(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {text[:40]!r}") from None
    if not math.isfinite(value) or abs(value) > 1e12:
        raise ValueError(f"{name} must be a finite number of seconds within ±1e12")
    return value


def drill_json(drill, *, viewer) -> dict:
    """A drill as the API shows it to ``viewer``: everyone sees what was injected and its
    effect; who asked is shown to staff, and to the requester, only (None otherwise)."""
    named = drill.requested_by is not None and (viewer.is_staff
                                                or drill.requested_by_id == viewer.pk)
    return {"id": drill.pk, "kind": drill.kind, "target": drill.target, "params": drill.params,
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
    return JsonResponse({"drills": [drill_json(d, viewer=request.user)
                                    for d in control_selectors.drills_recent(limit)]})


def _api_drill_request(request):
    """Body (``application/json``): ``{"kind": ..., "target": ..., <parameter>: <number>}``."""
    if not can_run_drills(request.user):
        return json_error(DRILLS_DENIED, 403)
    if request.content_type != "application/json":
        return json_error(f"send the drill as application/json, not "
                      f"{request.content_type or 'no Content-Type'}", 415)
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        return json_error(f"the request body is not valid JSON: {exc}", 400)
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


def _live_node(placement: dict, node: int) -> tuple[str, list[str]]:
    """A node's live status (``down``, ``drained``, ``spare`` or ``up``) and the jobs on it,
    from the engine's last placement."""
    if not placement:
        return "unknown", []
    status = next((k for k in ("down", "drained", "spare")
                   if in_ranges(node, placement.get(k, []))), "up")
    jobs = [name for name, job in placement.get("jobs", {}).items()
            if in_ranges(node, job["nodes"])]
    return status, jobs


def _placement() -> dict:
    live = live_selectors.live_state_get()
    return live.placement if live is not None else {}


@require_GET
def api_rack(request, index: int):
    """Rack ``index`` (the core's id): its nodes from the inventory with each node's live
    status and jobs, the jobs on the rack, and its live heatmap values."""
    cluster = inventory_selectors.cluster_current()
    if cluster is None:
        return json_error("no cluster built yet; run build_cluster", 404)
    rack = floor.rack_detail(cluster=cluster, index=index)
    if rack is None:
        return json_error(f"rack {index} does not exist in cluster {cluster.name}", 404)
    live = live_selectors.live_state_get()
    placement = live.placement if live is not None else {}
    rack["live"] = floor.rack_live_values(live.frame if live else {}, rack["cell"])
    ids = EngineIds(cluster)
    jobs: dict[str, int] = {}
    for node in rack["nodes"]:
        node["id"] = ids.node(node.pop("pk"))
        node["live_status"], node["jobs"] = _live_node(placement, node["id"])
        for name in node["jobs"]:
            jobs[name] = jobs.get(name, 0) + 1
    rack["jobs"] = [{"name": name, "nodes_here": n,
                     **{k: placement["jobs"][name][k] for k in ("state", "gpus")}}
                    for name, n in sorted(jobs.items())]
    return JsonResponse(rack)


@require_GET
def api_node(request, index: int):
    """Node ``index`` (the core's id): its inventory row, operator and live status, its rack
    and the jobs on it."""
    cluster = inventory_selectors.cluster_current()
    if cluster is None:
        return json_error("no cluster built yet; run build_cluster", 404)
    node = inventory_selectors.node_by_engine_id(cluster=cluster, index=index)
    if node is None:
        return json_error(f"node {index} does not exist in cluster {cluster.name}", 404)
    live_status, jobs = _live_node(_placement(), index)
    return JsonResponse({**node, "id": index, "live_status": live_status, "jobs": jobs})


@require_GET
def api_job(request, name: str):
    """Job ``name`` as placed now: state, GPUs, nodes (core ids) and racks."""
    cluster = inventory_selectors.cluster_current()
    job = _placement().get("jobs", {}).get(name)
    if job is None:
        return json_error(f"job {name!r} holds no GPUs now (queued, done or unknown)", 404)
    nodes = [n for a, b in job["nodes"] for n in range(a, b + 1)]
    racks = inventory_selectors.racks_of_engine_nodes(cluster=cluster, nodes=nodes) if cluster else []
    return JsonResponse({"name": name, **job, "node_ids": nodes, "racks": racks})
