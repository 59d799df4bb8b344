"""QOS limits, ``OverTimeLimit`` and preemption ``GraceTime`` in the ``slurm`` policy, as
slurmctld 22.05 applies them (``acct_policy.c``, ``job_mgr.c``'s ``job_time_limit``,
``preempt.c``'s ``_job_check_grace``).

Sleep jobs on 4 nodes of 8 GPUs, physics and failures off; expected times are worked out by
hand in each docstring.  A job starts at the scheduler's poll half a second after its
submission; a job's end starts the next once its nodes have completed, half a second later;
time limits, grace times and reservation ends are checked every 30 s.
"""

from __future__ import annotations

import pytest

from scheduler.engine import Engine
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.scheduling.slurm.conf import parse_slurm_conf, read_qos
from scheduler.scheduling.slurm.preemption import KILL_S
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, Tenant, TrainingJob, Workload

PEAK = get("H100-SXM").bf16_tflops * 1e12
BASE = ("SchedulerType=sched/backfill\nSchedulerParameters=bf_interval=1,bf_resolution=1\n"
        "SelectTypeParameters=CR_Core\nNodeName=gpu[1-4] Gres=gpu:8 CPUs=64 RealMemory=512000\n"
        "PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE\n")
ENFORCED = BASE + "AccountingStorageEnforce=associations,limits,qos\n"
HEAD = "Name|Priority|Preempt|PreemptMode|GraceTime|MaxWall|MaxTRESPU|MaxJobsPU|MaxSubmitPU|" \
       "GrpTRES|Flags\n"


def job(i, submit, duration, gpus, *, user="a", limit=3600.0, **kw) -> TrainingJob:
    return TrainingJob(i, f"j{i}", user, float(submit), gpus,
                       duration * gpus * PEAK * DEFAULT_EFFICIENCY, cpu_per_gpu=0.0,
                       ram_gb_per_gpu=0.0, nic_gbps_per_gpu=0.0, gpus_per_node=min(8, gpus),
                       time_limit_s=limit, checkpoint_interval_s=1e9, user=user, **kw)


def run(conf_text: str, qos: str, jobs, until: float = 400.0) -> Engine:
    conf = parse_slurm_conf(conf_text, qos=read_qos(HEAD + qos))
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})
    e = Engine(plan, Workload(jobs=tuple(jobs), tenants=tuple(
        Tenant(u, quota_gpus=0) for u in sorted({j.tenant for j in jobs}))),
        policy="slurm", slurm_conf=conf)
    e.run_until(until)
    return e


def starts(e: Engine) -> dict:
    return {r.spec.name: None if r.first_start is None else round(r.first_start, 6)
            for r in e.jobs.runs}


def reason(e: Engine, name: str) -> str | None:
    run = next(r for r in e.jobs.runs if r.spec.name == name)
    return e.scheduler.reasons.get(run.idx)


# ------------------------------------------------------------------ QOS limits
def test_a_user_over_max_tres_per_user_waits_while_another_users_later_job_starts():
    """MaxTRESPerUser=gres/gpu=8 on ``normal`` (jobs naming no QOS are under it).  a's j0
    holds 8 GPUs until 100.5; a's j1 (8 GPUs, submitted at 1) would make 16: it waits
    (QOSMaxGRESPerUser) though 24 GPUs are free, and without blocking b's j2 (submitted at 2,
    started at its poll).  j1 starts on free nodes as soon as j0 ends, at the backfill
    agent's poll then (100.5 s).  Without
    ``AccountingStorageEnforce=limits`` the limit is not enforced: j1 starts at once."""
    qos = "normal|0||cluster|||gres/gpu=8||||\n"
    jobs = [job(0, 0, 100, 8), job(1, 1, 10, 8), job(2, 2, 10, 8, user="b")]
    e = run(ENFORCED, qos, jobs, until=50.0)
    assert starts(e) == {"j0": 0.5, "j1": None, "j2": 2.5}
    assert reason(e, "j1") == "QOSMaxGRESPerUser"
    e.run_until(200.0)
    assert starts(e)["j1"] == 100.5
    assert starts(run(BASE, qos, jobs, until=50.0))["j1"] == 1.5


