"""``manage.py mirror_check``: one read of each source, and a verdict a newcomer can act on.

Slurm is a stand-in on ``PATH`` here (shell scripts printing answers recorded from Debian's
Slurm 22.05, ``tests/fixtures/slurm_json``); the same command against a real slurmctld is in
``tests/slurm``.  The inventory is imported from the same stand-in, as a newcomer would."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command

from twin import models as m

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm_json"
TOPOLOGY = ("SwitchName=leaf0 Level=0 LinkSpeed=1 Nodes=rec-n[000000-000003]\n"
            "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=rec-n[000004-000007]\n"
            "SwitchName=spine0 Level=1 LinkSpeed=1 Switches=leaf[0-1]\n")


def stand_in(tmp_path, **scripts: str) -> Path:
    """A folder of fake Slurm commands (``name=shell script``) put first on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    defaults = {"sinfo": f"cat {FIXTURES / 'sinfo-22.05.json'}",
                "squeue": f"cat {FIXTURES / 'squeue-22.05.json'}",
                "sacct": f"cat {FIXTURES / 'sacct-22.05.stderr'} >&2; exit 1",
                "scontrol": f"printf '{TOPOLOGY}'"}
    for name, script in {**defaults, **scripts}.items():
        (folder / name).write_text(f"#!/bin/sh\n{script}\n")
        (folder / name).chmod(0o755)
    return folder


@pytest.fixture
def slurm(tmp_path, monkeypatch, settings):
    folder = stand_in(tmp_path)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "PROMETHEUS_URL": "", "SLURM_CONF": "",
                            "SLURM_REST_URL": "", "MIRROR_TIMEOUT_S": 5.0}
    call_command("import_inventory", "--from-slurm", "--name", "rec")
    return folder


def check(capsys, *args) -> tuple[int, list[str]]:
    code = 0
    try:
        call_command("mirror_check", *args)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().out.strip().splitlines()


def test_a_good_setup_maps_every_node_and_exits_0(db, slurm, capsys):
    code, lines = check(capsys)
    assert code == 0, lines
    assert "OK    inventory   cluster rec: 8 node(s), 64 GPU(s)" in lines
    assert any(line.startswith("OK") and "8 node(s) listed, 8 of the inventory's 8 mapped"
               in line for line in lines)
    # what cannot be read is said, not failed: no slurmdbd here
    assert any(line.startswith("WARN") and "no accounting" in line
               and "Slurm accounting storage is disabled" in line for line in lines)
    assert any(line.startswith("WARN") and "CLUSTERTWIN_SLURM_CONF" in line for line in lines)
    assert lines[-1] == "the mirror can follow this cluster"


def test_nodes_the_inventory_lacks_fail_and_are_named(db, slurm, capsys):
    m.Node.objects.filter(hostname="rec-n000003").update(hostname="other-7")
    code, lines = check(capsys)
    assert code == 1
    assert any(line.startswith("FAIL") and "1 node(s) Slurm lists that the inventory lacks: "
               "rec-n000003" in line for line in lines), lines
    assert any(line.startswith("FAIL") and "running job(s) on nodes the inventory lacks: 5_0"
               in line for line in lines), lines
    assert any("inventory node(s) Slurm does not list" in line and "other-7" in line
               for line in lines)
    assert "cannot follow" in lines[-1]


def test_a_gpu_count_or_gres_type_unlike_the_inventory_fails(db, slurm, capsys):
    m.Node.objects.filter(hostname="rec-n000001").update(accelerator_count=4)
    code, lines = check(capsys)
    assert code == 1
    assert any(line.startswith("FAIL") and "rec-n000001 (8 in Slurm, 4 in the inventory)"
               in line for line in lines), lines


def test_a_slurm_that_cannot_be_read_fails_in_one_line(db, slurm, capsys, tmp_path):
    stand_in(tmp_path, sinfo="echo 'slurm_load_node error: Unable to contact slurm "
                             "controller' >&2; exit 1")
    code, lines = check(capsys)
    assert code == 1
    assert ("FAIL  slurm       slurm: `sinfo --json` exited 1: slurm_load_node error: Unable to "
            "contact slurm controller") in lines


def test_a_slurm_conf_for_another_cluster_fails_the_forks(db, slurm, capsys, tmp_path,
                                                          settings):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=other\nNodeName=gpu[1-3] CPUs=64 Gres=gpu:8\n"
                    "PartitionName=gpu Nodes=gpu[1-3] Default=YES\n")
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "SLURM_CONF": str(conf)}
    stand_in(tmp_path)  # SLURM_CONF now goes to the stand-ins too: they ignore it
    code, lines = check(capsys)
    assert code == 1
    assert any(line.startswith("FAIL") and "has 3 node(s), the inventory 8" in line
               for line in lines), lines


def test_no_cluster_and_an_unknown_cluster(db, capsys, settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "SLURM_CONF": "", "PROMETHEUS_URL": ""}
    code, lines = check(capsys)
    assert code == 1 and lines[0].startswith("FAIL  inventory  no cluster to mirror")
    from django.core.management import CommandError
    with pytest.raises(CommandError) as err:
        call_command("mirror_check", "--cluster", "nope")
    assert err.value.returncode == 2 and "no such cluster" in str(err.value)


def test_a_gres_type_unlike_the_inventory_model_fails_until_the_map_says_so(db, slurm,
                                                                            capsys):
    a100 = m.AcceleratorModel.objects.get(name="A100-SXM4-80GB")
    m.Node.objects.filter(hostname="rec-n000004").update(accelerator_model=a100)
    code, lines = check(capsys)
    assert code == 1
    assert any(line.startswith("FAIL") and "rec-n000004 (gpu:h100_sxm:8 is H100-SXM, the "
               "inventory says A100-SXM4-80GB)" in line for line in lines), lines
    m.Cluster.objects.filter(name="rec").update(gres_map={"h100_sxm": "A100-SXM4-80GB"})
    code, lines = check(capsys)
    assert any("rec-n000000 (gpu:h100_sxm:8 is A100-SXM4-80GB" in line for line in lines)
