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
from twin.control import actions as services_actions
from twin.control import selectors as control_selectors
from twin.inventory import selectors as inventory_selectors
from twin.inventory.models import Cluster
from twin.inventory.names import Names
from twin.live import selectors as live_selectors
from twin.live.models import LiveState
from twin.mirror.node_telemetry import measured_node
from twin.pages import event_rows, search
from twin.pages.columns import job_gpu_ranges, node_gpu_rows
from twin.pages.entity_charts import entity_charts
from twin.pages.entity_incidents import Involves, entity_incidents
from twin.pages.entity_state import (
    incident_of,
    job_state,
    state_history,
    state_line,
    tenant_state,
)

NODES_SHOWN = 200
"""A job's nodes listed on its page; a 12,000-node gang says how many more."""
EVENTS_SHOWN = 100
NOT_REPORTED = "not reported by the live engine"


def live_now() -> tuple[LiveState | None, LivePlacement | None, StoredFrame | None]:
    """The live state, its placement and its frame (each ``None`` when there is none)."""
    live = live_selectors.live_state_get()
    if live is None:
        return None, None, None
    return live, live.placement, live.frame


def cluster_or_404() -> Cluster:
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
    _, placement, frame = live_now()
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
    _, _, frame = live_now()
    return render(request, "twin/job.html", {
        "name": name, **job, **_job_nodes(cluster, job["placed"]),
        "timeline_rows": event_rows.named(job["timeline"]["events"], names=Names(cluster),
                                          page_of=name),
        **control_selectors.job_actions_get(name=name, job=job, user=request.user),
        "not_reported": NOT_REPORTED, "priority_bound": JOB_PRIORITY,
        "state_line": job_state(job, frame, name),
        "incidents": entity_incidents(Involves(jobs=frozenset({name}))),
        "charts": entity_charts(kind="job", entity_id=name, frame=frame)})


# ----------------------------------------------------------------- a node
@require_GET
def node_page(request, index: int):
    cluster = cluster_or_404()
    detail = inventory_selectors.node_detail_get(cluster=cluster, index=index)
    if detail is None:
        raise Http404(f"node {index} does not exist in cluster {cluster.name}")
    _, placement, frame = live_now()
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
    history = state_history(names.node(index), names)
    first = detail["first_gpu"]
    involves = Involves(nodes=frozenset({index}), gpus=(first, first + node["gpus"]),
                        racks=frozenset({node["rack"]}),
                        switches=frozenset(link["switch_index"] for link in detail["links"]))
    return render(request, "twin/node.html", {
        "node": node, "rack_nodes": detail["rack_nodes"], **live, "history": history,
        "state": state_line(live["live_status"], incident_of(frame, node=index), history),
        "holders_reported": holders_reported, "telemetry_missing": telemetry_missing,
        "measured": measured_node(node["hostname"], node["gpus"]),
        "can_act": services_actions.can_act(request.user),
        "incidents": entity_incidents(involves),
        "charts": entity_charts(kind="node", entity_id=index, frame=frame)})


# ----------------------------------------------------------------- a switch
@require_GET
def switch_page(request, index: int):
    cluster = cluster_or_404()
    detail = inventory_selectors.switch_detail_get(cluster=cluster, index=index)
    if detail is None:
        raise Http404(f"switch {index} does not exist in cluster {cluster.name}")
    _, placement, frame = live_now()
    live = live_selectors.switch_live_get(placement=placement, index=index,
                                          links=detail["links"])
    names = Names(cluster)
    named = names.switch(index)
    history = state_history(named, names)
    position = names.switch_position(index)
    incident = (incident_of(frame, target=("switch", position))
                if position is not None else None)
    status = live["live_status"]
    if status == "up" and any(link["live"] != "up" for link in live["links"]):
        status = "degraded"
    return render(request, "twin/switch.html", {
        "switch": detail["switch"], **live, "history": history,
        "state": state_line(status, incident, history),
        "incidents": entity_incidents(Involves(
            switches=frozenset({index}), switch_names=frozenset({detail["switch"]["name"]}))),
        "charts": entity_charts(kind="switch", entity_id=index, frame=frame)})


# ----------------------------------------------------------------- a tenant
@require_GET
def tenant_page(request, name: str):
    tenant = live_selectors.tenant_live_get(name=name)
    if tenant is None:
        raise Http404(f"no tenant {name!r} in the live twin")
    jobs = frozenset([n for n, _ in tenant["running"]] + [q["name"] for q in tenant["queued"]])
    incidents = entity_incidents(Involves(jobs=jobs))
    return render(request, "twin/tenant.html", {
        "name": name, **tenant, "incidents": incidents,
        "state": tenant_state(tenant, incidents["open_total"])})
