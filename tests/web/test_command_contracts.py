"""No request bricks the twin: every bad drill value, path, size or flag gets one line (one
message) and exit status 2 (a 400), and nothing is written — no database row, no file."""

import json
import math
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from twin import models as m

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def refused(command: str, *args) -> str:
    """Run a management command that must refuse; its one-line message."""
    with pytest.raises(CommandError) as err:
        call_command(command, *args)
    assert err.value.returncode == 2
    assert "\n" not in str(err.value)
    return str(err.value)


def cli(tmp_path, *args) -> subprocess.CompletedProcess:
    """``manage.py`` as a person runs it, on a database of its own."""
    return subprocess.run([sys.executable, "manage.py", *args], capture_output=True, text=True,
                          env={"DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
                               "CLUSTERTWIN_INSECURE_DEMO": "1", "PATH": "/usr/bin:/bin"},
                          timeout=120)


def one_line_exit_2(proc: subprocess.CompletedProcess, message: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def no_cluster_rows() -> bool:
    return not (m.Cluster.objects.exists() or m.Node.objects.exists()
                or m.Accelerator.objects.exists())


# ----------------------------------------------------------------- POST /api/drills
def post_drill(client, body):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post("/api/drills", data=data, content_type="application/json")


@pytest.mark.parametrize("body, message", [
    # the finding: accepted, and the engine's next step raised OverflowError
    ({"kind": "inference_surge", "target": "all", "factor": 1e308, "duration_s": 1e308},
     "factor must be at most 100, not 1e+308"),
    ({"kind": "inference_surge", "factor": 1e9, "duration_s": 1e12},
     "factor must be at most 100, not 1000000000.0"),
    ({"kind": "inference_surge", "factor": 2, "duration_s": 1e12},
     "duration_s must be at most 2,592,000 s (30 days), not 1000000000000.0"),
    # JSON's 1e400 parses as inf
    ('{"kind": "storage_slowdown", "factor": 1e400}',
     "factor must be a positive number in [0.0001, 1], not inf"),
    ({"kind": "storage_slowdown", "factor": 1e-9},
     "factor must be at least 0.0001, not 1e-09"),
    ({"kind": "storage_slowdown", "duration_s": True},
     "duration_s must be a positive number in (0, 2,592,000] s, not True"),
    ({"kind": "power_cap", "target": "all", "fraction": 0.01},
     "fraction must be at least 0.1, not 0.01"),
    ({"kind": "inference_surge", "factor": "1e308"},
     "factor must be a positive number in (0, 100], not '1e308'"),
])
def test_an_out_of_bound_drill_is_a_400_with_one_message_and_nothing_recorded(
        login, body, message, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as sent:
        response = post_drill(login("staff"), body)
    assert response.status_code == 400
    assert response.json() == {"error": message}
    assert not m.Drill.objects.exists() and sent == []


def test_the_upper_bounds_themselves_are_accepted(login):
    response = post_drill(login("staff"), {"kind": "inference_surge", "target": "all",
                                           "factor": 100, "duration_s": 30 * 86400})
    assert response.status_code == 202
    assert m.Drill.objects.get().params == {"factor": 100.0, "duration_s": 2592000.0}


def test_the_drill_form_refuses_1e400_instead_of_using_the_default(login, small_cluster):
    page = login("staff").post("/drills/", {"kind": "storage_slowdown", "factor": "1e400"})
    assert page.status_code == 400
    assert "Enter a number." in page.content.decode()
    assert not m.Drill.objects.exists()


# ----------------------------------------------------------------- build_cluster
@pytest.mark.parametrize("where, message", [
    (lambda tmp: tmp / "missing" / "s.json", "does not exist"),
    (lambda tmp: tmp, "is a folder"),
])
def test_build_cluster_checks_its_json_path_before_writing_the_cluster(db, tmp_path, where,
                                                                       message):
    target = where(tmp_path)
    assert message in refused("build_cluster", "--preset", "dev-small", "--json", str(target))
    assert no_cluster_rows()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_json_write_that_fails_after_the_build_keeps_no_cluster(db, tmp_path, monkeypatch):
    def full_disk(files):
        path = next(iter(files))
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr("twin.management.one_line.files_write", full_disk)
    target = tmp_path / "s.json"
    message = refused("build_cluster", "--preset", "dev-small", "--json", str(target))
    assert message == f"cannot write {target}: No space left on device"
    assert no_cluster_rows() and not target.exists()


def test_the_json_summary_is_written_whole_with_no_temporary_file_left(db, tmp_path):
    target = tmp_path / "s.json"
    target.write_text("old")
    call_command("build_cluster", "--preset", "dev-small", "--json", str(target))
    assert json.loads(target.read_text())["gpus"] == m.Accelerator.objects.count() == 512
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


@pytest.mark.parametrize("args, message", [
    (["--radix", "100000"], "--radix must be at most 512 ports, not 100000"),
    (["--gpus", "80000000000"], "--gpus must be at most 4,194,304 GPUs, not 80000000000"),
    (["--radix", "300"], "a full-size radix-300 fat-tree fabric holds 6,750,000 GPUs"),
    (["--radix", "300", "--dry-run"], "more than the 4,194,304 the twin builds"),
    (["--radix", "9"], "--radix must be an even integer in [4, 512] ports, not 9"),
])
def test_build_cluster_bounds_huge_sizes_with_one_line_and_writes_nothing(db, tmp_path, args,
                                                                          message):
    target = tmp_path / "s.json"
    assert message in refused("build_cluster", "--fabric", "fat-tree", *args, "--json",
                              str(target))
    assert no_cluster_rows() and not target.exists()


def test_build_cluster_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    one_line_exit_2(cli(tmp_path, "build_cluster", "--fabric", "dragonfly+", "--radix",
                        "100000"), "--radix must be at most 512 ports")
    one_line_exit_2(cli(tmp_path, "build_cluster", "--preset", "dev-small", "--json",
                        str(tmp_path / "no" / "s.json")), "does not exist")
    one_line_exit_2(cli(tmp_path, "build_cluster", "--bogus"), "unrecognized arguments")


# ----------------------------------------------------------------- simulate
@pytest.mark.parametrize("rows, message", [
    ("2017-10-01 00:00:00,1e308,2,0.0,a\n",
     "trace.csv line 2: duration must be at most 31,622,400 s (366 days), not 1e+308"),
    ("2017-10-01 00:00:00,60,8,0.0,a\n2017-10-01 00:00:05,60," + "1" + "0" * 26 + ",0.0,a\n",
     "trace.csv line 3: num_gpus must be at most 4,194,304"),
])
def test_an_absurd_trace_row_is_refused_with_file_and_line_and_no_report(tmp_path, rows,
                                                                         message):
    trace = tmp_path / "trace.csv"
    trace.write_text(PHILLY + rows)
    report = tmp_path / "report.json"
    assert message in refused("simulate", "--preset", "dev-small", "--days", "0.1", "--trace",
                              str(trace), "--json", str(report))
    assert not report.exists()


@pytest.mark.parametrize("args, message", [
    (["--gpus", "1000000000000"], "gpus must be at most 4,194,304 GPUs"),
    (["--load", "1e308"], "load must be at most 100, not 1e+308"),
    (["--fabric", "fat-tree", "--oversubscription", "1e308"],
     "oversubscription must be at most 100"),
    (["--checkpoint-interval", "1e-300"], "checkpoint interval must be at least 60 s"),
])
def test_simulate_bounds_sizes_and_values_and_writes_nothing(tmp_path, args, message):
    report = tmp_path / "report.json"
    assert message in refused("simulate", "--preset", "dev-small", *args, "--json",
                              str(report))
    assert not report.exists()


def test_simulate_refuses_a_folder_as_its_report_before_running(tmp_path):
    assert "is a folder" in refused("simulate", "--preset", "dev-small", "--json",
                                    str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_simulate_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text(PHILLY + "2017-10-01 00:00:00,1e308,2,0.0,a\n")
    one_line_exit_2(cli(tmp_path, "simulate", "--preset", "dev-small", "--trace", str(trace)),
                    "trace.csv line 2: duration must be at most")
    one_line_exit_2(cli(tmp_path, "simulate", "--preset", "dev-small", "--bogus"),
                    "unrecognized arguments")


# ----------------------------------------------------------------- collective
@pytest.mark.parametrize("args, message", [
    (["--bytes", "1e300", "--gpus", "8"],
     "--bytes must be at most 1,099,511,627,776 B (1 TiB), not 1e+300"),
    (["--bytes", "2T", "--gpus", "8"], "--bytes must be at most 1,099,511,627,776 B"),
    (["--bytes", "1G", "--gpus", "100000000000"], "--gpus must be at most 4,194,304 GPUs"),
    (["--bytes", "1G", "--gpus", "8", "--nic-gbps", "1e-300"],
     "--nic-gbps must be at least 1 Gb/s, not 1e-300"),
    (["--bytes", "1G", "--gpus", "16", "--oversubscription", "1e308"],
     "--oversubscription must be at most 100, not 1e+308"),
])
def test_collective_refuses_absurd_sizes_instead_of_printing_inf(tmp_path, args, message):
    out = tmp_path / "c.json"
    assert message in refused("collective", "--op", "all_reduce", *args, "--json", str(out))
    assert not out.exists()


def test_collective_at_its_upper_bounds_prints_finite_figures(capsys):
    call_command("collective", "--op", "all_reduce", "--bytes", "1T", "--gpus", "4194304",
                 "--nic-gbps", "1", "--oversubscription", "100", "--json", "-")
    captured = capsys.readouterr()

    def no_inf(token):
        raise AssertionError(f"{token} in the JSON")
    report = json.loads(captured.out, parse_constant=no_inf)
    assert all(math.isfinite(report[k]) and report[k] > 0
               for k in ("time_s", "algbw_GB_s", "busbw_GB_s"))
    assert "inf" not in captured.err and "nan" not in captured.err


def test_collective_checks_its_json_path_first(tmp_path):
    assert "does not exist" in refused("collective", "--op", "all_reduce", "--bytes", "1G",
                                       "--gpus", "8", "--json", str(tmp_path / "no" / "c.json"))


# ----------------------------------------------------------------- run_engine
@pytest.mark.parametrize("args, message", [
    (["--speed", "fast"], "--speed 'fast' is not a number"),
    (["--speed", "1e308"], "--speed must be in (0, 10000], not 1e308"),
    (["--preset", "nope"], "invalid choice: 'nope'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_run_engine_refuses_a_bad_flag_with_one_line_and_exit_2(tmp_path, args, message):
    one_line_exit_2(cli(tmp_path, "run_engine", *args), message)


@pytest.mark.parametrize("args", [["whatif", "--help"], ["mirror_check"], ["migrate"]])
def test_a_command_without_usable_settings_says_so_in_one_line(tmp_path, args):
    """Issue 26: ``whatif --help`` without ``SECRET_KEY`` printed an ImproperlyConfigured
    traceback. Any command now names the setting in one line and exits 2."""
    proc = subprocess.run([sys.executable, "manage.py", *args], capture_output=True, text=True,
                          env={"DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
                               "PATH": "/usr/bin:/bin"}, timeout=120)
    one_line_exit_2(proc, "SECRET_KEY is the published development key")
    assert proc.stderr.startswith(f"{args[0]}: settings: ")
    assert not (tmp_path / "cli.sqlite3").exists()
