"""What real schedulers read, exported from the inventory: Slurm topology, node and GRES files,
and Kubernetes node labels with a Kueue ``Topology``.

:func:`cluster_topology_get` reads the rows with a few ``values_list`` queries into plain
columns (:class:`TopologyInventory`); the functions below it only format, so 13,500 nodes and
their switches export in well under a second.  Nothing here reads the presets: an admin's edit
to a node, a switch or a cable shows in the next export.

Slurm leaves
    A node's NIC links name the leaf switches it is cabled to.  Where every node has one leaf,
    each leaf is a Slurm leaf switch under its own name.  Where a node is cabled to several
    leaves (a rail-optimised scalable unit, whose eight rail leaves all reach the same 32
    nodes; or a node with more NICs than a leaf has ports) the leaves that share nodes form one
    *leaf group*, written as one virtual Slurm leaf ``leafgroup-NNNNN`` (``NNNNN`` its position
    among the leaf lines) with a comment naming its switches.  So every node sits under exactly
    one leaf, as ``topology/tree`` expects, and a job on one leaf group needs no spine hop.
Upper tiers (``slurm-tree``)
    One ``SwitchName=... Switches=...`` line per spine and core switch that reaches a node,
    its children read from the switch-to-switch Link rows (the lower-tier end of each link).
    A link between two switches of one tier (a Dragonfly+ global link) has no place in a tree;
    when the inventory has such links a virtual root ``global-links`` joins the switches left
    without a parent, so that jobs may still span groups.  Leaf switches that no node is cabled
    to, and upper switches above only those, are left out (Slurm refuses a line without
    children).  See topology.conf(5), topology/tree.
Blocks (``slurm-block``)
    One ``BlockName=... Nodes=...`` line per NVLink domain that spans nodes (a GB200 NVL72
    rack: the model's scale-up domain is larger than one node's accelerators, and the domain
    holds at least two nodes), named ``nvlink-NNNNN`` after the domain; every other node is in
    the block of its leaf group (the Slurm leaf above).  Blocks are listed in node order, which
    follows the fabric, because ``topology/block`` pairs neighbouring blocks into larger ones.
    ``BlockSizes`` starts with the smallest block's node count (Slurm refuses a block smaller
    than the first size, and without the line takes the first block listed as the base) and
    doubles up to the first size that spans all blocks, so aggregated blocks can grow to the
    whole cluster.  See topology.conf(5), topology/block.
Nodes and GRES (both Slurm formats)
    ``slurm-nodes.conf`` (to ``Include`` from ``slurm.conf``, which needs ``GresTypes=gpu``):
    ``NodeName=<hostlist> CPUs=<cores> RealMemory=<MiB> Gres=gpu:<type>:<count>``, one line per
    set of identical nodes; ``RealMemory`` is the inventory's RAM in MiB (GB x 1024), and the
    GRES type is the model name in lower case with other characters turned to ``_``
    (``H100-SXM`` -> ``h100_sxm``).  ``gres.conf`` starts with ``AutoDetect=off`` and gives each
    set ``Name=gpu Type=<type> File=<device files>``: ``/dev/nvidia[0-N]`` (NVIDIA),
    ``/dev/dri/renderD[128-..]`` (AMD), ``/dev/davinci[0-N]`` (Huawei Ascend),
    ``/dev/accel/accel[0-N]`` (Intel Gaudi); ``Count=N`` for a vendor whose device files we do
    not know.  Hot spares and drained or failed nodes are included: Slurm needs them defined,
    and keeps them out of jobs through partitions and node states.
Kubernetes (``k8s``)
    One YAML stream: a Kueue ``Topology`` (``apiVersion: kueue.x-k8s.io/v1alpha1``, as in Kueue
    0.9-0.13; later releases serve the same ``spec.levels`` as ``v1beta1``/``v1beta2``), then
    one ``v1 Node`` per node whose labels ``kubectl apply`` merges into the existing node:

    * ``topology.kubernetes.io/region``: the site's region (its name when it has none) and
      ``topology.kubernetes.io/zone``: site and data hall (Kubernetes' well-known labels);
    * ``cloud.provider.com/topology-block``: the node's spine block, ``block-NNNN``: the leaf
      groups joined by the same spines (a fat-tree pod, an island, a rail spine group, a
      Dragonfly+ group);
    * ``cloud.provider.com/topology-rack``: the node's Slurm block: its multi-node NVLink
      domain, else its leaf group (the keys of Kueue's Topology Aware Scheduling guide);
    * ``kubernetes.io/hostname``: the node's hostname.

    The Topology's levels are block, rack, hostname, coarse to fine.  Region and zone are
    labels only: a data hall is a physical boundary the network does not follow (an island can
    straddle two halls), and a Kueue level above the spine block would split it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from twin.inventory.hostlist import hostlist
from twin.inventory.models import Cluster, Link, Node, Switch

FORMATS = ("slurm-tree", "slurm-block", "k8s")
SLURM_NODES = "slurm-nodes.conf"
GRES_CONF = "gres.conf"
KUEUE_TOPOLOGY_API = "kueue.x-k8s.io/v1alpha1"
REGION, ZONE = "topology.kubernetes.io/region", "topology.kubernetes.io/zone"
BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
HOSTNAME = "kubernetes.io/hostname"
KUEUE_LEVELS = (BLOCK, RACK, HOSTNAME)
GLOBAL_ROOT = "global-links"

_TIER = {"leaf": 0, "spine": 1, "core": 2}
_DEVICES = {"NVIDIA": ("/dev/nvidia", 0), "AMD": ("/dev/dri/renderD", 128),
            "Huawei": ("/dev/davinci", 0), "Intel": ("/dev/accel/accel", 0)}
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class TopologyInventory:
    """Plain columns read from a cluster's rows; nodes in id order, switches by ``index``.

    ``node_leaves[n]`` lists the switch positions node ``n``'s NIC links land on;
    ``switch_links`` holds one ``(a, b)`` pair of switch positions per switch-to-switch cable.
    ``scaleup`` is the node model's NVLink (scale-up) domain size, in accelerators.
    """

    cluster: str
    hostname: list[str]
    gpus: list[int]
    cpus: list[int]
    ram_gb: list[float]
    model: list[str]
    vendor: list[str]
    scaleup: list[int]
    nvlink_domain: list[int]
    region: list[str]
    zone: list[str]
    switch_name: list[str]
    switch_tier: list[int]
    node_leaves: list[list[int]]
    switch_links: list[tuple[int, int]]


@dataclass(frozen=True)
class Group:
    """A set of nodes under one name: a Slurm leaf, a block or a spine block."""

    name: str
    nodes: list[int]
    leaves: list[int]


def cluster_topology_get(*, cluster: Cluster) -> TopologyInventory:
    """Read what the exports need from the rows of ``cluster`` (a handful of queries)."""
    nodes = list(Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
                 .values_list("id", "hostname", "accelerator_count", "cpu_cores", "ram_gb",
                              "accelerator_model__name", "accelerator_model__vendor",
                              "accelerator_model__scaleup_domain", "nvlink_domain",
                              "rack__hall__site__region", "rack__hall__site__name",
                              "rack__hall__name"))
    switches = list(Switch.objects.filter(cluster=cluster).order_by("index")
                    .values_list("id", "name", "tier"))
    node_pos = {row[0]: i for i, row in enumerate(nodes)}
    switch_pos = {row[0]: i for i, row in enumerate(switches)}
    node_leaves: list[set[int]] = [set() for _ in nodes]
    switch_links = []
    for switch, peer, node in Link.objects.filter(cluster=cluster).values_list(
            "switch_id", "peer_switch_id", "node_id").iterator(chunk_size=20_000):
        if node is not None:
            node_leaves[node_pos[node]].add(switch_pos[switch])
        elif peer is not None:
            switch_links.append((switch_pos[peer], switch_pos[switch]))
    return TopologyInventory(
        cluster=cluster.name,
        hostname=[r[1] for r in nodes], gpus=[r[2] for r in nodes], cpus=[r[3] for r in nodes],
        ram_gb=[r[4] for r in nodes], model=[r[5] for r in nodes], vendor=[r[6] for r in nodes],
        scaleup=[r[7] for r in nodes], nvlink_domain=[r[8] for r in nodes],
        region=[r[9] or r[10] for r in nodes], zone=[f"{r[10]}-{r[11]}" for r in nodes],
        switch_name=[s[1] for s in switches], switch_tier=[_TIER[s[2]] for s in switches],
        node_leaves=[sorted(s) for s in node_leaves], switch_links=switch_links)


def leaf_groups(inv: TopologyInventory) -> list[Group]:
    """The Slurm leaves: leaf switches joined by the nodes they share, in node order.

    Raises ``ValueError`` naming a node with no NIC link, or one cabled to an upper switch.
    """
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for n, leaves in enumerate(inv.node_leaves):
        if not leaves:
            raise ValueError(f"node {inv.hostname[n]} has no NIC link to a leaf switch")
        for s in leaves:
            if inv.switch_tier[s]:
                raise ValueError(f"node {inv.hostname[n]} is cabled to "
                                 f"{inv.switch_name[s]}, which is not a leaf switch")
            parent[root(s)] = root(leaves[0])
    nodes: dict[int, list[int]] = {}
    for n, leaves in enumerate(inv.node_leaves):
        nodes.setdefault(root(leaves[0]), []).append(n)
    members: dict[int, list[int]] = {}
    for s in sorted(parent):
        members.setdefault(root(s), []).append(s)
    groups = []
    for i, key in enumerate(sorted(nodes, key=lambda k: nodes[k][0])):
        leaves = members[key]
        name = inv.switch_name[leaves[0]] if len(leaves) == 1 else f"leafgroup-{i:05d}"
        groups.append(Group(name, nodes[key], leaves))
    names = {g.name for g in groups if len(g.leaves) > 1} | {GLOBAL_ROOT}
    clash = names & set(inv.switch_name)
    if clash:
        raise ValueError(f"switch {min(clash)} has a name the export keeps for a virtual switch")
    return groups


def slurm_tree(inv: TopologyInventory, groups: list[Group]) -> str:
    """``topology.conf`` for ``TopologyPlugin=topology/tree``."""
    group_of = {s: g.name for g in groups for s in g.leaves}
    children: dict[int, set[str]] = {}
    has_global = False
    for a, b in inv.switch_links:
        ta, tb = inv.switch_tier[a], inv.switch_tier[b]
        if ta == tb:
            has_global = True
            continue
        low, up = (a, b) if ta < tb else (b, a)
        child = group_of.get(low) if inv.switch_tier[low] == 0 else inv.switch_name[low]
        if child is not None:
            children.setdefault(up, set()).add(child)
    lines = [f"# topology.conf for TopologyPlugin=topology/tree: cluster {inv.cluster}, "
             f"{len(inv.hostname)} nodes, exported from the ClusterTwin inventory"]
    for g in groups:
        if len(g.leaves) > 1:
            lines.append(f"# {g.name}: {hostlist(inv.switch_name[s] for s in g.leaves)}, "
                         "cabled to the same nodes")
        lines.append(f"SwitchName={g.name} Nodes={hostlist(inv.hostname[n] for n in g.nodes)}")
    listed = {g.name for g in groups}
    placed: set[str] = set()
    uppers = sorted(children, key=lambda s: (inv.switch_tier[s], s))
    for s in uppers:
        kids = children[s] & listed
        if kids:
            lines.append(f"SwitchName={inv.switch_name[s]} Switches={hostlist(kids)}")
            listed.add(inv.switch_name[s])
            placed |= kids
    roots = listed - placed
    if has_global and len(roots) > 1:
        lines.append(f"# {GLOBAL_ROOT}: the switch-to-switch links within a tier "
                     "(Dragonfly+ global links), which a tree cannot draw")
        lines.append(f"SwitchName={GLOBAL_ROOT} Switches={hostlist(roots)}")
    return "\n".join(lines) + "\n"


def blocks(inv: TopologyInventory, groups: list[Group]) -> list[Group]:
    """Slurm blocks: multi-node NVLink domains, and the rest of each leaf group, in node order."""
    domains: dict[int, list[int]] = {}
    for n, domain in enumerate(inv.nvlink_domain):
        if inv.scaleup[n] > inv.gpus[n]:
            domains.setdefault(domain, []).append(n)
    in_domain = {n for members in domains.values() if len(members) > 1 for n in members}
    out = [Group(f"nvlink-{d:05d}", members, [])
           for d, members in domains.items() if len(members) > 1]
    for g in groups:
        rest = [n for n in g.nodes if n not in in_domain]
        if rest:
            out.append(Group(g.name, rest, g.leaves))
    return sorted(out, key=lambda b: b.nodes[0])


def block_sizes(sizes: list[int]) -> list[int]:
    """``BlockSizes``: the smallest block, doubled up to the first size that spans all blocks.

    >>> block_sizes([18, 18, 4, 4, 4])
    [4, 8, 16, 32]
    """
    base, levels = min(sizes), 1
    while levels < len(sizes) and levels < 2 ** 15:
        levels *= 2
    return [base * 2 ** k for k in range(levels.bit_length())]


def slurm_block(inv: TopologyInventory, groups: list[Group]) -> str:
    """``topology.conf`` for ``TopologyPlugin=topology/block``."""
    found = blocks(inv, groups)
    lines = [f"# topology.conf for TopologyPlugin=topology/block: cluster {inv.cluster}, "
             f"{len(inv.hostname)} nodes in {len(found)} blocks (multi-node NVLink domains, "
             "else leaf groups), exported from the ClusterTwin inventory"]
    lines += [f"BlockName={b.name} Nodes={hostlist(inv.hostname[n] for n in b.nodes)}"
              for b in found]
    lines.append("BlockSizes=" + ",".join(map(str, block_sizes([len(b.nodes) for b in found]))))
    return "\n".join(lines) + "\n"


def gres_type(model: str) -> str:
    """A Slurm GRES type for an accelerator model.

    >>> gres_type("H100-SXM"), gres_type("Ascend910B")
    ('h100_sxm', 'ascend910b')
    """
    return re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")


def _same_nodes(inv: TopologyInventory, key) -> dict[tuple, list[int]]:
    sets: dict[tuple, list[int]] = {}
    for n in range(len(inv.hostname)):
        sets.setdefault(key(n), []).append(n)
    return sets


def slurm_nodes(inv: TopologyInventory) -> str:
    """``NodeName`` lines for ``slurm.conf``, one per set of identical nodes."""
    sets = _same_nodes(inv, lambda n: (inv.cpus[n], round(inv.ram_gb[n] * 1024),
                                       gres_type(inv.model[n]), inv.gpus[n]))
    lines = [f"# NodeName lines for slurm.conf (Include this file; slurm.conf needs "
             f"GresTypes=gpu): cluster {inv.cluster}, exported from the ClusterTwin inventory"]
    lines += [f"NodeName={hostlist(inv.hostname[n] for n in nodes)} CPUs={cpus} "
              f"RealMemory={mib} Gres=gpu:{kind}:{count}"
              for (cpus, mib, kind, count), nodes in sets.items()]
    return "\n".join(lines) + "\n"


def _devices(vendor: str, count: int) -> str:
    if vendor not in _DEVICES:
        return f"Count={count}"
    path, first = _DEVICES[vendor]
    last = first + count - 1
    return f"File={path}{first}" if count == 1 else f"File={path}[{first}-{last}]"


def gres_conf(inv: TopologyInventory) -> str:
    """``gres.conf``: each node's accelerators and their device files; no auto-detection."""
    sets = _same_nodes(inv, lambda n: (gres_type(inv.model[n]), inv.vendor[n], inv.gpus[n]))
    lines = [f"# gres.conf: cluster {inv.cluster}, exported from the ClusterTwin inventory",
             "AutoDetect=off"]
    lines += [f"NodeName={hostlist(inv.hostname[n] for n in nodes)} Name=gpu Type={kind} "
              + _devices(vendor, count)
              for (kind, vendor, count), nodes in sets.items()]
    return "\n".join(lines) + "\n"


