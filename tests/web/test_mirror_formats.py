"""Issue 26: the mirror reads what Slurm allocated, the variety of real clusters, reservations,
and today's Slurm (CLI JSON of 23.02 to 24.11, slurmrestd data parsers v0.0.38 to v0.0.42).

The 22.05 answers were recorded from Debian's Slurm; the others are hand-built from the field
names in Slurm's data parsers and OpenAPI documents (``tests/fixtures/slurm_json/README.md``).
A real slurmrestd (22.05) is read in ``tests/slurm/test_slurmrestd_live.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from twin.mirror.errors import SourceError
from twin.mirror.slurm_alloc import split, tres_str_totals
from twin.mirror.slurm_rest import negotiate
from twin.mirror.slurm_resv import parse_reservations, parse_reservations_text
from twin.mirror.slurm_source import parse_sacct, parse_sinfo, parse_squeue

SLURM = Path(__file__).resolve().parent.parent / "fixtures" / "slurm_json"


def load(name: str) -> dict:
    return json.loads((SLURM / name).read_text())


def by_id(jobs) -> dict:
    return {job.job_id: job for job in jobs}


def alloc(job) -> tuple:
    return job.cpus_by_node, job.mem_mb_by_node, job.gpus_by_node


# ------------------------------------------------------------------ observed allocations


def test_squeue_22_05_allocation_per_node_comes_from_job_resources_and_gres_detail():
    jobs = by_id(parse_squeue(load("squeue-22.05.json")))
    # recorded: 1 core per node, whole-node memory (no DefMemPerCPU), 8 GPUs each
    assert alloc(jobs["3"]) == ((1, 1), (2097152, 2097152), (8, 8))
    assert (jobs["3"].gres_type, jobs["3"].array_job_id, jobs["3"].het_job_id) == (
        "h100_sxm", "", "")
    assert jobs["5_1"].array_job_id == "5" and jobs["5_1"].gpus_by_node == (1,)
    assert alloc(jobs["8"]) == (None, None, None)           # pending: nothing allocated


def test_squeue_23_02_counts_cores_times_threads_and_reads_arrays_het_jobs_and_exit():
    jobs = by_id(parse_squeue(load("squeue-23.02.json")))
    # lean nodes: 16 cores x 2 threads of 32 CPUs, 128 GB of 256 GB, 8 untyped GPUs each
    assert alloc(jobs["201"]) == ((32, 32), (131072, 131072), (8, 8))
    assert jobs["201"].gres_type == "" and jobs["201"].gpus == 16
    task = jobs["200_3"]
    assert (task.array_job_id, task.gres_type, alloc(task)) == (
        "200", "a100", ((6,), (49152,), (2,)))
    assert (jobs["200_[4-9]"].array_job_id, jobs["200_[4-9]"].state) == ("200", "PENDING")
    het = jobs["203+1"]
    assert (het.het_job_id, het.array_job_id, alloc(het)) == ("203", "", ((4,), (16384,),
                                                                          (0,)))
    assert (jobs["205"].gpus, alloc(jobs["205"])) == (16, (None, None, None))
    # v0.0.39's exit_code is a no-val raw wait status: 256 = exit 1
    assert (jobs["206"].state, jobs["206"].exit_code) == ("FAILED", 1)


def test_squeue_24_11_reads_nodes_allocation_mig_slices_suspended_and_requeued_jobs():
    jobs = by_id(parse_squeue(load("squeue-24.11.json")))
    assert (jobs["301"].gres_type, alloc(jobs["301"])) == ("1g.10gb", ((4,), (30720,), (3,)))
    # unlike nodes of one job keep their own counts
    assert alloc(jobs["302"]) == ((32, 16), (262144, 131072), (4, 4))
    assert (jobs["303"].state, jobs["303"].gres_type, alloc(jobs["303"])) == (
        "SUSPENDED", "", ((8,), (65536,), (2,)))
    assert (jobs["304"].state, jobs["304"].reason, alloc(jobs["304"])) == (
        "REQUEUED", "BeginTime", (None, None, None))
    # no job_resources: tres_alloc_str's totals split over the nodes
    assert alloc(jobs["305"]) == ((5, 5), (51200, 51200), (3, 3))


@pytest.mark.parametrize("fixture", ["sacct-22.05.json", "sacct-24.05.json"])
def test_sacct_without_memory_in_its_tres_splits_cpus_and_gpus(fixture):
    jobs = by_id(parse_sacct(load(fixture)))
    assert alloc(jobs["90"]) == ((4, 4), None, (8, 8))
    assert alloc(jobs["92_1"]) == (None, None, None)        # cancelled before it ran


def test_sacct_24_11_splits_tres_totals_over_nodes_first_ones_taking_the_rest():
    jobs = by_id(parse_sacct(load("sacct-24.11.json")))
    assert alloc(jobs["401"]) == ((33, 33, 32), (131072,) * 3, (8, 8, 8))
    assert jobs["401"].gres_type == "a100"
    assert (jobs["402_1"].array_job_id, alloc(jobs["402_1"])) == ("402", ((8,), (65536,),
                                                                          (2,)))
    assert (jobs["405"].het_job_id, jobs["405"].gpus_by_node) == ("404", (0,))


def test_split_and_tres_strings():
    assert split(7, 3) == (3, 2, 2) and split(None, 2) is None and split(4, 0) is None
    assert tres_str_totals("cpu=32,mem=400G,node=2,gres/gpu=16") == (32, 409600)
    assert tres_str_totals("cpu=2,mem=4T") == (2, 4 * 1024**2)
    assert tres_str_totals("mem=1536M,node=1") == (None, 1536)
    assert tres_str_totals("") == (None, None)


@pytest.mark.parametrize("change, where", [
    (lambda j: j["job_resources"].__setitem__("allocated_nodes", {}),
     "jobs[0].job_resources.allocated_nodes: expected a list, got dict"),
    (lambda j: j["job_resources"]["allocated_nodes"][1].__setitem__("nodename", "lean-09"),
     "jobs[0].job_resources.allocated_nodes: no entry for the job's node lean-02"),
    (lambda j: j["job_resources"]["allocated_nodes"][0].__setitem__("memory_allocated", "1G"),
     "jobs[0].job_resources.allocated_nodes[0].memory_allocated: expected a number, got str"),
    (lambda j: j["job_resources"]["allocated_nodes"][0]["sockets"]["0"].__setitem__(
        "cores", 3), "allocated_nodes[0].sockets[0].cores: expected an object or a list"),
    (lambda j: j.__setitem__("gres_detail", "gpu:8"),
     "jobs[0].gres_detail: expected a list of strings"),
])
def test_a_malformed_allocation_is_one_error_with_its_json_path(change, where):
    doc = load("squeue-23.02.json")
    change(doc["jobs"][0])
    with pytest.raises(SourceError, match="^slurm: `squeue --json`: unexpected JSON at ") as err:
        parse_squeue(doc)
    assert where in str(err.value)


# ------------------------------------------------------------------ node shapes and states


def test_slurmrestd_24_11_nodes_keep_their_shape_gres_types_mig_and_states():
    nodes, partitions = parse_sinfo(load("nodes-24.11.json"), origin="GET /slurm/v0.0.42/nodes")
    assert partitions == ("gpu", "mig")
    lean = nodes["lean-01"]
    assert (lean.cpus, lean.real_memory_mb, lean.gres_types, lean.gpus, lean.mig) == (
        32, 262144, {"": 8}, 8, False)
    assert (nodes["lean-03"].gres_types, nodes["lean-03"].cpus) == ({"a100": 8}, 64)
    mig, shard = nodes["mig-01"], nodes["shard-01"]
    assert (mig.gres_types, mig.mig, mig.gpus) == ({"a100": 1, "1g.10gb": 7}, True, 8)
    assert (shard.gres_types, shard.mig, shard.gpus) == ({"h100": 4}, True, 4)
    assert {name: n.state for name, n in nodes.items() if name.startswith("lean")} == {
        "lean-01": {"mixed"}, "lean-02": {"allocated"},
        "lean-03": {"idle", "drain", "drained"}, "lean-04": {"mixed", "drain", "draining"},
        "lean-05": {"idle", "completing"}, "lean-06": {"idle", "powered_down"},
        "lean-07": {"down", "fail"}, "lean-08": {"idle", "maint", "reserved"}}
    assert nodes["lean-07"].reason == "psu"


def test_sinfo_sizes_come_from_groups_of_like_nodes_only():
    nodes, _ = parse_sinfo(load("sinfo-24.11.json"))
    assert (nodes["gpu-a01"].cpus, nodes["gpu-a01"].real_memory_mb) == (224, 2063000)
    assert (nodes["cpu-b01"].cpus, nodes["cpu-b01"].real_memory_mb) == (128, 515000)
    # gpu-a02 is only in a group of unlike memory; gpu-a06 also has an entry of its own
    assert (nodes["gpu-a02"].cpus, nodes["gpu-a02"].real_memory_mb) == (224, None)
    assert nodes["gpu-a06"].real_memory_mb == 2063000
    old, _ = parse_sinfo(load("sinfo-22.05.json"))
    assert {(n.cpus, n.real_memory_mb, tuple(n.gres_types.items())) for n in old.values()} == {
        (112, 2097152, (("h100_sxm", 8),))}


# ------------------------------------------------------------------ reservations


def test_reservations_from_json_v0_0_42_and_v0_0_38():
    new = {r.name: r for r in parse_reservations(load("reservations-24.11.json"))}
    psu = new["psu-swap"]
    assert (psu.nodes, psu.end - psu.start, psu.maintenance) == (
        ("lean-07", "lean-08"), 3600.0, True)
    assert (new["team-a"].end, new["team-a"].maintenance) == (None, False)
    [old] = parse_reservations(load("reservations-22.05.json"))
    assert (old.nodes, old.flags, old.end - old.start) == (
        ("rec-n000006", "rec-n000007"), ("MAINT", "SPEC_NODES"), 3600.0)



def test_reservations_from_scontrol_22_05_text_in_local_time():
    psu, cores = parse_reservations_text(
        (SLURM / "scontrol-reservations-22.05.txt").read_text())
    start = time.mktime((2026, 12, 4, 10, 0, 0, 0, 0, -1))
    assert (psu.name, psu.nodes, psu.start, psu.end - psu.start, psu.flags) == (
        "psu-swap", ("rec-n000006", "rec-n000007"), start, 3600.0, ("MAINT", "SPEC_NODES"))
    assert (cores.nodes, cores.flags, cores.maintenance) == ((), (), False)
    assert parse_reservations_text("No reservations in the system\n") == []
    with pytest.raises(SourceError, match=r"reservation 0.StartTime: '12/04-10:00' is not a "
                                          r"time \(SLURM_TIME_FORMAT set\?\)"):
        parse_reservations_text("ReservationName=x StartTime=12/04-10:00 EndTime=Unknown")


# ------------------------------------------------------------------ the version of slurmrestd


@pytest.mark.parametrize("release, slurm, slurmdb", [
    ("22.05", "v0.0.38", "v0.0.38"), ("23.02", "v0.0.39", "v0.0.39"),
    ("23.11", "v0.0.40", "v0.0.40"), ("24.05", "v0.0.41", "v0.0.41"),
    ("24.11", "v0.0.42", "v0.0.42"), ("25.05", "v0.0.42", "v0.0.42"),
])
def test_the_newest_data_parser_both_sides_know_is_picked(release, slurm, slurmdb):
    assert negotiate(load(f"openapi-{release}.json")) == (slurm, slurmdb)


def test_a_slurmrestd_offering_only_unknown_parsers_says_which_it_offers():
    doc = {"paths": {"/slurm/v0.0.43/jobs/": {}, "/slurm/v0.0.44/jobs/": {}}}
    with pytest.raises(SourceError, match=r"offers /slurm/ data parsers v0.0.43, v0.0.44; "
                                          r"this twin reads v0.0.38 to v0.0.42$"):
        negotiate(doc)
    with pytest.raises(SourceError, match="unexpected JSON at paths: expected an object"):
        negotiate({"openapi": "3.0.3"})
