"""Rebuild an inventory from a running Slurm (``import_inventory --from-slurm``).

Slurm knows nodes and a switch tree, not racks or cables, so the import rebuilds *Slurm's view*:

* nodes from ``sinfo --json`` (Slurm 22.05's ``scontrol`` has no ``--json``): ``name``,
  ``gres`` (``gpu:<type>:<count>``), ``cpus`` and ``real_memory`` (MiB; RAM GB = MiB / 1024).
  The GRES type maps back to the catalog model whose name, lower-cased with other characters
  turned to ``_``, it is (the inverse of ``export_topology``'s ``gres_type``, ignoring case).
  NIC speed and NVMe take the node defaults; each node is its own NVLink domain.
* switches from ``scontrol show topology``: ``Level`` 0 is a leaf, 1 a spine, 2 and above a
  core; each upper switch is cabled to the switches it lists (``Switches=``), and every node
  under a leaf (``Nodes=``) has each accelerator cabled to that leaf, port = accelerator index.
  Virtual switches the exporter wrote (``leafgroup-NNNNN`` for leaves sharing nodes, the
  ``global-links`` root) come back as switches under those names: the real rail leaves or
  Dragonfly+ global links behind them are not in Slurm.
* one rack per leaf switch, named after it, in site ``slurm``, hall ``hall-0``, 16 racks to a
  row; the nodes' slots are their order under the leaf.  The fabric is inferred as for NetBox
  (``dragonfly+`` if two switches of one tier are cabled, else ``fat-tree``).

GRES types that are not catalog names are mapped by the admin (``--gres-map``, kept on the
cluster as :attr:`Cluster.gres_map <twin.inventory.models.Cluster.gres_map>`): ``TYPE=MODEL``
for a type (``a100=A100-SXM4-80GB``), ``gpu=MODEL`` for untyped ``gpu:8``, ``TYPE=MODEL/K``
for MIG slices (``1g.10gb=A100-SXM4-80GB/7``: seven slices are one GPU; the twin models whole
GPUs).  A type with no mapping is one error line that offers the flag.  ``shard`` and other
GRES are not accelerators and are left out.  A Slurm without ``TopologyPlugin=topology/tree``
(no switches) is imported flat, with a warning: leaves of :data:`FLAT_LEAF` nodes in hostname
order under one core switch, an assumed topology the pages call so.

A Slurm that cannot be read (a command missing, no answer within the timeout, a non-zero exit,
output that is not what 22.05 prints) raises :class:`SlurmError` with one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from scheduler.hardware.catalog import CATALOG
from twin.inventory.formats import fabric_infer, racks_place
from twin.inventory.gres import gres_map_parse  # noqa: F401  (the import command's)
from twin.inventory.hostlist import expand
from twin.inventory.importer import Inventory, Row
from twin.inventory.topology_export import gres_type
from twin.mirror.errors import SourceError, run_command

SLURM_TIMEOUT = 30.0
SITE, HALL = "slurm", "hall-0"
_GRES = re.compile(r"(?:^|,)gpu(?::([^:,()]+))?:(\d+)")
_MIG = re.compile(r"^\d+g\.\d+gb$")
_TYPES = {gres_type(name): name for name in CATALOG}
UNTYPED = "gpu"
FLAT_LEAF = 16
"""Nodes per assumed leaf switch of a cluster imported without a topology."""


class SlurmError(Exception):
    """Slurm could not be read; the message is one line."""


def _run(args: list[str], conf: Path | None, timeout: float) -> str:
    try:
        return run_command(args, conf=conf, timeout=timeout)
    except SourceError as exc:
        raise SlurmError(exc.problem) from None


def slurm_read(*, conf: Path | None = None,
               timeout: float = SLURM_TIMEOUT) -> tuple[list[dict], str]:
    """``sinfo --json``'s nodes and ``scontrol show topology``'s text from a running Slurm."""
    out = _run(["sinfo", "--json"], conf, timeout)
    try:
        nodes = json.loads(out)["nodes"]
        if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise SlurmError("`sinfo --json` did not print a JSON object with a list of nodes") \
            from None
    return nodes, _run(["scontrol", "show", "topology"], conf, timeout)


def node_gpus(gres: str, gres_map: dict[str, str]) -> tuple[str, int] | str:
    """(catalog model, GPUs) of a node's GRES string, or why not (one line)."""
    found = _GRES.findall(gres)
    if not found:
        return f"no gpu GRES (gres {gres!r})"
    models, gpus = set(), 0
    for kind, count in found:
        key = kind.lower() if kind else UNTYPED
        mapped = gres_map.get(key)
        if mapped is None and kind:
            mapped = _TYPES.get(key)
        if mapped is None:
            flag = f"--gres-map {key}=MODEL" + ("/SLICES" if _MIG.match(key) else "")
            what = (f"untyped gpu:{count} names no model" if not kind else
                    f"MIG slices gpu:{kind}:{count} need the GPU they are cut from" if
                    _MIG.match(key) else f"GRES type {kind!r} is not a catalog model")
            return f"{what}: give {flag} (catalog: {', '.join(CATALOG)})"
        model, _, slices = mapped.partition("/")
        per = int(slices or 1)
        if int(count) % per:
            return f"gpu:{kind}:{count} is not a whole number of GPUs of {per} slices"
        models.add(model)
        gpus += int(count) // per
    if len(models) > 1:
        return f"GRES {gres!r} maps to several models ({', '.join(sorted(models))})"
    return models.pop(), gpus


