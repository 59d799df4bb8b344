"""simulate: reports with every figure, seeded repeatability, trace replay and clear refusals."""

import copy
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from scheduler.report import WALL_CLOCK_FIELDS
from scheduler.scheduling.policies import REGISTRY

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def simulate(tmp_path, *args, name="report.json") -> dict:
    path = tmp_path / name
    call_command("simulate", *args, "--json", str(path))
    return json.loads(path.read_text())


def without_wall_clock(report: dict) -> dict:
    out = copy.deepcopy(report)
    for *parents, leaf in WALL_CLOCK_FIELDS:
        node = out
        for key in parents:
            node = node[key]
        node.pop(leaf)
    return out


def test_half_a_day_of_dev_small_reports_every_figure(tmp_path, capsys):
    r = simulate(tmp_path, "--preset", "dev-small", "--days", "0.5", "--seed", "3")
    sc = r["scenario"]
    assert (sc["preset"], sc["seed"], sc["days"], sc["gpus"], sc["nodes"]) == (
        "dev-small", 3, 0.5, 512, 64)
    assert sc["fabric"] == "rail" and sc["policy"] == "default" and sc["trace"] is None
    assert r["wall_seconds"] >= 0
    hours = sum(r["ledger_gpu_hours"].values())
    assert hours == pytest.approx(512 * 12.0, rel=1e-6)
    assert 0 < r["mfu"]["achieved"] < 1
    mfu = r["mfu"]
    jobs = r["jobs"]
    assert jobs["submitted"] > 0
    assert jobs["submitted"] >= jobs["completed"] + jobs["running_at_end"] + jobs["queued_at_end"]
    assert {"mean", "p95"} <= set(jobs["wait_hours"]) and "mean" in jobs["jct_hours"]
    assert 0 <= r["inference"]["slo_attainment"] <= 1
    assert r["inference"]["borrowed_gpu_hours"] >= 0
    assert r["cloud"]["gpu_hours"] >= 0 and r["cloud"]["cost"] >= 0
    assert r["scheduler"]["placement_decisions"] > 0
    # wall-clock figures are reported, not checked: they depend on the machine
    assert {"wall_seconds", "decisions_per_second"} <= set(r["scheduler"])
    out = capsys.readouterr().out
    for heading in ("dev-small: 512 GPUs", "GPU-hours by category", "MFU achieved", "Jobs",
                    "inference SLO attainment", "cloud cost", "decisions per second"):
        assert heading in out
    # the printed summary says what the JSON report says
    assert f"MFU achieved {100.0 * mfu['achieved']:.2f} %" in out
    biggest = max(mfu["loss_pp"].items(), key=lambda cv: cv[1])
    assert f"{biggest[0]}" in out and f"{biggest[1]:.2f}" in out


def test_the_same_seed_gives_the_same_report_and_another_seed_does_not(tmp_path):
    args = ("--preset", "dev-small", "--days", "0.5", "--seed", "7")
    first = simulate(tmp_path, *args, name="a.json")
    second = simulate(tmp_path, *args, name="b.json")
    other = simulate(tmp_path, "--preset", "dev-small", "--days", "0.5", "--seed", "8",
                     name="c.json")
    assert without_wall_clock(first) == without_wall_clock(second)
    assert without_wall_clock(first)["ledger_gpu_hours"] != other["ledger_gpu_hours"]


@pytest.mark.parametrize("policy", list(REGISTRY))
def test_every_registered_policy_runs(tmp_path, policy):
    conf = ("--slurm-conf", str(TRACES / "slurm_sample.conf")) if policy == "slurm" else ()
    r = simulate(tmp_path, "--preset", "dev-small", "--days", "0.5", "--policy", policy, *conf)
    assert r["scenario"]["policy"] == policy
    assert sum(r["ledger_gpu_hours"].values()) == pytest.approx(512 * 12.0, rel=1e-6)
    assert r["jobs"]["completed"] > 0


