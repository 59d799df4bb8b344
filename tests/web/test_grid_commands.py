"""The grid from the product's entry points (issue 30): ``build_cluster --preset grid`` writes
what ``grid_spec_read`` reads back, ``simulate --preset grid`` / ``--grid NAME`` run it with
one ``sites`` entry per place, the inventory grid's stored weights and replication are its
defaults, ``--region-loss`` moves jobs with their checkpoint bytes, bad flags are one line,
and a study on an inventory grid runs the same on Dask as in one process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from scheduler.grid.run import grid_preset
from scheduler.study.spec import load_spec_text
from twin.inventory.grid import grid_spec_read
from twin.inventory.models import Accelerator, Cluster, Grid, GridCloudRegion, WanLink
from twin.studies.grids import inventory_grid
from twin.studies.report import write_all
from twin.studies.runner import run_study

TABLES = (Grid, GridCloudRegion, WanLink, Cluster, Accelerator)


def counts() -> dict[str, int]:
    return {t.__name__: t.objects.count() for t in TABLES}


def refused(command: str, *args) -> str:
    with pytest.raises(CommandError) as err:
        call_command(command, *args)
    assert err.value.returncode == 2
    assert "\n" not in str(err.value)
    return str(err.value)


def simulate(tmp_path, *args, name: str = "r.json") -> tuple[dict, str]:
    """``simulate ARGS --json FILE``: the report and what it printed."""
    path = tmp_path / name
    out = _Out()
    call_command("simulate", *args, "--json", str(path), stdout=out)
    return json.loads(path.read_text()), out.text


class _Out:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def unclocked(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "wall_seconds"}


@pytest.fixture
def built(db, tmp_path):
    call_command("build_cluster", "--preset", "grid", "--json", str(tmp_path / "b.json"),
                 stdout=_Out())
    return json.loads((tmp_path / "b.json").read_text())


# ------------------------------------------------------------------ build_cluster
def test_build_cluster_grid_writes_what_grid_spec_read_reads_back(built):
    spec, plans = grid_preset("grid")
    read, read_plans = grid_spec_read(grid=Grid.objects.get(name="grid"))
    assert read.places() == spec.places()
    assert read.clouds == spec.clouds and read.links == spec.links
    for mine, theirs in zip(read.sites, spec.sites, strict=True):
        assert (mine.region, mine.jurisdiction, mine.pue, mine.power_price_per_kwh,
                mine.stacks) == (theirs.region, theirs.jurisdiction, theirs.pue,
                                 theirs.power_price_per_kwh, theirs.stacks)
        assert read_plans[mine.name].summary()["gpus_by_model"] == \
            plans[mine.name].summary()["gpus_by_model"]
    assert built["written"] and built["gpus"] == Accelerator.objects.count() == 512
    assert [s["name"] for s in built["sites"]] == ["eu-north", "eu-west", "us-east"]
    assert len(built["clouds"]) == 2 and len(built["links"]) == 7


def test_a_second_build_needs_replace_and_replace_rebuilds_the_same_grid(built, tmp_path):
    before = counts()
    assert "grid 'grid' already exists; pass --replace" in refused(
        "build_cluster", "--preset", "grid", "--json", str(tmp_path / "again.json"))
    assert counts() == before and not (tmp_path / "again.json").exists()
    call_command("build_cluster", "--preset", "grid", "--replace", stdout=_Out())
    assert counts() == before


def test_a_dry_run_prints_the_grid_and_writes_nothing(db, capsys):
    call_command("build_cluster", "--preset", "grid", "--dry-run", "--json", "-")
    out = capsys.readouterr()
    summary = json.loads(out.out)
    assert summary["written"] is False and summary["cloud_quota_gpus"] == 256
    assert "Planned (dry run, nothing written) grid grid: 3 sites" in out.err
    assert "aws/eu-central-1 - gcp/us-central1" in out.err
    assert not Grid.objects.exists() and not Cluster.objects.exists()


@pytest.mark.parametrize("args, message", [
    (["--gpus", "8"], "--gpus shapes one cluster; --preset grid writes"),
    (["--fabric", "rail"], "--fabric shapes one cluster"),
    (["--name", "x"], "--name shapes one cluster"),
])
def test_build_cluster_grid_refuses_a_clusters_flags_in_one_line(db, args, message):
    assert message in refused("build_cluster", "--preset", "grid", *args)
    assert not Grid.objects.exists() and not Cluster.objects.exists()


def test_a_cluster_of_a_site_name_is_not_overwritten_without_replace(db, small_plan):
    from dataclasses import replace

    from twin.inventory.adapter import cluster_plan_write
    cluster_plan_write(replace(small_plan, name="eu-west"))
    assert "cluster 'eu-west' already exists; pass --replace" in refused(
        "build_cluster", "--preset", "grid")
    assert not Grid.objects.exists() and Cluster.objects.count() == 1


# ------------------------------------------------------------------ simulate
def test_simulate_grid_reports_one_site_per_place_and_totals_that_add_up(db, tmp_path):
    report, text = simulate(tmp_path, "--preset", "grid", "--days", "1", "--seed", "1")
    spec, _ = grid_preset("grid")
    sites, summary = report["sites"], report["summary"]
    assert [s["place"] for s in sites] == list(spec.places())
    n = len(sites)
    assert summary["cost"]["compute"] == pytest.approx(sum(s["cost"] for s in sites), abs=n * 0.01)
    assert summary["cost"]["egress"] == pytest.approx(sum(s["egress_cost"] for s in sites),
                                                      abs=n * 0.01)
    wan_out = sum(s["wan_out_gb"] for s in sites)
    assert wan_out == pytest.approx(sum(s["wan_in_gb"] for s in sites), abs=n * 0.1)
    assert summary["moved_gb"]["total"] == pytest.approx(wan_out, abs=n * 0.1)
    assert sum(s["jobs_submitted"] for s in sites) == sum(summary["places_used"].values()) > 0
    assert report["scenario"]["policy"] == "balanced" and report["scenario"]["seed"] == 1
    for s in sites:  # the printed table has a row per place with its GPUs
        assert any(line.split()[:1] == [s["place"]] and f"{s['gpus']:,}" in line
                   for line in text.splitlines())
    assert "moved GB for jobs" in text and "wait mean / p95 h" in text


def test_same_seed_same_report_in_another_process_and_another_seed_another(db, tmp_path):
    here, _ = simulate(tmp_path, "--preset", "grid", "--days", "0.5", "--seed", "4")
    proc = subprocess.run(
        [sys.executable, "manage.py", "simulate", "--preset", "grid", "--days", "0.5",
         "--seed", "4", "--json", "-"], capture_output=True, text=True, timeout=120,
        env={"DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
             "CLUSTERTWIN_INSECURE_DEMO": "1", "PATH": "/usr/bin:/bin",
             "PYTHONHASHSEED": "123"})
    assert proc.returncode == 0, proc.stderr
    assert unclocked(json.loads(proc.stdout)) == unclocked(here)
    other, _ = simulate(tmp_path, "--preset", "grid", "--days", "0.5", "--seed", "5",
                        name="o.json")
    assert other["summary"] != here["summary"]


def _weights(cost, start, gravity, replication_s=3600):
    Grid.objects.filter(name="grid").update(weight_cost=cost, weight_start=start,
                                            weight_gravity=gravity,
                                            checkpoint_replication_s=replication_s)


def test_grid_name_runs_on_the_stored_weights_and_replication(built, tmp_path):
    _weights(1, 0, 0)
    by_cost, text = simulate(tmp_path, "--grid", "grid", "--days", "1", "--seed", "2")
    preset_cost, _ = simulate(tmp_path, "--preset", "grid", "--days", "1", "--seed", "2",
                              "--grid-policy", "cost", name="p.json")
    assert by_cost["summary"] == preset_cost["summary"]  # the inventory's grid is the preset's
    assert "grid grid (inventory)" in text and "placement weights cost 1, start 0" in text
    _weights(0, 1, 0)
    by_start, _ = simulate(tmp_path, "--grid", "grid", "--days", "1", "--seed", "2",
                           name="s.json")
    assert by_start["scenario"]["weights"] == {"cost": 0.0, "start": 1.0, "gravity": 0.0}
    # the verdict changes with the stored weights: dearer, and shorter waits
    assert by_start["summary"]["cost"]["total"] > by_cost["summary"]["cost"]["total"]
    assert by_start["summary"]["wait_hours"]["mean"] < by_cost["summary"]["wait_hours"]["mean"]
    flag, _ = simulate(tmp_path, "--grid", "grid", "--days", "1", "--seed", "2",
                       "--grid-policy", "cost", name="f.json")  # a flag overrides them
    assert flag["summary"] == by_cost["summary"]
    _weights(0, 1, 0, replication_s=0)
    never, _ = simulate(tmp_path, "--grid", "grid", "--days", "1", "--seed", "2",
                        name="n.json")
    assert never["scenario"]["replication_s"] is None
    assert never["summary"]["moved_gb"]["replicas"] == 0 < by_start["summary"]["moved_gb"][
        "replicas"]


def test_a_region_loss_moves_its_jobs_with_their_checkpoints_over_the_wan(db, tmp_path):
    args = ("--preset", "grid", "--days", "1", "--seed", "1")
    calm, _ = simulate(tmp_path, *args, name="calm.json")
    lost, text = simulate(tmp_path, *args, "--region-loss", "eu-west@12+6")
    west = next(s for s in lost["sites"] if s["place"] == "eu-west")
    assert west["dark_hours"] == 6.0
    assert lost["scenario"]["region_loss"] == [["eu-west", 43200.0, 21600.0]]
    moved = [j for j in lost["jobs"] if j["places"][0] == "eu-west" and len(j["places"]) > 1]
    assert moved and lost["summary"]["region_loss"]["from_checkpoint"] > 0
    assert calm["summary"]["moved_gb"]["checkpoints"] == 0
    assert lost["summary"]["moved_gb"]["checkpoints"] > 0
    assert lost["summary"]["region_loss"]["lost_h100_gpu_hours"] > 0
    assert "Jobs placed again after a region loss" in text
    assert f"{moved[0]['name']}  {' > '.join(moved[0]['places'])}" in text


@pytest.mark.parametrize("args, message", [
    (["--preset", "grid", "--region-loss", "mars@1"], "'mars' is no place of the grid"),
    (["--preset", "grid", "--region-loss", "eu-west@30"],
     "--region-loss hours must be hours in [0, 24) (within the run), not '30'"),
    (["--preset", "grid", "--region-loss", "eu-west@1+0"], "--region-loss duration must be "
                                                             "hours > 0"),
    (["--preset", "grid", "--region-loss", "eu-west"], "must be PLACE@HOURS"),
    (["--preset", "grid", "--grid-policy", "fast"],
     "--grid-policy must be cost, start, gravity, balanced or three weights"),
    (["--preset", "grid", "--grid-policy", "0,0,0"], "not all 0"),
    (["--preset", "grid", "--replication-s", "0"], "--replication-s must be seconds > 0"),
    (["--preset", "grid", "--gpus", "8"], "--gpus shapes a cluster's run; a grid run takes"),
    (["--preset", "grid", "--policy", "fifo"], "--policy shapes a cluster's run"),
    (["--preset", "dev-small", "--grid-policy", "cost"],
     "--grid-policy goes with a grid run: --preset grid or --grid NAME"),
    (["--grid", "grid", "--preset", "grid"], "--grid runs a grid of the inventory: not with "
                                             "--preset"),
    (["--grid", "nope"], "--grid 'nope': no such grid in the inventory; grids: none"),
])
def test_bad_grid_flags_are_one_line_and_no_report(db, tmp_path, args, message):
    report = tmp_path / "r.json"
    assert message in refused("simulate", *args, "--json", str(report))
    assert not report.exists()


def test_a_bad_grid_flag_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "manage.py", "simulate", "--preset", "grid", "--region-loss",
         "mars@1"], capture_output=True, text=True, timeout=120,
        env={"DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
             "CLUSTERTWIN_INSECURE_DEMO": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "'mars' is no place of the grid" in proc.stderr


# ------------------------------------------------------------------ a study on an inventory grid
STUDY = """\
name: stored weights
grid: inventory:grid
base: {days: 0.5}
seeds: 2
arms:
  - name: stored
  - name: cost
    set: {policy: cost}
