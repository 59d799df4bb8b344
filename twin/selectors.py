"""Reads of the inventory for views and commands."""

from __future__ import annotations

from django.db.models import Count, Sum

from twin import models as m
from twin.conf import app_setting


def cluster_current() -> m.Cluster | None:
    """The cluster the twin shows and runs: ``CLUSTERTWIN_CLUSTER`` if set (``None`` if no
    cluster has that name), else the most recently built one."""
    name = app_setting("CLUSTER")
    if name:
        return m.Cluster.objects.filter(name=name).first()
    return m.Cluster.objects.order_by("-created_at", "-id").first()


def inventory_summary(*, cluster: m.Cluster) -> dict:
    """Counts for the home page, computed by the database (a handful of queries)."""
    nodes = m.Node.objects.filter(rack__hall__site__cluster=cluster)
    by_status = dict(nodes.values_list("status").annotate(n=Count("id")).order_by())
    by_model = list(nodes.values("accelerator_model__name", "accelerator_model__vendor")
                    .annotate(nodes=Count("id"), gpus=Sum("accelerator_count"))
                    .order_by("accelerator_model__name"))
    switches = dict(m.Switch.objects.filter(cluster=cluster).values_list("tier")
                    .annotate(n=Count("id")).order_by())
    links = dict(m.Link.objects.filter(cluster=cluster).values_list("status")
                 .annotate(n=Count("id")).order_by())
    failed_gpus = m.Accelerator.objects.filter(
        node__rack__hall__site__cluster=cluster, status=m.AcceleratorStatus.FAILED).count()
    return {
        "cluster": cluster,
        "by_model": by_model,
        "gpus": sum(r["gpus"] or 0 for r in by_model),
        "nodes": sum(by_status.values()),
        "nodes_by_status": {s: by_status.get(s, 0) for s in m.NodeStatus.values},
        "failed_gpus": failed_gpus,
        "racks": m.Rack.objects.filter(hall__site__cluster=cluster).count(),
        "switches": {t: switches.get(t, 0) for t in m.SwitchTier.values},
        "links": links,
        "storage": list(m.StorageSystem.objects.filter(cluster=cluster).order_by("tier")),
        "cloud_pools": list(m.CloudPool.objects.filter(cluster=cluster)
                            .select_related("accelerator_model")),
        "it_power_kw": cluster.summary.get("it_power_kw"),
    }


def live_state_get() -> m.LiveState | None:
    """The live engine's latest frame and status (None before the engine first ran)."""
    return m.LiveState.objects.filter(pk=m.LiveState.SINGLETON_PK).first()


def live_state_version() -> tuple | None:
    """``(seq, health, updated_at)`` of the live state, without reading its frame."""
    return (m.LiveState.objects.filter(pk=m.LiveState.SINGLETON_PK)
            .values_list("seq", "health", "updated_at").first())


def drills_recent(limit: int = 50) -> list[m.Drill]:
    """The newest drills first, with who asked for them."""
    return list(m.Drill.objects.select_related("requested_by")
                .order_by("-requested_at", "-id")[:limit])


def engine_snapshot_latest(*, preset: str, seed: int) -> m.EngineSnapshot | None:
    """The newest stored engine of this preset and seed (its ``inventory`` says which
    inventory it ran)."""
    return m.EngineSnapshot.objects.filter(preset=preset, seed=seed).order_by("-id").first()


EVENTS_PER_PAGE_MAX = 500


def engine_events_page(*, inventory: str, kind: str = "", component: str = "", job: str = "",
                       page: int = 1, per_page: int = 100) -> dict:
    """Stored engine events, newest first, filtered by kind, component (exact) and job; a page
    of them with the totals."""
    rows = m.EngineEvent.objects.filter(inventory=inventory)
    if kind:
        rows = rows.filter(kind=kind)
    if component:
        rows = rows.filter(component=component)
    if job:
        rows = rows.filter(jobs__contains=f",{job},")
    total = rows.count()
    pages = max(1, -(-total // per_page))
    start = (page - 1) * per_page
    events = [{"seq": e.seq, "t": e.t_sim, "kind": e.kind, "component": e.component,
               "jobs": [j for j in e.jobs.split(",") if j], "text": e.text}
              for e in rows.order_by("-seq")[start:start + per_page]]
    return {"events": events, "page": page, "pages": pages, "per_page": per_page,
            "total": total}


def node_by_engine_id(*, cluster: m.Cluster, index: int) -> dict | None:
    """The node the core numbers ``index`` (its position in id order), as plain values."""
    if index < 0:
        return None
    row = (m.Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
           .values("id", "hostname", "rack_id", "rack__name", "slot", "accelerator_model__name",
                   "accelerator_count", "status", "status_reason", "is_spare",
                   "nvlink_domain")[index:index + 1])
    row = next(iter(row), None)
    if row is None:
        return None
    racks = list(m.Rack.objects.filter(hall__site__cluster=cluster).order_by("pk")
                 .values_list("pk", flat=True))
    return {"hostname": row["hostname"], "rack": racks.index(row["rack_id"]),
            "rack_name": row["rack__name"], "slot": row["slot"],
            "model": row["accelerator_model__name"], "gpus": row["accelerator_count"],
            "status": row["status"], "reason": row["status_reason"], "spare": row["is_spare"],
            "nvlink_domain": row["nvlink_domain"]}


def racks_of_engine_nodes(*, cluster: m.Cluster, nodes: list[int]) -> list[dict]:
    """The racks (core ids and names) holding the nodes the core numbers ``nodes``."""
    node_racks = list(m.Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
                      .values_list("rack_id", flat=True))
    racks = list(m.Rack.objects.filter(hall__site__cluster=cluster).order_by("pk")
                 .values_list("pk", "name"))
    position = {pk: i for i, (pk, _) in enumerate(racks)}
    wanted = sorted({position[node_racks[n]] for n in nodes if 0 <= n < len(node_racks)})
    return [{"id": i, "name": racks[i][1]} for i in wanted]
