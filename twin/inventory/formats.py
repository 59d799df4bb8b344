"""Read the import layouts into :class:`~twin.inventory.importer.Inventory` rows, and write a
cluster back out as JSON or CSV (the layouts are described in :mod:`twin.inventory.importer`).

NetBox (``--format netbox``): a directory holding ``devices.csv`` and ``cables.csv`` as
NetBox's bulk import takes them (and as an export with those columns gives them).  Headers are
matched without case, spaces read as ``_``.

``devices.csv``
    ``name``; ``role`` (``device_role`` before NetBox 3.6); ``device_type``; ``site``;
    ``location`` (the data hall; ``main`` when empty); ``rack``; ``position`` (the slot,
    a whole number of U); custom fields ``cf_<field>`` for the fields NetBox has no column for.
    A device whose role or ``cf_tier`` names ``leaf``, ``spine`` or ``core`` (or whose role
    holds ``switch``) is a switch of that tier (``cf_pod``, ``cf_rail``, ``cf_free_ports``).
    Every other device is a node: its model is ``cf_accelerator_model`` or else the device
    type, matched to the catalog without case; ``cf_accelerator_count`` defaults to the
    model's ``per_node``; ``cf_cpu_cores``, ``cf_ram_gb``, ``cf_nic_gbps``, ``cf_nvme_tb``,
    ``cf_nvlink_domain`` and ``cf_is_spare`` to the node defaults.  Racks are those the nodes
    name, placed in their hall in order of first mention, 16 to a row; a rack's power is the
    peak draw of its nodes.
``cables.csv``
    ``side_a_device``, ``side_a_name``, ``side_b_device``, ``side_b_name`` (NetBox 3.3 and
    later; ``termination_a_device`` ... ``termination_b_name`` are read too).  Two switches
    make a switch cable, the higher tier upper; a node and a leaf make a NIC cable whose port is
    the number that ends the node's interface name (``nic3`` and ``gpu3`` are port 3).
The cluster is named by ``--name``; the fabric is inferred (:func:`fabric_infer`).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from scheduler.hardware import power
from scheduler.hardware.catalog import CATALOG
from scheduler.limits.documents import DocumentError, json_loads
from twin.inventory.adapter import FREE_PORTS
from twin.inventory.importer import NODE_DEFAULTS, Inventory, Row, model_name
from twin.inventory.models import Cluster, Link, Node, Site, Switch

CSV_TABLES = {
    "cluster": ("name", "fabric_kind", "radix", "port_gbps", "preset", "fabric_params"),
    "sites": ("site", "hall", "region", "pue"),
    "racks": ("name", "site", "hall", "row", "column", "power_kw"),
    "nodes": ("hostname", "rack", "slot", "model", "accelerators", "cpu_cores", "ram_gb",
              "nic_gbps", "nvme_tb", "nvlink_domain", "is_spare"),
    "switches": ("name", "tier", "pod", "rail", "free_ports"),
    "cables": ("upper", "lower", "switch", "hostname", "port"),
}
RACKS_PER_ROW = 16


class LayoutError(Exception):
    """A file cannot be read at all (missing, not JSON, no header); one line."""


# ---------------------------------------------------------------- JSON


def inventory_from_json(doc, *, source: str = "", name: str | None = None) -> Inventory:
    """Rows of a JSON document in the import layout; ``name`` overrides the cluster's."""
    if not isinstance(doc, dict):
        raise LayoutError(f"{source}: the document must be an object with cluster, sites, "
                          "nodes, switches and cables")
    cluster = doc.get("cluster") or {}
    if not isinstance(cluster, dict):
        raise LayoutError(f"{source}: cluster must be an object")
    inv = Inventory(Row("cluster", {**cluster, **({"name": name} if name else {})}))
    for key in ("sites", "nodes", "switches", "cables"):
        if not isinstance(doc.get(key, []), list):
            raise LayoutError(f"{source}: {key} must be a list")

    def items(parent, key, where):
        for i, item in enumerate(parent.get(key) or []):
            yield f"{where}{key}[{i}]", item if isinstance(item, dict) else {"": item}

    for sw, site in items(doc, "sites", ""):
        inv.sites.append(Row(sw, site))
        for hw, hall in items(site, "halls", f"{sw}."):
            inv.halls.append(Row(hw, {"site": site.get("name"), "name": hall.get("name")}))
            for rw, rack in items(hall, "racks", f"{hw}."):
                inv.racks.append(Row(rw, {**rack, "site": site.get("name"),
                                          "hall": hall.get("name")}))
    for key in ("nodes", "switches", "cables"):
        getattr(inv, key).extend(Row(w, item) for w, item in items(doc, key, ""))
    return inv