def test_placement_overrides_the_policy_strategy(tmp_path):
    r = simulate(tmp_path, "--preset", "dev-small", "--days", "0.25", "--policy", "fifo",
                 "--placement", "random")
    assert (r["scenario"]["policy"], r["scenario"]["placement"]) == ("fifo", "random")


def test_json_dash_writes_the_report_to_stdout_and_the_summary_to_stderr(capsys):
    call_command("simulate", "--preset", "dev-small", "--days", "0.1", "--json", "-")
    captured = capsys.readouterr()
    assert json.loads(captured.out)["scenario"]["preset"] == "dev-small"
    assert "GPU-hours by category" in captured.err


@pytest.mark.parametrize("args, message", [
    (["--preset", "nope"], "unknown preset 'nope'"),
    (["--days", "1"], "--preset is required"),
    (["--preset", "dev-small", "--days", "soon"], "--days must be a number"),
    (["--preset", "dev-small", "--days", "0"], "--days must be a number > 0"),
    (["--preset", "dev-small", "--days", "-2"], "--days must be a number > 0"),
    (["--preset", "dev-small", "--days", "nan"], "--days must be a number"),
    (["--preset", "dev-small", "--days", "400"], "<= 366"),
    (["--preset", "dev-small", "--seed", "-1"], "--seed must be an integer >= 0"),
    (["--preset", "dev-small", "--seed", "1.5"], "--seed must be an integer >= 0"),
    (["--preset", "dev-small", "--policy", "nope"], "unknown policy 'nope'; choose one of"),
    (["--preset", "dev-small", "--placement", "best"], "unknown placement 'best'"),
    (["--preset", "dev-small", "--gpus", "0"], "--gpus must be a positive integer"),
    (["--preset", "dev-small", "--gpus", "12.5"], "--gpus must be a positive integer"),
    (["--preset", "dev-small", "--trace", "no/such.csv"], "does not exist"),
    (["--preset", "dev-small", "--trace", str(TRACES / "unknown_header.csv")],
     "unrecognised header"),
    (["--preset", "dev-small", "--trace", str(TRACES)], "is not a file"),
    (["--preset", "dev-small", "--warmup-s", "soon"], "--warmup-s must be a number"),
    (["--preset", "dev-small", "--detect-s", "inf"], "--detect-s must be a finite"),
    (["--preset", "dev-small", "--reschedule-s", "-5"], "reschedule_s"),
])
def test_bad_flags_are_refused_with_status_2_and_write_nothing(tmp_path, args, message):
    path = tmp_path / "report.json"
    with pytest.raises(CommandError, match=message) as err:
        call_command("simulate", *args, "--json", str(path))
    assert err.value.returncode == 2
    assert "\n" not in str(err.value)
    assert not path.exists()


def test_a_json_path_in_a_missing_folder_is_refused_before_the_run(tmp_path):
    with pytest.raises(CommandError, match="does not exist") as err:
        call_command("simulate", "--preset", "dev-small", "--json", str(tmp_path / "no" / "r"))
    assert err.value.returncode == 2


def test_a_bad_trace_row_names_the_file_and_line(tmp_path):
    path = tmp_path / "report.json"
    with pytest.raises(CommandError, match=r"philly_bad_row\.csv line 17: num_gpus") as err:
        call_command("simulate", "--preset", "dev-small", "--trace",
                     str(TRACES / "philly_bad_row.csv"), "--json", str(path))
    assert err.value.returncode == 2
    assert not path.exists()


