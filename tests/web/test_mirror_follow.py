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
    (("allocated", "maint"), True, True), (("fail",), False, False)])
def test_slurm_node_states_map_to_up_and_drained(state, up, drained):
    obs, _ = observation(slurm({"b": node(*state, reason="why")}), None, HOSTS)
    assert obs.nodes == {1: {"up": up, "drained": drained}}
    assert obs.reasons == {1: "why"}


@pytest.mark.parametrize(("state", "seen"), [
    ("RUNNING", "running"), ("COMPLETING", "running"), ("CONFIGURING", "running"),
    ("PENDING", "pending"), ("REQUEUED", "pending"),
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
