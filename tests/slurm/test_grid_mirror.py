"""Issue 30: two real Slurm clusters, each its own slurmctld, mirrored at once as two sites of
one grid.

Two Slurms run side by side (``conftest.slurm``, each with its own ports, state and spool, and
two emulated nodes of eight fake GPUs); each is imported as a member cluster
(``import_inventory --from-slurm``) of one grid with a ``SiteMirror``.  Jobs submitted to each
must show in that site's row as each Slurm's own text output (``squeue -o``, ``sinfo -o``)
counts them; with one slurmctld stopped, its site goes down while the other stays ok and keeps
following its Slurm.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.slurm.conftest import stop
from tests.waiting import wait_until
from twin.inventory.grid_models import Grid, SiteMirror, WanLink
from twin.inventory.models import Cluster
from twin.live.models import GridState
from twin.mirror.grid_mirror import GridMirror, grid_sources

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

GRES = "h100_sxm"      # export_topology's name for H100-SXM: import_inventory maps it back
POLL_S = 2.0


def export(tmp_path: Path, prefix: str) -> Path:
    """A ``slurm-tree`` folder (what ``conftest.slurm`` starts) of two 8-GPU nodes."""
    out = tmp_path / f"export-{prefix}"
    out.mkdir()
    nodes = f"{prefix}[1-2]"
    (out / "slurm-nodes.conf").write_text(
        f"NodeName={nodes} CPUs=64 RealMemory=512000 Gres=gpu:{GRES}:8 State=UNKNOWN\n")
    (out / "topology.conf").write_text(f"SwitchName=leaf{prefix} Nodes={nodes}\n")
    (out / "gres.conf").write_text(
        f"NodeName={nodes} Name=gpu Type={GRES} File=/dev/nvidia[0-7]\n")
    return out


def sbatch(slurm, *args: str) -> str:
    return slurm.run("sbatch", "--parsable", "--no-requeue", "--output=/dev/null",
                     "--time=5", "--mem=1000", *args, "--wrap", "sleep 120").strip()


def gpus_in(gres: str) -> int:
    """GPUs in a GRES string as sinfo or squeue prints it (``gpu:h100_sxm:8(S:0)``,
    ``gres:gpu:3``)."""
    found = re.search(r"gpu:(?:[a-z_0-9]+:)?(\d+)", gres)
    return int(found.group(1)) if found else 0


def slurm_counts(slurm) -> dict[str, int]:
    """A site's numbers from Slurm's own text output (not the mirror's JSON parsers)."""
    per_node = {}
    down = 0
    for line in slurm.run("sinfo", "-h", "-N", "-o", "%N|%G|%T").splitlines():
        name, gres, state = line.split("|")
        per_node[name] = gpus_in(gres)
        down += per_node[name] if state.rstrip("*~#$@").lower() in (
            "down", "drained", "draining", "drain", "fail", "failing") else 0
    out = {"gpus": sum(per_node.values()), "down": down, "allocated": 0, "queued_jobs": 0,
           "queued_gpus": 0}
    for line in slurm.run("squeue", "-h", "-o", "%T|%b|%D").splitlines():
        state, gres, nodes = line.split("|")
        gpus = gpus_in(gres) * int(nodes)
        if state == "RUNNING":
            out["allocated"] += gpus
        elif state == "PENDING":
            out["queued_jobs"] += 1
            out["queued_gpus"] += gpus
    return out


def shown(row: dict) -> dict[str, int]:
    return {k: row[k] for k in ("gpus", "down", "allocated", "queued_jobs", "queued_gpus")}


@pytest.fixture
def pair(slurm, tmp_path):
    """Two running Slurms imported as sites ``alpha`` and ``beta`` of grid ``pair``."""
    running = {"alpha": slurm(export(tmp_path, "a")), "beta": slurm(export(tmp_path, "b"))}
    grid = Grid.objects.create(name="pair")
    for name, one in running.items():
        call_command("import_inventory", "--from-slurm", "--slurm-conf", str(one.conf),
                     "--name", name, stdout=io.StringIO())
        cluster = Cluster.objects.get(name=name)
        Cluster.objects.filter(pk=cluster.pk).update(grid=grid, jurisdiction="EU")
        row = SiteMirror(cluster=cluster, slurm_conf=str(one.conf), poll_s=POLL_S,
                         timeout_s=POLL_S)
        row.full_clean()
        row.save()
    WanLink.objects.create(grid=grid, a="alpha", b="beta", gbps=100.0, latency_ms=9.0)
    try:
        yield grid, running
    finally:
        for one in running.values():
            jobs = one.run("squeue", "-h", "-o", "%i").split() \
                if one.procs["slurmctld"].poll() is None else []
            if jobs:
                one.run("scancel", "--full", *jobs)
            # the slurmd first, while their slurmctld answers (without it each waits ~10 s)
            stop([p for n, p in one.procs.items() if n != "slurmctld"], timeout=2)
            stop([one.procs["slurmctld"]])


def rows(doc: dict) -> dict[str, dict]:
    return {row["place"]: row for row in doc["places"]}


def test_two_slurms_are_mirrored_as_two_sites_of_one_grid(pair):
    grid, running = pair
    alpha, beta = running["alpha"], running["beta"]
    first = sbatch(alpha, "-N1", "--gres=gpu:8")
    sbatch(alpha, "-N2", "--gres=gpu:8")                     # 16 GPUs: waits for the first
    sbatch(beta, "-N1", "--gres=gpu:3")
    beta.run("scontrol", "update", "nodename=b2", "state=drain", "reason=fan")
    want = {}

    def settled() -> bool:
        want.update({name: slurm_counts(one) for name, one in running.items()})
        return want["alpha"]["allocated"] == 8 and want["beta"]["allocated"] == 3

    wait_until(settled, what="the first jobs running on both Slurms")
    assert want["alpha"]["queued_gpus"] == 16 and want["beta"]["down"] == 8

    call_command("mirror_grid", "--grid", "pair", "--once", stdout=io.StringIO())
    doc = GridState.objects.get(grid=grid, source="mirrored").doc
    got = rows(doc)
    assert {name: shown(row) for name, row in got.items()} == want
    assert [r["health"] for r in got.values()] == ["ok", "ok"]
    assert [(w["a"], w["b"]) for w in doc["links"]] == [("alpha", "beta")]

    # the looping mirror: each site on its own; stop alpha's slurmctld
    _, sites, links = grid_sources(name="pair")
    mirror = GridMirror("pair", sites, links)
    mirror.start()
    try:
        wait_until(lambda: {r["health"] for r in mirror.overview()["places"]} == {"ok"},
                   what="both sites ok in the looping mirror")
        alpha.run("scancel", first)
        stop([alpha.procs["slurmctld"]])
        sbatch(beta, "-N1", "--gres=gpu:2")

        def split() -> bool:
            now = rows(mirror.overview())
            counts = slurm_counts(beta)
            return (now["alpha"]["health"] == "down" and now["beta"]["health"] == "ok"
                    and counts["allocated"] == 5 and shown(now["beta"]) == counts)

        wait_until(split, what="alpha down, beta ok and following its Slurm's new job")
        assert "unreachable" in rows(mirror.overview())["alpha"]["note"]
    finally:
        mirror.stop()
    call_command("mirror_grid", "--grid", "pair", "--once", stdout=io.StringIO())
    got = rows(GridState.objects.get(grid=grid, source="mirrored").doc)
    assert (got["alpha"]["health"], got["beta"]["health"]) == ("down", "ok")
    assert "unreachable" in got["alpha"]["note"] and shown(got["beta"]) == slurm_counts(beta)
