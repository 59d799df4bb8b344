"""Import a cluster's inventory from a file (or from Slurm), checked row by row before writing.

``import_inventory`` reads one of the layouts below into :class:`Inventory` (plain rows, each
with the place it came from), :func:`inventory_check` checks every row and collects every
error, and :func:`inventory_import` writes the rows with bulk inserts in one transaction, only
when no row is wrong.  The cluster written is one :func:`twin.inventory.adapter.cluster_plan_read`
accepts: the import reads it back before committing.

JSON layout (``--format json``)
-------------------------------
One object; fields marked * are required, the others take the default shown::

    {"cluster": {"name"*: "lab", "fabric_kind"*: "fat-tree", "radix"*: 8,
                 "port_gbps"*: 400, "preset": "", "fabric_params": {}},
     "sites": [{"name"*: "lab-site", "region": "", "pue": 1.2,
                "halls": [{"name"*: "hall-0",
                           "racks": [{"name"*: "r0", "row"*: 0, "column"*: 0,
                                      "power_kw"*: 41.0}]}]}],
     "nodes": [{"hostname"*: "n0", "rack"*: "r0", "slot"*: 0, "model"*: "H100-SXM",
                "accelerators"*: 8, "cpu_cores": 112, "ram_gb": 2048, "nic_gbps": 400,
                "nvme_tb": 30.72, "nvlink_domain": 0, "is_spare": false}],
     "switches": [{"name"*: "leaf-00000", "tier"*: "leaf", "pod": null, "rail": null,
                   "free_ports": 0}],
     "cables": [{"upper": "spine-00004", "lower": "leaf-00000"},
                {"switch": "leaf-00000", "hostname": "n0", "port": 0}]}

* ``fabric_kind`` is one of ``fat-tree``, ``dragonfly+``, ``rail``, ``island``; ``radix`` and
  ``port_gbps`` apply to every switch; ``fabric_params`` is kept as the builder's parameters.
* Rack names are unique in the file (nodes name their rack); a rack's ``(row, column)`` is
  unique in its hall, a node's ``slot`` in its rack, a hostname in the whole database.
* ``model`` is a catalog name (``scheduler.hardware.catalog.CATALOG``), matched without
  regard to case; ``accelerators`` is at most the model's ``per_node``.
* Switches get ``index`` 0, 1, ... in file order; ``tier`` is ``leaf``, ``spine`` or
  ``core``; ``free_ports`` is a leaf's ports that no accelerator is cabled to.
* A switch-to-switch cable names its ``upper`` (higher tier) and ``lower`` switch; two
  switches of one tier only on a ``dragonfly+`` fabric (global links).  A node cable joins
  accelerator ``port`` (0 .. accelerators-1) of ``hostname`` to leaf ``switch``; every
  accelerator has exactly one.  A switch uses at most ``radix`` ports.

Errors name the JSON path of the row (``nodes[17]``, ``sites[0].halls[1].racks[2]``).

CSV layout (``--format csv``): a directory of files with the same columns
--------------------------------------------------------------------------------------
``cluster.csv`` (one row: name, fabric_kind, radix, port_gbps, preset, fabric_params as JSON
text), ``sites.csv`` (one row per hall: site, hall, region, pue), ``racks.csv`` (name, site,
hall, row, column, power_kw), ``nodes.csv`` (the node fields above), ``switches.csv`` (name,
tier, pod, rail, free_ports) and ``cables.csv`` (upper, lower, switch, hostname, port: a row
fills upper and lower, or switch, hostname and port).  An empty cell is a missing value.
Without ``cluster.csv``, ``--name`` names the cluster and the fabric is inferred as for
NetBox (:func:`fabric_infer`).  Errors name the file and the data row (1 = first after the
header).  The NetBox layout is described in :mod:`twin.inventory.formats`, the Slurm one in
:mod:`twin.mirror.slurm_import`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from numbers import Integral, Real

from scheduler.fabric.topology import KINDS, TIERS
from scheduler.hardware.catalog import CATALOG
from scheduler.hardware.cluster import NodeShape
from twin.inventory.models import Cluster, Node

MAX_ERRORS = 50




_SLUG = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")


_SHAPE = NodeShape()


NODE_DEFAULTS = {"cpu_cores": _SHAPE.cpu_cores, "ram_gb": _SHAPE.ram_gb,
                 "nic_gbps": _SHAPE.nic_gbps, "nvme_tb": _SHAPE.nvme_tb,
                 "nvlink_domain": 0, "is_spare": False}


_MODELS = {name.lower(): name for name in CATALOG}


@dataclass
class Row:
    """One record as read: ``where`` it came from (``nodes[3]``, ``nodes.csv row 4``)."""

    where: str
    data: dict


@dataclass
class Inventory:
    """Rows of every table, unchecked; sites, halls and racks are flat (racks name both)."""

    cluster: Row
    sites: list[Row] = field(default_factory=list)
    halls: list[Row] = field(default_factory=list)
    racks: list[Row] = field(default_factory=list)
    nodes: list[Row] = field(default_factory=list)
    switches: list[Row] = field(default_factory=list)
    cables: list[Row] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the import assumed (printed)


class InventoryError(Exception):
    """The rows cannot be imported; ``errors`` holds one line per problem."""

    def __init__(self, errors: list[str]):
        super().__init__(f"{len(errors)} errors")
        self.errors = errors


def model_name(text) -> str | None:
    """The catalog name of a model, matched without regard to case (``None`` if unknown)."""
    return _MODELS.get(str(text).strip().lower()) if text is not None else None


class _Checker:
    """Collects errors; the coercers return ``None`` (and note an error) for a bad value."""

    def __init__(self):
        self.errors: list[str] = []

    def error(self, row: Row, text: str) -> None:
        self.errors.append(f"{row.where}: {text}")

    def text(self, row: Row, key: str, required: bool = True, default: str = ""):
        value = row.data.get(key)
        if value is None or str(value).strip() == "":
            if required:
                self.error(row, f"{key} is missing")
                return None
            return default
        return str(value).strip()

    def integer(self, row: Row, key: str, minimum: int = 0, required: bool = True,
                default=None):
        value = row.data.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                self.error(row, f"{key} is missing")
            return default
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(value) if isinstance(value, str) else value
            if not isinstance(number, Real) or number != int(number):
                raise ValueError
            number = int(number)
        except (TypeError, ValueError, OverflowError):
            self.error(row, f"{key} must be a whole number, not {value!r}")
            return None
        if number < minimum:
            self.error(row, f"{key} must be at least {minimum}, not {number}")
            return None
        return number

    def number(self, row: Row, key: str, positive: bool = True, required: bool = True,
               default=None):
        value = row.data.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                self.error(row, f"{key} is missing")
            return default
        try:
            if isinstance(value, bool) or not isinstance(value, (str, Real)):
                raise ValueError
            number = float(value)
        except ValueError:
            self.error(row, f"{key} must be a number, not {value!r}")
            return None
        if number != number or (number <= 0 if positive else number < 0):
            self.error(row, f"{key} must be {'positive' if positive else 'at least 0'}, "
                            f"not {value!r}")
            return None
        return number

    def flag(self, row: Row, key: str):
        value = row.data.get(key)
        if value is None or value == "":
            return False
        if isinstance(value, bool):
            return value
        if isinstance(value, Integral) and value in (0, 1):
            return bool(value)
        text = str(value).strip().lower()
        if text in ("true", "yes", "1"):
            return True
        if text in ("false", "no", "0"):
            return False
        self.error(row, f"{key} must be true or false, not {value!r}")
        return None


@dataclass
class Checked:
    """Rows that passed every check, with typed values, ready to write."""

    cluster: dict
    sites: list[dict]
    halls: list[dict]
    racks: list[dict]
    nodes: list[dict]
    switches: list[dict]
    switch_cables: list[tuple[str, str]]
    node_cables: list[tuple[str, str, int]]
    replaces: Cluster | None


def _check_cluster(c: _Checker, inv: Inventory, replace: bool):
    row = inv.cluster
    out = {"name": c.text(row, "name"), "fabric_kind": c.text(row, "fabric_kind"),
           "radix": c.integer(row, "radix", minimum=2),
           "port_gbps": c.number(row, "port_gbps"),
           "preset": c.text(row, "preset", required=False),
           "fabric_params": row.data.get("fabric_params") or {},
           "gres_map": row.data.get("gres_map") or {}}
    if out["name"] is not None and not _SLUG.match(out["name"]):
        c.error(row, f"name {out['name']!r} must be 1-64 letters, digits, '-' or '_'")
    if out["fabric_kind"] is not None and out["fabric_kind"] not in KINDS:
        c.error(row, f"fabric_kind {out['fabric_kind']!r} is not one of {', '.join(KINDS)}")
    if not isinstance(out["fabric_params"], dict):
        c.error(row, "fabric_params must be an object")
    replaces = None
    if out["name"]:
        replaces = Cluster.objects.filter(name=out["name"]).first()
        if replaces is not None and not replace:
            c.error(row, f"cluster {out['name']!r} already exists; pass --replace to "
                         "replace it")
    return out, replaces


def _check_places(c: _Checker, inv: Inventory):
    sites, halls, racks = {}, {}, {}
    for row in inv.sites:
        name = c.text(row, "name")
        if name in sites:
            c.error(row, f"duplicate site {name!r} (first at {sites[name]['where']})")
        elif name is not None:
            sites[name] = {"where": row.where, "name": name,
                           "region": c.text(row, "region", required=False),
                           "pue": c.number(row, "pue", required=False, default=1.2)}
    for row in inv.halls:
        site, name = c.text(row, "site"), c.text(row, "name")
        if site is not None and site not in sites:
            c.error(row, f"site {site!r} not found")
        elif (site, name) in halls:
            c.error(row, f"duplicate hall {name!r} in site {site!r}")
        elif name is not None:
            halls[(site, name)] = {"site": site, "name": name}
    spots: dict[tuple, str] = {}
    for row in inv.racks:
        name, site, hall = c.text(row, "name"), c.text(row, "site"), c.text(row, "hall")
        r, col = c.integer(row, "row"), c.integer(row, "column")
        kw = c.number(row, "power_kw")
        if site is not None and hall is not None and (site, hall) not in halls:
            c.error(row, f"hall {hall!r} of site {site!r} not found")
            continue
        if name in racks:
            c.error(row, f"duplicate rack name {name!r} (first at {racks[name]['where']})")
            continue
        spot = (site, hall, r, col)
        if None not in spot and spot in spots:
            c.error(row, f"row {r}, column {col} of hall {hall!r} is taken by rack "
                         f"{spots[spot]!r}")
            continue
        if None in (name, site, hall, r, col, kw):
            continue
        spots[spot] = name
        racks[name] = {"where": row.where, "name": name, "hall": (site, hall), "row": r,
                       "column": col, "power_kw": kw}
    return sites, halls, racks


def _check_nodes(c: _Checker, inv: Inventory, racks: dict, replaces):
    nodes: dict[str, dict] = {}
    slots: dict[tuple, str] = {}
    for row in inv.nodes:
        host, rack = c.text(row, "hostname"), c.text(row, "rack")
        slot = c.integer(row, "slot")
        raw_model = c.text(row, "model")
        count = c.integer(row, "accelerators", minimum=1)
        node = {"where": row.where, "hostname": host, "rack": rack, "slot": slot,
                "model": model_name(raw_model), "accelerators": count}
        for key in ("cpu_cores", "nvlink_domain"):
            node[key] = c.integer(row, key, minimum=1 if key == "cpu_cores" else 0,
                                  required=False, default=NODE_DEFAULTS[key])
        for key in ("ram_gb", "nic_gbps", "nvme_tb"):
            node[key] = c.number(row, key, positive=key != "nvme_tb", required=False,
                                 default=NODE_DEFAULTS[key])
        node["is_spare"] = c.flag(row, "is_spare")
        if raw_model is not None and node["model"] is None:
            c.error(row, f"unknown accelerator model {raw_model!r} (the catalog has: "
                         f"{', '.join(CATALOG)})")
        elif node["model"] and count and count > CATALOG[node["model"]].per_node:
            c.error(row, f"{count} accelerators, above the {CATALOG[node['model']].per_node} "
                         f"a {node['model']} node holds")
            node["accelerators"] = None
        if rack is not None and rack not in racks:
            c.error(row, f"rack {rack!r} not found")
        if host in nodes:
            c.error(row, f"duplicate hostname {host!r} (first at {nodes[host]['where']})")
            continue
        if host is not None and not _SLUG.match(host.replace(".", "_")):
            c.error(row, f"hostname {host!r} holds characters other than letters, digits, "
                         "'.', '-' and '_'")
        if rack in racks and slot is not None:
            if (rack, slot) in slots:
                c.error(row, f"slot {slot} of rack {rack!r} is taken by {slots[rack, slot]}")
            else:
                slots[rack, slot] = host
        if host is not None:
            nodes[host] = node
    taken = Node.objects.all()
    if replaces is not None:
        taken = taken.exclude(rack__hall__site__cluster=replaces)
    names = sorted(nodes)
    for start in range(0, len(names), 900):
        for host, cluster in taken.filter(hostname__in=names[start:start + 900]).values_list(
                "hostname", "rack__hall__site__cluster__name"):
            c.error(Row(nodes[host]["where"], {}),
                    f"hostname {host!r} already exists (cluster {cluster!r})")
    return nodes


def _check_switches(c: _Checker, inv: Inventory):
    switches: dict[str, dict] = {}
    for row in inv.switches:
        name, tier = c.text(row, "name"), c.text(row, "tier")
        sw = {"where": row.where, "name": name, "tier": tier,
              "pod": c.integer(row, "pod", minimum=-1, required=False),
              "rail": c.integer(row, "rail", minimum=-1, required=False),
              "free_ports": c.integer(row, "free_ports", required=False, default=0)}
        if tier is not None and tier not in TIERS:
            c.error(row, f"tier {tier!r} is not one of {', '.join(TIERS)}")
        elif sw["free_ports"] and tier != "leaf":
            c.error(row, "free_ports is for leaf switches only")
        if name in switches:
            c.error(row, f"duplicate switch name {name!r} (first at "
                         f"{switches[name]['where']})")
        elif name is not None:
            switches[name] = sw
    return switches


def _check_cables(c: _Checker, inv: Inventory, kind, nodes: dict, switches: dict):
    rank = {t: i for i, t in enumerate(TIERS)}
    up, nic, ports = [], [], Counter()
    cabled: dict[tuple[str, int], str] = {}
    for row in inv.cables:
        d = row.data
        if d.get("_error"):
            c.error(row, d["_error"])
            continue
        has_up = any(d.get(k) not in (None, "") for k in ("upper", "lower"))
        has_nic = any(d.get(k) not in (None, "") for k in ("switch", "hostname", "port"))
        if has_up == has_nic:
            c.error(row, "a cable names upper and lower (two switches), or switch, hostname "
                         "and port (a node's NIC)")
            continue
        if has_up:
            upper, lower = c.text(row, "upper"), c.text(row, "lower")
            for name in (upper, lower):
                if name is not None and name not in switches:
                    c.error(row, f"cable to an unknown switch {name!r}")
            if upper not in switches or lower not in switches:
                continue
            tu, tl = rank.get(switches[upper]["tier"]), rank.get(switches[lower]["tier"])
            if upper == lower:
                c.error(row, f"cable from switch {upper!r} to itself")
            elif tu is not None and tl is not None and (
                    tu < tl or (tu == tl and kind != "dragonfly+")):
                c.error(row, f"switch cable {lower!r} ({TIERS[tl]}) -> {upper!r} "
                             f"({TIERS[tu]}) does not go from a lower to an upper tier"
                             + (" (same-tier links only on dragonfly+)" if tu == tl else ""))
            else:
                up.append((upper, lower))
                ports[upper] += 1
                ports[lower] += 1
            continue
        sw, host = c.text(row, "switch"), c.text(row, "hostname")
        port = c.integer(row, "port")
        if sw is not None and sw not in switches:
            c.error(row, f"cable to an unknown switch {sw!r}")
        elif sw is not None and switches[sw]["tier"] != "leaf":
            c.error(row, f"node cable to {sw!r}, a {switches[sw]['tier']} switch, not a leaf")
        if host is not None and host not in nodes:
            c.error(row, f"cable to an unknown node {host!r}")
        if port is not None and host in nodes and nodes[host]["accelerators"] is not None \
                and port >= nodes[host]["accelerators"]:
            c.error(row, f"port {port} of {host!r} is out of range (it has "
                         f"{nodes[host]['accelerators']} accelerators)")
            continue
        if (host, port) in cabled:
            c.error(row, f"port {port} of {host!r} is cabled twice (first at "
                         f"{cabled[host, port]})")
            continue
        if None in (sw, host, port) or sw not in switches or host not in nodes:
            continue
        cabled[host, port] = row.where
        nic.append((sw, host, port))
        ports[sw] += 1
    for host, node in nodes.items():
        for port in range(node["accelerators"] or 0):
            if (host, port) not in cabled:
                c.error(Row(node["where"], {}),
                        f"accelerator {port} of {host!r} has no NIC cable to a leaf switch")
    return up, nic, ports


def inventory_check(inv: Inventory, *, replace: bool = False) -> Checked:
    """Check every row; raise :class:`InventoryError` with every problem found."""
    c = _Checker()
    cluster, replaces = _check_cluster(c, inv, replace)
    sites, halls, racks = _check_places(c, inv)
    nodes = _check_nodes(c, inv, racks, replaces)
    switches = _check_switches(c, inv)
    up, nic, ports = _check_cables(c, inv, cluster["fabric_kind"], nodes, switches)
    if not inv.nodes:
        c.error(inv.cluster, "the inventory has no nodes")
    if not inv.switches:
        c.error(inv.cluster, "the inventory has no switches")
    if cluster["radix"]:
        for name, sw in switches.items():
            used = ports[name] + (sw["free_ports"] or 0)
            if used > cluster["radix"]:
                c.error(Row(sw["where"], {}), f"switch {name!r} uses {used} ports, more than "
                                              f"the radix {cluster['radix']}")
    if c.errors:
        raise InventoryError(c.errors)
    return Checked(cluster, list(sites.values()), list(halls.values()), list(racks.values()),
                   list(nodes.values()), list(switches.values()), up, nic, replaces)
