"""The JSON API under /api/: state, jobs, events, history, drills, racks, nodes, jobs by name.
Views parse and answer; selectors and services do the work."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from scheduler.live import in_ranges
from scheduler.placement_schema import LivePlacement
from twin.api import entity_series
from twin.api import events as event_log
from twin.api.bodies import json_error
from twin.api.history_query import history_query
from twin.inventory import floor
from twin.inventory import selectors as inventory_selectors
from twin.inventory.adapter import EngineIds
from twin.live import history
from twin.live import selectors as live_selectors

PAGE_MAX = 10**9
"""More pages than any event log holds; beyond it the SQL OFFSET would overflow 64 bits."""

NO_FRAME = "the live engine has not published a frame yet"


# ----------------------------------------------------------------- JSON API
@require_GET
def api_inventory(request):
    cluster = live_selectors.cluster_current()
    if cluster is None:
        return json_error("no cluster built yet; run build_cluster", 404)
    return JsonResponse({"cluster": cluster.name, **cluster.summary})


def _live_head(live) -> dict:
    return {"seq": live.seq, "t": live.t_sim, "health": live.health,
            "last_error": live.last_error, "speed": live.speed, "paused": live.paused,
            "updated_at": live.updated_at.isoformat() if live.updated_at else None}


def _live_or_error():
    live = live_selectors.live_state_get()
    if live is None:
        return None, json_error(NO_FRAME, 503, health=None)
    return live, None


@require_GET
def api_state(request):
    live, error = _live_or_error()
    if error:
        return error
    return JsonResponse({**_live_head(live), "frame": live.frame or {}})  # {}: no frame


@require_GET
def api_jobs(request):
    live, error = _live_or_error()
    if error:
        return error
    frame = live.frame
    if frame is None:  # no frame to show (none yet, or the engine lost its state)
        return JsonResponse({**_live_head(live), "jobs": {}, "queue": [], "running_jobs": [],
                             "tenants": [], "mirror_jobs": {}})
    # a mirror's jobs as its scheduler names them (run name -> id, name, user ...; {} else)
    mirror_jobs = (frame.get("mirror") or {}).get("jobs", {})
    return JsonResponse({**_live_head(live), "jobs": frame["jobs"], "queue": frame["queue"],
                         "running_jobs": frame["running_jobs"], "tenants": frame["tenants"],
                         "mirror_jobs": mirror_jobs})


@require_GET
def api_events(request):
    """The stored event log of the engine now running, newest first: ``?kind=`` (a kind of
    ``twin.api.events.KINDS`` or of this log), ``?severity=`` (info, warning, critical: that
    and above), ``?routine=0`` (leave out routine scheduling; shown by default here),
    ``?component=`` (e.g. ``switch 12``), ``?job=``, ``?page=`` (from 1; past the last, the
    last, with ``page_asked``), ``?per_page=`` (1-500, default 100).  A bad filter is a 400."""
    live, error = _live_or_error()
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
    try:
        filters = event_log.event_filters_parse(request.GET, inventory=live.inventory,
                                                routine_default=True)
    except event_log.BadFilter as exc:
        return json_error(str(exc), 400)
    return JsonResponse({**_live_head(live), **event_log.events_page(
        inventory=live.inventory, filters=filters, page=page, per_page=per_page)})


@require_GET
def api_history(request):
    """``?metric=`` of the run now live over ``?range=`` (15m, 1h, 6h, 24h, 7d, 30d, all;
    or ``?last=S``, or ``?from=S&to=S``), in ``?bucket=`` widths (``300``, ``5m``, ``1h``;
    default: as recorded, or the narrowest that keeps it within ``history.MAX_POINTS``
    points), each bucket's mean, min and max (``twin.live.history``).  Simulated time; a
    mirror's is the wall clock.  Without ``metric``: the series this run has.  With
    ``?kind=node|rack|switch|job&id=``: that entity's (``twin.api.entity_series``)."""
    live, error = _live_or_error()
    if error:
        return error
    if "kind" in request.GET or "id" in request.GET:
        try:
            return JsonResponse({**_live_head(live), **entity_series.entity_history_answer(
                request.GET, live=live)})
        except entity_series.EntityError as exc:
            return json_error(str(exc), exc.status)
    metric = request.GET.get("metric", "")[:200]
    if not metric:
        return JsonResponse({**_live_head(live), "metrics": {
            k: {"label": label, "unit": unit}
            for k, (label, unit) in history.known(live.inventory).items()}})
    mirror = (live.frame or {}).get("source") == "mirror"
    try:
        answer = history.series(run=live.inventory, metric=metric, wall_clock=mirror,
                                **history_query(request.GET, now=live.t_sim))
    except ValueError as exc:
        return json_error(str(exc), 400)
    return JsonResponse({**_live_head(live), **answer})


def _live_node(placement: LivePlacement | None, node: int) -> tuple[str, list[str]]:
    """A node's live status (``down``, ``drained``, ``spare`` or ``up``) and the jobs on it,
    from the engine's last placement."""
    if placement is None:
        return "unknown", []
    status = next((k for k in ("down", "drained", "spare") if in_ranges(node, placement[k])),
                  "up")
    jobs = [name for name, job in placement["jobs"].items() if in_ranges(node, job["nodes"])]
    return status, jobs


def _placement() -> LivePlacement | None:
    live = live_selectors.live_state_get()
    return live.placement if live is not None else None


@require_GET
def api_rack(request, index: int):
    """Rack ``index`` (the core's id): its nodes from the inventory with each node's live
    status and jobs, the jobs on the rack, and its live heatmap values."""
    cluster = live_selectors.cluster_current()
    if cluster is None:
        return json_error("no cluster built yet; run build_cluster", 404)
    rack = floor.rack_detail(cluster=cluster, index=index)
    if rack is None:
        return json_error(f"rack {index} does not exist in cluster {cluster.name}", 404)
    live = live_selectors.live_state_get()
    placement = live.placement if live is not None else None
    rack["live"] = floor.rack_live_values(live.frame if live else None, rack["cell"])
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
    cluster = live_selectors.cluster_current()
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
    cluster = live_selectors.cluster_current()
    placement = _placement()
    job = placement["jobs"].get(name) if placement is not None else None
    if job is None:
        return json_error(f"job {name!r} holds no GPUs now (queued, done or unknown)", 404)
    nodes = [n for a, b in job["nodes"] for n in range(a, b + 1)]
    racks = (inventory_selectors.racks_of_engine_nodes(cluster=cluster, nodes=nodes)
             if cluster else [])
    return JsonResponse({"name": name, **job, "node_ids": nodes, "racks": racks})