def inventory_export_json(*, cluster: Cluster) -> dict:
    """A cluster's rows in the JSON import layout (importing it gives the same plan)."""
    params = dict(cluster.fabric_params)
    free = dict(params.pop(FREE_PORTS, []))
    switches = list(Switch.objects.filter(cluster=cluster).order_by("index")
                    .values_list("index", "name", "tier", "pod", "rail", "radix", "port_gbps"))
    doc = {"cluster": {"name": cluster.name, "fabric_kind": cluster.fabric_kind,
                       "radix": switches[0][5] if switches else None,
                       "port_gbps": switches[0][6] if switches else None,
                       "preset": cluster.preset, "fabric_params": params},
           "sites": [], "nodes": [], "switches": [], "cables": []}
    for site in Site.objects.filter(cluster=cluster).order_by("id"):
        halls = []
        for hall in site.halls.order_by("id"):
            halls.append({"name": hall.name, "racks": [
                {"name": r.name, "row": r.row, "column": r.column,
                 "power_kw": r.power_capacity_kw} for r in hall.racks.order_by("id")]})
        doc["sites"].append({"name": site.name, "region": site.region, "pue": site.pue,
                             "halls": halls})
    for n in (Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
              .select_related("rack", "accelerator_model")):
        doc["nodes"].append({
            "hostname": n.hostname, "rack": n.rack.name, "slot": n.slot,
            "model": n.accelerator_model.name, "accelerators": n.accelerator_count,
            "cpu_cores": n.cpu_cores, "ram_gb": n.ram_gb, "nic_gbps": n.nic_gbps,
            "nvme_tb": n.nvme_tb, "nvlink_domain": n.nvlink_domain, "is_spare": n.is_spare})
    for index, name, tier, pod, rail, _, _ in switches:
        doc["switches"].append({"name": name, "tier": tier, "pod": pod, "rail": rail,
                                "free_ports": free.get(index, 0)})
    links = Link.objects.filter(cluster=cluster)
    doc["cables"] = [{"upper": u, "lower": lo} for u, lo in
                     links.filter(peer_switch__isnull=False).order_by("id")
                     .values_list("switch__name", "peer_switch__name")]
    doc["cables"] += [{"switch": s, "hostname": h, "port": p} for s, h, p in
                      links.filter(node__isnull=False).order_by("node_id", "node_port")
                      .values_list("switch__name", "node__hostname", "node_port")]
    return doc


# ---------------------------------------------------------------- CSV


