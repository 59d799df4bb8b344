"""export_topology: Slurm and Kubernetes topology files read from the inventory rows.

Every expectation here is computed from the database rows (Node, Accelerator, Switch, Link,
Site, DataHall) with this file's own hostlist parser and graph code, never with the exporter's.
"""

import errno
import io
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import networkx as nx
import pytest
import yaml
from django.core.management import CommandError, call_command
from django.db.models import Count
from hypothesis import example, given
from hypothesis import strategies as st

from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.presets import get_preset
from tests.hostlists import expand
from twin import models as m
from twin.inventory.adapter import cluster_plan_write
from twin.inventory.hostlist import hostlist

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------- reading the files back


def conf_lines(path) -> list[dict]:
    """``Key=value`` lines of a Slurm file, comments left out."""
    return [dict(kv.split("=", 1) for kv in line.split())
            for line in path.read_text().splitlines() if line and not line.startswith("#")]


def export(tmp_path, fmt, *extra, name="topology.conf"):
    out = tmp_path / name
    call_command("export_topology", "--format", fmt, "--out", str(out), *extra,
                 stdout=io.StringIO())
    return out


# ---------------------------------------------------------------- what the rows say


def nic_leaves(cluster) -> dict[str, set[str]]:
    """Hostname -> names of the switches its NIC links land on."""
    out = defaultdict(set)
    for host, switch in m.Link.objects.filter(cluster=cluster, node__isnull=False).values_list(
            "node__hostname", "switch__name"):
        out[host].add(switch)
    return out


def switch_children(cluster) -> dict[str, set[str]]:
    """Upper switch name -> names of the lower-tier switches cabled to it."""
    rank = {"leaf": 0, "spine": 1, "core": 2}
    out = defaultdict(set)
    for a, ta, b, tb in m.Link.objects.filter(cluster=cluster, peer_switch__isnull=False) \
            .values_list("switch__name", "switch__tier", "peer_switch__name",
                         "peer_switch__tier"):
        if rank[ta] > rank[tb]:
            out[a].add(b)
        elif rank[tb] > rank[ta]:
            out[b].add(a)
    return out


def reaching_a_node(cluster) -> set[str]:
    """Switches with a node below them, following the Link rows down."""
    reach = set().union(*nic_leaves(cluster).values())
    children = switch_children(cluster)
    while True:
        more = {up for up, kids in children.items() if kids & reach} - reach
        if not more:
            return reach
        reach |= more


def hostnames(cluster) -> set[str]:
    return set(m.Node.objects.filter(rack__hall__site__cluster=cluster)
               .values_list("hostname", flat=True))


# ---------------------------------------------------------------- clusters


@pytest.fixture
def fat_tree(db):
    """Radix-16 fat-tree, two pods and a core layer: 14 nodes, one leaf each, two leaves free."""
    return cluster_plan_write(plan_cluster(
        "ft", (NodeGroup("H100-SXM", 10), NodeGroup("MI300X", 4, spares=1)),
        fabric_kind="fat-tree", fabric_kw={"radix": 16}))


@pytest.fixture
def rail(db):
    """dev-small: two rail-optimised SUs of 32 nodes, eight rail leaves each."""
    return cluster_plan_write(get_preset("dev-small").plan())


@pytest.fixture
def nvl(db):
    """Eight H100 nodes and two GB200 NVL72 racks (18 trays of 4 GPUs) in compute islands."""
    return cluster_plan_write(plan_cluster(
        "nvl", (NodeGroup("H100-SXM", 8, nodes_per_rack=2),
                NodeGroup("GB200", 36, nodes_per_rack=18)),
        fabric_kind="island", fabric_kw={"radix": 16}))


# ---------------------------------------------------------------- slurm-tree


def test_every_node_sits_under_exactly_one_leaf_it_is_cabled_to(fat_tree, tmp_path):
    leaves = [line for line in conf_lines(export(tmp_path, "slurm-tree")) if "Nodes" in line]
    placed = Counter(host for line in leaves for host in expand(line["Nodes"]))
    assert set(placed) == hostnames(fat_tree) and set(placed.values()) == {1}
    cabled = nic_leaves(fat_tree)
    for line in leaves:
        for host in expand(line["Nodes"]):
            assert cabled[host] == {line["SwitchName"]}


