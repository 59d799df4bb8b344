"""Reads of the inventory: the cluster the twin runs, its summary, nodes and racks by engine id,
what the job, node and switch pages and the heatmaps name, the nodes ``/metrics/dcgm`` models.

Each takes keyword-only arguments and answers plain values (ids are the core's, as
:class:`~twin.inventory.adapter.EngineIds` numbers rows), except :func:`node_rows_by_engine_id`,
the queryset a service writes to."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet, Sum

from twin.inventory.adapter import EngineIds
from twin.inventory.models import (
    Accelerator,
    AcceleratorStatus,
    CloudPool,
    Cluster,
    CoolingLoop,
    DataHall,
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


# ----------------------------------------------------------------- nodes by engine id
def node_rows_by_engine_id(*, cluster: Cluster, index: int) -> QuerySet[Node] | None:
    """The node the core numbers ``index``, as the one-row queryset the node services
    (``twin.control.actions.node_drain_request``) write to; ``None`` when there is no such node."""
    keys = EngineIds(cluster).node_keys()
    if not 0 <= index < keys.size:
        return None
    return Node.objects.filter(pk=int(keys[index]))


def job_nodes_get(*, cluster: Cluster, runs: list[list[int]], shown: int) -> dict:
    """The first ``shown`` of the nodes in ``runs`` (engine node ids, ``[first, last]``) and how
    many more: each node's engine ``id``, ``hostname``, ``rack`` (core id) and ``rack_name``, its
    ``gpus`` and ``first_gpu`` (the engine id of its GPU 0)."""
    ids = [n for a, b in runs for n in range(a, b + 1)]
    engine = EngineIds(cluster)
    keys = engine.node_keys()
    wanted = [(i, int(keys[i])) for i in ids[:shown] if 0 <= i < keys.size]
    rows = {r[0]: r[1:] for r in Node.objects.filter(pk__in=[pk for _, pk in wanted])
            .values_list("pk", "hostname", "rack_id", "rack__name", "accelerator_count")}
    nodes = [{"id": i, "hostname": rows[pk][0], "rack": engine.rack(rows[pk][1]),
              "rack_name": rows[pk][2], "gpus": rows[pk][3], "first_gpu": engine.gpu(pk, 0)}
             for i, pk in wanted if pk in rows]
    return {"nodes": nodes, "more_nodes": max(0, len(ids) - shown)}


def node_detail_get(*, cluster: Cluster, index: int) -> dict | None:
    """What the node page shows of the node the core numbers ``index``: ``node``
    (:func:`node_by_engine_id` with its ``id``), ``first_gpu`` (engine id of its GPU 0),
    ``nic_gbps``, its ``accelerators`` (index, serial, status), its ``links`` (port, switch name
    and index, speed, status) and the ``rack_nodes`` beside it (engine id, hostname, slot);
    ``None`` when there is no such node."""
    node = node_by_engine_id(cluster=cluster, index=index)
    if node is None:
        return None
    engine = EngineIds(cluster)
    pk = int(engine.node_keys()[index])
    return {
        "node": {**node, "id": index},
        "first_gpu": engine.gpu(pk, 0),
        "nic_gbps": Node.objects.filter(pk=pk).values_list("nic_gbps", flat=True).first(),
        "accelerators": [{"index": i, "serial": serial, "status": status}
                         for i, serial, status in Accelerator.objects.filter(node_id=pk)
                         .order_by("index").values_list("index", "serial", "status")],
        "links": [{"port": port, "switch": sw, "switch_index": sw_index, "speed": speed,
                   "status": status}
                  for port, sw, sw_index, speed, status in Link.objects.filter(node_id=pk)
                  .order_by("node_port").values_list("node_port", "switch__name",
                                                     "switch__index", "speed_gbps", "status")],
        "rack_nodes": [{"id": engine.node(p), "hostname": h, "slot": s}
                       for p, h, s in Node.objects.filter(rack__nodes__pk=pk)
                       .order_by("slot").values_list("pk", "hostname", "slot")],
    }


# ----------------------------------------------------------------- a switch
SWITCH_FIELDS = ("id", "name", "tier", "index", "status", "radix", "port_gbps", "pod", "rail")


def _switch_link(engine: EngineIds, index: int, row: tuple) -> dict:
    pk, near, near_index, peer, peer_index, node, host, port, speed, status = row
    if node is None:  # a switch-to-switch link: the far end is the other switch
        far, far_index = (peer, peer_index) if near_index == index else (near, near_index)
        return {"pk": pk, "far": far, "switch_index": far_index, "speed": speed,
                "status": status, "engine_link": engine.link(pk)}
    return {"pk": pk, "far": f"{host}:{port}", "node": engine.node(node), "port": port,
            "speed": speed, "status": status, "engine_gpu": engine.gpu(node, port)}


def switch_detail_get(*, cluster: Cluster, index: int) -> dict | None:
    """Switch ``index`` of ``cluster`` (``switch``: its :data:`SWITCH_FIELDS`) and its cabled
    ``links`` in id order: a switch link names the far switch (``far``, ``switch_index``) and
    its engine link id (``engine_link``, ``None`` if the engine has none), a node link the node
    (``far`` ``host:port``, engine ``node``, ``port``) and the engine id of its GPU
    (``engine_gpu``); ``None`` when there is no such switch."""
    switch = Switch.objects.filter(cluster=cluster, index=index).values(*SWITCH_FIELDS).first()
    if switch is None:
        return None
    engine = EngineIds(cluster)
    rows = (Link.objects.filter(Q(switch_id=switch["id"]) | Q(peer_switch_id=switch["id"]))
            .order_by("id").values_list(
                "id", "switch__name", "switch__index", "peer_switch__name",
                "peer_switch__index", "node_id", "node__hostname", "node_port", "speed_gbps",
                "status"))
    return {"switch": switch, "links": [_switch_link(engine, index, row) for row in rows]}


# ----------------------------------------------------------------- names for the heatmaps
def switch_names(*, cluster: Cluster) -> list[str]:
    """Switch names by switch index (``""`` for an index no switch has)."""
    names: list[str] = []
    for index, name in (Switch.objects.filter(cluster=cluster).order_by("index")
                        .values_list("index", "name")):
        names.extend([""] * (index - len(names)))
        names.append(name)
    return names


def switch_names_of(*, cluster: Cluster, indices: list[int]) -> list[str]:
    """The names of switches ``indices`` (``switch <i>`` for an index no switch has)."""
    found = dict(Switch.objects.filter(cluster=cluster, index__in=indices)
                 .values_list("index", "name"))
    return [found.get(i, f"switch {i}") for i in indices]


def rack_names(*, cluster: Cluster) -> list[str]:
    """Rack names by the core's rack id (primary-key order)."""
    return list(Rack.objects.filter(hall__site__cluster=cluster).order_by("pk")
                .values_list("name", flat=True))


def hall_names(*, cluster: Cluster) -> list[str]:
    """Data hall names by hall index (primary-key order)."""
    return list(DataHall.objects.filter(site__cluster=cluster).order_by("pk")
                .values_list("name", flat=True))


def heatmap_names(*, cluster: Cluster | None) -> dict:
    """Switch names by switch index, rack names by the core's rack id and hall names by hall
    index: what the topology page labels heatmap axes and cells with."""
    if cluster is None:
        return {"switches": [], "racks": [], "halls": []}
    return {"switches": switch_names(cluster=cluster), "racks": rack_names(cluster=cluster),
            "halls": hall_names(cluster=cluster)}


# ----------------------------------------------------------------- DCGM
def dcgm_nodes_get(*, cluster: Cluster) -> tuple[tuple[str, str, int, float], ...]:
    """Every node of ``cluster`` in the engine's order (ids) as ``twin.metrics.dcgm`` takes
    them: ``(hostname, accelerator model, GPUs, NIC Gb/s)``."""
    return tuple(Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
                 .values_list("hostname", "accelerator_model__name", "accelerator_count",
                              "nic_gbps"))
