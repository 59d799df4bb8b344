"""Issue 12: ``import_inventory --from-slurm`` rebuilds the cluster a running Slurm describes.

The fat-tree and rail clusters of ``test_slurm_topology.py`` are exported, started as a real
Slurm (``conftest.py``), removed from the database (hostnames are unique), and rebuilt from
``sinfo --json`` and ``scontrol show topology``.  The rebuilt cluster must hold the same nodes,
GPU counts and models, Slurm's switch tree exactly, and run in the engine.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from tests.slurm.conftest import PLANS, export_tree, leaf_sets, slurm_tree
from twin import models as m
from twin.inventory.adapter import cluster_delete, cluster_plan_read, cluster_plan_write

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

TIER = {0: "leaf", 1: "spine"}


def nodes_of(cluster) -> dict[str, tuple[str, int, int, float]]:
    """Hostname -> (model, accelerators, cpu cores, RAM GB) from the rows."""
    return {h: rest for h, *rest in m.Node.objects.filter(rack__hall__site__cluster=cluster)
            .values_list("hostname", "accelerator_model__name", "accelerator_count",
                         "cpu_cores", "ram_gb")}


def leaf_map(cluster) -> dict[str, set[str]]:
    """Leaf switch name -> hostnames cabled to it (rows)."""
    out: dict[str, set[str]] = {}
    for leaf, host in m.Link.objects.filter(cluster=cluster, node__isnull=False).values_list(
            "switch__name", "node__hostname"):
        out.setdefault(leaf, set()).add(host)
    return out


@pytest.fixture(params=sorted(PLANS))
def rebuilt(request, db, slurm, tmp_path):
    """(original nodes, original leaf sets, rebuilt cluster, running Slurm)."""
    original = cluster_plan_write(PLANS[request.param]())
    running = slurm(export_tree(tmp_path))
    before = (nodes_of(original), (leaf_sets(original), leaf_map(original)))
    args = ("import_inventory", "--from-slurm", "--slurm-conf", str(running.conf), "--name",
            "rebuilt")
    with pytest.raises(CommandError, match="nothing was written"):
        call_command(*args, stdout=io.StringIO(), stderr=io.StringIO())  # hostnames taken
    cluster_delete(cluster=original)
    call_command(*args, stdout=io.StringIO())
    return (*before, m.Cluster.objects.get(name="rebuilt"), running, request.param)


def test_the_rebuilt_cluster_has_the_same_nodes_gpus_and_models(rebuilt):
    nodes, _, cluster, _, _ = rebuilt
    assert nodes_of(cluster) == nodes
    plan = cluster_plan_read(cluster=cluster)           # the engine accepts it
    assert plan.n_gpus == sum(n[1] for n in nodes.values())


def test_the_rebuilt_switch_tree_is_what_scontrol_reports(rebuilt):
    _, _, cluster, slurm, _ = rebuilt
    tree = slurm_tree(slurm)
    switches = dict(m.Switch.objects.filter(cluster=cluster).values_list("name", "tier"))
    assert switches == {name: TIER.get(sw["level"], "core") for name, sw in tree.items()}
    children: dict[str, set[str]] = {name: set() for name in tree}
    for upper, lower in m.Link.objects.filter(cluster=cluster, peer_switch__isnull=False) \
            .values_list("switch__name", "peer_switch__name"):
        children[upper].add(lower)
    leaf_nodes: dict[str, set[str]] = {name: set() for name in tree}
    for leaf, host in m.Link.objects.filter(cluster=cluster, node__isnull=False) \
            .values_list("switch__name", "node__hostname"):
        leaf_nodes[leaf].add(host)
    for name, sw in tree.items():
        assert children[name] == sw["switches"], name
        if sw["level"] == 0:
            assert leaf_nodes[name] == sw["nodes"], name
        else:
            assert not leaf_nodes[name], name


def test_every_accelerator_is_cabled_to_its_nodes_slurm_leaf(rebuilt):
    _, (before_leaves, before_map), cluster, _, _ = rebuilt
    ports = {}
    for host, port in m.Link.objects.filter(cluster=cluster, node__isnull=False) \
            .values_list("node__hostname", "node_port"):
        ports.setdefault(host, []).append(port)
    for host, (_, count, _, _) in nodes_of(cluster).items():
        assert sorted(ports[host]) == list(range(count)), host
    # Slurm's leaves hold the nodes that share leaf switches in the inventory; a rail
    # fabric's eight rail leaves per scalable unit come back as one virtual leaf
    assert leaf_sets(cluster) == before_leaves
    for name, hosts in leaf_map(cluster).items():       # a real leaf keeps its name and nodes
        assert hosts == before_map[name] if name in before_map else \
            name.startswith("leafgroup-"), name
    racks = dict(m.Node.objects.filter(rack__hall__site__cluster=cluster)
                 .values_list("hostname", "rack__name"))
    leaf = dict(m.Link.objects.filter(cluster=cluster, node__isnull=False)
                .values_list("node__hostname", "switch__name"))
    assert racks == leaf                                # one rack per leaf switch