def test_spine_and_core_lines_follow_the_switch_links(fat_tree, tmp_path):
    lines = conf_lines(export(tmp_path, "slurm-tree"))
    uppers = {line["SwitchName"]: set(expand(line["Switches"]))
              for line in lines if "Switches" in line}
    reach = reaching_a_node(fat_tree)
    expected = {up: kids & reach for up, kids in switch_children(fat_tree).items()
                if kids & reach}
    assert uppers == expected
    tiers = dict(m.Switch.objects.filter(cluster=fat_tree).values_list("name", "tier"))
    assert Counter(tiers[s] for s in uppers) == {"spine": 16, "core": 8}
    defined = {line["SwitchName"] for line in lines}
    assert set().union(*uppers.values()) <= defined    # every child has its own line
    empty = {s for s, t in tiers.items() if t == "leaf"} - set().union(
        *nic_leaves(fat_tree).values())
    assert len(empty) == 2 and not empty & defined     # Slurm refuses a switch with no child


def test_a_spine_whose_cables_were_removed_is_left_out(fat_tree, tmp_path):
    spine = m.Switch.objects.filter(cluster=fat_tree, tier="spine").order_by("index").first()
    m.Link.objects.filter(switch=spine, peer_switch__tier="leaf").delete()
    m.Link.objects.filter(peer_switch=spine, switch__tier="leaf").delete()
    lines = conf_lines(export(tmp_path, "slurm-tree"))
    defined = {line["SwitchName"] for line in lines}
    named = {s for line in lines if "Switches" in line for s in expand(line["Switches"])}
    assert spine.name not in defined | named
    assert named <= defined


def test_dragonfly_groups_hang_from_one_root_for_their_global_links(db, tmp_path):
    df = cluster_plan_write(plan_cluster("df", (NodeGroup("H100-SXM", 16),),
                                         fabric_kind="dragonfly+", fabric_kw={"radix": 16}))
    tiers = dict(m.Switch.objects.filter(cluster=df).values_list("name", "tier"))
    assert m.Link.objects.filter(switch__tier="spine", peer_switch__tier="spine").exists()
    lines = conf_lines(export(tmp_path, "slurm-tree"))
    uppers = {line["SwitchName"]: set(expand(line["Switches"]))
              for line in lines if "Switches" in line}
    root = uppers.pop("global-links")
    assert root == {s for s, t in tiers.items() if t == "spine"}
    reach = reaching_a_node(df)
    assert uppers == {up: kids & reach for up, kids in switch_children(df).items()
                      if kids & reach}


def test_rail_leaves_that_share_their_nodes_are_one_slurm_leaf(rail, tmp_path):
    path = export(tmp_path, "slurm-tree")
    lines = conf_lines(path)
    leaves = {line["SwitchName"]: expand(line["Nodes"]) for line in lines if "Nodes" in line}
    placed = Counter(host for hosts in leaves.values() for host in hosts)
    assert set(placed) == hostnames(rail) and set(placed.values()) == {1}
    cabled = nic_leaves(rail)
    members = {}
    for name, hosts in leaves.items():
        switches = set().union(*(cabled[h] for h in hosts))
        assert len(switches) == 8                      # one leaf per rail
        assert {h for h, s in cabled.items() if s & switches} == set(hosts)
        members[name] = switches
    assert len(leaves) == 2                            # one per scalable unit
    for name, switches in members.items():             # the comment names the real switches
        comment = next(c for c in path.read_text().splitlines() if c.startswith(f"# {name}:"))
        assert set(expand(comment.split()[2].rstrip(","))) == switches
    children = switch_children(rail)
    uppers = {line["SwitchName"]: set(expand(line["Switches"]))
              for line in lines if "Switches" in line}
    assert set(uppers) == set(children)
    for spine, kids in uppers.items():
        assert kids == {g for g, switches in members.items() if switches & children[spine]}


def test_nodes_with_more_nics_than_a_leaf_has_ports_join_their_leaves(small_cluster, tmp_path):
    lines = conf_lines(export(tmp_path, "slurm-tree"))
    cabled = nic_leaves(small_cluster)
    for line in (x for x in lines if "Nodes" in x):
        hosts = expand(line["Nodes"])
        assert all(len(cabled[h]) == 2 for h in hosts)     # radix 8: 4 ports, 8 NICs
        assert len(hosts) == 1 and line["SwitchName"].startswith("leafgroup-")