def _switch_lines(text: str, hosts: list[str]) -> tuple[list[dict[str, str]], str]:
    """The switch lines of ``scontrol show topology``, and a warning ("" when none): with no
    switches (no topology plugin) an assumed flat tree over ``hosts``."""
    lines = []
    for line in text.splitlines():
        if line.strip().startswith("SwitchName="):
            lines.append(dict(kv.split("=", 1) for kv in line.split() if "=" in kv))
    if lines:
        return lines, ""
    leaves = [hosts[i:i + FLAT_LEAF] for i in range(0, len(hosts), FLAT_LEAF)]
    lines = [{"SwitchName": f"flat-leaf{k:04d}", "Level": "0", "Nodes": ",".join(group)}
             for k, group in enumerate(leaves)]
    lines.append({"SwitchName": "flat-core", "Level": "1",
                  "Switches": ",".join(line["SwitchName"] for line in lines)})
    first = text.strip().splitlines()[0] if text.strip() else "nothing"
    return lines, (f"`scontrol show topology` lists no switches ({first!r}; is "
                   "TopologyPlugin=topology/tree set?): imported flat, an assumed topology of "
                   f"{len(leaves)} leaf switch(es) of up to {FLAT_LEAF} nodes under one core "
                   "switch; the fabric figures are not the cluster's")


def inventory_from_slurm(nodes: list[dict], topology: str, *, name: str,
                         gres_map: dict[str, str] | None = None) -> Inventory:
    """Rows of the cluster Slurm describes (see the module docstring); ``gres_map`` as
    :func:`gres_map_parse` gives it.  What the import assumed is in ``inv.warnings``."""
    gres_map = dict(gres_map or {})
    inv = Inventory(Row("cluster", {"name": name, "gres_map": gres_map}))
    hosts = list(dict.fromkeys(str(n.get("name")) for n in nodes if n.get("name")))
    lines, warning = _switch_lines(topology, hosts)
    if warning:
        inv.warnings.append(warning)
    try:
        order = sorted(range(len(lines)), key=lambda i: (int(lines[i]["Level"]), i))
    except (KeyError, ValueError):
        raise SlurmError("`scontrol show topology` printed a switch without a numeric "
                         "Level") from None
    leaf_of: dict[str, str] = {}
    for i in order:
        sw = lines[i]
        level, where = int(sw["Level"]), f"scontrol show topology switch {sw['SwitchName']}"
        inv.switches.append(Row(where, {"name": sw["SwitchName"],
                                        "tier": ("leaf", "spine", "core")[min(level, 2)]}))
        if level == 0:
            for host in expand(sw.get("Nodes", "")):
                if host in leaf_of:
                    inv.cables.append(Row(where, {"_error": f"node {host} is under two leaf "
                                                            f"switches ({leaf_of[host]} too)"}))
                leaf_of.setdefault(host, sw["SwitchName"])
        else:
            inv.cables += [Row(where, {"upper": sw["SwitchName"], "lower": child})
                           for child in expand(sw.get("Switches", ""))]
    seen: set[str] = set()
    slots: dict[str, int] = {}
    for node in nodes:
        host = node.get("name")
        if host in seen:
            continue
        seen.add(host)
        where = f"sinfo node {host}"
        got = node_gpus(str(node.get("gres") or ""), gres_map)
        leaf = leaf_of.get(host)
        data = {"hostname": host, "rack": leaf, "slot": slots.get(leaf, 0),
                "model": None, "accelerators": None, "cpu_cores": node.get("cpus"),
                "ram_gb": (node["real_memory"] / 1024
                           if isinstance(node.get("real_memory"), (int, float)) else None),
                "nvlink_domain": len(seen) - 1}
        slots[leaf] = slots.get(leaf, 0) + 1
        if isinstance(got, str):
            inv.cables.append(Row(where, {"_error": got}))
        else:
            model, count = got
            data.update(model=model, accelerators=count)
            for port in range(count if leaf else 0):
                inv.cables.append(Row(where, {"switch": leaf, "hostname": host,
                                              "port": port}))
        if leaf is None:
            inv.cables.append(Row(where, {"_error": "the node is under no leaf switch in "
                                                    "`scontrol show topology`"}))
        inv.nodes.append(Row(where, data))
    for host in sorted(set(leaf_of) - seen):
        inv.cables.append(Row(f"scontrol show topology switch {leaf_of[host]}",
                              {"_error": f"node {host} is not in `sinfo --json`"}))
    racks_place(inv, {leaf: (f"scontrol show topology switch {leaf}", SITE, HALL)
                      for leaf in dict.fromkeys(leaf_of[h] for h in seen if h in leaf_of)})
    fabric_infer(inv)
    return inv
