"""simulate --cluster: a cluster of the inventory replays its own history and logs each job."""

import csv
import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from scheduler.job_log import JOB_LOG_HEADER
from twin.studies.store import spec_check

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
CSV = TRACES / "slurm_sample.csv"
SACCT = TRACES / "sacct_24.11_schema.json"
CONF = TRACES / "slurm_sample.conf"
QUIET = ("--failures", "off", "--physics", "off", "--days", "0.01")


@pytest.fixture
def rack8(build):
    """A full radix-8 fat-tree of H100 nodes in the inventory: 128 GPUs on 16 nodes."""
    build("--fabric", "fat-tree", "--radix", "8", "--name", "rack8")
    return "rack8"


def simulate(tmp_path, *args) -> tuple[dict, list[dict]]:
    report, log = tmp_path / "report.json", tmp_path / "jobs.csv"
    call_command("simulate", *args, "--json", str(report), "--job-log", str(log))
    with open(log) as f:
        assert tuple(next(csv.reader(f))) == JOB_LOG_HEADER
    with open(log) as f:
        return json.loads(report.read_text()), list(csv.DictReader(f))


def test_a_cluster_of_the_inventory_replays_a_slurm_csv_job_for_job(tmp_path, rack8, capsys):
    report, rows = simulate(tmp_path, "--cluster", rack8, "--trace", str(CSV),
                            "--policy", "backfill", *QUIET)
    sc = report["scenario"]
    assert (sc["cluster"], sc["preset"], sc["gpus"], sc["nodes"]) == ("rack8", None, 128, 16)
    assert sc["trace_source"] == "slurm-csv"
    assert "cluster rack8: 128 GPUs on 16 nodes" in capsys.readouterr().out
    with open(CSV) as f:
        stated = {r["job_id"]: r for r in csv.DictReader(f) if r["gpus"] != "0"}
    assert [r["job_id"] for r in rows] == list(stated)  # the trace's own ids, in submit order
    for r in rows:
        want = stated[r["job_id"]]
        assert (r["submit_s"], r["gpus"]) == (want["submit_s"], want["gpus"])
        duration = float(want["duration_s"]) or 1.0  # a 0 s job is replayed as 1 s
        assert float(r["end_s"]) - float(r["start_s"]) == pytest.approx(duration, abs=1e-6)
        assert int(r["nodes"]) >= -(-int(r["gpus"]) // 8)  # 8 GPUs a node


def test_a_sacct_export_replays_on_the_cluster(tmp_path, rack8):
    report, rows = simulate(tmp_path, "--cluster", rack8, "--trace", str(SACCT), *QUIET)
    assert report["scenario"]["trace_source"] == "slurm-sacct"
    assert [r["job_id"] for r in rows] == ["301", "302", "304", "305", "306", "307"]
    assert [float(r["end_s"]) - float(r["start_s"]) for r in rows] == pytest.approx(
        [30, 60, 14, 20, 20, 24], abs=1e-6)


def test_the_slurm_policy_replays_by_the_given_slurm_conf(tmp_path, rack8, capsys):
    report, rows = simulate(tmp_path, "--cluster", rack8, "--trace", str(SACCT), "--policy",
                            "slurm", "--slurm-conf", str(CONF), *QUIET)
    sc = report["scenario"]
    assert (sc["policy"], sc["slurm_conf"]) == ("slurm", "slurm_sample.conf")
    assert ("trace sacct_24.11_schema.json (slurm-sacct; 2 skipped: never started), "
            "slurm_sample.conf") in capsys.readouterr().out
    assert sc["trace_jobs_in_file"] == 8 and sc["trace_skipped"] == {"never_started": 2}
    assert [float(r["end_s"]) - float(r["start_s"]) for r in rows] == pytest.approx(
        [30, 60, 14, 20, 20, 24], abs=1e-6)


def test_slurm_conf_keys_the_twin_does_not_model_are_named_in_one_warning(tmp_path, rack8,
                                                                          capsys):
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF.read_text() + "FairShareDampeningFactor=3\nPriorityWeightTRES=x\n")
    simulate(tmp_path, "--cluster", rack8, "--trace", str(SACCT), "--policy", "slurm",
             "--slurm-conf", str(conf), *QUIET)
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if line.startswith("warning:")]
    assert warnings == ["warning: slurm.conf: not modelled by the twin, so not applied: "
                        "FairShareDampeningFactor, PriorityWeightTRES"]


