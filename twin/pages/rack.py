"""The page of one rack (``/racks/<id>/``, the core's rack id, as ``/api/racks/<id>``): its
status, its nodes with theirs and the jobs on them, its power and outlet now, the incidents that
involve it, its state changes in the event log, and its history charts.

A rack is ``up`` while all its nodes are, ``down`` when all are out (down or drained),
``degraded`` between; an open incident about the rack itself (its power feed) says why.
"""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from scheduler.live import in_ranges
from scheduler.placement_schema import LivePlacement
from twin.inventory import floor
from twin.inventory.adapter import EngineIds
from twin.inventory.names import Names
from twin.pages.entities import cluster_or_404, live_now
from twin.pages.entity_charts import entity_charts
from twin.pages.entity_incidents import Involves, entity_incidents
from twin.pages.entity_state import incident_of, state_history, state_line

NODE_OUT = ("down", "drained")


def node_live(placement: LivePlacement | None, node: int) -> tuple[str, list[str]]:
    """A node's live status (``unknown``, ``down``, ``drained``, ``spare`` or ``up``) and
    the jobs on it, from the engine's last placement."""
    if placement is None:
        return "unknown", []
    status = next((k for k in ("down", "drained", "spare") if in_ranges(node, placement[k])),
                  "up")
    return status, sorted(n for n, j in placement["jobs"].items() if in_ranges(node, j["nodes"]))


def rack_status(statuses: list[str]) -> str:
    """``up``, ``degraded`` or ``down`` from its nodes' statuses (``unknown`` before any
    placement; a rack with no node is ``up``).

    >>> rack_status(["up", "spare"]), rack_status(["up", "down"]), rack_status(["drained"])
    ('up', 'degraded', 'down')
    """
    if "unknown" in statuses:
        return "unknown"
    out = sum(s in NODE_OUT for s in statuses)
    return "up" if not out else "down" if out == len(statuses) else "degraded"


@require_GET
def rack_page(request, index: int):
    cluster = cluster_or_404()
    rack = floor.rack_detail(cluster=cluster, index=index)
    if rack is None:
        raise Http404(f"rack {index} does not exist in cluster {cluster.name}")
    _, placement, frame = live_now()
    ids = EngineIds(cluster)
    jobs: dict[str, int] = {}
    for node in rack["nodes"]:
        node["id"] = ids.node(node.pop("pk"))
        node["live_status"], node["jobs"] = node_live(placement, node["id"])
        for name in node["jobs"]:
            jobs[name] = jobs.get(name, 0) + 1
    names = Names(cluster)
    history = state_history(names.rack(index), names)
    status = rack_status([n["live_status"] for n in rack["nodes"]])
    involves = Involves(racks=frozenset({index}),
                        nodes=frozenset(n["id"] for n in rack["nodes"]),
                        cooling=frozenset({rack["cooling_loop"]} - {None}))
    return render(request, "twin/rack.html", {
        "rack": rack, "now": floor.rack_live_values(frame, rack["cell"]),
        "jobs": [{"name": n, "nodes_here": k, **{f: placement["jobs"][n][f]
                                                 for f in ("state", "gpus", "tenant")}}
                 for n, k in sorted(jobs.items())],
        "t": placement["t"] if placement is not None else None, "history": history,
        "state": state_line(status, incident_of(frame, target=("rack", index)), history),
        "incidents": entity_incidents(involves),
        "charts": entity_charts(kind="rack", entity_id=index, frame=frame)})