def test_a_held_job_does_not_block_its_partition_in_the_main_scheduler():
    """sched/builtin (strict order): j1, held by the limit, is first in the queue; b's j2
    behind it still starts in the next pass, 3 s after the one at 0.5 (batch_sched_delay);
    had j1 failed the partition, j2 would wait for j1 (ESLURM_ACCOUNTING_POLICY fails none)."""
    conf = ENFORCED.replace("sched/backfill", "sched/builtin")
    jobs = [job(0, 0, 100, 8), job(1, 1, 10, 8), job(2, 1, 10, 8, user="b")]
    e = run(conf, "normal|0||cluster|||gres/gpu=8||||\n", jobs, until=50.0)
    assert starts(e) == {"j0": 0.5, "j1": None, "j2": 3.5}


def test_max_jobs_per_user_holds_the_users_next_job():
    qos = "normal|0||cluster||||1|||\n"
    jobs = [job(0, 0, 100, 8), job(1, 1, 10, 8), job(2, 2, 10, 8, user="b")]
    e = run(ENFORCED, qos, jobs, until=50.0)
    assert starts(e) == {"j0": 0.5, "j1": None, "j2": 2.5}
    assert reason(e, "j1") == "QOSMaxJobsPerUserLimit"


def test_grp_tres_caps_the_gpus_of_the_whole_qos():
    """GrpTRES=gres/gpu=16 on ``normal``: a's j0 holds 16; b's j1 (8 GPUs) waits
    (QOSGrpGRES) though 16 GPUs are free; j2 of QOS ``other`` starts."""
    qos = "normal|0||cluster||||||gres/gpu=16|\nother|0||cluster|||||||\n"
    jobs = [job(0, 0, 100, 16), job(1, 1, 10, 8, user="b"),
            job(2, 2, 10, 8, user="b", qos="other")]
    e = run(ENFORCED, qos, jobs, until=50.0)
    assert starts(e) == {"j0": 0.5, "j1": None, "j2": 2.5}
    assert reason(e, "j1") == "QOSGrpGRES"


def test_max_submit_jobs_per_user_refuses_the_submission():
    """MaxSubmitJobsPerUser=2: a's third job, submitted while two are pending or running, is
    refused; a's fourth, submitted after j0 ended, is accepted; b is not counted with a."""
    qos = "normal|0||cluster|||||2||\n"
    jobs = [job(0, 0, 10, 8), job(1, 1, 100, 8), job(2, 2, 10, 8), job(3, 3, 10, 8, user="b"),
            job(4, 30, 10, 8)]
    e = run(ENFORCED, qos, jobs, until=50.0)
    assert [r.state for r in e.jobs.runs][2] == "cancelled"
    assert starts(e) == {"j0": 0.5, "j1": 1.5, "j2": None, "j3": 3.5, "j4": 30.5}
    assert any(x["text"].startswith("j2 refused: QOSMaxSubmitJobPerUserLimit")
               for x in e.kernel.events if x["kind"] == "slurm")


def test_max_wall_holds_a_longer_job_refuses_it_with_deny_on_limit_and_sets_a_default():
    """MaxWall=01:00:00: j0 (limit 2 h) stays pending (QOSMaxWallDurationPerJobLimit), or is
    refused with the flag DenyOnLimit.  j1 names no limit: it gets the QOS's MaxWall and is
    ended at the first check after 3600.5 s (3630 s)."""
    jobs = [job(0, 0, 10, 8, limit=7200.0), job(1, 0, 5000, 8, limit=None)]
    e = run(ENFORCED, "normal|0||cluster||01:00:00|||||\n", jobs, until=4000.0)
    assert starts(e)["j0"] is None and reason(e, "j0") == "QOSMaxWallDurationPerJobLimit"
    assert e.jobs.runs[1].end_s == 3630.0
    e = run(ENFORCED, "normal|0||cluster||01:00:00|||||DenyOnLimit\n", jobs[:1], until=50.0)
    assert e.jobs.runs[0].state == "cancelled"


