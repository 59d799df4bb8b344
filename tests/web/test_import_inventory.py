"""import_inventory: JSON, CSV and NetBox files checked row by row, written all or nothing.

A cluster written by ``cluster_plan_write`` is dumped (``inventory_export_json``, CSV), its
hostnames renamed, imported under another name, and read back with ``cluster_plan_read``: the
engine's plan must be the same.  Each kind of bad row is refused with exit status 2, its place
in the message, and not one row written.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from scheduler.hardware.cluster import NodeGroup, plan_cluster
from twin import models as m
from twin.inventory.adapter import cluster_plan_read, cluster_plan_write
from twin.inventory.formats import inventory_export_csv, inventory_export_json

ROOT = Path(__file__).resolve().parents[2]
TABLES = (m.Cluster, m.Site, m.DataHall, m.Rack, m.Node, m.Accelerator, m.Switch, m.Link)

PLANS = {
    "fat-tree": lambda: plan_cluster(
        "ft", (NodeGroup("H100-SXM", 8), NodeGroup("MI300X", 4, spares=1)),
        fabric_kind="fat-tree", fabric_kw={"radix": 8}),
    "dragonfly+": lambda: plan_cluster(
        "df", (NodeGroup("H100-SXM", 8),), fabric_kind="dragonfly+", fabric_kw={"radix": 8}),
    "rail": lambda: plan_cluster(
        "rail", (NodeGroup("H100-SXM", 24),), fabric_kind="rail",
        fabric_kw={"radix": 16, "su_per_group": 1}),
}


def counts() -> dict[str, int]:
    return {t.__name__: t.objects.count() for t in TABLES}


def renamed(doc: dict, name: str) -> dict:
    """The document with the cluster and every hostname renamed (hostnames are unique)."""
    old = doc["cluster"]["name"]
    doc = copy.deepcopy(doc)
    doc["cluster"]["name"] = name
    for node in doc["nodes"]:
        node["hostname"] = node["hostname"].replace(old, name, 1)
    for cable in doc["cables"]:
        if "hostname" in cable:
            cable["hostname"] = cable["hostname"].replace(old, name, 1)
    return doc


def write_json(tmp_path, doc, name="inventory.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def run(*args) -> str:
    out = io.StringIO()
    call_command("import_inventory", *map(str, args), stdout=out, stderr=io.StringIO())
    return out.getvalue()


def refused(*args) -> list[str]:
    """The error lines of an import that must fail with status 2 and write nothing."""
    before, err = counts(), io.StringIO()
    with pytest.raises(CommandError) as exc:
        call_command("import_inventory", *map(str, args), stdout=io.StringIO(), stderr=err)
    assert exc.value.returncode == 2
    assert counts() == before
    return err.getvalue().splitlines() + [str(exc.value)]


def assert_same_plan(a, b) -> None:
    assert [a.models[k].name for k in a.node_model] == [b.models[k].name for k in b.node_model]
    for field in ("node_gpus", "node_first_gpu", "node_rack", "node_slot", "node_spare",
                  "node_nvlink_domain", "rack_hall", "rack_row", "rack_col", "rack_power_kw"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    fa, fb = a.fabric, b.fabric
    assert (fa.kind, fa.radix, fa.port_gbps, fa.n_endpoints) == \
        (fb.kind, fb.radix, fb.port_gbps, fb.n_endpoints)
    for field in ("switch_tier", "switch_pod", "switch_rail", "endpoint_leaf", "link_a",
                  "link_b", "link_kind"):
        np.testing.assert_array_equal(getattr(fa, field), getattr(fb, field), err_msg=field)
    assert a.node_shape == b.node_shape


@pytest.fixture
def original(db):
    return cluster_plan_write(PLANS["fat-tree"]())


@pytest.fixture
def doc(original):
    """A valid document for a second cluster, ``copy``, beside the original."""
    return renamed(inventory_export_json(cluster=original), "copy")


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("kind", sorted(PLANS))
def test_a_json_dump_imports_as_the_same_plan(db, tmp_path, kind):
    cluster = cluster_plan_write(PLANS[kind]())
    doc = renamed(inventory_export_json(cluster=cluster), "copy")
    out = run(write_json(tmp_path, doc))
    assert out.startswith("Imported copy from")
    copy_ = m.Cluster.objects.get(name="copy")
    assert_same_plan(cluster_plan_read(cluster=cluster), cluster_plan_read(cluster=copy_))
    assert copy_.summary["gpus"] == cluster.summary["gpus"]
    # the same layout again, from the copy: nothing lost on the way
    assert renamed(inventory_export_json(cluster=copy_), cluster.name) == \
        inventory_export_json(cluster=cluster)


def test_a_csv_dump_imports_as_the_same_plan(original, tmp_path):
    inventory_export_csv(cluster=original, directory=tmp_path)
    for name in ("nodes.csv", "cables.csv"):
        path = tmp_path / name
        path.write_text(path.read_text().replace("ft-n", "copy-n"))
    (tmp_path / "cluster.csv").unlink()       # the fabric is then inferred, the name given
    run(tmp_path, "--format", "csv", "--name", "copy")
    a, b = (cluster_plan_read(cluster=c) for c in m.Cluster.objects.order_by("id"))
    assert b.fabric.kind == "fat-tree" and b.fabric.radix == 8
    assert_same_plan(a, b)


def test_replace_rebuilds_a_cluster_of_the_same_name(original, tmp_path, doc):
    path = write_json(tmp_path, doc)
    run(path)
    before = counts()
    doc["nodes"][0]["is_spare"] = True
    run(write_json(tmp_path, doc), "--replace")
    assert counts() == before
    assert m.Node.objects.get(hostname=doc["nodes"][0]["hostname"]).is_spare


def test_replace_may_keep_the_replaced_clusters_hostnames(original, tmp_path):
    doc = inventory_export_json(cluster=original)
    run(write_json(tmp_path, doc), "--replace")
    assert m.Cluster.objects.get().name == "ft"


# ---------------------------------------------------------------- bad rows


def nic(doc, host_index=0, port=0) -> int:
    host = doc["nodes"][host_index]["hostname"]
    return next(i for i, c in enumerate(doc["cables"])
                if c.get("hostname") == host and c["port"] == port)


def set_node(i, **kw):
    def change(doc):
        doc["nodes"][i].update(kw)
        return f"nodes[{i}]"
    return change


def same_slot(doc):
    doc["nodes"][1].update(rack=doc["nodes"][0]["rack"], slot=doc["nodes"][0]["slot"])
    return "nodes[1]"


def duplicate_host(doc):
    doc["nodes"][2]["hostname"] = doc["nodes"][1]["hostname"]
    return "nodes[2]"


def unknown_switch(doc):
    i = nic(doc, 3, 1)
    doc["cables"][i]["switch"] = "ghost"
    return f"cables[{i}]"


def cabled_twice(doc):
    doc["cables"].append(dict(doc["cables"][nic(doc, 2, 0)]))
    return f"cables[{len(doc['cables']) - 1}]"


def no_nic(doc):
    del doc["cables"][nic(doc, 5, 7)]
    return "nodes[5]"


def upside_down(doc):
    cable = doc["cables"][0]
    cable["upper"], cable["lower"] = cable["lower"], cable["upper"]
    return "cables[0]"


def port_out_of_range(doc):
    doc["cables"][nic(doc, 0, 7)]["port"] = 8
    return f"cables[{nic(doc, 0, 8)}]"


def nic_to_spine(doc):
    spine = next(s["name"] for s in doc["switches"] if s["tier"] == "spine")
    i = nic(doc, 4, 0)
    doc["cables"][i]["switch"] = spine
    return f"cables[{i}]"


def taken_rack_spot(doc):
    racks = doc["sites"][0]["halls"][0]["racks"]
    racks[1].update(row=racks[0]["row"], column=racks[0]["column"])
    return "sites[0].halls[0].racks[1]"


def bad_tier(doc):
    doc["switches"][3]["tier"] = "tor"
    return "switches[3]"


BAD = {
    "unknown model": (set_node(3, model="H900"), "unknown accelerator model 'H900'"),
    "duplicate hostname": (duplicate_host, "duplicate hostname"),
    "rack not found": (set_node(0, rack="nowhere"), "rack 'nowhere' not found"),
    "slot taken": (same_slot, "is taken by"),
    "too many accelerators": (set_node(0, accelerators=9), "9 accelerators, above the 8"),
    "not a number": (set_node(6, slot="left"), "slot must be a whole number"),
    "unknown switch": (unknown_switch, "cable to an unknown switch 'ghost'"),
    "port cabled twice": (cabled_twice, "is cabled twice"),
    "accelerator without NIC": (no_nic, "accelerator 7 of 'copy-n000005' has no NIC cable"),
    "cable upside down": (upside_down, "does not go from a lower to an upper tier"),
    "port out of range": (port_out_of_range, "port 8 of 'copy-n000000' is out of range"),
    "NIC to a spine": (nic_to_spine, "a spine switch, not a leaf"),
    "rack spot taken": (taken_rack_spot, "is taken by rack"),
    "unknown tier": (bad_tier, "tier 'tor' is not one of leaf, spine, core"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_row_is_refused_by_its_place_and_nothing_is_written(doc, tmp_path, case):
    change, message = BAD[case]
    where = change(doc)
    lines = refused(write_json(tmp_path, doc))
    assert any(line.startswith(f"{where}: ") and message in line for line in lines), lines
    assert lines[-1].endswith("nothing was written")


def test_an_existing_cluster_name_needs_replace(doc, tmp_path):
    doc["cluster"]["name"] = "ft"
    lines = refused(write_json(tmp_path, doc))
    assert "cluster: cluster 'ft' already exists; pass --replace to replace it" in lines


def test_a_hostname_of_another_cluster_is_refused(original, tmp_path):
    doc = renamed(inventory_export_json(cluster=original), "other")
    doc["nodes"][4]["hostname"] = "ft-n000004"
    lines = refused(write_json(tmp_path, doc))
    assert any(line.startswith("nodes[4]: hostname 'ft-n000004' already exists (cluster 'ft')")
               for line in lines)


def test_every_error_is_listed_up_to_fifty(doc, tmp_path):
    for node in doc["nodes"]:
        node["model"] = "H900"
    for i in range(40):
        doc["nodes"].append({**doc["nodes"][0], "hostname": f"extra-{i}", "slot": 99})
    lines = refused(write_json(tmp_path, doc))
    assert len(lines) == 52 and all(": " in line for line in lines[:50])
    assert lines[50].startswith("... and ") and lines[50].endswith(" more errors")
    assert lines[51].endswith(f"{50 + int(lines[50].split()[2])} error(s); nothing was written")


def test_a_csv_error_names_the_file_and_data_row(original, tmp_path):
    inventory_export_csv(cluster=original, directory=tmp_path)
    path = tmp_path / "nodes.csv"
    rows = list(csv.DictReader(path.open()))
    rows[2]["model"] = "TPU-v99"
    rows[4]["rack"] = ""
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = refused(tmp_path, "--name", "copy")
    assert any(line.startswith("nodes.csv row 3: unknown accelerator model 'TPU-v99'")
               for line in lines)
    assert "nodes.csv row 5: rack is missing" in lines
    assert any(line.startswith("nodes.csv row 1: hostname 'ft-n000000' already exists")
               for line in lines)


# ---------------------------------------------------------------- NetBox

DEVICES = """\
name,role,device_type,site,location,rack,position,cf_accelerator_count
gpu-a,GPU Server,H100-SXM,dc1,hall-a,r1,1,
gpu-b,GPU Server,h100-sxm,dc1,hall-a,r1,5,4
leaf-1,Leaf Switch,QM9700,dc1,hall-a,r1,40,
spine-1,Spine,QM9700,dc1,hall-a,r2,40,
"""


def netbox(tmp_path, cables: list[str], devices: str = DEVICES) -> Path:
    (tmp_path / "devices.csv").write_text(devices)
    lines = ["side_a_device,side_a_type,side_a_name,side_b_device,side_b_type,side_b_name"]
    (tmp_path / "cables.csv").write_text("\n".join(lines + cables) + "\n")
    return tmp_path


def nb_cables(ports=((("gpu-a"), 8), ("gpu-b", 4))) -> list[str]:
    out = [f"{host},dcim.interface,nic{p},leaf-1,dcim.interface,swp{p}"
           for host, n in ports for p in range(n)]
    return out + ["spine-1,dcim.interface,swp1,leaf-1,dcim.interface,swp60"] * 2


def test_a_netbox_export_imports_as_a_runnable_cluster(db, tmp_path):
    run(netbox(tmp_path, nb_cables()), "--format", "netbox", "--name", "nb")
    plan = cluster_plan_read(cluster=m.Cluster.objects.get(name="nb"))
    assert plan.node_gpus.tolist() == [8, 4] and plan.models[0].name == "H100-SXM"
    assert plan.fabric.switch_tier.tolist() == [0, 1]
    assert plan.fabric.link_a.tolist() == [0, 0] and plan.fabric.link_b.tolist() == [1, 1]
    assert plan.node_slot.tolist() == [1, 5] and plan.fabric.kind == "fat-tree"
    assert plan.fabric.radix == 14                      # 12 NICs + 2 uplinks on the leaf


def test_netbox_errors_name_the_file_and_row(db, tmp_path):
    cables = nb_cables()
    cables[3] = "gpu-a,dcim.interface,nic3,leaf-9,dcim.interface,swp3"
    cables[9] = "gpu-b,dcim.interface,mgmt,leaf-1,dcim.interface,swp9"
    lines = refused(netbox(tmp_path, cables), "--format", "netbox", "--name", "nb")
    assert "cables.csv row 4: cable to an unknown device 'leaf-9'" in lines
    assert "cables.csv row 10: no port number ends interface 'mgmt' of gpu-b" in lines
    assert any(line.startswith("devices.csv row 1: accelerator 3 of 'gpu-a' has no NIC")
               for line in lines)


# ---------------------------------------------------------------- the command line


def fake_slurm(tmp_path, script: str) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sinfo", "scontrol"):
        (bin_dir / name).write_text(f"#!/bin/sh\n{script}\n")
        (bin_dir / name).chmod(0o755)
    return {"PATH": str(bin_dir)}


@pytest.mark.parametrize("script, message", [
    ("exec /bin/sleep 5", "`sinfo --json` did not answer within 0.5 s"),
    ("echo 'slurm_load_node error: Unable to contact slurm controller' >&2; exit 1",
     "`sinfo --json` exited 1: slurm_load_node error: Unable to contact slurm controller"),
    ("echo not json", "`sinfo --json` did not print a JSON object with a list of nodes"),
    (None, "sinfo not found"),
])
def test_a_broken_slurm_gives_one_line_and_status_2(db, tmp_path, monkeypatch, script,
                                                     message):
    env = fake_slurm(tmp_path, script) if script else {"PATH": str(tmp_path)}
    monkeypatch.setenv("PATH", env["PATH"])
    lines = refused("--from-slurm", "--name", "x", "--slurm-timeout", "0.5")
    assert lines == [f"cannot read Slurm: {lines[-1].split(': ', 1)[1]}"]
    assert message in lines[0]


@pytest.mark.parametrize("args, message", [
    ([], "give a PATH to import, or --from-slurm"),
    (["--from-slurm"], "--from-slurm needs --name CLUSTER"),
    (["missing.json"], "missing.json: no such file or directory"),
    (["manage.py"], "manage.py: not JSON"),
    (["--format", "xml", "x"], "invalid choice: 'xml'"),
])
def test_command_line_errors_are_one_line_with_exit_status_2(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "manage.py", "import_inventory", *args],
                          capture_output=True, text=True, cwd=ROOT,
                          env={"DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}",
                               "CLUSTERTWIN_INSECURE_DEMO": "1",
                               "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr


# ---------------------------------------------------------------- real clusters' variety (26)
def slurm_nodes(tmp_path, monkeypatch, nodes: list[dict], topology: str = "") -> None:
    """A stand-in Slurm whose ``sinfo --json`` lists ``nodes`` and whose ``scontrol show
    topology`` prints ``topology`` (nothing: no topology plugin)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (tmp_path / "sinfo.json").write_text(json.dumps({"nodes": nodes}))
    (folder / "sinfo").write_text(f"#!/bin/sh\ncat {tmp_path / 'sinfo.json'}\n")
    (folder / "scontrol").write_text(f"#!/bin/sh\nprintf '{topology}'\n")
    for name in ("sinfo", "scontrol"):
        (folder / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")


def lean(name: str, gres: str) -> dict:
    return {"name": name, "gres": gres, "cpus": 32, "real_memory": 262144}


def test_without_a_topology_plugin_the_cluster_is_imported_flat_with_a_warning(
        db, tmp_path, monkeypatch, capsys):
    slurm_nodes(tmp_path, monkeypatch, [lean(f"n{i:02d}", "gpu:h100_sxm:8") for i in range(20)])
    call_command("import_inventory", "--from-slurm", "--name", "flat")
    out = capsys.readouterr().out
    assert "Imported flat from Slurm: 20 nodes, 160 accelerators, 3 switches" in out
    assert "warning: `scontrol show topology` lists no switches" in out
    assert "imported flat, an assumed topology of 2 leaf switch(es) of up to 16 nodes" in out
    plan = cluster_plan_read(cluster=m.Cluster.objects.get(name="flat"))
    assert plan.node_gpus.tolist() == [8] * 20
    # lean nodes keep Slurm's CPUs and memory, not the catalog's node shape
    assert set(m.Node.objects.values_list("cpu_cores", "ram_gb")) == {(32, 256.0)}


def test_untyped_and_unknown_gres_offer_the_map_and_write_nothing(db, tmp_path, monkeypatch):
    slurm_nodes(tmp_path, monkeypatch, [lean("a", "gpu:8"), lean("b", "gpu:a100:8"),
                                        lean("c", "gpu:1g.10gb:7")])
    lines = refused("--from-slurm", "--name", "x")
    assert any("sinfo node a: untyped gpu:8 names no model: give --gres-map gpu=MODEL" in line
               for line in lines), lines
    assert any("sinfo node b: GRES type 'a100' is not a catalog model: give --gres-map "
               "a100=MODEL" in line for line in lines), lines
    assert any("sinfo node c: MIG slices gpu:1g.10gb:7 need the GPU they are cut from: give "
               "--gres-map 1g.10gb=MODEL/SLICES" in line for line in lines), lines


def test_the_gres_map_maps_types_untyped_gpus_and_mig_slices_and_is_kept(
        db, tmp_path, monkeypatch):
    slurm_nodes(tmp_path, monkeypatch,
                [lean("a", "gpu:8"), lean("b", "gpu:a100:8,shard:32"),
                 lean("c", "gpu:1g.10gb:14(S:0-1)")],
                "SwitchName=s0 Level=0 Nodes=a,b,c\n")
    call_command("import_inventory", "--from-slurm", "--name", "mapped", "--gres-map",
                 "gpu=H100-SXM,A100=a100-sxm4-80gb,1g.10gb=A100-SXM4-80GB/7")
    nodes = dict(m.Node.objects.values_list("hostname", "accelerator_count"))
    models = dict(m.Node.objects.values_list("hostname", "accelerator_model__name"))
    assert nodes == {"a": 8, "b": 8, "c": 2}
    assert models == {"a": "H100-SXM", "b": "A100-SXM4-80GB", "c": "A100-SXM4-80GB"}
    cluster = m.Cluster.objects.get(name="mapped")
    assert cluster.gres_map == {"gpu": "H100-SXM", "a100": "A100-SXM4-80GB",
                                "1g.10gb": "A100-SXM4-80GB/7"}


@pytest.mark.parametrize("raw, message", [
    ("a100=V100", "GRES map entry a100=V100: give TYPE=MODEL with MODEL one of H100-SXM"),
    ("1g.10gb=A100-SXM4-80GB/0", "the slices per GPU after / must be a whole number >= 1"),
    ("a100", "GRES map entry a100=?"),
])
def test_a_bad_gres_map_is_one_line_and_the_admin_refuses_it_too(db, raw, message):
    from django.core.exceptions import ValidationError
    lines = refused("--from-slurm", "--name", "x", "--gres-map", raw)
    assert len(lines) == 1 and message in lines[0]
    cluster = m.Cluster(name="c", fabric_kind="fat-tree", gres_map=dict(
        [raw.split("=", 1)] if "=" in raw else [(raw, "")]))
    with pytest.raises(ValidationError) as err:
        cluster.clean()
    assert message in str(err.value)