def test_command_line_error_is_one_line_with_exit_status_2(tmp_path):
    env_db = f"sqlite:///{tmp_path / 'x.sqlite3'}"
    proc = subprocess.run([sys.executable, "manage.py", "simulate", "--preset", "dev-small",
                           "--days", "-1"], capture_output=True, text=True,
                          env={"DATABASE_URL": env_db, "CLUSTERTWIN_INSECURE_DEMO": "1",
                               "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "--days must be a number > 0" in proc.stderr


def test_a_philly_trace_replaces_the_preset_workload(tmp_path):
    r = simulate(tmp_path, "--preset", "dev-small", "--days", "11", "--trace",
                 str(TRACES / "philly_sample.csv"))
    sc = r["scenario"]
    assert (sc["trace"], sc["trace_source"], sc["gpus"]) == ("philly_sample.csv", "philly", 512)
    assert r["jobs"]["submitted"] == 40 and r["jobs"]["completed"] == 40
    assert r["inference"]["services"] == 0 and r["ledger_gpu_hours"]["inference"] == 0
    assert sum(r["ledger_gpu_hours"].values()) == pytest.approx(512 * 264.0, rel=1e-6)


@pytest.mark.parametrize("trace, days, submitted", [
    ("alibaba_openb_sample.csv", "40", 7),        # pods created within the first 40 days
    ("alibaba_multigpu_sample.csv", "1", 38),     # synthetic times: one pod a minute
])
def test_an_alibaba_trace_replays(tmp_path, trace, days, submitted):
    r = simulate(tmp_path, "--preset", "dev-small", "--days", days, "--trace",
                 str(TRACES / trace))
    assert (r["scenario"]["trace"], r["scenario"]["trace_source"]) == (trace, "alibaba-openb")
    assert r["jobs"]["submitted"] == submitted
    assert r["jobs"]["running_at_end"] + r["jobs"]["completed"] == submitted


def test_gpus_scales_llama3_and_its_frontier_job(tmp_path):
    r = simulate(tmp_path, "--preset", "llama3-16k", "--days", "1", "--gpus", "1024")
    assert 1000 <= r["scenario"]["gpus"] <= 1100
    assert r["scenario"]["gpus_requested"] == 1024
    assert 512 <= r["largest_job"]["gpus"] <= 1024
    assert r["largest_job"]["state"] == "running"


def test_fabric_flag_swaps_the_scale_out_fabric(tmp_path):
    out = tmp_path / "r.json"
    call_command("simulate", "--preset", "superpod-h100", "--days", "0.2",
                 "--fabric", "fat-tree", "--oversubscription", "2", "--json", str(out),
                 stdout=io.StringIO(), stderr=io.StringIO())
    report = json.loads(out.read_text())
    assert report["scenario"]["fabric"] == "fat-tree"
    assert report["scenario"]["gpus"] == 1016


@pytest.mark.parametrize("flags, message", [
    (("--fabric", "torus"), "unknown fabric"),
    (("--fabric", "rail", "--oversubscription", "2"), "applies to fat-tree and island"),
    (("--oversubscription", "0.5"), ">= 1"),
])
def test_bad_fabric_flags_exit_2(tmp_path, flags, message):
    out = tmp_path / "r.json"
    with pytest.raises(CommandError) as err:
        call_command("simulate", "--preset", "superpod-h100", "--days", "0.1", *flags,
                     "--json", str(out), stdout=io.StringIO(), stderr=io.StringIO())
    assert err.value.returncode == 2 and message in str(err.value)
    assert not out.exists()


def test_the_restart_parts_are_set_from_the_command_line(tmp_path):
    """A longer warm-up after every restart costs recovery time: the same seed with a
    10-minute warm-up books more recovery GPU-hours than with none."""
    args = ("--preset", "llama3-16k", "--gpus", "2048", "--days", "2", "--seed", "4")
    quick = simulate(tmp_path, *args, "--warmup-s", "0", "--reschedule-s", "0", name="a.json")
    slow = simulate(tmp_path, *args, "--warmup-s", "600", "--reschedule-s", "0", name="b.json")
    assert quick["interruptions"]["unplanned"] > 0
    assert slow["ledger_gpu_hours"]["recovery"] > quick["ledger_gpu_hours"]["recovery"]
