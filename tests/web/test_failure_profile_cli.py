"""Failure profiles at the edges: simulate and whatif take --failure-profile, refuse an unknown
one with one line and exit 2, fit_failures writes a profile they take, and a cluster's profile
set in the admin is what a fresh live engine draws."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.core.management import CommandError, call_command

from scheduler.reliability.profiles import load_profile
from tests.web.test_command_contracts import cli, one_line_exit_2
from tests.web.test_driver import FakeClock, drivers  # noqa: F401  (the fixture)
from twin import models as m
from twin.inventory.adapter import cluster_plan_write


def refused(command: str, *args) -> str:
    with pytest.raises(CommandError) as err:
        call_command(command, *args)
    assert err.value.returncode == 2 and "\n" not in str(err.value)
    return str(err.value)


def test_simulate_runs_the_profile_it_is_given(tmp_path):
    path = tmp_path / "r.json"
    call_command("simulate", "--preset", "dev-small", "--days", "2", "--seed", "3",
                 "--failure-profile", "rsc1", "--json", str(path))
    report = json.loads(path.read_text())
    assert report["scenario"]["failure_profile"] == "rsc1"
    causes = {mo.cause for mo in load_profile("rsc1").modes}
    assert report["failures"]["by_cause"] and set(report["failures"]["by_cause"]) <= causes


def test_simulate_refuses_an_unknown_profile_with_one_line():
    assert "unknown failure profile 'nope'" in refused(
        "simulate", "--preset", "dev-small", "--days", "1", "--failure-profile", "nope")


def test_simulate_on_the_command_line_refuses_an_unknown_profile_with_exit_2(tmp_path):
    proc = cli(tmp_path, "simulate", "--preset", "dev-small", "--days", "1",
               "--failure-profile", "nope")
    one_line_exit_2(proc, "unknown failure profile 'nope'")


def test_whatif_forks_a_preset_under_the_profile_given(tmp_path, db):
    call_command("whatif", "--preset", "dev-small", "--failure-profile", "alibaba-hpn",
                 "--hours", "1", "--seeds", "1", "--json", str(tmp_path / "w.json"))
    assert json.loads((tmp_path / "w.json").read_text())
    assert "unknown failure profile 'nope'" in refused(
        "whatif", "--preset", "dev-small", "--failure-profile", "nope", "--hours", "1")
    assert "--failure-profile goes with --preset" in refused(
        "whatif", "--from-live", "--failure-profile", "rsc1")


def test_fit_failures_writes_a_profile_simulate_takes(tmp_path, capsys):
    csv = tmp_path / "fleet.csv"
    csv.write_text("time,component,unit\n1.0,gpu,3\n5.5,host,2\n30,gpu,9\n")
    out = tmp_path / "fleet.toml"
    call_command("fit_failures", "--csv", str(csv), "--window-days", "2", "--gpus", "512",
                 "--nodes", "64", "--out", str(out))
    printed = capsys.readouterr().out
    assert "95% exact Poisson intervals" in printed and f"wrote {out}" in printed
    assert load_profile(out).intervals.keys() == {"gpu", "host"}
    call_command("simulate", "--preset", "dev-small", "--days", "0.1",
                 "--failure-profile", str(out), "--json", str(tmp_path / "r.json"))


def test_fit_failures_by_job_size_writes_both_parts_with_intervals(tmp_path, capsys):
    """Issue 29: job records of different sizes give a per-node hardware rate and a per-job
    rate, each with its profile-likelihood interval, in a profile simulate takes."""
    csv = tmp_path / "jobs.csv"
    csv.write_text("units,hours,failures\n1,10000,20\n128,100,15\n16,500,5\n")
    out = tmp_path / "sized.toml"
    call_command("fit_failures", "--jobs-csv", str(csv), "--out", str(out))
    printed = capsys.readouterr().out
    assert "rate = a x nodes + b over 3 job records, 40 failures" in printed
    assert "95% profile-likelihood intervals" in printed and f"wrote {out}" in printed
    p = load_profile(out)
    assert [mo.component for mo in p.modes] == ["host", "job"]
    for mo in p.modes:
        lo, hi = p.intervals[mo.cause]
        assert lo <= mo.per_hour <= hi and hi > lo
    call_command("simulate", "--preset", "dev-small", "--days", "0.1",
                 "--failure-profile", str(out), "--json", str(tmp_path / "r.json"))
    assert "--jobs-csv" in refused("fit_failures", "--csv", str(csv), "--jobs-csv", str(csv),
                                   "--out", str(out))
    one_size = tmp_path / "one.csv"
    one_size.write_text("units,hours,failures\n8,100,1\n8,50,2\n")
    assert "one size" in refused("fit_failures", "--jobs-csv", str(one_size), "--out",
                                 str(tmp_path / "x.toml"))
    assert not (tmp_path / "x.toml").exists()


@pytest.mark.parametrize("args, message", [
    (("--window-days", "0"), "--window-days must be a positive number"),
    (("--gpus", "many"), "--gpus must be a positive integer"),
    (("--confidence", "1.5"), "--confidence must be in (0, 1)"),
    (("--units", "toaster=3"), "--units: unknown component 'toaster'"),
])
def test_fit_failures_bad_flags_are_one_line_and_write_nothing(tmp_path, args, message):
    csv = tmp_path / "fleet.csv"
    csv.write_text("time,component\n1.0,gpu\n")
    out = tmp_path / "fleet.toml"
    base = {"--csv": str(csv), "--window-days": "2", "--gpus": "512", "--nodes": "64",
            "--out": str(out)}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    flat = [x for kv in base.items() for x in kv]
    assert message in refused("fit_failures", *flat)
    assert not out.exists()


def test_a_bad_csv_row_is_one_line_and_writes_nothing(tmp_path):
    csv = tmp_path / "fleet.csv"
    csv.write_text("time,component\n1.0,toaster\n")
    out = tmp_path / "fleet.toml"
    message = refused("fit_failures", "--csv", str(csv), "--window-days", "2", "--gpus", "8",
                      "--nodes", "1", "--out", str(out))
    assert message.startswith("fleet.csv:2: field 'component'") and not out.exists()


def test_the_admin_saves_a_clusters_failure_profile(login, small_cluster):
    client = login("admin")
    url = f"/admin/twin/cluster/{small_cluster.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    data["failure_profile"] = "rsc1"
    response = client.post(url, data)
    assert response.status_code == 302, response.content[:2000]
    small_cluster.refresh_from_db()
    assert small_cluster.failure_profile == "rsc1"
    data["failure_profile"] = "nope"
    assert b"Select a valid choice" in client.post(url, data).content
    small_cluster.refresh_from_db()
    assert small_cluster.failure_profile == "rsc1"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_fresh_live_engine_draws_its_clusters_profile(drivers, small_plan):  # noqa: F811
    cluster = await database_sync_to_async(cluster_plan_write)(small_plan)
    cluster.failure_profile = "rsc1"
    await database_sync_to_async(cluster.save)()
    driver = await drivers(speed=3600.0, clock=FakeClock())
    assert driver.engine.reliability.modes == load_profile("rsc1").modes
    assert m.Cluster._meta.get_field("failure_profile").default == "llama3"
