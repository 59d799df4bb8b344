"""Reads of the inventory: the cluster the twin runs, its summary, nodes and racks by engine id."""

from __future__ import annotations

from django.db.models import Count, Sum

from twin import models as m
from twin.config.conf import app_setting


def cluster_current() -> m.Cluster | None:
    """The cluster the twin shows and runs, chosen explicitly, never switched silently:
    ``CLUSTERTWIN_CLUSTER`` if set (``None`` if no cluster has that name); else the only
    cluster; else, among several, the one the live engine runs (its run is filed under
    ``<inventory>:<cluster id>``); else ``None`` (see :func:`cluster_choice_problem`)."""
    name = app_setting("CLUSTER")
    if name:
        return m.Cluster.objects.filter(name=name).first()
    first_two = list(m.Cluster.objects.order_by("id")[:2])
    if len(first_two) <= 1:
        return first_two[0] if first_two else None
    run = (m.LiveState.objects.filter(pk=m.LiveState.SINGLETON_PK)
           .values_list("inventory", flat=True).first() or "")
    tail = run.rpartition(":")[2]
    return m.Cluster.objects.filter(pk=int(tail)).first() if tail.isdigit() else None


def cluster_choice_problem() -> str | None:
    """Why no cluster is selected although some exist (``None`` when one is, or none exist)."""
    name = app_setting("CLUSTER")
    if name and not m.Cluster.objects.filter(name=name).exists():
        return f"CLUSTERTWIN_CLUSTER={name!r} names no cluster in the inventory"
    if not name and cluster_current() is None and m.Cluster.objects.exists():
        names = ", ".join(m.Cluster.objects.order_by("name").values_list("name", flat=True)[:10])
        return (f"the inventory holds several clusters ({names}): set CLUSTERTWIN_CLUSTER to "
                "the one the twin runs")
    return None


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
    switch_status = dict(m.Switch.objects.filter(cluster=cluster).values_list("status")
                         .annotate(n=Count("id")).order_by())
    feeds = dict(m.PowerFeed.objects.filter(hall__site__cluster=cluster).values_list("status")
                 .annotate(n=Count("id")).order_by())
    loops = dict(m.CoolingLoop.objects.filter(hall__site__cluster=cluster)
                 .values_list("status").annotate(n=Count("id")).order_by())
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
        "switches_by_status": switch_status,
        "power_feeds": feeds,
        "cooling_loops": loops,
        "storage": list(m.StorageSystem.objects.filter(cluster=cluster).order_by("tier")),
        "cloud_pools": list(m.CloudPool.objects.filter(cluster=cluster)
                            .select_related("accelerator_model")),
        "it_power_kw": cluster.summary.get("it_power_kw"),
    }


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
