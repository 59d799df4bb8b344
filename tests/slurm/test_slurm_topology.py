"""Issue 12: slurmctld accepts the exported ``topology.conf`` and hands back the twin's tree.

A fat-tree (radix 8, 16 nodes, H100 and MI300X) and a rail-optimised cluster (radix 16, three
scalable units of 8 nodes under spine groups and cores) are written to the test database,
exported with ``export_topology --format slurm-tree``, and started as a real Slurm (see
``conftest.py``).  What Slurm reports (``scontrol show topology``, ``sinfo --json``) is compared
with the exported files and with the inventory rows; Slurm's own hostlists are expanded by
Slurm (``scontrol show hostnames``).
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from django.db.models import Count

from tests.hostlists import expand
from tests.slurm.conftest import PLANS, conf_lines, export_tree, leaf_sets, slurm_tree
from twin import models as m
from twin.inventory.adapter import cluster_plan_write

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

@pytest.fixture(params=sorted(PLANS))
def running(request, db, slurm, tmp_path):
    """(cluster row, export folder, running Slurm) for each fabric."""
    cluster = cluster_plan_write(PLANS[request.param]())
    out = export_tree(tmp_path)
    return cluster, out, slurm(out)


def hostnames(cluster) -> set[str]:
    return set(m.Node.objects.filter(rack__hall__site__cluster=cluster)
               .values_list("hostname", flat=True))


def exported_tree(out) -> dict[str, dict[str, set[str]]]:
    """Switch -> {"nodes", "switches"} as written in the exported topology.conf."""
    return {line["SwitchName"]: {"nodes": set(expand(line.get("Nodes", ""))),
                                 "switches": set(expand(line.get("Switches", "")))}
            for line in conf_lines((out / "topology.conf").read_text())}


def switch_children(cluster) -> dict[str, set[str]]:
    """Upper switch -> lower-tier switches cabled to it (inventory rows)."""
    rank = {"leaf": 0, "spine": 1, "core": 2}
    out: dict[str, set[str]] = {}
    for a, ta, b, tb in m.Link.objects.filter(cluster=cluster, peer_switch__isnull=False) \
            .values_list("switch__name", "switch__tier", "peer_switch__name",
                         "peer_switch__tier"):
        if rank[ta] != rank[tb]:
            up, low = (a, b) if rank[ta] > rank[tb] else (b, a)
            out.setdefault(up, set()).add(low)
    return out


def test_scontrol_show_topology_gives_back_the_exported_tree(running):
    cluster, out, slurm = running
    exported, tree = exported_tree(out), slurm_tree(slurm)
    assert set(tree) == set(exported)
    for name, sw in exported.items():
        assert tree[name]["switches"] == sw["switches"], name
        if sw["nodes"]:
            assert tree[name]["nodes"] == sw["nodes"] and tree[name]["level"] == 0, name

    def below(name):                                   # nodes under a switch, from the file
        sw = exported[name]
        return sw["nodes"].union(*(below(k) for k in sw["switches"]))

    def level(name):
        kids = exported[name]["switches"]
        return 1 + max(map(level, kids)) if kids else 0

    for name in exported:
        assert tree[name]["nodes"] == below(name), name
        assert tree[name]["level"] == level(name), name
    hosts = hostnames(cluster)
    assert any(sw["nodes"] == hosts for sw in tree.values())   # a job may span the cluster
    assert "no switch can reach all nodes" not in slurm.logs["slurmctld"].read_text()


def test_every_node_sits_under_exactly_one_leaf_as_cabled(running):
    cluster, _, slurm = running
    tree = slurm_tree(slurm)
    leaves = {name: sw["nodes"] for name, sw in tree.items() if sw["level"] == 0}
    placed = Counter(h for nodes in leaves.values() for h in nodes)
    assert set(placed) == hostnames(cluster) and set(placed.values()) == {1}
    assert {frozenset(n) for n in leaves.values()} == leaf_sets(cluster)
    # each real upper switch holds the Slurm leaves of the leaf switches cabled to it
    slurm_leaf = {}
    for host, leaf in m.Link.objects.filter(cluster=cluster, node__isnull=False).values_list(
            "node__hostname", "switch__name"):
        slurm_leaf[leaf] = next(n for n, nodes in leaves.items() if host in nodes)
    children = switch_children(cluster)
    uppers = {name: sw for name, sw in tree.items() if sw["level"] > 0}
    assert set(uppers) <= set(children)
    for name, sw in uppers.items():
        assert sw["switches"] == {slurm_leaf.get(c, c) for c in children[name]} & set(tree)


def test_every_node_registers_with_the_inventorys_gpus(running):
    cluster, _, slurm = running
    rows = {h: (cpus, ram, model, n) for h, cpus, ram, model, n in
            m.Node.objects.filter(rack__hall__site__cluster=cluster)
            .annotate(n=Count("accelerators"))
            .values_list("hostname", "cpu_cores", "ram_gb", "accelerator_model__name", "n")}
    states = slurm.node_states()
    assert set(states) == set(rows)
    for host, node in states.items():
        cpus, ram_gb, model, gpus = rows[host]
        kind, count = re.fullmatch(r"gpu:([^:,]+):(\d+)(\(.*\))?", node["gres"]).group(1, 2)
        assert int(count) == gpus and kind == re.sub(r"[^a-z0-9]+", "_", model.lower()), host
        assert (node["cpus"], node["real_memory"]) == (cpus, round(ram_gb * 1024)), host
        assert node["state"] == "idle", host


def test_a_one_switch_job_lands_on_one_free_leaf_group(running):
    """With part of the first leaf taken, a job the size of a leaf asking for one switch
    goes to another leaf whole rather than to the next nodes in name order."""
    cluster, _, slurm = running
    leaves = {name: sw["nodes"] for name, sw in slurm_tree(slurm).items() if sw["level"] == 0}
    first = min(leaves.values(), key=min)
    size = max(map(len, leaves.values()))
    if len(first) > 1:                                 # rail: a scalable unit per leaf group
        slurm.run("salloc", "--no-shell", "--immediate=10", "--exclusive", "-t", "1",
                  "-N", str(len(first) // 2), "-w", ",".join(sorted(first)[:len(first) // 2]))
    slurm.run("salloc", "--no-shell", "--immediate=10", "--exclusive", "-t", "1",
              "-N", str(size), "--switches=1", "-J", "one-switch")
    (line,) = slurm.run("squeue", "-h", "-n", "one-switch", "-o", "%T %N").splitlines()
    state, nodelist = line.split()
    nodes = set(slurm.hostnames(nodelist))
    assert state == "RUNNING"
    assert nodes in leaves.values() and (nodes != first or len(first) == 1)