def _read_csv(path: Path, required: bool = True) -> list[tuple[int, dict]] | None:
    """``(data row number, row)`` pairs, headers lower-cased; ``None`` for a missing
    optional file."""
    if not path.is_file():
        if required:
            raise LayoutError(f"{path}: no such file")
        return None
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is None:
                raise LayoutError(f"{path}: empty file (no header row)")
            header = [re.sub(r"\s+", "_", (h or "").strip().lower()) for h in reader.fieldnames]
            return [(i, {k: (v.strip() if isinstance(v, str) else v)
                         for k, v in zip(header, raw.values(), strict=False)})
                    for i, raw in enumerate(reader, start=1)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise LayoutError(f"{path}: cannot read: {exc}") from None


def _need(path: Path, rows, columns) -> None:
    have = set(rows[0][1]) if rows else set()
    missing = [c for c in columns if c not in have]
    if rows and missing:
        raise LayoutError(f"{path.name}: missing column(s) {', '.join(missing)}")


def inventory_from_csv(directory: Path, *, name: str | None = None) -> Inventory:
    """Rows of a CSV directory (one file per table)."""
    files = {t: _read_csv(directory / f"{t}.csv", required=t != "cluster")
             for t in CSV_TABLES}
    for table, columns in (("sites", ("site", "hall")), ("racks", CSV_TABLES["racks"][:2]),
                           ("nodes", ("hostname",)), ("switches", ("name", "tier"))):
        _need(directory / f"{table}.csv", files[table], columns)

    def rows(table):
        return [Row(f"{table}.csv row {i}", data) for i, data in files[table] or []]

    cluster = rows("cluster")
    if len(cluster) > 1:
        raise LayoutError("cluster.csv: one row expected, not "
                          f"{len(cluster)}")
    if cluster:
        data = dict(cluster[0].data)
        try:
            data["fabric_params"] = json_loads(data.get("fabric_params") or "{}",
                                               what="fabric_params")
        except DocumentError as exc:
            raise LayoutError(f"cluster.csv row 1: {exc}") from None
        inv = Inventory(Row("cluster.csv row 1", {**data, **({"name": name} if name else {})}))
    else:
        inv = Inventory(Row("cluster", {"name": name}))
    seen: set[str] = set()
    for row in rows("sites"):
        if row.data.get("site") and row.data["site"] not in seen:
            seen.add(row.data["site"])
            inv.sites.append(Row(row.where, {**row.data, "name": row.data["site"]}))
        inv.halls.append(Row(row.where, {"site": row.data.get("site"),
                                         "name": row.data.get("hall")}))
    inv.racks, inv.nodes = rows("racks"), rows("nodes")
    inv.switches, inv.cables = rows("switches"), rows("cables")
    if not cluster:
        fabric_infer(inv)
    return inv


def csv_tables(doc: dict) -> dict[str, list[dict]]:
    """The JSON layout flattened into the CSV tables."""
    cluster = {**doc["cluster"], "fabric_params": json.dumps(doc["cluster"]["fabric_params"])}
    out = {"cluster": [cluster], "sites": [], "racks": [], "nodes": doc["nodes"],
           "switches": doc["switches"], "cables": doc["cables"]}
    for site in doc["sites"]:
        for hall in site["halls"]:
            out["sites"].append({"site": site["name"], "hall": hall["name"],
                                 "region": site["region"], "pue": site["pue"]})
            out["racks"] += [{**r, "site": site["name"], "hall": hall["name"]}
                             for r in hall["racks"]]
    return out


def inventory_export_csv(*, cluster: Cluster, directory: Path) -> list[Path]:
    """Write a cluster as the CSV layout into ``directory``; returns the files written."""
    written = []
    for table, rows in csv_tables(inventory_export_json(cluster=cluster)).items():
        path = directory / f"{table}.csv"
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=CSV_TABLES[table])
            writer.writeheader()
            writer.writerows({k: ("" if v is None else v) for k, v in row.items()}
                             for row in rows)
        written.append(path)
    return written


# ---------------------------------------------------------------- inferred fabric


def fabric_infer(inv: Inventory) -> None:
    """Fill in the fabric of a source that has none (NetBox, Slurm, CSV without
    ``cluster.csv``): ``dragonfly+`` if a cable joins two switches of one tier, ``rail`` if a
    switch has a rail, else ``fat-tree``; the radix is the most ports any switch uses,
    rounded up to even (at least 4); the port speed the fastest NIC (400 Gb/s if none)."""
    tiers = {r.data.get("name"): r.data.get("tier") for r in inv.switches}
    ports: dict[str, int] = {}
    same_tier = False
    for r in inv.cables:
        ends = [r.data.get(k) for k in ("upper", "lower", "switch") if r.data.get(k)]
        for end in ends:
            ports[end] = ports.get(end, 0) + 1
        same_tier |= len(ends) == 2 and tiers.get(ends[0]) == tiers.get(ends[1])
    for r in inv.switches:
        free = str(r.data.get("free_ports") or "0")
        if free.isdigit() and r.data.get("name") in ports:
            ports[r.data["name"]] += int(free)
    rails = any(r.data.get("rail") not in (None, "", -1, "-1") for r in inv.switches)
    gbps = []
    for r in inv.nodes:
        try:
            gbps.append(float(r.data.get("nic_gbps") or NODE_DEFAULTS["nic_gbps"]))
        except (TypeError, ValueError):
            continue
    radix = max([4, *ports.values()])
    inv.cluster.data.update(
        fabric_kind="dragonfly+" if same_tier else "rail" if rails else "fat-tree",
        radix=radix + radix % 2, port_gbps=max(gbps, default=NODE_DEFAULTS["nic_gbps"]))


def rack_power_kw(nodes: list[tuple[str, int]]) -> float:
    """Peak draw of ``(model, accelerators)`` nodes, kW (1 kW for a rack of none)."""
    kw = 0.0
    for model, count in nodes:
        name = model_name(model)
        if name is not None and isinstance(count, int):
            kw += power.node_kw(CATALOG[name], count)
    return round(kw, 3) or 1.0


