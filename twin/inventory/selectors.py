"""Reads of the inventory: the cluster the twin runs, its summary, nodes and racks by engine id."""

from __future__ import annotations

from django.db.models import Count, Sum

from twin.inventory.models import (
    Accelerator,
    AcceleratorStatus,
    CloudPool,
    Cluster,
    CoolingLoop,
    Link,
    Node,
    NodeStatus,
    PowerFeed,
    Rack,
    StorageSystem,
    Switch,
    SwitchTier,
)


def inventory_summary(*, cluster: Cluster) -> dict:
    """Counts for the home page, computed by the database (a handful of queries)."""
    nodes = Node.objects.filter(rack__hall__site__cluster=cluster)
    by_status = dict(nodes.values_list("status").annotate(n=Count("id")).order_by())
    by_model = list(nodes.values("accelerator_model__name", "accelerator_model__vendor")
                    .annotate(nodes=Count("id"), gpus=Sum("accelerator_count"))
                    .order_by("accelerator_model__name"))
    switches = dict(Switch.objects.filter(cluster=cluster).values_list("tier")
                    .annotate(n=Count("id")).order_by())
    links = dict(Link.objects.filter(cluster=cluster).values_list("status")
                 .annotate(n=Count("id")).order_by())
    switch_status = dict(Switch.objects.filter(cluster=cluster).values_list("status")
                         .annotate(n=Count("id")).order_by())
    feeds = dict(PowerFeed.objects.filter(hall__site__cluster=cluster).values_list("status")
                 .annotate(n=Count("id")).order_by())
    loops = dict(CoolingLoop.objects.filter(hall__site__cluster=cluster)
                 .values_list("status").annotate(n=Count("id")).order_by())
    failed_gpus = Accelerator.objects.filter(
        node__rack__hall__site__cluster=cluster, status=AcceleratorStatus.FAILED).count()
    return {
        "cluster": cluster,
        "by_model": by_model,
        "gpus": sum(r["gpus"] or 0 for r in by_model),
        "nodes": sum(by_status.values()),
        "nodes_by_status": {s: by_status.get(s, 0) for s in NodeStatus.values},
        "failed_gpus": failed_gpus,
        "racks": Rack.objects.filter(hall__site__cluster=cluster).count(),
        "switches": {t: switches.get(t, 0) for t in SwitchTier.values},
        "links": links,
        "switches_by_status": switch_status,
        "power_feeds": feeds,
        "cooling_loops": loops,
        "storage": list(StorageSystem.objects.filter(cluster=cluster).order_by("tier")),
        "cloud_pools": list(CloudPool.objects.filter(cluster=cluster)
                            .select_related("accelerator_model")),
        "it_power_kw": cluster.summary.get("it_power_kw"),
    }


def node_by_engine_id(*, cluster: Cluster, index: int) -> dict | None:
    """The node the core numbers ``index`` (its position in id order), as plain values."""
    if index < 0:
        return None
    row = (Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
           .values("id", "hostname", "rack_id", "rack__name", "slot", "accelerator_model__name",
                   "accelerator_count", "status", "status_reason", "is_spare",
                   "nvlink_domain")[index:index + 1])
    row = next(iter(row), None)
    if row is None:
        return None
    racks = list(Rack.objects.filter(hall__site__cluster=cluster).order_by("pk")
                 .values_list("pk", flat=True))
    return {"hostname": row["hostname"], "rack": racks.index(row["rack_id"]),
            "rack_name": row["rack__name"], "slot": row["slot"],
            "model": row["accelerator_model__name"], "gpus": row["accelerator_count"],
            "status": row["status"], "reason": row["status_reason"], "spare": row["is_spare"],
            "nvlink_domain": row["nvlink_domain"]}


def racks_of_engine_nodes(*, cluster: Cluster, nodes: list[int]) -> list[dict]:
    """The racks (core ids and names) holding the nodes the core numbers ``nodes``."""
    node_racks = list(Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
                      .values_list("rack_id", flat=True))
    racks = list(Rack.objects.filter(hall__site__cluster=cluster).order_by("pk")
                 .values_list("pk", "name"))
    position = {pk: i for i, (pk, _) in enumerate(racks)}
    wanted = sorted({position[node_racks[n]] for n in nodes if 0 <= n < len(node_racks)})
    return [{"id": i, "name": racks[i][1]} for i in wanted]
