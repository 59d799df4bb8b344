"""Search and the pages of one job, node, switch and tenant: read-only, rendered from the
inventory and the live engine's last placement and frame (``LiveState``), linked to each other
(rack -> node -> GPU -> job -> tenant and back).

Ids in URLs are the core's (``twin.inventory.adapter.EngineIds``): ``/nodes/<id>/`` is the node the
engine numbers ``id``, as in ``/api/nodes/<id>``; ``/switches/<index>/`` a switch's ``index``.
"""

from __future__ import annotations

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from scheduler.frame_schema import StoredFrame
from scheduler.limits.bounds import JOB_PRIORITY
from scheduler.placement_schema import LivePlacement, PlacedJob
from twin.api import events as event_log
from twin.api.events import EventFilters
from twin.control import actions as services_actions
from twin.control import selectors as control_selectors
from twin.inventory import selectors as inventory_selectors
from twin.inventory.models import Cluster
from twin.inventory.names import Named, Names
from twin.live import selectors as live_selectors
from twin.live.models import LiveState
from twin.mirror.node_telemetry import measured_node
from twin.pages import event_rows, search
from twin.pages.columns import job_gpu_ranges, node_gpu_rows

NODES_SHOWN = 200
"""A job's nodes listed on its page; a 12,000-node gang says how many more."""
EVENTS_SHOWN = 100
NOT_REPORTED = "not reported by the live engine"


def _live() -> tuple[LiveState | None, LivePlacement | None, StoredFrame | None]:
    """The live state, its placement and its frame (each ``None`` when there is none)."""
    live = live_selectors.live_state_get()
    if live is None:
        return None, None, None
    return live, live.placement, live.frame


def _cluster() -> Cluster:
    cluster = live_selectors.cluster_current()
    if cluster is None:
        raise Http404("no cluster built yet; run build_cluster")
    return cluster


# ----------------------------------------------------------------- search
def _search(request) -> tuple[str, list[search.Group] | None, str]:
    raw = request.GET.get("q", "")
    try:
        q = search.query_clean(raw)
    except search.SearchError as exc:
        return raw[:search.QUERY_MAX], None, str(exc)
    _, placement, frame = _live()
    return q, search.search(cluster=live_selectors.cluster_current(), placement=placement,
                            frame=frame, q=q), ""


@require_GET
def search_page(request):
    q, groups, error = _search(request)
    return render(request, "twin/search.html",
                  {"q": q, "groups": groups, "error": error,
                   "found": groups is not None and any(g.hits for g in groups)},
                  status=400 if error and "q" in request.GET else 200)


@require_GET
def api_search(request):
    """``?q=``: each kind's first hits (names holding ``q``, and what ``q`` numbers) and how
    many more."""
    q, groups, error = _search(request)
    if error:
        return JsonResponse({"error": error}, status=400)
    return JsonResponse({"q": q, "limit": search.LIMIT, **search.as_json(groups)})


NAMES_MAX = 200
"""Texts one ``/api/names`` request may ask about."""


@require_GET
def api_names(request):
    """``?c=host 100&c=leaf-00010``: the thing each text names (a component text of the log,
    a name, a kind and a name) as ``{kind, id, name, url}``, ``null`` when it names none or
    more than one; what the browser shows the overview's log by."""
    texts = list(dict.fromkeys(request.GET.getlist("c")))[:NAMES_MAX]
    names = Names(live_selectors.cluster_current())
    out = {}
    for text in texts:
        found = names.resolve(text[:search.QUERY_MAX])
        out[text] = found[0].as_json() if len(found) == 1 else None
    return JsonResponse({"names": out})


# ----------------------------------------------------------------- a job
def _job_nodes(cluster: Cluster | None, placed: PlacedJob | None) -> dict:
    """A placed job's first ``NODES_SHOWN`` nodes, how many more, and its GPUs on them
    (``gpu_ranges``: ``None`` when the engine did not report which GPUs it holds)."""
    if placed is None or cluster is None:
        return {"nodes": [], "more_nodes": 0, "gpu_ranges": None}
    shown = inventory_selectors.job_nodes_get(cluster=cluster, runs=placed["nodes"],
                                              shown=NODES_SHOWN)
    return {**shown, "gpu_ranges": None if placed["gpu_runs"] is None
            else job_gpu_ranges(placed["gpu_runs"], shown["nodes"])}


@require_GET
def job_page(request, name: str):
    job = live_selectors.job_live_get(name=name, events_shown=EVENTS_SHOWN)
    if job is None:
        raise Http404(f"no job {name!r} in the live twin (now or in its event log)")
    cluster = live_selectors.cluster_current()
    return render(request, "twin/job.html", {
        "name": name, **job, **_job_nodes(cluster, job["placed"]),
        "timeline_rows": event_rows.named(job["timeline"]["events"], names=Names(cluster),
                                          page_of=name),
        **control_selectors.job_actions_get(name=name, job=job, user=request.user),
        "not_reported": NOT_REPORTED, "priority_bound": JOB_PRIORITY})


