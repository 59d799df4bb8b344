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

from scheduler.frame_schema import LivePlacement, StoredFrame
from scheduler.limits.bounds import JOB_PRIORITY
from scheduler.live import in_ranges
from twin.control import actions as services_actions
from twin.inventory import selectors as inventory_selectors
from twin.inventory.adapter import EngineIds
from twin.inventory.models import Accelerator, Cluster, Link, Node, Switch
from twin.live import history
from twin.live import selectors as live_selectors
from twin.live.models import LiveState
from twin.pages import search
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
    """``?q=``: each kind's first hits (prefix match) and how many more."""
    q, groups, error = _search(request)
    if error:
        return JsonResponse({"error": error}, status=400)
    return JsonResponse({"q": q, "limit": search.LIMIT, **search.as_json(groups)})


# ----------------------------------------------------------------- a job
def _node_rows(cluster: Cluster, ids: list[int]) -> list[dict]:
    """Hostname, rack name and rack id of the nodes the engine numbers ``ids``."""
    keys = EngineIds(cluster).node_keys()
    pks = [int(keys[i]) for i in ids if 0 <= i < keys.size]
    rows = dict((r[0], r[1:]) for r in Node.objects.filter(pk__in=pks).values_list(
        "pk", "hostname", "rack_id", "rack__name", "accelerator_count"))
    racks = EngineIds(cluster)
    return [{"id": i, "hostname": rows[pk][0], "rack": racks.rack(rows[pk][1]),
             "rack_name": rows[pk][2], "gpus": rows[pk][3]}
            for i, pk in zip(ids, pks, strict=False) if pk in rows]


def _job_gpus(cluster: Cluster, runs: list[list[int]], nodes: list[dict]) -> list[dict]:
    """The job's GPUs on the listed ``nodes`` (``_node_rows``) as ``host:indices``."""
    ids = EngineIds(cluster)
    keys = ids.node_keys()
    return job_gpu_ranges(runs, [(n["id"], n["hostname"], ids.gpu(int(keys[n["id"]]), 0),
                                  n["gpus"]) for n in nodes])


@require_GET
def job_page(request, name: str):
    live, placement, frame = _live()
    placed = placement["jobs"].get(name) if placement is not None else None
    running = queued = held = None
    if frame is not None:
        running = next((r for r in frame["running_jobs"] if r["name"] == name), None)
        queued = next((r for r in frame["queue"] if r["name"] == name), None)
    if placement is not None:
        held = next((h for h in placement["held"] if h["name"] == name), None)
    timeline = (live_selectors.engine_events_page(inventory=live.inventory, job=name,
                                             per_page=EVENTS_SHOWN)
                if live is not None else {"events": [], "total": 0})
    if (placed is None and running is None and queued is None and held is None
            and not timeline["total"]):
        raise Http404(f"no job {name!r} in the live twin (now or in its event log)")
    cluster = live_selectors.cluster_current()
    nodes, more_nodes, gpu_ranges = [], 0, None
    if placed is not None and cluster is not None:
        ids = [n for a, b in placed["nodes"] for n in range(a, b + 1)]
        nodes = _node_rows(cluster, ids[:NODES_SHOWN])
        more_nodes = max(0, len(ids) - NODES_SHOWN)
        if placed["gpu_runs"] is not None:  # None: the engine did not report which GPUs
            gpu_ranges = _job_gpus(cluster, placed["gpu_runs"], nodes)
    tenant = next((row["tenant"] for row in (placed, running, queued, held)
                   if row is not None and row["tenant"]), None)
    state = (placed["state"] if placed is not None else running["state"] if running is not None
             else "queued" if queued else "held" if held else "not running (done or evicted)")
    recent = services_actions.job_actions_recent(name=name)
    if placed is None and queued is None and held is None and any(
            a["action"] == "cancel" and a["status"] == "applied" for a in recent):
        state = "cancelled"  # by staff: the engine applied it (the placement lists live jobs)
    staff = services_actions.can_act(request.user)
    return render(request, "twin/job.html", {
        "name": name, "state": state, "tenant": tenant, "placed": placed, "running": running,
        "queued": queued, "held": held, "nodes": nodes, "more_nodes": more_nodes,
        "gpu_ranges": gpu_ranges,
        "timeline": timeline, "t": placement["t"] if placement is not None else None,
        "not_reported": NOT_REPORTED,
        "can_act": staff, "priority_bound": JOB_PRIORITY,
        "actions": [a for a, ok in services_actions.ACTION_STATES.items() if state in ok],
        "recent_actions": recent if staff else []})


# ----------------------------------------------------------------- a node
def _live_of(placement: LivePlacement | None, runs: list[list[int]] | None, engine_id: int,
             otherwise: str) -> str:
    """A node's GPU or port, a switch or a link as the placement has it: ``unknown`` before
    any placement, ``not reported`` where the engine did not report ``runs`` (an older
    engine's placement), ``down`` when ``engine_id`` lies in them, else ``otherwise``."""
    if placement is None:
        return "unknown"
    if runs is None:
        return "not reported"
    return "down" if in_ranges(engine_id, runs) else otherwise