def racks_place(inv: Inventory, racks: dict[str, tuple[str, str, str]]) -> None:
    """Add sites, halls and racks for ``{rack: (where, site, hall)}`` in that order: 16 racks
    to a row, each rack's power the peak draw of the nodes that name it."""
    load: dict[str, list] = {}
    for r in inv.nodes:
        load.setdefault(r.data.get("rack"), []).append(
            (r.data.get("model"), _whole(r.data.get("accelerators"))))
    halls: dict[tuple[str, str], int] = {}
    for rack, (where, site, hall) in racks.items():
        if not any(s.data["name"] == site for s in inv.sites):
            inv.sites.append(Row(where, {"name": site}))
        if (site, hall) not in halls:
            halls[site, hall] = 0
            inv.halls.append(Row(where, {"site": site, "name": hall}))
        i = halls[site, hall]
        halls[site, hall] += 1
        inv.racks.append(Row(where, {"name": rack, "site": site, "hall": hall,
                                     "row": i // RACKS_PER_ROW, "column": i % RACKS_PER_ROW,
                                     "power_kw": rack_power_kw(load.get(rack, []))}))


def _whole(value):
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- NetBox

_TIER_WORDS = ("leaf", "spine", "core")
_NB_CABLE = {"a_device": ("side_a_device", "termination_a_device"),
             "a_name": ("side_a_name", "termination_a_name"),
             "b_device": ("side_b_device", "termination_b_device"),
             "b_name": ("side_b_name", "termination_b_name")}


def _tier(role: str, cf_tier: str) -> str | None:
    for text in (cf_tier, role):
        for word in _TIER_WORDS:
            if word in (text or "").lower():
                return word
    return "" if "switch" in (role or "").lower() else None


def inventory_from_netbox(directory: Path, *, name: str | None) -> Inventory:
    """Rows of NetBox's ``devices.csv`` and ``cables.csv`` (see the module docstring)."""
    devices = _read_csv(directory / "devices.csv")
    cables = _read_csv(directory / "cables.csv")
    _need(directory / "devices.csv", devices, ("name",))
    inv = Inventory(Row("cluster", {"name": name}))
    racks: dict[str, tuple[str, str, str]] = {}
    kind: dict[str, str] = {}
    for i, d in devices:
        where = f"devices.csv row {i}"
        role = d.get("role") or d.get("device_role") or ""
        tier = _tier(role, d.get("cf_tier"))
        if tier is not None:
            kind[d.get("name")] = "switch"
            inv.switches.append(Row(where, {
                "name": d.get("name"), "tier": tier or None, "pod": d.get("cf_pod"),
                "rail": d.get("cf_rail"), "free_ports": d.get("cf_free_ports")}))
            continue
        kind[d.get("name")] = "node"
        model = d.get("cf_accelerator_model") or d.get("device_type")
        known = model_name(model)
        count = d.get("cf_accelerator_count") or (CATALOG[known].per_node if known else None)
        node = {"hostname": d.get("name"), "rack": d.get("rack"), "slot": d.get("position"),
                "model": model, "accelerators": count}
        node.update({k: d.get(f"cf_{k}") for k in NODE_DEFAULTS})
        inv.nodes.append(Row(where, node))
        if d.get("rack") and d["rack"] not in racks:
            racks[d["rack"]] = (where, d.get("site") or "main", d.get("location") or "main")
    racks_place(inv, racks)
    for i, c in cables:
        where = f"cables.csv row {i}"
        get = {k: next((c[a] for a in names if c.get(a)), None)
               for k, names in _NB_CABLE.items()}
        a, b = get["a_device"], get["b_device"]
        unknown = [x for x in (a, b) if x not in kind]
        if unknown:
            inv.cables.append(Row(where, {"_error": f"cable to an unknown device "
                                                    f"{unknown[0]!r}"}))
            continue
        if kind[a] == kind[b] == "node":
            inv.cables.append(Row(where, {"_error": f"cable between two nodes ({a}, {b})"}))
            continue
        if kind[a] == kind[b] == "switch":
            rank = {r.data["name"]: _TIER_WORDS.index(r.data["tier"] or "leaf")
                    for r in inv.switches if r.data["name"] in (a, b)}
            upper, lower = (a, b) if rank[a] >= rank[b] else (b, a)
            inv.cables.append(Row(where, {"upper": upper, "lower": lower}))
            continue
        (node, iface), switch = ((a, get["a_name"]), b) if kind[a] == "node" else \
            ((b, get["b_name"]), a)
        port = re.search(r"(\d+)$", iface or "")
        inv.cables.append(Row(where, {"switch": switch, "hostname": node,
                                      "port": port.group(1)} if port else {
            "_error": f"no port number ends interface {iface!r} of {node}"}))
    fabric_infer(inv)
    return inv