# ------------------------------------------------------------------ OverTimeLimit
@pytest.mark.parametrize("extra, end", [
    ("", 150.0),  # 0.5 + 120 -> the check at 150 s
    ("OverTimeLimit=1\n", 210.0),  # + 60 s -> 180.5 -> 210 s
    ("OverTimeLimit=1\nPartitionName=long Nodes=ALL Default=YES OverTimeLimit=2\n", 270.0),
])
def test_over_time_limit_lets_a_job_run_past_its_limit(extra, end):
    """j0's limit is 120 s, its work 300 s: ended at the first check after its limit plus
    OverTimeLimit minutes (the partition's before the cluster's)."""
    conf = BASE.replace("PartitionName=batch Nodes=ALL Default=YES", "PartitionName=batch "
                        "Nodes=ALL Default=NO") if "PartitionName=long" in extra else BASE
    e = run(conf + extra, "normal|0||cluster|||||||\n", [job(0, 0, 300, 8, limit=120.0)])
    assert e.jobs.runs[0].end_s == end


# ------------------------------------------------------------------ GraceTime
PREEMPT = BASE + "PreemptType=preempt/qos\nPreemptMode=REQUEUE\nAuthInfo=cred_expire=10\n"


@pytest.mark.parametrize("grace, kill", [("", 20.5), ("45", 90.0)])
def test_grace_time_delays_the_victims_kill_to_the_check_after_it(grace, kill):
    """j0 (normal) fills the cluster; j1 (high) preempts it at 20.5.  Without a GraceTime
    j0 is requeued at once and j1 starts once its nodes are released (``KILL_S``).  With
    GraceTime=45 s j0 is signalled, runs on until the first check after 65.5 s (90 s), is
    requeued then, and j1 starts ``KILL_S`` later."""
    qos = (f"normal|0||cluster|{grace}||||||\nhigh|100|normal|cluster|||||||\n")
    e = run(PREEMPT, qos, [job(0, 0, 100, 32, limit=200, qos="normal"),
                           job(1, 20, 30, 32, limit=60, qos="high")])
    assert starts(e)["j1"] == round(kill + KILL_S, 6)
    assert e.scheduler.mechanics.counters["requeued"] == 1


def test_partition_grace_time_under_partition_priority_preemption():
    conf = (BASE.replace("PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE\n", "")
            + "PreemptType=preempt/partition_prio\nPreemptMode=CANCEL\n"
            "PartitionName=low Nodes=ALL Default=YES PriorityTier=1 GraceTime=45\n"
            "PartitionName=high Nodes=ALL PriorityTier=10\n")
    e = run(conf, "normal|0||cluster|||||||\n",
            [job(0, 0, 100, 32, limit=200, partition="low"),
             job(1, 20, 30, 32, limit=60, partition="high")])
    r0 = e.jobs.runs[0]
    assert (r0.state, r0.end_s, starts(e)["j1"]) == ("cancelled", 90.0, round(90 + KILL_S, 6))


# ------------------------------------------------------------------ the configuration
def test_limits_keys_are_read_and_no_longer_named_unmodelled():
    conf = parse_slurm_conf(BASE + "AccountingStorageEnforce=safe\nOverTimeLimit=UNLIMITED\n"
                            "PartitionName=p Nodes=ALL GraceTime=30 OverTimeLimit=5\n")
    assert conf.warning() is None and conf.enforce_limits
    assert conf.over_time_limit_s == float("inf")
    assert (conf.partitions[1].grace_time_s, conf.partitions[1].over_time_limit_s) == (30.0,
                                                                                        300.0)
    assert not parse_slurm_conf("AccountingStorageEnforce=associations\n").enforce_limits
    q = read_qos(HEAD + "normal|0||cluster|00:00:30|1:00:00|cpu=8,gres/gpu=16|2|5|"
                        "gres/gpu:h100=4,gres/gpu:a100=4|DenyOnLimit,NoReserve\n")["normal"]
    assert (q.grace_time_s, q.max_wall_s, q.max_tres_pu_gpus, q.max_jobs_pu,
            q.max_submit_jobs_pu, q.grp_tres_gpus) == (30.0, 3600.0, 16, 2, 5, 8)
    assert q.flags == frozenset({"denyonlimit", "noreserve"})