figures: [grid.cost_usd, grid.wait_mean_h]
"""


def test_a_study_on_an_inventory_grid_uses_its_weights_and_runs_alike_on_dask(built, tmp_path):
    _weights(0, 1, 0)
    spec = load_spec_text(STUDY, grids=inventory_grid)
    assert spec.arms[0].options["policy"] == {"cost": 0.0, "start": 1.0, "gravity": 0.0}
    serial = run_study(spec, tmp_path / "serial", serial=True)
    on_dask = run_study(spec, tmp_path / "dask", workers=1)
    assert on_dask.failed == serial.failed == 0 and "LocalCluster" in on_dask.where
    assert on_dask.values() == serial.values()
    summary = write_all(spec, serial, tmp_path / "serial")["summary"]
    cost = summary["paired"][0]["figures"]["grid.cost_usd"]
    assert cost["mean"] < 0  # cost-only is cheaper than the stored start-only weights
    _weights(1, 0, 0)  # stored weights changed: the arms now run the same placement
    again = load_spec_text(STUDY, grids=inventory_grid)
    assert again.arms[0].key(0) != spec.arms[0].key(0)
    rerun = run_study(again, tmp_path / "serial", serial=True)
    assert rerun.ran == 2 and rerun.kept == 2  # only the arm whose options changed ran
    d = write_all(again, rerun, tmp_path / "serial")["summary"]["paired"][0]["figures"]
    assert d["grid.cost_usd"]["mean"] == 0 and d["grid.cost_usd"]["verdict"] == \
        "not distinguishable"


def test_a_study_naming_a_grid_the_inventory_lacks_is_refused_at_its_line(db):
    from scheduler.study.spec import SpecError
    with pytest.raises(SpecError) as err:
        load_spec_text(STUDY, grids=inventory_grid)
    assert str(err.value) == ("spec: line 2: grid 'grid' is neither a grid preset (grid) nor a "
                              "grid of the inventory (grids: none)")