def spine_blocks(inv: TopologyInventory, groups: list[Group]) -> list[str]:
    """Per node, ``block-NNNN``: the leaf groups that share an upper switch above a leaf."""
    group_at = {s: i for i, g in enumerate(groups) for s in g.leaves}
    parent = list(range(len(groups)))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first_group: dict[int, int] = {}
    for a, b in inv.switch_links:
        for low, up in ((a, b), (b, a)):
            if inv.switch_tier[low] == 0 and inv.switch_tier[up] > 0 and low in group_at:
                g = group_at[low]
                parent[root(g)] = root(first_group.setdefault(up, g))
    names: dict[int, str] = {}
    per_node = [""] * len(inv.hostname)
    for i, g in enumerate(groups):
        name = names.setdefault(root(i), f"block-{len(names):04d}")
        for n in g.nodes:
            per_node[n] = name
    return per_node


def _label_value(text: str) -> str:
    """A Kubernetes label value: other characters become ``-``, at most 63 characters."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value) or "unknown"


def k8s_yaml(inv: TopologyInventory, groups: list[Group]) -> str:
    """A Kueue ``Topology`` and one labelled ``Node`` per node, as one YAML stream."""
    rack = [""] * len(inv.hostname)
    for b in blocks(inv, groups):
        for n in b.nodes:
            rack[n] = b.name
    block = spine_blocks(inv, groups)
    bad = next((h for h in inv.hostname if not _LABEL_VALUE.match(h)), None)
    if bad is not None:
        raise ValueError(f"hostname {bad!r} is not a valid Kubernetes label value")
    name = re.sub(r"[^a-z0-9.-]+", "-", inv.cluster.lower()).strip("-.") or "cluster"
    q = json.dumps
    out = [f"# Kueue Topology and node labels: cluster {inv.cluster}, exported from the "
           "ClusterTwin inventory; kubectl apply -f merges the labels into existing nodes",
           f"apiVersion: {KUEUE_TOPOLOGY_API}", "kind: Topology", "metadata:",
           f"  name: {q(name)}", "spec:", "  levels:"]
    out += [f"  - nodeLabel: {q(level)}" for level in KUEUE_LEVELS]
    for n, host in enumerate(inv.hostname):
        out += ["---", "apiVersion: v1", "kind: Node", "metadata:", f"  name: {q(host)}",
                "  labels:",
                f"    {REGION}: {q(_label_value(inv.region[n]))}",
                f"    {ZONE}: {q(_label_value(inv.zone[n]))}",
                f"    {BLOCK}: {q(_label_value(block[n]))}",
                f"    {RACK}: {q(_label_value(rack[n]))}",
                f"    {HOSTNAME}: {q(host)}"]
    return "\n".join(out) + "\n"


def topology_files(fmt: str, inv: TopologyInventory, out: Path) -> dict[Path, str]:
    """The files one export writes, by path: ``out`` itself, and for Slurm formats
    ``slurm-nodes.conf`` and ``gres.conf`` beside it."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    groups = leaf_groups(inv)
    if fmt == "k8s":
        return {out: k8s_yaml(inv, groups)}
    tree = slurm_tree if fmt == "slurm-tree" else slurm_block
    return {out: tree(inv, groups), out.parent / SLURM_NODES: slurm_nodes(inv),
            out.parent / GRES_CONF: gres_conf(inv)}


def files_write(files: dict[Path, str]) -> None:
    """Write every file or none: each to a temporary file in its own directory, then rename.

    A target that is a directory is refused before anything is written, and a failure while
    writing (a full disk, no permission) removes the temporary files and leaves every target
    as it was.  Only a failing rename, after the first succeeded, could leave some targets new
    and some old; none is ever half-written.
    """
    for path in files:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    temps: list[tuple[str, Path]] = []
    path = next(iter(files), None)
    try:
        for path, text in files.items():
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temps.append((tmp, path))
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        for tmp, path in temps:
            os.replace(tmp, path)
    except OSError as exc:
        _remove(temps)
        # name the file being written, not its temporary twin
        raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        _remove(temps)
        raise


def _remove(temps: list[tuple[str, Path]]) -> None:
    for tmp, _ in temps:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