@require_GET
def node_page(request, index: int):
    cluster = _cluster()
    node = inventory_selectors.node_by_engine_id(cluster=cluster, index=index)
    if node is None:
        raise Http404(f"node {index} does not exist in cluster {cluster.name}")
    _, placement, frame = _live()
    ids = EngineIds(cluster)
    pk = int(ids.node_keys()[index])
    first_gpu = ids.gpu(pk, 0)
    gpu_live, telemetry_missing, holders_reported = node_gpu_rows(
        placement=placement, frame=frame, cluster=cluster.name, node=index,
        hostname=node["hostname"], model=node["model"], first_gpu=first_gpu,
        n_gpus=node["gpus"],
        nic_gbps=Node.objects.filter(pk=pk).values_list("nic_gbps", flat=True).first())
    live_status = ("unknown" if placement is None else next(
        (k for k in ("down", "drained", "spare") if in_ranges(index, placement[k])), "up"))
    jobs = [] if placement is None else [
        {"name": n, "state": j["state"], "gpus": j["gpus"], "tenant": j["tenant"]}
        for n, j in sorted(placement["jobs"].items()) if in_ranges(index, j["nodes"])]
    gpus_down = placement["gpus_down"] if placement is not None else None
    gpus = [{"index": i, "serial": serial, "status": status, "engine_id": first_gpu + i,
             "live": _live_of(placement, gpus_down, first_gpu + i, live_status),
             "now": gpu_live[i] if 0 <= i < len(gpu_live) else None}
            for i, serial, status in Accelerator.objects.filter(node_id=pk)
            .order_by("index").values_list("index", "serial", "status")]
    links = [{"port": port, "switch": sw, "switch_index": sw_index, "speed": speed,
              "status": status,
              "live": _live_of(placement, gpus_down, first_gpu + port, "up")}
             for port, sw, sw_index, speed, status in Link.objects.filter(node_id=pk)
             .order_by("node_port").values_list("node_port", "switch__name", "switch__index",
                                                "speed_gbps", "status")]
    rack_nodes = [{"id": ids.node(p), "hostname": h, "slot": s} for p, h, s in
                  Node.objects.filter(rack__nodes__pk=pk)
                  .order_by("slot").values_list("pk", "hostname", "slot")]
    return render(request, "twin/node.html", {
        "node": {**node, "id": index}, "live_status": live_status, "jobs": jobs, "gpus": gpus,
        "links": links, "rack_nodes": rack_nodes,
        "t": placement["t"] if placement is not None else None,
        "holders_reported": holders_reported, "telemetry_missing": telemetry_missing,
        "can_act": services_actions.can_act(request.user)})


# ----------------------------------------------------------------- a switch
@require_GET
def switch_page(request, index: int):
    cluster = _cluster()
    switch = Switch.objects.filter(cluster=cluster, index=index).first()
    if switch is None:
        raise Http404(f"switch {index} does not exist in cluster {cluster.name}")
    _, placement, _ = _live()
    ids = EngineIds(cluster)
    down = _live_of(placement, placement and placement["switches_down"], index, "up")
    rows = (Link.objects.filter(switch=switch) | Link.objects.filter(peer_switch=switch))
    links, nodes = [], set()
    for pk, near, near_index, peer, peer_index, node, host, port, speed, status in (
            rows.order_by("id").values_list(
                "id", "switch__name", "switch__index", "peer_switch__name",
                "peer_switch__index", "node_id", "node__hostname", "node_port", "speed_gbps",
                "status")):
        if node is None:
            far, far_index = (peer, peer_index) if near_index == index else (near, near_index)
            engine_link = ids.link(pk)
            live = ("unknown" if engine_link is None else
                    _live_of(placement, placement and placement["links_down"], engine_link, "up"))
            links.append({"pk": pk, "far": far, "switch_index": far_index, "speed": speed,
                          "status": status, "live": live})
        else:
            n = ids.node(node)
            gpu = ids.gpu(node, port)
            nodes.add(n)
            live = _live_of(placement, placement and placement["gpus_down"], gpu, "up")
            links.append({"pk": pk, "far": f"{host}:{port}", "node": n, "port": port,
                          "speed": speed, "status": status, "live": live})
    # A leaf carries the traffic of the jobs on the nodes cabled to it; above the leaves the
    # placement does not say which spine or core ECMP hashes a flow onto.
    crossing = [] if placement is None else sorted(
        name for name, job in placement["jobs"].items()
        if any(in_ranges(n, job["nodes"]) for n in nodes))
    return render(request, "twin/switch.html", {
        "switch": switch, "live_status": down, "links": links, "crossing": crossing,
        "is_leaf": bool(nodes), "t": placement["t"] if placement is not None else None})


# ----------------------------------------------------------------- a tenant
@require_GET
def tenant_page(request, name: str):
    live, placement, frame = _live()
    row = (next((t for t in frame["tenants"] if t["tenant"] == name), None)
           if frame is not None else None)
    metric = f"{history.TENANT_PREFIX}{name}.gpus"
    if row is None and (live is None or metric not in history.known(live.inventory)):
        raise Http404(f"no tenant {name!r} in the live twin")
    running = [] if placement is None else sorted(
        (n, j) for n, j in placement["jobs"].items() if j["tenant"] == name)
    queued = [] if frame is None else [q for q in frame["queue"] if q["tenant"] == name]
    return render(request, "twin/tenant.html", {
        "name": name, "row": row, "metric": metric, "running": running, "queued": queued,
        "share": (row["used_gpus"] / row["quota_gpus"] if row and row["quota_gpus"] else None),
        "t": placement["t"] if placement is not None else None})