# ---------------------------------------------------------------- slurm-block


def test_blocks_are_nvlink_domains_where_they_span_nodes_else_leaves(nvl, tmp_path):
    lines = conf_lines(export(tmp_path, "slurm-block"))
    found = {line["BlockName"]: expand(line["Nodes"]) for line in lines if "BlockName" in line}
    placed = Counter(host for hosts in found.values() for host in hosts)
    assert set(placed) == hostnames(nvl) and set(placed.values()) == {1}
    domains = defaultdict(set)
    for host, domain in m.Node.objects.filter(accelerator_model__name="GB200").values_list(
            "hostname", "nvlink_domain"):
        domains[domain].add(host)
    assert len(domains) == 2 and {len(d) for d in domains.values()} == {18}
    as_sets = [set(hosts) for hosts in found.values()]
    for members in domains.values():
        assert members in as_sets
    cabled = nic_leaves(nvl)
    for hosts in found.values():
        if set(hosts) not in domains.values():
            (leaf,) = {s for h in hosts for s in cabled[h]}
            assert set(hosts) == {h for h, s in cabled.items() if s == {leaf}}
    assert len(found) == 8 + 2                         # radix 16: one H100 node per leaf


def test_block_sizes_start_at_the_smallest_block_and_double(nvl, rail, tmp_path):
    for cluster, base in ((nvl, 1), (rail, 32)):
        lines = conf_lines(export(tmp_path, "slurm-block", "--cluster", cluster.name))
        sizes = [int(s) for s in lines[-1]["BlockSizes"].split(",")]
        counts = [len(expand(line["Nodes"])) for line in lines if "BlockName" in line]
        assert sizes[0] == min(counts) == base
        assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))
        assert sizes[-1] // sizes[0] >= len(counts) > sizes[-1] // sizes[0] // 2


def test_blocks_are_listed_in_node_order_so_neighbours_pair_up(nvl, tmp_path):
    lines = conf_lines(export(tmp_path, "slurm-block"))
    order = {h: i for i, h in enumerate(m.Node.objects.order_by("id")
                                        .values_list("hostname", flat=True))}
    firsts = [min(order[h] for h in expand(line["Nodes"])) for line in lines
              if "BlockName" in line]
    assert firsts == sorted(firsts)


# ---------------------------------------------------------------- slurm-nodes.conf, gres.conf


@pytest.mark.parametrize("cluster", ["small_cluster", "nvl"])
def test_node_and_gres_lines_match_each_node_and_its_accelerators(request, cluster, tmp_path):
    request.getfixturevalue(cluster)
    export(tmp_path, "slurm-tree")
    gpus = dict(m.Node.objects.annotate(n=Count("accelerators")).values_list("hostname", "n"))
    rows = {r[0]: r[1:] for r in m.Node.objects.values_list(
        "hostname", "cpu_cores", "ram_gb", "accelerator_model__name")}
    nodes = conf_lines(tmp_path / "slurm-nodes.conf")
    seen = Counter(h for line in nodes for h in expand(line["NodeName"]))
    assert set(seen) == set(rows) and set(seen.values()) == {1}
    types = {"H100-SXM": "h100_sxm", "MI300X": "mi300x", "GB200": "gb200"}
    for line in nodes:
        for host in expand(line["NodeName"]):
            cpus, ram_gb, model = rows[host]
            assert line["Gres"] == f"gpu:{types[model]}:{gpus[host]}"
            assert (int(line["CPUs"]), int(line["RealMemory"])) == (cpus, ram_gb * 1024)
    gres = (tmp_path / "gres.conf").read_text().splitlines()
    assert [x for x in gres if not x.startswith("#")][0] == "AutoDetect=off"
    files = {"H100-SXM": "/dev/nvidia", "MI300X": "/dev/dri/renderD", "GB200": "/dev/nvidia"}
    for line in conf_lines(tmp_path / "gres.conf")[1:]:
        assert line["Name"] == "gpu"
        for host in expand(line["NodeName"]):
            model = rows[host][2]
            assert line["Type"] == types[model]
            devices = expand(line["File"])
            assert len(devices) == gpus[host] and all(d.startswith(files[model])
                                                      for d in devices)


