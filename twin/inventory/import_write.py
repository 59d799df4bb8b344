"""Writing a checked inventory: bulk inserts in one transaction, so an import lands whole or
not at all."""

from __future__ import annotations

from django.db import transaction

from twin.inventory.adapter import (
    FREE_PORTS,
    accelerator_models_sync,
    cluster_delete,
    cluster_plan_read,
)
from twin.inventory.grid_membership import membership_restore
from twin.inventory.importer import Checked, Inventory, InventoryError, inventory_check
from twin.inventory.models import Accelerator, Cluster, DataHall, Link, Node, Rack, Site, Switch

BATCH = 5000


def _write(ok: Checked) -> Cluster:
    kept = None
    if ok.replaces is not None:  # a grid site stays in its grid (twin.inventory.grid_membership)
        kept = cluster_delete(cluster=ok.replaces, successor=ok.cluster["name"])
    models = accelerator_models_sync()
    free = [[i, sw["free_ports"]] for i, sw in enumerate(ok.switches) if sw["free_ports"]]
    c = ok.cluster
    cluster = Cluster.objects.create(
        name=c["name"], preset=c["preset"], fabric_kind=c["fabric_kind"],
        fabric_params={**c["fabric_params"], FREE_PORTS: free}, gres_map=c["gres_map"])
    sites = Site.objects.bulk_create(
        Site(cluster=cluster, name=s["name"], region=s["region"], pue=s["pue"])
        for s in ok.sites)
    site_id = {s.name: s.pk for s in sites}
    halls = DataHall.objects.bulk_create(
        DataHall(site_id=site_id[h["site"]], name=h["name"]) for h in ok.halls)
    hall_id = {(h["site"], h["name"]): row.pk for h, row in zip(ok.halls, halls, strict=True)}
    racks = Rack.objects.bulk_create(
        (Rack(hall_id=hall_id[r["hall"]], name=r["name"], row=r["row"], column=r["column"],
                power_capacity_kw=r["power_kw"], cooling_capacity_kw=r["power_kw"])
         for r in ok.racks), batch_size=BATCH)
    rack_id = {r.name: r.pk for r in racks}
    nodes = Node.objects.bulk_create(
        (Node(rack_id=rack_id[n["rack"]], slot=n["slot"], hostname=n["hostname"],
                accelerator_model_id=models[n["model"]].pk,
                accelerator_count=n["accelerators"], cpu_cores=n["cpu_cores"],
                ram_gb=n["ram_gb"], nic_count=n["accelerators"], nic_gbps=n["nic_gbps"],
                nvme_tb=n["nvme_tb"], nvlink_domain=n["nvlink_domain"],
                is_spare=n["is_spare"]) for n in ok.nodes), batch_size=BATCH)
    node_id = {n.hostname: n.pk for n in nodes}
    accelerators, g = [], 0
    for n in ok.nodes:
        for i in range(n["accelerators"]):
            accelerators.append(Accelerator(node_id=node_id[n["hostname"]], index=i,
                                              serial=f"{n['model']}-{c['name']}-{g:06d}"))
            g += 1
    Accelerator.objects.bulk_create(accelerators, batch_size=BATCH)
    switches = Switch.objects.bulk_create(
        (Switch(cluster=cluster, name=s["name"], index=i, tier=s["tier"], radix=c["radix"],
                  port_gbps=c["port_gbps"], pod=s["pod"], rail=s["rail"])
         for i, s in enumerate(ok.switches)), batch_size=BATCH)
    switch_id = {s.name: s.pk for s in switches}
    xcvr = f"{int(c['port_gbps'])}G optical"
    gbps = {n["hostname"]: n["nic_gbps"] for n in ok.nodes}
    Link.objects.bulk_create(
        [Link(cluster=cluster, switch_id=switch_id[u], peer_switch_id=switch_id[lo],
                speed_gbps=c["port_gbps"], transceiver_model=xcvr)
         for u, lo in ok.switch_cables]
        + [Link(cluster=cluster, switch_id=switch_id[sw], node_id=node_id[host],
                  node_port=port, speed_gbps=gbps[host],
                  transceiver_model=f"{int(gbps[host])}G optical")
           for sw, host, port in ok.node_cables], batch_size=BATCH)
    try:
        plan = cluster_plan_read(cluster=cluster)
    except ValueError as exc:
        raise InventoryError([f"the imported cluster cannot run: {exc}"]) from None
    cluster.summary = plan.summary()
    cluster.save(update_fields=["summary"])
    membership_restore(cluster=cluster, kept=kept, site=False)
    return cluster


@transaction.atomic
def inventory_import(inv: Inventory, *, replace: bool = False) -> Cluster:
    """Check ``inv`` and write it as a cluster, all or nothing.

    Raises :class:`InventoryError` (nothing written) listing every row that is wrong.
    """
    return _write(inventory_check(inv, replace=replace))
