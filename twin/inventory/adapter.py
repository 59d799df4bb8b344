"""The one adapter between the ORM inventory and the core's columnar ``ClusterPlan``.

``cluster_plan_write`` turns a plan into rows with bulk inserts (one transaction: a crash
leaves the database as it was); ``cluster_arrays_read`` turns rows back into the arrays the
engine uses, keyed by the same integer ids.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import numpy as np
from django.db import transaction

from scheduler.fabric.topology import LINK_KINDS, TIERS, Fabric
from scheduler.hardware.catalog import CATALOG
from scheduler.hardware.cluster import CloudPoolSpec, ClusterPlan, NodeShape, StorageSpec
from twin.inventory.grid_membership import membership_keep, membership_restore
from twin.inventory.models import (
    Accelerator,
    AcceleratorModel,
    AcceleratorStatus,
    CloudPool,
    Cluster,
    CoolingLoop,
    DataHall,
    Link,
    LinkStatus,
    Node,
    NodeStatus,
    PowerFeed,
    Rack,
    Site,
    StorageStatus,
    StorageSystem,
    Switch,
)

BATCH = 5000
FREE_PORTS = "uncabled_leaf_ports"
"""Key of ``Cluster.fabric_params``: ``[[leaf switch index, ports], ...]`` of leaf ports no
GPU is cabled to (a fabric is built for whole leaves; the engine numbers them after the GPUs)."""
Progress = Callable[[str, int], None]


def _noop(stage: str, n: int) -> None:
    return None


def accelerator_models_sync() -> dict[str, AcceleratorModel]:
    """Make sure every catalog model has a row; rows edited in the admin are kept."""
    existing = {a.name: a for a in AcceleratorModel.objects.all()}
    missing = [
        AcceleratorModel(
            name=a.name, vendor=a.vendor, bf16_tflops=a.bf16_tflops, hbm_gb=a.hbm_gb,
            hbm_tb_s=a.hbm_tb_s, scaleup_gb_s=a.scaleup_gb_s, scaleup_domain=a.scaleup_domain,
            tdp_w=a.tdp_w, per_node=a.per_node, unconfirmed=", ".join(a.unconfirmed),
            source=a.source)
        for name, a in CATALOG.items() if name not in existing
    ]
    AcceleratorModel.objects.bulk_create(missing)
    return {a.name: a for a in AcceleratorModel.objects.all()}


def _bulk(model, rows: Iterable, stage: str, progress: Progress) -> list:
    rows = list(rows)
    for start in range(0, len(rows), BATCH):
        chunk = rows[start:start + BATCH]
        model.objects.bulk_create(chunk, batch_size=BATCH)
        progress(stage, len(chunk))
    return rows


def plan_row_count(plan: ClusterPlan) -> int:
    """Rows ``cluster_plan_write`` inserts (for a progress bar's total)."""
    return (plan.n_racks * 2 + plan.n_nodes + plan.n_gpus + plan.fabric.n_switches()
            + plan.cabled_links())


@transaction.atomic
def cluster_plan_write(plan: ClusterPlan, *, replace: bool = False,
                       progress: Progress = _noop) -> Cluster:
    """Write a plan as a new cluster; refuse an existing name unless ``replace`` (a replaced
    grid site stays in its grid, with its grid attributes and mirror)."""
    existing = Cluster.objects.filter(name=plan.name)
    kept = None
    if existing.exists():
        if not replace:
            raise ValueError(f"cluster {plan.name!r} already exists; pass --replace to rebuild it")
        kept = cluster_delete(cluster=existing.get(), successor=plan.name)
    models = accelerator_models_sync()
    # switch ports no GPU is cabled to (the fabric's spare endpoints), per leaf
    spare = np.bincount(plan.fabric.endpoint_leaf[plan.n_gpus:],
                        minlength=plan.fabric.n_switches())
    cluster = Cluster.objects.create(
        name=plan.name, preset=plan.preset, fabric_kind=plan.fabric.kind,
        fabric_params={**plan.fabric.params, FREE_PORTS: [
            [int(leaf), int(spare[leaf])] for leaf in np.flatnonzero(spare)]},
        summary=plan.summary())
    site = Site.objects.create(cluster=cluster, name=f"{plan.name}-site")
    halls = _bulk(DataHall, (DataHall(site=site, name=f"hall-{h}")
                               for h in range(plan.n_halls)), "halls", progress)
    hall_ids = [h.pk for h in halls]

    feeds = _bulk(PowerFeed, (
        PowerFeed(hall_id=hall_ids[plan.rack_hall[r]], name=f"{plan.name}-pdu-{r:05d}",
                    capacity_kw=float(plan.rack_power_kw[r]))
        for r in range(plan.n_racks)), "power feeds", progress)
    rows = sorted({(int(plan.rack_hall[r]), int(plan.rack_row[r])) for r in range(plan.n_racks)})
    row_load = {}
    for r in range(plan.n_racks):
        key = (int(plan.rack_hall[r]), int(plan.rack_row[r]))
        row_load[key] = row_load.get(key, 0.0) + float(plan.rack_power_kw[r])
    loops = _bulk(CoolingLoop, (
        CoolingLoop(hall_id=hall_ids[h], name=f"{plan.name}-cdu-h{h}-r{row:02d}",
                      kind="liquid", capacity_kw=row_load[(h, row)])
        for h, row in rows), "cooling loops", progress)
    loop_of = {key: loop.pk for key, loop in zip(rows, loops, strict=True)}
    racks = _bulk(Rack, (
        Rack(hall_id=hall_ids[plan.rack_hall[r]], name=f"{plan.name}-rack-{r:05d}",
               row=int(plan.rack_row[r]), column=int(plan.rack_col[r]),
               power_capacity_kw=float(plan.rack_power_kw[r]),
               cooling_capacity_kw=float(plan.rack_power_kw[r]),
               power_feed_id=feeds[r].pk,
               cooling_loop_id=loop_of[(int(plan.rack_hall[r]), int(plan.rack_row[r]))])
        for r in range(plan.n_racks)), "racks", progress)
    rack_ids = np.array([r.pk for r in racks], dtype=np.int64)

    model_ids = [models[a.name].pk for a in plan.models]
    shapes = plan.node_shape
    node_rows = []
    for n in range(plan.n_nodes):
        k = int(plan.node_model[n])
        shape = shapes[k]
        node_rows.append(Node(
            rack_id=int(rack_ids[plan.node_rack[n]]), slot=int(plan.node_slot[n]),
            hostname=f"{plan.name}-n{n:06d}", accelerator_model_id=model_ids[k],
            accelerator_count=int(plan.node_gpus[n]), cpu_cores=shape.cpu_cores,
            ram_gb=shape.ram_gb, nic_count=int(plan.node_gpus[n]), nic_gbps=shape.nic_gbps,
            nvme_tb=shape.nvme_tb, nvlink_domain=int(plan.node_nvlink_domain[n]),
            is_spare=bool(plan.node_spare[n])))
    nodes = _bulk(Node, node_rows, "nodes", progress)
    node_ids = np.array([x.pk for x in nodes], dtype=np.int64)

    gpu_node = plan.gpu_node()
    gpu_index = np.arange(plan.n_gpus) - plan.node_first_gpu[gpu_node]
    model_names = [plan.models[int(k)].name for k in plan.node_model]
    _bulk(Accelerator, (
        Accelerator(node_id=int(node_ids[gpu_node[g]]), index=int(gpu_index[g]),
                      serial=f"{model_names[gpu_node[g]]}-{plan.name}-{g:06d}")
        for g in range(plan.n_gpus)), "accelerators", progress)

    fab = plan.fabric
    switches = _bulk(Switch, (
        Switch(cluster=cluster, name=f"{TIERS[fab.switch_tier[s]]}-{s:05d}", index=s,
                 tier=TIERS[fab.switch_tier[s]], radix=fab.radix, port_gbps=fab.port_gbps,
                 rail=None if fab.switch_rail[s] < 0 else int(fab.switch_rail[s]),
                 pod=None if fab.switch_pod[s] < 0 else int(fab.switch_pod[s]))
        for s in range(fab.n_switches())), "switches", progress)
    switch_ids = np.array([s.pk for s in switches], dtype=np.int64)
    xcvr = f"{int(fab.port_gbps)}G optical"
    _bulk(Link, (
        Link(cluster=cluster, switch_id=int(switch_ids[fab.link_b[i]]),
               peer_switch_id=int(switch_ids[fab.link_a[i]]), speed_gbps=fab.port_gbps,
               transceiver_model=xcvr)
        for i in range(fab.link_a.size)), "switch links", progress)
    nic = f"{int(plan.node_shape[0].nic_gbps)}G optical"
    _bulk(Link, (
        Link(cluster=cluster, switch_id=int(switch_ids[fab.endpoint_leaf[g]]),
               node_id=int(node_ids[gpu_node[g]]), node_port=int(gpu_index[g]),
               speed_gbps=float(plan.node_shape[plan.node_model[gpu_node[g]]].nic_gbps),
               transceiver_model=nic)
        for g in range(plan.n_gpus)), "NIC links", progress)

    StorageSystem.objects.bulk_create(
        StorageSystem(cluster=cluster, name=s.name, tier=s.tier, capacity_tb=s.capacity_tb,
                        read_gb_s=s.read_gb_s, write_gb_s=s.write_gb_s, gpudirect=s.gpudirect)
        for s in plan.storage)
    CloudPool.objects.bulk_create(
        CloudPool(cluster=cluster, provider=c.provider, region=c.region,
                    accelerator_model=models[c.model], max_gpus=c.max_gpus,
                    price_per_gpu_hour=c.price_per_gpu_hour,
                    provisioning_delay_s=c.provisioning_delay_s)
        for c in plan.cloud_pools)
    membership_restore(cluster=cluster, kept=kept)
    return cluster


def cluster_delete(*, cluster: Cluster, successor: str | None = None) -> dict:
    """Delete a cluster and everything in it, table by table (no per-row cascades).

    A site of a grid that WAN links name is refused (``ValueError``, one line, nothing
    deleted) unless ``successor``, the cluster replacing it, has its name.  Returns its grid
    membership (:func:`~twin.inventory.grid_membership.membership_keep`) for the successor.
    """
    kept = membership_keep(cluster=cluster, successor=successor)
    Link.objects.filter(cluster=cluster)._raw_delete(Link.objects.db)
    halls = DataHall.objects.filter(site__cluster=cluster)
    nodes = Node.objects.filter(rack__hall__in=halls)
    Accelerator.objects.filter(node__in=nodes)._raw_delete(Accelerator.objects.db)
    nodes._raw_delete(Node.objects.db)
    Switch.objects.filter(cluster=cluster)._raw_delete(Switch.objects.db)
    Rack.objects.filter(hall__in=halls)._raw_delete(Rack.objects.db)
    cluster.delete()
    return kept


def cluster_arrays_read(*, cluster: Cluster) -> dict[str, np.ndarray]:
    """Per-node and per-GPU state of a cluster as arrays, in database id order.

    Returns ``node_id``, ``node_gpus``, ``node_status`` (0 ready, 1 drained, 2 failed),
    ``node_spare``, ``node_rack`` (rack position), ``gpu_node`` (node position) and
    ``gpu_ok`` (bool).
    """
    statuses = {s: i for i, s in enumerate(NodeStatus.values)}
    node_rows = list(Node.objects.filter(rack__hall__site__cluster=cluster)
                     .order_by("id").values_list("id", "accelerator_count", "status",
                                                 "is_spare", "rack_id"))
    node_id = np.array([r[0] for r in node_rows], dtype=np.int64)
    rack_ids = np.array([r[4] for r in node_rows], dtype=np.int64)
    _, rack_pos = np.unique(rack_ids, return_inverse=True)
    gpu_rows = list(Accelerator.objects.filter(node__rack__hall__site__cluster=cluster)
                    .order_by("node_id", "index").values_list("node_id", "status"))
    gpu_node_db = np.array([r[0] for r in gpu_rows], dtype=np.int64)
    return {
        "node_id": node_id,
        "node_gpus": np.array([r[1] for r in node_rows], dtype=np.int16),
        "node_status": np.array([statuses[r[2]] for r in node_rows], dtype=np.int8),
        "node_spare": np.array([r[3] for r in node_rows], dtype=bool),
        "node_rack": rack_pos.astype(np.int32),
        "gpu_node": np.searchsorted(node_id, gpu_node_db).astype(np.int32),
        "gpu_ok": np.array([r[1] == AcceleratorStatus.OK for r in gpu_rows], dtype=bool),
    }


def _link_kinds(fabric_kind: str, tier_a: np.ndarray, tier_b: np.ndarray,
                pod_a: np.ndarray, pod_b: np.ndarray) -> np.ndarray:
    """Switch-link kinds (:data:`~scheduler.fabric.topology.LINK_KINDS`) from the tiers
    a link joins: leaf-spine, spine-core (an island uplink on an island fabric), and a link
    between two switches of one tier is a global (Dragonfly+) link; on a plain Dragonfly a link
    between two routers of one group (pod) is a local link."""
    kind = np.where(tier_a == tier_b, 2, np.where(tier_a == 0, 0, 1))
    if fabric_kind == "island":
        kind = np.where((tier_a == 1) & (tier_b == 2), 3, kind)
    if fabric_kind == "dragonfly":
        kind = np.where(pod_a == pod_b, LINK_KINDS.index("local"), 2)
    return kind.astype(np.int8)


def cluster_plan_read(*, cluster: Cluster) -> ClusterPlan:
    """The core's :class:`ClusterPlan` of a cluster as its rows are now (the live engine runs
    this): nodes in id order, GPUs numbered node by node, switches by their ``index``, the
    switch tree from the switch links and each GPU's leaf from its NIC link.

    Raises ``ValueError`` (naming the rows) for an inventory the engine cannot run: a node
    without a NIC link per accelerator, a model outside the catalog, no nodes at all.
    """
    halls = list(DataHall.objects.filter(site__cluster=cluster).order_by("id")
                 .values_list("id", flat=True))
    hall_pos = {h: i for i, h in enumerate(halls)}
    racks = list(Rack.objects.filter(hall__site__cluster=cluster).order_by("id")
                 .values_list("id", "hall_id", "row", "column", "power_capacity_kw"))
    rack_pos = {r[0]: i for i, r in enumerate(racks)}
    nodes = list(Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
                 .values_list("id", "rack_id", "slot", "accelerator_model__name",
                              "accelerator_count", "cpu_cores", "ram_gb", "nic_gbps", "nvme_tb",
                              "nvlink_domain", "is_spare", "hostname"))
    if not nodes:
        raise ValueError(f"cluster {cluster.name!r} has no nodes")
    models: list = []
    shapes: list = []
    node_model = np.empty(len(nodes), dtype=np.int16)
    for i, row in enumerate(nodes):
        name = row[3]
        if name not in CATALOG:
            raise ValueError(f"node {row[11]}: accelerator model {name!r} is not in the catalog")
        if CATALOG[name] not in models:
            models.append(CATALOG[name])
            shapes.append(NodeShape(cpu_cores=int(row[5]), ram_gb=float(row[6]),
                                    nic_gbps=float(row[7]), nvme_tb=float(row[8])))
        node_model[i] = models.index(CATALOG[name])
    node_id = np.array([r[0] for r in nodes], dtype=np.int64)
    node_gpus = np.array([r[4] for r in nodes], dtype=np.int16)
    first = np.concatenate([[0], np.cumsum(node_gpus[:-1], dtype=np.int64)]).astype(np.int32)
    n_gpus = int(node_gpus.sum())

    switches = list(Switch.objects.filter(cluster=cluster).order_by("index")
                    .values_list("id", "index", "tier", "pod", "rail", "radix", "port_gbps"))
    sw_pos = {s[0]: i for i, s in enumerate(switches)}
    tier = np.array([TIERS.index(s[2]) for s in switches], dtype=np.int8)
    nic = np.array(list(Link.objects.filter(cluster=cluster, node__isnull=False)
                        .values_list("node_id", "node_port", "switch_id")),
                   dtype=np.int64).reshape(-1, 3)
    params = dict(cluster.fabric_params)
    free = params.pop(FREE_PORTS, [])
    endpoint_leaf = np.full(n_gpus, -1, dtype=np.int32)
    pos = np.searchsorted(node_id, nic[:, 0])
    endpoint_leaf[first[pos] + nic[:, 1]] = [sw_pos[s] for s in nic[:, 2].tolist()]
    if (endpoint_leaf < 0).any():
        g = int(np.flatnonzero(endpoint_leaf < 0)[0])
        n = int(np.searchsorted(first, g, side="right") - 1)
        raise ValueError(f"node {nodes[n][11]}: accelerator {g - int(first[n])} has no NIC "
                         "link to a leaf switch")
    if free:
        leaf, count = np.array(free, dtype=np.int64).T
        endpoint_leaf = np.concatenate([endpoint_leaf, np.repeat(leaf, count)]).astype(np.int32)
    up = np.array(list(Link.objects.filter(cluster=cluster, peer_switch__isnull=False)
                       .order_by("id").values_list("peer_switch_id", "switch_id")),
                  dtype=np.int64).reshape(-1, 2)
    link_a = np.array([sw_pos[s] for s in up[:, 0].tolist()], dtype=np.int32)
    link_b = np.array([sw_pos[s] for s in up[:, 1].tolist()], dtype=np.int32)
    pod = np.array([-1 if s[3] is None else s[3] for s in switches], dtype=np.int64)
    fabric = Fabric(
        kind=cluster.fabric_kind, n_endpoints=int(endpoint_leaf.size), switch_tier=tier,
        switch_pod=pod,
        switch_rail=[-1 if s[4] is None else s[4] for s in switches],
        radix=int(switches[0][5]), port_gbps=float(switches[0][6]),
        endpoint_leaf=endpoint_leaf, link_a=link_a, link_b=link_b,
        link_kind=_link_kinds(cluster.fabric_kind, tier[link_a], tier[link_b], pod[link_a],
                              pod[link_b]),
        params=params)
    storage = tuple(StorageSpec(s.name, s.tier, s.capacity_tb, s.read_gb_s, s.write_gb_s,
                                s.gpudirect)
                    for s in StorageSystem.objects.filter(cluster=cluster).order_by("id"))
    pools = tuple(CloudPoolSpec(c.provider, c.region, c.accelerator_model.name, c.max_gpus,
                                c.price_per_gpu_hour, c.provisioning_delay_s)
                  for c in CloudPool.objects.filter(cluster=cluster)
                  .select_related("accelerator_model").order_by("id"))
    return ClusterPlan(
        name=cluster.name, fabric=fabric, models=tuple(models), node_model=node_model,
        node_gpus=node_gpus, node_first_gpu=first,
        node_rack=np.array([rack_pos[r[1]] for r in nodes], dtype=np.int32),
        node_slot=np.array([r[2] for r in nodes], dtype=np.int16),
        node_spare=np.array([r[10] for r in nodes], dtype=bool),
        node_nvlink_domain=np.array([r[9] for r in nodes], dtype=np.int32),
        node_shape=tuple(shapes),
        rack_hall=np.array([hall_pos[r[1]] for r in racks], dtype=np.int32),
        rack_row=np.array([r[2] for r in racks], dtype=np.int32),
        rack_col=np.array([r[3] for r in racks], dtype=np.int32),
        rack_power_kw=np.array([r[4] for r in racks], dtype=float),
        storage=storage, cloud_pools=pools, preset=cluster.preset)


class EngineIds:
    """Inventory rows -> the ids the live engine uses for them (the positions
    :func:`cluster_plan_read` gives): a node's position in id order, a GPU's number node by
    node, a switch's ``index``, a switch link's position in id order.  Rows of another
    cluster have none (``None``)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    # each table is read on first use only: an edit of one node needs no link ids
    @functools.cached_property
    def _nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Node ids in id order, and each node's first GPU number."""
        rows = np.array(list(Node.objects.filter(rack__hall__site__cluster=self.cluster)
                             .order_by("id").values_list("id", "accelerator_count")),
                        dtype=np.int64).reshape(-1, 2)
        return rows[:, 0], np.concatenate([[0], np.cumsum(rows[:, 1])[:-1]]).astype(np.int64)

    def _ids(self, rows) -> np.ndarray:
        return np.array(list(rows.order_by("id").values_list("id", flat=True)), dtype=np.int64)

    @functools.cached_property
    def _racks(self) -> np.ndarray:
        return self._ids(Rack.objects.filter(hall__site__cluster=self.cluster))

    @functools.cached_property
    def _loops(self) -> np.ndarray:
        return self._ids(CoolingLoop.objects.filter(hall__site__cluster=self.cluster))

    @functools.cached_property
    def _links(self) -> np.ndarray:
        return self._ids(Link.objects.filter(cluster=self.cluster, peer_switch__isnull=False))

    @staticmethod
    def _pos(ids: np.ndarray, pk: int) -> int | None:
        i = int(np.searchsorted(ids, pk))
        return i if i < ids.size and ids[i] == pk else None

    def node(self, pk: int) -> int | None:
        return self._pos(self._nodes[0], pk)

    def node_keys(self) -> np.ndarray:
        """Every node's primary key, in engine order (what a re-plan maps nodes by)."""
        return self._nodes[0]

    def gpu(self, node_pk: int, index: int) -> int | None:
        n = self.node(node_pk)
        return None if n is None else int(self._nodes[1][n]) + int(index)

    def link(self, pk: int) -> int | None:
        return self._pos(self._links, pk)

    def rack(self, pk: int) -> int | None:
        return self._pos(self._racks, pk)

    @functools.cached_property
    def _storage(self) -> dict[int, str]:
        """The storage row the engine models per tier: the first by id (its plan lists them
        in id order and the storage model takes the first of each tier)."""
        first: dict[str, int] = {}
        for pk, tier in (StorageSystem.objects.filter(cluster=self.cluster).order_by("id")
                         .values_list("id", "tier")):
            first.setdefault(tier, pk)
        return {pk: tier for tier, pk in first.items()}

    def storage_tier(self, pk: int) -> str | None:
        """The tier the engine knows a storage row as (``None``: a second system of a tier,
        which the engine does not model, or a row of another cluster)."""
        return self._storage.get(pk)

    def cooling_loop(self, pk: int) -> int | None:
        """A loop's position in id order: ``cluster_plan_write`` makes one per rack row, in
        (hall, row) order, which is the engine's cooling-unit order."""
        return self._pos(self._loops, pk)


def inventory_status_commands(*, cluster: Cluster) -> list[tuple[str, dict]]:
    """The engine commands that bring a freshly built engine to the statuses the inventory
    holds (nodes failed or drained, accelerators failed, switches and links down, power feeds
    and cooling loops down, storage down or degraded)."""
    ids = EngineIds(cluster)
    out: list[tuple[str, dict]] = []
    nodes = Node.objects.filter(rack__hall__site__cluster=cluster)
    for pk, status in nodes.exclude(status=NodeStatus.READY).values_list("id", "status"):
        out.append(("node_down" if status == NodeStatus.FAILED else "drain_node",
                    {"node": ids.node(pk)}))
    for node_pk, index in (Accelerator.objects.filter(node__in=nodes)
                           .exclude(status=AcceleratorStatus.OK)
                           .values_list("node_id", "index")):
        out.append(("gpu_down", {"gpu": ids.gpu(node_pk, index)}))
    for index in (Switch.objects.filter(cluster=cluster, status=LinkStatus.DOWN)
                  .order_by("index").values_list("index", flat=True)):
        out.append(("switch_down", {"switch": int(index)}))
    down = Link.objects.filter(cluster=cluster, status=LinkStatus.DOWN)
    for pk in down.filter(peer_switch__isnull=False).values_list("id", flat=True):
        out.append(("link_down", {"link": ids.link(pk)}))
    for node_pk, port in down.filter(node__isnull=False).values_list("node_id", "node_port"):
        out.append(("gpu_down", {"gpu": ids.gpu(node_pk, port), "nic": True}))
    for rack_pk in Rack.objects.filter(hall__site__cluster=cluster,
                                         power_feed__status="down").values_list("id", flat=True):
        out.append(("feed_down", {"rack": ids.rack(rack_pk)}))
    for loop_pk in CoolingLoop.objects.filter(hall__site__cluster=cluster,
                                                status="down").values_list("id", flat=True):
        out.append(("cooling_down", {"loop": ids.cooling_loop(loop_pk)}))
    for pk, status, factor in (StorageSystem.objects.filter(cluster=cluster)
                               .exclude(status=StorageStatus.UP).order_by("id")
                               .values_list("id", "status", "degraded_factor")):
        tier = ids.storage_tier(pk)
        if tier is not None:
            out.append(storage_command(tier, status, factor))
    return out


def storage_command(tier: str, status: str, factor: float) -> tuple[str, dict]:
    """The engine command that gives a storage tier ``status`` (``factor``: the share of its
    bandwidth left when degraded)."""
    if status == StorageStatus.DEGRADED:
        return "storage_degraded", {"tier": tier, "factor": float(factor)}
    return f"storage_{status}", {"tier": tier}