def test_an_admin_edit_shows_in_the_next_export(small_cluster, tmp_path):
    node = m.Node.objects.order_by("id").first()
    node.cpu_cores = 64
    node.save()
    lines = conf_lines(export(tmp_path, "slurm-tree").parent / "slurm-nodes.conf")
    (edited,) = [line for line in lines if line["CPUs"] == "64"]
    assert expand(edited["NodeName"]) == [node.hostname]


# ---------------------------------------------------------------- k8s


def k8s(tmp_path, *extra):
    docs = list(yaml.safe_load_all(export(tmp_path, "k8s", *extra, name="k8s.yaml")
                                   .read_text()))
    return docs[0], docs[1:]


def test_the_yaml_holds_a_kueue_topology_and_one_labelled_node_per_node(rail, tmp_path):
    topology, nodes = k8s(tmp_path)
    assert (topology["apiVersion"], topology["kind"]) == ("kueue.x-k8s.io/v1alpha1", "Topology")
    levels = [level["nodeLabel"] for level in topology["spec"]["levels"]]
    assert levels == ["cloud.provider.com/topology-block", "cloud.provider.com/topology-rack",
                      "kubernetes.io/hostname"]
    assert {(d["apiVersion"], d["kind"]) for d in nodes} == {("v1", "Node")}
    names = [d["metadata"]["name"] for d in nodes]
    assert sorted(names) == sorted(hostnames(rail))
    zones = {f"{site}-{hall}" for site, hall in
             m.DataHall.objects.values_list("site__name", "name")}
    for d in nodes:
        labels = d["metadata"]["labels"]
        assert set(levels) <= set(labels)
        assert labels["kubernetes.io/hostname"] == d["metadata"]["name"]
        assert labels["topology.kubernetes.io/zone"] in zones
        assert labels["topology.kubernetes.io/region"] == "dev-small-site"
        assert all(isinstance(v, str) for v in labels.values())


def test_node_labels_follow_the_cabling(rail, fat_tree, tmp_path):
    for cluster in (rail, fat_tree):
        _, nodes = k8s(tmp_path, "--cluster", cluster.name)
        labels = {d["metadata"]["name"]: d["metadata"]["labels"] for d in nodes}
        graph = nx.Graph()
        cabled = nic_leaves(cluster)
        leaf_names = set().union(*cabled.values())
        for host, switches in cabled.items():
            graph.add_edges_from((host, s) for s in switches)
        shared = nx.Graph(graph)                      # nodes joined by their leaves alone
        for upper, kids in switch_children(cluster).items():
            graph.add_edges_from((upper, k) for k in kids & leaf_names)
        for key, g in (("cloud.provider.com/topology-rack", shared),
                       ("cloud.provider.com/topology-block", graph)):
            by_label = defaultdict(set)
            for host, values in labels.items():
                by_label[values[key]].add(host)
            expected = {frozenset(c & labels.keys()) for c in nx.connected_components(g)}
            assert {frozenset(v) for v in by_label.values()} == expected - {frozenset()}
        racks_per_block = defaultdict(set)             # Kueue's levels nest here
        for values in labels.values():
            racks_per_block[values["cloud.provider.com/topology-rack"]].add(
                values["cloud.provider.com/topology-block"])
        assert all(len(b) == 1 for b in racks_per_block.values())


def test_a_gb200_rack_label_is_its_nvlink_domain(nvl, tmp_path):
    _, nodes = k8s(tmp_path)
    rack = {d["metadata"]["name"]: d["metadata"]["labels"]["cloud.provider.com/topology-rack"]
            for d in nodes}
    for domain in m.Node.objects.filter(accelerator_model__name="GB200").values_list(
            "nvlink_domain", flat=True).distinct():
        hosts = set(m.Node.objects.filter(nvlink_domain=domain).values_list("hostname",
                                                                            flat=True))
        assert {h for h, r in rack.items() if r == rack[next(iter(hosts))]} == hosts


# ---------------------------------------------------------------- files and refusals


def test_an_export_replaces_the_files_and_leaves_no_temporary_file(rail, tmp_path):
    (tmp_path / "topology.conf").write_text("old\n")
    export(tmp_path, "slurm-block")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "gres.conf", "slurm-nodes.conf", "topology.conf"]
    assert (tmp_path / "topology.conf").read_text().count("BlockName=") == 2


