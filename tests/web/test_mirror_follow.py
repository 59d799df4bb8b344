"""What the mirror reads, in the engine's ids: Slurm's words as the twin reads them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from twin.mirror.follow import HostIndex, declared, observation

HOSTS = HostIndex(["a", "b", "c", "d"], [8, 8, 4, 8])


def node(*state, reason=""):
    return SimpleNamespace(state=frozenset(state), reason=reason)


def job(job_id, state, nodes=(), gpus=8, per_node=None, comment=""):
    return SimpleNamespace(job_id=job_id, state=state, nodes=tuple(nodes), gpus=gpus,
                           gpus_per_node=per_node, reason="Priority", name="x", account="",
                           user="u", partition="p", start_time=100.0, time_limit_s=3600.0,
                           comment=comment)


def slurm(nodes=None, jobs=()):
    return SimpleNamespace(nodes=nodes or {}, jobs=list(jobs), read_at=1000.0)


@pytest.mark.parametrize(("state", "up", "drained"), [
    (("idle",), True, False), (("mixed", "drain"), True, True), (("idle", "drained"), True, True),
    (("down",), False, False), (("idle", "not_responding"), False, False),
    (("allocated", "maint"), True, True), (("fail",), False, False),
    (("mixed",), True, False), (("allocated",), True, False), (("completing",), True, False),
    (("mixed", "draining"), True, True), (("allocated", "failing"), True, True),
    (("idle", "powered_down"), True, False), (("down", "powered_down"), False, False),
    (("idle", "reserved"), True, False)])
def test_slurm_node_states_map_to_up_and_drained(state, up, drained):
    obs, _ = observation(slurm({"b": node(*state, reason="why")}), None, HOSTS)
    assert obs.nodes == {1: {"up": up, "drained": drained}}
    assert obs.reasons == {1: "why"}


@pytest.mark.parametrize(("state", "seen"), [
    ("RUNNING", "running"), ("COMPLETING", "running"), ("CONFIGURING", "running"),
    ("SUSPENDED", "running"), ("RESIZING", "running"), ("SIGNALING", "running"),
    ("PENDING", "pending"), ("REQUEUED", "pending"), ("REQUEUE_HOLD", "pending"),
    ("SPECIAL_EXIT", "pending"), ("PREEMPTED", "ended"),
    ("COMPLETED", "ended"), ("NODE_FAIL", "ended"), ("CANCELLED", "ended")])
def test_slurm_job_states_map_to_running_pending_or_ended(state, seen):
    obs, _ = observation(slurm(jobs=[job("7", state, nodes=["a"])]), None, HOSTS)
    assert obs.jobs[0].state == seen
    assert obs.jobs[0].reason == {"pending": "Priority", "ended": state, "running": ""}[seen]
    assert obs.jobs[0].elapsed_s == 900.0


def test_what_cannot_be_mapped_is_counted_and_named_never_guessed():
    obs, problems = observation(slurm(
        nodes={"zz": node("idle")},
        jobs=[job("1", "RUNNING", nodes=["a", "zz"]), job("2", "RUNNING", nodes=["a"], gpus=0),
              job("3", "RUNNING", nodes=["a", "c"], gpus=9), job("4", "RUNNING", nodes=["a"]),
              job("5", "RUNNING", nodes=["d"], comment="twin:layers=3")]), None, HOSTS)
    assert [j.key for j in obs.jobs] == ["4", "5"]
    assert problems["slurm"] == {
        "unknown_nodes": {"count": 1, "names": ["zz"]},
        "jobs_on_unknown_nodes": {"count": 1, "names": ["1"]},
        "jobs_without_gpus": {"count": 1, "names": ["2"]},
        "jobs_with_uneven_gpus": {"count": 1, "names": ["3"]},
        "jobs_with_a_bad_model_declaration": {"count": 1, "names": ["5"]}}


def test_a_declared_model_reaches_the_observed_job():
    obs, _ = observation(slurm(jobs=[job("1", "RUNNING", nodes=["a"],
                                         comment="twin:params_b=8,tp=8")]), None, HOSTS)
    assert (obs.jobs[0].params_b, obs.jobs[0].tp, obs.jobs[0].pp) == (8.0, 8, 1)


def test_a_job_may_declare_its_model_in_its_slurm_comment():
    assert declared("") == {} and declared("nightly run") == {}
    assert declared("nightly twin:params_b=70,tp=8,pp=4") == {"params_b": 70.0, "tp": 8,
                                                               "pp": 4}
    for bad in ("twin:layers=80", "twin:params_b=big", "twin:tp=0", "twin:pp=2.5"):
        with pytest.raises(ValueError):
            declared(bad)


def test_telemetry_lands_on_each_gpu_by_hostname_and_index():
    prom = SimpleNamespace(hosts=("c", "a", "ghost"), host_index=np.array([0, 0, 1, 2, 0]),
                           gpu=np.array([0, 3, 7, 0, 4]),
                           values={"DCGM_FI_DEV_POWER_USAGE": np.array([1., 2., 3., 4., 5.])})
    obs, problems = observation(None, prom, HOSTS)
    power = obs.telemetry["power_w"]
    assert power[16] == 1.0 and power[19] == 2.0 and power[7] == 3.0  # c starts at GPU 16
    assert np.isfinite(power).sum() == 3  # c has 4 GPUs: index 4 is out of range
    assert problems["prometheus"]["unknown_hosts_in_telemetry"]["names"] == ["ghost"]
    assert problems["prometheus"]["gpu_index_out_of_range"]["count"] == 1
    assert not obs.complete  # no Slurm read: no job ends


def test_a_maintenance_node_without_a_reason_says_so():
    obs, _ = observation(slurm({"a": node("idle", "maint")}), None, HOSTS)
    assert obs.reasons == {0: "maintenance reservation"}


def allocated(job_id, nodes, gpus, cpus=None, mem=None, **kw):
    one = job(job_id, "RUNNING", nodes=nodes, gpus=sum(gpus), **kw)
    one.gpus_by_node, one.cpus_by_node, one.mem_mb_by_node = tuple(gpus), cpus, mem
    return one


def test_a_running_job_holds_the_gpus_cores_and_memory_slurm_allocated_per_node():
    obs, problems = observation(slurm(jobs=[
        allocated("1", ["a", "b"], [8, 2], cpus=(32, 4), mem=(262144, 16384)),
        allocated("2", ["cpu-only", "d"], [0, 4], cpus=(64, 8)),  # no GPU on a host: not ours
        allocated("3", ["c"], [4])]), None, HOSTS)
    one, two, three = obs.jobs
    assert (one.nodes, one.gpus_per_node, one.gpus) == ((0, 1), (8, 2), 10)
    assert one.cpus_per_gpu == 4.0 and one.ram_gb_per_gpu == 32.0  # the larger share per GPU
    assert (two.nodes, two.gpus_per_node, two.cpus_per_gpu) == ((3,), (4,), 2.0)
    assert three.cpus_per_gpu is None and three.ram_gb_per_gpu is None  # not said: booked 0
    assert problems["slurm"] == {}


def test_names_users_and_the_slurm_state_reach_the_observed_job():
    one = job("7_3", "SUSPENDED", nodes=["a"])
    obs, _ = observation(slurm(jobs=[one]), None, HOSTS)
    j = obs.jobs[0]
    assert (j.key, j.state, j.slurm_state, j.name, j.user) == ("7_3", "running", "SUSPENDED",
                                                               "x", "u")


def test_an_arrays_pending_remainder_is_one_pending_job_per_task():
    obs, _ = observation(slurm(jobs=[job("40_2", "RUNNING", nodes=["a"]),
                                     job("40_[3-5,9%2]", "PENDING"),
                                     job("41+0", "PENDING"), job("41+1", "PENDING")]),
                         None, HOSTS)
    assert [j.key for j in obs.jobs] == ["40_2", "40_3", "40_4", "40_5", "40_9", "41+0", "41+1"]
    assert all(j.state == "pending" for j in obs.jobs[1:])


def test_jobs_on_gpu_slices_are_counted_and_named_not_followed():
    mig = job("5", "RUNNING", nodes=["a"], gpus=7)
    mig.gres_type = "1g.10gb"
    sliced = SimpleNamespace(state=frozenset({"mixed"}), reason="", mig=True)
    on_node = job("6", "RUNNING", nodes=["b"], gpus=2)
    obs, problems = observation(slurm({"b": sliced}, jobs=[mig, on_node]), None, HOSTS)
    assert obs.jobs == []
    assert problems["slurm"]["jobs_on_gpu_slices"] == {"count": 2, "names": ["5", "6"]}
