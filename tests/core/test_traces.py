"""Reading real GPU-cluster traces (Philly, Alibaba openb) into the twin's job model."""

from pathlib import Path

import pytest

from scheduler.hardware.catalog import get
from scheduler.workload.traces import TraceError, read_trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
PHILLY = FIXTURES / "philly_sample.csv"
OPENB = FIXTURES / "alibaba_openb_sample.csv"
MULTIGPU = FIXTURES / "alibaba_multigpu_sample.csv"
OPENB_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                "creation_time,deletion_time,scheduled_time\n")
FULL_PHILLY = (Path(__file__).resolve().parents[2].parent / "shared" / "data" / "philly"
               / "philly.csv")


def write(tmp_path, text, name="trace.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_philly_rows_become_gangs_whose_runtime_on_the_reference_model_is_the_trace_duration():
    w = read_trace(PHILLY)
    assert w.source == "philly"
    first = next(j for j in w.jobs if j.name == "philly-2")  # 2017-10-09 07:01:55,66.0,1,.,11cb48
    assert first.gpus == 1 and first.tenant == "vc-11cb48" and first.checkpoint_gb == 0
    assert first.runtime_s(get("H100-SXM")) == pytest.approx(66.0)
    for model in ("H100-SXM", "MI300X"):
        job = read_trace(PHILLY, reference_model=model).jobs[5]
        assert job.runtime_s(get(model)) == pytest.approx(float(_philly_duration(job.name)))


def _philly_duration(name):
    line = int(name.removeprefix("philly-"))
    return PHILLY.read_text().splitlines()[line - 1].split(",")[1]


def test_a_faster_model_runs_a_philly_job_in_proportionally_less_time():
    job = read_trace(PHILLY).jobs[0]
    ratio = job.runtime_s(get("H100-SXM")) / job.runtime_s(get("B200"))
    assert ratio == pytest.approx(get("B200").bf16_tflops / get("H100-SXM").bf16_tflops)


def test_philly_gangs_of_eight_or_more_must_stay_in_one_pod(tmp_path):
    path = write(tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n"
                           "2017-10-01 00:00:00,10.0,7,70.0,a\n"
                           "2017-10-01 00:00:01,10.0,8,80.0,a\n")
    assert [j.affinity for j in read_trace(path).jobs] == ["any", "pod"]


def test_a_zero_duration_becomes_a_one_second_job(tmp_path):
    path = write(tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n"
                           "2017-10-01 00:00:00,0.0,2,0.0,a\n")
    w = read_trace(path)
    assert w.jobs[0].runtime_s(get("H100-SXM")) == pytest.approx(1.0)
    assert w.meta["zero_duration_rows"] == 1


def test_trace_starts_at_time_zero_and_is_sorted():
    for path in (PHILLY, OPENB, MULTIGPU):
        w = read_trace(path)
        submits = [j.submit_s for j in w.jobs]
        assert submits[0] == 0.0 and submits == sorted(submits)
        assert [j.job_id for j in w.jobs] == list(range(len(w.jobs)))


def test_equal_submit_times_keep_file_order(tmp_path):
    path = write(tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n"
                           "2017-10-01 00:00:05,1.0,1,1.0,a\n"
                           "2017-10-01 00:00:00,1.0,1,1.0,b\n"
                           "2017-10-01 00:00:05,1.0,1,1.0,c\n")
    assert [j.name for j in read_trace(path).jobs] == ["philly-3", "philly-2", "philly-4"]
    assert [j.submit_s for j in read_trace(path).jobs] == [0.0, 5.0, 5.0]


def test_without_start_offset_philly_submit_times_are_posix_seconds(tmp_path):
    path = write(tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n"
                           "2017-10-01 00:00:00,1.0,1,1.0,a\n")
    assert read_trace(path, start_offset=False).jobs[0].submit_s == 1506816000.0


def test_limit_keeps_the_first_jobs_and_only_their_tenants():
    whole, first = read_trace(PHILLY), read_trace(PHILLY, limit=2)
    assert first.jobs == whole.jobs[:2]
    assert {t.name for t in first.tenants} == {j.tenant for j in first.jobs}
    assert first.meta["jobs_in_file"] == len(whole.jobs) == 40


def test_each_tenant_appears_once_without_a_quota():
    w = read_trace(PHILLY)
    names = [t.name for t in w.tenants]
    assert sorted(names) == sorted({j.tenant for j in w.jobs}) == ["vc-11cb48", "vc-6214e9",
                                                                    "vc-6c71a0"]
    assert all(t.quota_gpus == 0 for t in w.tenants)


def test_a_bad_row_is_reported_with_its_line_number():
    with pytest.raises(TraceError, match=r"philly_bad_row\.csv line 17: num_gpus must be a "
                                         r"positive integer, got 'x'"):
        read_trace(FIXTURES / "philly_bad_row.csv")


@pytest.mark.parametrize(("row", "complaint"), [
    ("2017-10-01 00:00:00,1.0,1,1.0", "line 3: expected 5 columns"),
    ("2017-10-01 00:00:00,soon,1,1.0,a", "line 3: duration must be a number, got 'soon'"),
    ("2017-10-01 00:00:00,-4,1,1.0,a", "line 3: duration must be finite and >= 0"),
    ("2017-10-01 00:00:00,4,0,1.0,a", "line 3: num_gpus must be a positive integer, got '0'"),
    ("yesterday,4,1,1.0,a", "line 3: timestamp must be 'YYYY-MM-DD HH:MM:SS'"),
])
def test_bad_philly_rows_are_refused(tmp_path, row, complaint):
    path = write(tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n"
                           f"2017-10-01 00:00:00,1.0,1,1.0,a\n{row}\n", name="p.csv")
    with pytest.raises(TraceError, match="p.csv " + complaint):
        read_trace(path)


@pytest.mark.parametrize(("row", "complaint"), [
    ("p,1000,1024,1,1000,,LS,Failed,100,50,90", "deletion_time 50 is before scheduled_time 90"),
    ("p,1000,1024,1,1000,,LS,Pending,100,50,", "deletion_time 50 is before creation_time 100"),
    ("p,1000,1024,1,1000,,VIP,Running,0,50,0", "qos must be one of LS, Guaranteed"),
    ("p,1000,1024,2,500,,LS,Running,0,50,0", "num_gpu 2 with gpu_milli 500"),
    ("p,1000,1024,one,1000,,LS,Running,0,50,0", "num_gpu must be an integer >= 0, got 'one'"),
])
def test_bad_openb_rows_are_refused(tmp_path, row, complaint):
    path = write(tmp_path, OPENB_HEADER + row + "\n", name="o.csv")
    with pytest.raises(TraceError, match="o.csv line 2: " + complaint):
        read_trace(path)


def test_unknown_header_is_refused_naming_accepted_formats():
    with pytest.raises(TraceError) as caught:
        read_trace(FIXTURES / "unknown_header.csv")
    message = str(caught.value)
    assert "unknown_header.csv" in message
    accepted = message.split("accepted headers: ")[1].removesuffix(
        " (or a sacct --json export)").split("; ")
    assert sorted(accepted) == sorted(["timestamp,duration,num_gpus,gpu_time,cluster",
                                       OPENB_HEADER.strip(),
                                       "name,cpu_milli,memory_mib,num_gpu,gpu_milli",
                                       "job_id,submit_s,duration_s,gpus,gpus_per_node,"
                                       "partition,qos,user,time_limit_s"])
    assert isinstance(caught.value, ValueError)


def test_alibaba_cpu_only_pods_are_skipped_and_counted():
    w = read_trace(OPENB)
    assert w.source == "alibaba-openb"
    assert w.meta["skipped_cpu_only"] == 2  # openb-pod-0005 and -0016 ask for no GPU
    assert {"openb-pod-0005", "openb-pod-0016"}.isdisjoint(j.name for j in w.jobs)
    assert len(w.jobs) == 42 - 2


def test_gpu_sharing_pods_become_one_gpu_jobs_with_host_resources_per_gpu():
    w = read_trace(OPENB)
    shared = next(j for j in w.jobs if j.name == "openb-pod-0001")  # 6000,12288,1,460
    assert shared.gpus == 1 and shared.cpu_per_gpu == 6.0 and shared.ram_gb_per_gpu == 12.0
    assert w.meta["fractional_gpu_rows"] == 14
    gang = next(j for j in w.jobs if j.name == "openb-pod-0017")  # 88000,327680,8,1000
    assert gang.gpus == 8 and gang.cpu_per_gpu == 11.0 and gang.ram_gb_per_gpu == 40.0
    assert gang.affinity == "nvlink"  # a pod lives on one node


def test_qos_maps_to_priority_and_burstable():
    jobs = {j.name: j for j in read_trace(OPENB).jobs}
    expected = {"openb-pod-0000": ("alibaba-ls", 10, False),
                "openb-pod-0017": ("alibaba-burstable", 0, True),
                "openb-pod-0061": ("alibaba-be", -10, False),
                "openb-pod-0129": ("alibaba-guaranteed", 10, False)}
    for name, (tenant, priority, burstable) in expected.items():
        assert (jobs[name].tenant, jobs[name].priority, jobs[name].burstable) == (
            tenant, priority, burstable)


def test_openb_duration_runs_from_scheduling_or_else_creation_to_deletion():
    jobs = {j.name: j for j in read_trace(OPENB).jobs}
    h100 = get("H100-SXM")
    # openb-pod-0012 ...,LS,Running,6588193,10959245,6595531: queued 7,338 s before it ran.
    assert jobs["openb-pod-0012"].runtime_s(h100) == pytest.approx(10959245 - 6595531)
    assert jobs["openb-pod-0012"].submit_s == 6588193
    # openb-pod-0061 ...,BE,Pending,10001278,10001403,(never scheduled): replayed for its life.
    assert jobs["openb-pod-0061"].runtime_s(h100) == pytest.approx(125)
    assert read_trace(OPENB).meta["never_scheduled"] == 1


def test_openb_pods_without_a_deletion_time_are_skipped_and_counted(tmp_path):
    path = write(tmp_path, OPENB_HEADER + "a,1000,1024,1,1000,,LS,Running,0,,0\n"
                                          "b,1000,1024,1,1000,,LS,Running,5,50,5\n")
    w = read_trace(path)
    assert [j.name for j in w.jobs] == ["b"] and w.jobs[0].submit_s == 0
    assert w.meta["skipped_no_deletion"] == 1


def test_gpu_specs_naming_no_catalog_model_accept_any_model_and_are_counted(tmp_path):
    path = write(tmp_path, OPENB_HEADER + "a,1000,1024,1,1000,V100M16|V100M32,LS,Running,0,9,0\n"
                                          "b,1000,1024,1,1000,T4|h100-sxm,LS,Running,0,9,0\n"
                                          "c,1000,1024,1,1000,V100M16|V100M32,LS,Running,0,9,0\n")
    a, b, c = read_trace(path).jobs
    assert a.requirement.models is None and a.requirement.accepts(get("MI300X"))
    assert b.requirement.models == ("H100-SXM",)  # T4 cannot exist in the twin anyway
    assert read_trace(path).meta["gpu_spec_unmapped"] == {"V100M16|V100M32": 2}


def test_multigpu_form_arrives_one_pod_a_minute_with_the_default_duration():
    w = read_trace(MULTIGPU, default_duration_s=600)
    assert [j.submit_s for j in w.jobs[:3]] == [0.0, 60.0, 120.0]
    assert all(j.runtime_s(get("H100-SXM")) == pytest.approx(600) for j in w.jobs)
    assert w.meta["synthetic_times"] and w.meta["skipped_cpu_only"] == 2
    assert {t.name for t in w.tenants} == {"alibaba"}
    assert max(j.gpus for j in w.jobs) == 8


@pytest.mark.skipif(not FULL_PHILLY.exists(), reason="real Philly trace not present")
def test_the_full_philly_trace_reads_whole():
    w = read_trace(FULL_PHILLY)
    assert len(w.jobs) == 82_247
    assert max(j.gpus for j in w.jobs) == 128
    assert w.jobs[0].submit_s == 0