def test_without_a_trace_a_preset_s_workload_is_scaled_to_the_cluster(tmp_path, rack8):
    report, rows = simulate(tmp_path, "--cluster", rack8, "--preset", "dev-small", *QUIET)
    sc = report["scenario"]
    assert (sc["cluster"], sc["preset"], sc["gpus"], sc["trace"]) == ("rack8", "dev-small", 128,
                                                                      None)
    assert len(rows) == report["jobs"]["submitted"] > 0


def test_an_unknown_cluster_is_one_line_that_lists_the_clusters(tmp_path, rack8):
    with pytest.raises(CommandError) as err:
        call_command("simulate", "--cluster", "rack9", "--trace", str(CSV))
    assert str(err.value) == "--cluster 'rack9': no such cluster in the inventory; clusters: rack8"


def test_an_unknown_cluster_in_an_empty_inventory_says_how_to_make_one(db):
    with pytest.raises(CommandError, match=r"clusters: none \(make one with build_cluster or "
                                           r"import_inventory\)$"):
        call_command("simulate", "--cluster", "rack9", "--trace", str(CSV))


@pytest.mark.parametrize("args, message", [
    ((), "--cluster 'rack8' has no preset's workload: give --trace PATH"),
    (("--trace", str(CSV), "--gpus", "64"), "--gpus shapes a preset's cluster; --cluster runs"),
    (("--trace", str(CSV), "--fabric", "rail"), "--fabric shapes a preset's cluster"),
    (("--trace", str(CSV), "--job-log", "-"), "--job-log needs the path of a file"),
    (("--trace", str(CSV), "--job-log", "/no/such/folder/jobs.csv"),
     "--job-log: folder '/no/such/folder' does not exist"),
    (("--trace", str(CSV), "--slurm-conf", "/no/slurm.conf"),
     "slurm.conf file '/no/slurm.conf' does not exist or is not a file"),
    (("--trace", str(CSV), "--slurm-conf", str(CONF), "--policy", "backfill"),
     "a slurm.conf is read by policy 'slurm' only, not by 'backfill'"),
    (("--trace", str(CSV), "--policy", "slurm"),
     "policy 'slurm' schedules by a cluster's slurm.conf: give slurm_conf (simulate "
     "--slurm-conf PATH)"),

])
def test_bad_cluster_runs_are_refused_in_one_line_before_they_run(tmp_path, rack8, args,
                                                                  message):
    with pytest.raises(CommandError) as err:
        call_command("simulate", "--cluster", rack8, *args)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_bad_slurm_conf_is_one_line_naming_the_file(tmp_path, rack8):
    conf = tmp_path / "slurm.conf"
    conf.write_text("SchedulerParameters=bf_interval=soon\n")
    with pytest.raises(CommandError) as err:
        call_command("simulate", "--cluster", rack8, "--trace", str(CSV), "--policy", "slurm",
                     "--slurm-conf", str(conf))
    assert "slurm.conf" in str(err.value) and "bf_interval" in str(err.value)
    assert "\n" not in str(err.value)


def test_the_job_log_of_a_preset_run_names_every_submitted_job(tmp_path):
    report, rows = simulate(tmp_path, "--preset", "dev-small", "--days", "0.2")
    assert len(rows) == report["jobs"]["submitted"]
    done = [r for r in rows if r["end_s"]]
    assert len(done) == report["jobs"]["completed"] > 0
    assert all(float(r["submit_s"]) <= float(r["start_s"]) <= float(r["end_s"]) for r in done)


def test_a_study_from_the_web_cannot_name_a_slurm_conf_of_the_server():
    spec = ("name: slurm\nbase: {preset: dev-small, days: 0.25}\nseeds: 2\narms:\n"
            "  - name: backfill\n    set: {policy: backfill}\n"
            f"  - name: slurm\n    set: {{policy: slurm, slurm_conf: {CONF}}}\n"
            "figures: [mfu]\n")
    with pytest.raises(ValidationError, match="arm 'slurm': a slurm.conf is read by the command "
                                              r"line \(manage.py study run\), not from the web"):
        spec_check(text=spec)