@pytest.mark.parametrize("args, message", [
    ([], "--format is required"),
    (["--format", "slurm"], "--format must be one of"),
    (["--format", "k8s"], "--out PATH is required"),
    (["--format", "k8s", "--out", "{tmp}"], "is a directory"),
    (["--format", "k8s", "--out", "{tmp}/missing/x.yaml"], "does not exist"),
    (["--format", "slurm-tree", "--out", "{tmp}/gres.conf"], "written beside"),
    (["--format", "k8s", "--out", "{tmp}/x.yaml", "--cluster", "nope"], "unknown cluster"),
])
def test_bad_flags_are_refused_with_status_2_and_write_nothing(rail, tmp_path, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    with pytest.raises(CommandError, match=message) as err:
        call_command("export_topology", *args)
    assert err.value.returncode == 2
    assert list(tmp_path.iterdir()) == []


def test_an_empty_database_is_refused(db, tmp_path):
    with pytest.raises(CommandError, match="no cluster in the database") as err:
        export(tmp_path, "k8s")
    assert err.value.returncode == 2 and list(tmp_path.iterdir()) == []


def test_two_clusters_need_cluster_name(rail, fat_tree, tmp_path):
    with pytest.raises(CommandError, match=r"2 clusters \(dev-small, ft\); pass --cluster") as err:
        export(tmp_path, "k8s")
    assert err.value.returncode == 2 and list(tmp_path.iterdir()) == []


def test_an_unwritable_file_leaves_nothing_behind(rail, tmp_path):
    (tmp_path / "gres.conf").mkdir()
    with pytest.raises(CommandError, match="cannot write .*gres.conf") as err:
        export(tmp_path, "slurm-tree")
    assert err.value.returncode == 2
    assert [p.name for p in tmp_path.iterdir()] == ["gres.conf"]


def test_a_failure_while_writing_leaves_no_file_behind(rail, tmp_path, monkeypatch):
    real = os.fchmod
    calls = []

    def disk_full_on_the_third_file(fd, mode):
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, mode)

    monkeypatch.setattr(os, "fchmod", disk_full_on_the_third_file)
    with pytest.raises(CommandError, match="cannot write .*gres.conf: No space left") as err:
        export(tmp_path, "slurm-tree")
    assert err.value.returncode == 2 and list(tmp_path.iterdir()) == []


def test_a_node_without_a_nic_link_is_named_and_nothing_written(rail, tmp_path):
    node = m.Node.objects.order_by("id").last()
    m.Link.objects.filter(node=node).delete()
    with pytest.raises(CommandError, match=f"{node.hostname} has no NIC link") as err:
        export(tmp_path, "slurm-tree")
    assert err.value.returncode == 2 and list(tmp_path.iterdir()) == []


def test_a_node_cabled_to_a_spine_is_refused(fat_tree, tmp_path):
    link = m.Link.objects.filter(cluster=fat_tree, node__isnull=False).order_by("id").first()
    spine = m.Switch.objects.filter(cluster=fat_tree, tier="spine").first()
    m.Link.objects.filter(pk=link.pk).update(switch=spine)
    with pytest.raises(CommandError, match=f"cabled to {spine.name}, which is not a leaf") as err:
        export(tmp_path, "k8s")
    assert err.value.returncode == 2 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--format", "pbs", "--out", "x"], "--format must be one of"),
    (["--format", "k8s", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_command_line_errors_are_one_line_with_exit_status_2(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "manage.py", "export_topology", *args],
                          capture_output=True, text=True, cwd=ROOT,
                          env={"DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}",
                               "CLUSTERTWIN_INSECURE_DEMO": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert message in proc.stderr


# ---------------------------------------------------------------- hostlist expressions


names = st.lists(st.tuples(st.sampled_from(["n", "node-", "gpu7x", ""]), st.integers(0, 300),
                           st.sampled_from([1, 3, 6])), max_size=60)


@given(names)
@example([("n", 1, 3), ("n", 3, 3), ("n", 4, 3), ("n", 10, 2)])
def test_a_hostlist_expands_back_to_its_names(parts):
    hosts = {f"{prefix}{n:0{width}d}" for prefix, n, width in parts}
    assert sorted(expand(hostlist(hosts))) == sorted(hosts)
