"""Replaying a Slurm cluster's own history: the plain CSV and sacct --json exports (issue 25)."""

import csv
import io
import json
from pathlib import Path

import pytest

from scheduler.hardware.catalog import get
from scheduler.job_log import JOB_LOG_HEADER, job_log_text
from scheduler.simulate import Scenario, run_scenario
from scheduler.workload.trace_slurm import SLURM_CSV_HEADER, read_sacct_json, read_slurm_csv
from scheduler.workload.traces import TraceError, read_trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CSV = FIXTURES / "traces" / "slurm_sample.csv"
SACCT_22 = FIXTURES / "traces" / "sacct_22.05_schema.json"
SACCT_24 = FIXTURES / "traces" / "sacct_24.11_schema.json"
REAL_22 = FIXTURES / "slurm" / "sacct-22.05.json"
HEADER = ",".join(SLURM_CSV_HEADER) + "\n"
H100 = get("H100-SXM")


def write(tmp_path, text, name="trace.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def durations_in(path) -> dict[int, float]:
    """Job id -> duration, as the CSV states it."""
    with open(path) as f:
        return {int(r["job_id"]): float(r["duration_s"]) for r in csv.DictReader(f)}


# ----------------------------------------------------------------- the CSV
def test_a_slurm_csv_keeps_the_trace_s_ids_times_and_requests():
    w = read_trace(CSV)
    assert w.source == "slurm-csv"
    assert [j.job_id for j in w.jobs] == [101, 102, 103, 104, 105, 106, 108]  # 107: no GPU
    assert [j.submit_s for j in w.jobs] == [0, 0, 3, 5, 5, 9, 20]  # not shifted
    first = w.jobs[0]
    assert (first.name, first.tenant, first.gpus, first.gpus_per_node, first.nodes) == (
        "slurm-101", "alice", 8, 8, 1)
    assert (first.partition, first.qos, first.user, first.time_limit_s) == (
        "batch", "normal", "alice", 120.0)
    no_limit, no_names = w.jobs[3], w.jobs[4]
    assert no_limit.time_limit_s is None and no_limit.nodes == 4
    assert (no_names.partition, no_names.qos, no_names.user, no_names.tenant,
            no_names.gpus_per_node) == ("debug", "", "", "slurm", None)
    assert [t.name for t in w.tenants] == ["alice", "bob", "carol", "slurm", "dave"]
    assert w.meta["skipped_cpu_only"] == 1 and w.meta["jobs_in_file"] == 8


def test_each_csv_job_computes_its_duration_on_the_reference_model_and_asks_no_host():
    stated = durations_in(CSV)
    for model in ("H100-SXM", "MI300X"):
        for job in read_trace(CSV, reference_model=model).jobs:
            want = stated[job.job_id] or 1.0  # a 0 s job becomes 1 s (counted in meta)
            assert job.runtime_s(get(model)) == pytest.approx(want, rel=1e-12)
            assert (job.cpu_per_gpu, job.ram_gb_per_gpu, job.nic_gbps_per_gpu) == (0, 0, 0)
            assert job.checkpoint_gb == 0 and job.priority == 0
    assert read_trace(CSV).meta["zero_duration_rows"] == 1


def test_equal_submit_times_are_ordered_by_job_id_and_limit_keeps_the_first(tmp_path):
    path = write(tmp_path, HEADER + "9,5,1,1,,,,,\n7,5,1,1,,,,,\n8,0,1,1,,,,,\n")
    assert [j.job_id for j in read_trace(path).jobs] == [8, 7, 9]
    assert [j.job_id for j in read_trace(path, limit=2).jobs] == [8, 7]


BAD_CSV_ROWS = [
    ("x,0,10,1,,,,,", "job_id must be an integer >= 0 and <= 4294967293, got 'x'"),
    ("-1,0,10,1,,,,,", "job_id must be an integer >= 0"),
    ("1,0,10,1,,,,,", "job_id 1 is already on line 2"),
    ("2,-5,10,1,,,,,", "submit_s must be finite and >= 0, got '-5'"),
    ("2,1e11,10,1,,,,,", "submit_s"),
    ("2,0,soon,1,,,,,", "duration_s must be a number, got 'soon'"),
    ("2,0,4e7,1,,,,,", "duration_s must be at most 31,622,400 s"),
    ("2,0,10,2.5,,,,,", "gpus must be an integer >= 0, got '2.5'"),
    ("2,0,10,5000000,,,,,", "gpus must be at most 4,194,304"),
    ("2,0,10,12,8,,,,", "gpus 12 is not a whole number of nodes of gpus_per_node 8"),
    ("2,0,10,8,0,,,,", "gpus_per_node must be a positive integer, got '0'"),
    ("2,0,10,8,8,,,,0", "time_limit_s must be empty or a number of seconds > 0, got '0'"),
    ("2,0,10,8,8,,,,1:00", "time_limit_s must be empty or a number of seconds, got '1:00'"),
    ("2,0,10,8", "expected 9 columns"),
]


@pytest.mark.parametrize("row, message", BAD_CSV_ROWS)
def test_every_bad_csv_cell_is_one_line_naming_the_file_and_line(tmp_path, row, message):
    path = write(tmp_path, HEADER + "1,0,10,1,,,,,\n" + row + "\n")
    with pytest.raises(TraceError) as err:
        read_trace(path)
    text = str(err.value)
    assert text.startswith("trace.csv line 3: ") and message in text
    assert "\n" not in text


def test_read_slurm_csv_refuses_another_header(tmp_path):
    path = write(tmp_path, "job_id,submit_s,duration_s,gpus\n1,0,10,1\n")
    with pytest.raises(TraceError, match=r"^trace\.csv: the Slurm CSV header must be "
                                         r"'job_id,submit_s,duration_s,gpus,gpus_per_node,"):
        read_slurm_csv(path)
    with pytest.raises(TraceError, match=r"accepted headers: .*job_id,submit_s,duration_s,gpus,"
                                         r"gpus_per_node,partition,qos,user,time_limit_s "
                                         r"\(or a sacct --json export\)"):
        read_trace(path)


# ----------------------------------------------------------------- sacct --json
def test_a_22_05_export_replays_the_jobs_that_ran_and_counts_the_others():
    w = read_trace(SACCT_22)
    assert w.source == "slurm-sacct" and w.meta["release"] == "22.05.8"
    assert [(j.job_id, j.name) for j in w.jobs] == [
        (201, "slurm-201"), (202, "slurm-202"), (204, "slurm-203_1")]  # 204: array task 203_1
    m = w.meta
    assert (m["records"], m["jobs_in_file"], m["jobs_ran"], m["skipped_never_started"],
            m["skipped_not_ended"], m["skipped_cpu_only"], m["array_tasks"]) == (7, 7, 3, 2, 1,
                                                                                 1, 1)
    assert m["states"] == {"CANCELLED": 1, "COMPLETED": 2, "FAILED": 1, "PENDING": 1,
                           "RUNNING": 1, "TIMEOUT": 1}
    # times from the export's first submission: the cancelled job 205's, 10 s before 201's
    assert m["offset_s"] == 1796379990 and [j.submit_s for j in w.jobs] == [10, 11, 15]
    train, vit, task = w.jobs
    assert [j.runtime_s(H100) for j in w.jobs] == pytest.approx([40, 60, 12], rel=1e-12)
    assert (train.gpus, train.gpus_per_node, train.time_limit_s) == (16, 8, 120.0)
    assert vit.gpus == 4  # gres/gpu:h100 is the same 4 GPUs again, by type
    assert (vit.tenant, vit.user, train.tenant, train.user) == ("bob", "bob", "vision", "alice")
    assert task.time_limit_s is None and task.qos == "low" and task.partition == "gpu"


def test_a_24_11_export_reads_unset_and_infinite_numbers_state_lists_and_het_jobs():
    w = read_trace(SACCT_24)
    assert w.meta["release"] == "24.11.1"
    assert [j.name for j in w.jobs] == ["slurm-301", "slurm-302", "slurm-303_0", "slurm-305+0",
                                        "slurm-305+1", "slurm-307"]
    assert [j.submit_s for j in w.jobs] == [0, 2, 4, 6, 6, 7]
    assert [j.runtime_s(H100) for j in w.jobs] == pytest.approx([30, 60, 14, 20, 20, 24],
                                                                rel=1e-12)
    assert [j.time_limit_s for j in w.jobs] == [60, 120, None, 300, 300, 180]  # inf: none
    assert [j.nodes for j in w.jobs] == [1, 3, 1, 1, 1, 2]
    assert (w.meta["het_components"], w.meta["skipped_never_started"]) == (2, 2)
    assert w.jobs[-1].tenant == "dave"  # no account: the user


def test_without_start_offset_sacct_times_stay_posix_seconds():
    assert read_trace(SACCT_24, start_offset=False).jobs[0].submit_s == 1796400000


def record(job_id=1, **changes) -> dict:
    """A 24.05-shaped sacct record of a completed 8-GPU, 1-node job; ``changes`` by dotted key."""
    rec = {"job_id": job_id, "user": "u", "account": "a", "partition": "p", "qos": "normal",
           "allocation_nodes": 1, "state": {"current": ["COMPLETED"]},
           "array": {"job_id": 0, "task_id": {"set": False, "infinite": False, "number": 0}},
           "het": {"job_id": 0, "job_offset": {"set": False, "infinite": False, "number": 0}},
           "time": {"submission": 1000, "start": 1010, "end": 1070,
                    "limit": {"set": True, "infinite": False, "number": 2}},
           "tres": {"allocated": [{"type": "gres", "name": "gpu", "id": 1001, "count": 8}],
                    "requested": []}}
    if job_id is _DROP:
        rec.pop("job_id")
    for key, value in changes.items():
        *parents, leaf = key.split("__")
        node = rec
        for p in parents:
            node = node[p]
        if value is _DROP:
            node.pop(leaf)
        else:
            node[leaf] = value
    return rec


_DROP = object()


def sacct(tmp_path, *records, name="sacct.json"):
    return write(tmp_path, json.dumps({"jobs": list(records)}), name)


def test_a_requeued_job_replays_its_last_run_submitted_when_its_first_was(tmp_path):
    # sacct -X lists a requeued job once per run; the requeue's record is submitted at the
    # requeue (here the first run was preempted at 1013 s)
    first = record(7, state={"current": ["PREEMPTED"]}, time__end=1013)
    last = record(7, time={"submission": 1013, "start": 1200, "end": 1225, "limit": 2})
    other = record(8, time={"submission": 1005, "start": 1005, "end": 1010, "limit": 2})
    w = read_trace(sacct(tmp_path, last, other, first))
    assert [(j.job_id, j.submit_s) for j in w.jobs] == [(7, 0), (8, 5)]
    assert w.jobs[0].runtime_s(H100) == pytest.approx(25, rel=1e-12)
    assert (w.meta["records"], w.meta["jobs_in_file"], w.meta["requeued_runs"]) == (3, 2, 1)
    assert w.meta["states"] == {"COMPLETED": 2}


def test_gpus_come_from_gres_detail_when_no_tres_names_them(tmp_path):
    rec = record(tres__allocated=[{"type": "cpu", "name": "", "id": 1, "count": 4}],
                 gres_detail=["gpu:h100:4(IDX:0-3)", "gpu:4(IDX:4-7)"], allocation_nodes=2)
    job = read_trace(sacct(tmp_path, rec)).jobs[0]
    assert (job.gpus, job.gpus_per_node) == (8, 4)


def test_gpus_uneven_over_nodes_leave_gpus_per_node_unset(tmp_path):
    w = read_trace(sacct(tmp_path, record(allocation_nodes=3)))
    assert w.jobs[0].gpus_per_node is None and w.meta["uneven_nodes"] == 1


def test_an_export_where_no_job_names_gpus_says_how_slurm_records_them(tmp_path):
    rec = record(tres__allocated=[{"type": "cpu", "name": "", "id": 1, "count": 4}])
    with pytest.raises(TraceError, match=r"^sacct\.json: none of the 1 jobs that ran names GPUs "
                                         r".*AccountingStorageTRES=gres/gpu"):
        read_trace(sacct(tmp_path, rec))


def test_a_json_file_or_text_opening_with_a_brace_is_read_as_sacct(tmp_path):
    as_txt = sacct(tmp_path, record(), name="export.txt")
    assert read_trace(as_txt).source == "slurm-sacct"
    assert read_trace(write(tmp_path, "\n  " + json.dumps({"jobs": [record()]}),
                            "padded.log")).source == "slurm-sacct"


BAD_RECORDS = [
    (record(job_id=_DROP), "jobs[1]: job_id is missing"),
    (record(job_id="12"), "jobs[1]: job_id must be a number or a {set, infinite, number} "
                          "object, got \"12\""),
    (record(2, time__submission=_DROP), "jobs[1] (job 2): time.submission is missing"),
    (record(2, time="soon"), "jobs[1] (job 2): time must be an object, got str"),
    (record(2, time__end=1005), "jobs[1] (job 2): time.end 1005 is before time.start 1010"),
    (record(2, time__start=999), "jobs[1] (job 2): time.start 999 is before time.submission"),
    (record(2, time__end=1e11), "jobs[1] (job 2): time.end"),
    (record(2, time__limit="2:00"), "jobs[1] (job 2): time.limit must be a number"),
    (record(2, state={"current": 3}), "jobs[1] (job 2): state.current must be a state name"),
    (record(2, tres__allocated={"gpu": 8}), "jobs[1] (job 2): tres.allocated must be a list"),
    (record(2, tres__allocated=[{"type": "gres", "name": "gpu", "count": -8}]),
     "jobs[1] (job 2): tres.allocated[0].count must be an integer >= 0, got -8"),
    (record(2, tres__allocated=[{"type": "gres", "name": "gpu", "count": 5_000_000}]),
     "jobs[1] (job 2): 5,000,000 GPUs is more than 4,194,304"),
    (record(2, tres__allocated=[], gres_detail=["gpu:h100(IDX:0-3)"]),
     "jobs[1] (job 2): gres_detail[0] 'gpu:h100(IDX:0-3)' names GPUs without a count"),
    (record(2, allocation_nodes=1.5), "jobs[1] (job 2): allocation_nodes must be an integer"),
    (record(2, user=7), "jobs[1] (job 2): user must be a string, got int"),
    ("not a job", "jobs[1]: a job record must be an object, got str"),
]


@pytest.mark.parametrize("bad, message", BAD_RECORDS)
def test_every_bad_sacct_record_is_one_line_naming_the_file_and_record(tmp_path, bad, message):
    path = sacct(tmp_path, record(1), bad)
    with pytest.raises(TraceError) as err:
        read_trace(path)
    text = str(err.value)
    assert text.startswith("sacct.json " + message.split(":")[0]) and message in text
    assert "\n" not in text


@pytest.mark.parametrize("text, message", [
    ('{"jobs": [', "sacct.json: not JSON (Expecting value at line 1 column 11)"),
    ('{"job": []}', "sacct.json: not a sacct --json export: no 'jobs' list at the top"),
    ('[1, 2]', "sacct.json: not a sacct --json export"),
    ('{"jobs": [{"job_id": %s}]}' % ("9" * 5000), "sacct.json: a number Slurm never writes"),
])
def test_a_file_that_is_no_export_is_one_line(tmp_path, text, message):
    with pytest.raises(TraceError) as err:
        read_sacct_json(write(tmp_path, text, "sacct.json"))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_real_22_05_export_with_a_requeued_job_replays_each_job_once():
    # Slurm 22.05.8 (tests/fixtures/slurm/README.md): job 1 (4 nodes, 32 GPUs, sleep 20) was
    # preempted 3 s after it started, requeued and completed; jobs 2-4 ran once
    w = read_trace(REAL_22)
    assert w.meta["release"] == "22.05.8"
    assert [(j.job_id, j.submit_s, j.gpus, j.nodes, j.qos) for j in w.jobs] == [
        (1, 0, 32, 4, "low"), (2, 0, 8, 1, "normal"), (3, 3, 8, 1, "high"),
        (4, 4, 2, 1, "low")]
    assert [j.runtime_s(H100) for j in w.jobs] == pytest.approx([20, 6, 5, 4], rel=1e-12)
    assert all(j.time_limit_s == 60 and j.partition == "batch" for j in w.jobs)
    assert (w.meta["records"], w.meta["jobs_in_file"], w.meta["requeued_runs"]) == (5, 4, 1)


# ----------------------------------------------------------------- replayed, then logged
def replay(trace, **kw):
    """A failure-free, physics-free backfill run of ``trace`` on 64 H100 GPUs, and its log."""
    scenario = Scenario(preset="dev-small", gpus=64, spares=0.0, days=0.05, trace=trace,
                        policy="backfill", failures=False, physics=False, **kw)
    engine, report = run_scenario(scenario)
    rows = list(csv.DictReader(io.StringIO(job_log_text(engine))))
    return engine, report, rows


def test_a_replay_without_physics_or_failures_runs_each_job_for_its_duration(tmp_path):
    engine, report, rows = replay(CSV)
    assert report["scenario"]["gpus"] == 64 and report["scenario"]["trace_source"] == "slurm-csv"
    assert tuple(rows[0]) == JOB_LOG_HEADER
    stated = durations_in(CSV)
    assert [int(r["job_id"]) for r in rows] == [101, 102, 103, 104, 105, 106, 108]
    for r in rows:
        start, end, submit = float(r["start_s"]), float(r["end_s"]), float(r["submit_s"])
        assert end - start == pytest.approx(stated[int(r["job_id"])] or 1.0, abs=1e-6)
        assert start >= submit and int(r["nodes"]) >= 1
    # the 64-GPU job 108 (submitted at 20 s) waits for job 104, the last to hold GPUs, to end
    last = {int(r["job_id"]): r for r in rows}
    assert float(last[108]["start_s"]) == float(last[104]["end_s"]) == 95


@pytest.mark.parametrize("export, jobs", [(SACCT_24, 6), (REAL_22, 4)])
def test_a_replayed_sacct_export_reproduces_each_job_s_elapsed_time(export, jobs):
    doc = json.loads(export.read_text())
    last_runs = sorted(doc["jobs"], key=lambda j: j["time"]["submission"])  # a requeue's last
    elapsed = {j["job_id"]: j["time"]["end"] - j["time"]["start"] for j in last_runs
               if j["time"]["start"]}
    _, _, rows = replay(export)
    assert len(rows) == jobs
    for r in rows:
        assert float(r["end_s"]) - float(r["start_s"]) == pytest.approx(
            elapsed[int(r["job_id"])], abs=1e-6)


def test_the_job_log_leaves_start_end_and_nodes_empty_for_a_job_that_never_ran(tmp_path):
    path = write(tmp_path, HEADER + "1,0,10,8,8,,,,\n2,0,10,128,8,,,,\n")  # 128 > 64 GPUs
    engine, report, rows = replay(path)
    assert report["jobs"]["rejected"] == 1
    assert [(r["job_id"], r["start_s"], r["end_s"], r["gpus"], r["nodes"]) for r in rows] == [
        ("1", "0", "10", "8", "1"), ("2", "", "", "128", "")]


def test_the_job_log_gives_a_requeued_job_s_last_start_and_none_while_it_waits():
    scenario = Scenario(preset="dev-small", gpus=64, spares=0.0, days=0.05, trace=CSV,
                        policy="backfill", failures=False, physics=False)
    engine, _ = scenario.engine()
    engine.run_until(30.0)  # job 101 (8 GPUs, 45 s) has run since 0 s

    def row(job_id):
        rows = csv.DictReader(io.StringIO(job_log_text(engine)))
        return next((r["start_s"], r["end_s"], r["nodes"]) for r in rows
                    if r["job_id"] == str(job_id))

    engine.scheduler.hold()  # no pass may start it again at once
    engine.command("job_requeue", job="slurm-101")
    assert row(101) == ("", "", "")  # back in the queue: as sacct shows a requeued job
    engine.scheduler.release()
    engine.command("job_requeue", job="slurm-104")  # this instant's pass starts both again
    assert row(101) == ("30", "", "1")
    engine.run_until(4000.0)
    start, end, _ = row(101)
    assert start == "30" and float(end) > 30 + 15  # its restart, then what it had left