# ----------------------------------------------------------------- state, cause, history
HISTORY_SHOWN = 20
"""State changes listed on a node, switch or rack page."""


def _incident_of(frame: StoredFrame | None, *, node: int | None = None,
                 target: tuple[str, int] | None = None) -> dict | None:
    """The open incident (the frame's, worst first) that is about ``target`` (its
    ``target_kind`` and engine ``target_id``) or took ``node`` down; ``None`` when none."""
    incidents = ((frame or {}).get("incidents") or {}).get("open") or []
    for i in incidents:
        if target is not None and (i["target_kind"], i["target_id"]) == target:
            return i
    for i in incidents:
        if node is not None and node in i["nodes"]:
            return i
    return None


def _history(named: Named | None, names: Names) -> dict:
    """The stored log's latest events about ``named`` under every name the core logs it by
    (``host 5``, ``node 5`` ...), newest first, by name and linked."""
    live = live_selectors.live_state_get()
    if live is None or named is None:
        return {"rows": [], "total": 0, "query": ""}
    filters = EventFilters(component=named.name, components=tuple(names.aliases(named)))
    page = event_log.events_page(inventory=live.inventory, filters=filters, page=1,
                                 per_page=HISTORY_SHOWN)
    return {"rows": event_rows.named(page["events"], names=names), "total": page["total"],
            "query": filters.query(routine_default=True)}


def _state(live_status: str, incident: dict | None, history: dict) -> dict:
    """What the page's status line says: the status (its CSS class ``status-<status>``),
    the cause and since (the open incident's, else the latest state change logged) and the
    expected repair (simulated s; ``None``: not known)."""
    latest = history["rows"][0] if history["rows"] and live_status != "up" else None
    if incident is not None:
        return {"status": live_status, "cause": incident["cause"].replace("_", " "),
                "since": incident["since"], "expected_repair": incident["expected_repair"],
                "incident": incident, "drill": incident["drill"]}
    return {"status": live_status, "cause": latest["text"] if latest else "",
            "since": latest["t"] if latest else None, "expected_repair": None,
            "incident": None, "drill": False}


# ----------------------------------------------------------------- a node
@require_GET
def node_page(request, index: int):
    cluster = _cluster()
    detail = inventory_selectors.node_detail_get(cluster=cluster, index=index)
    if detail is None:
        raise Http404(f"node {index} does not exist in cluster {cluster.name}")
    _, placement, frame = _live()
    node = detail["node"]
    now, telemetry_missing, holders_reported = node_gpu_rows(
        placement=placement, frame=frame, cluster=cluster.name, node=index,
        hostname=node["hostname"], model=node["model"], first_gpu=detail["first_gpu"],
        n_gpus=node["gpus"], nic_gbps=detail["nic_gbps"])
    live = live_selectors.node_live_get(placement=placement, index=index,
                                        first_gpu=detail["first_gpu"],
                                        accelerators=detail["accelerators"],
                                        links=detail["links"], now=now)
    names = Names(cluster)
    history = _history(names.node(index), names)
    return render(request, "twin/node.html", {
        "node": node, "rack_nodes": detail["rack_nodes"], **live, "history": history,
        "state": _state(live["live_status"], _incident_of(frame, node=index), history),
        "holders_reported": holders_reported, "telemetry_missing": telemetry_missing,
        "measured": measured_node(node["hostname"], node["gpus"]),
        "can_act": services_actions.can_act(request.user)})


# ----------------------------------------------------------------- a switch
@require_GET
def switch_page(request, index: int):
    cluster = _cluster()
    detail = inventory_selectors.switch_detail_get(cluster=cluster, index=index)
    if detail is None:
        raise Http404(f"switch {index} does not exist in cluster {cluster.name}")
    _, placement, frame = _live()
    live = live_selectors.switch_live_get(placement=placement, index=index,
                                          links=detail["links"])
    names = Names(cluster)
    named = names.switch(index)
    history = _history(named, names)
    position = names.switch_position(index)
    incident = (_incident_of(frame, target=("switch", position))
                if position is not None else None)
    status = live["live_status"]
    if status == "up" and any(link["live"] != "up" for link in live["links"]):
        status = "degraded"
    return render(request, "twin/switch.html", {
        "switch": detail["switch"], **live, "history": history,
        "state": _state(status, incident, history)})


# ----------------------------------------------------------------- a tenant
@require_GET
def tenant_page(request, name: str):
    tenant = live_selectors.tenant_live_get(name=name)
    if tenant is None:
        raise Http404(f"no tenant {name!r} in the live twin")
    return render(request, "twin/tenant.html", {"name": name, **tenant})
