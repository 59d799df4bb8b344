"""The ``slurm`` policy does what slurmctld does with the same ``slurm.conf``.

Every case runs a handful of jobs on 4 nodes of 8 GPUs with physics and failures off, so a
job runs exactly its duration; the expected starts are worked out by hand in each docstring.
slurmctld never starts a batch job at its submission: the background loop or the backfill
agent does, at their next poll, half a second later here (``TICK_PHASE_S``; submissions are
on whole seconds); a job's end starts the next job once its nodes have completed, half a
second later (``COMPLETE_S``: the batch step's exit and the epilog).
"""

from __future__ import annotations

import pytest

from scheduler.engine import Engine
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.scheduling.slurm.conf import (
    SlurmConfError,
    parse_slurm_conf,
    read_qos,
    read_slurm_conf,
)
from scheduler.scheduling.slurm.mechanics import COMPLETE_S
from scheduler.scheduling.slurm.preemption import KILL_S
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, Tenant, TrainingJob, Workload

NODES = "NodeName=gpu[1-4] Gres=gpu:8 CPUs=64 RealMemory=512000\n"
BASE = ("SchedulerType=sched/backfill\nSchedulerParameters=bf_interval=1,bf_resolution=1\n"
        "SelectTypeParameters=CR_Core\n" + NODES)
ONE_PARTITION = BASE + "PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE\n"
PEAK = get("H100-SXM").bf16_tflops * 1e12


def job(i, submit, duration, gpus, *, per=8, limit=3600.0, **kw) -> TrainingJob:
    """A sleep job: ``duration`` s of work on ``gpus`` GPUs, ``per`` on each node."""
    return TrainingJob(i, f"j{i}", "u", float(submit), gpus,
                       duration * gpus * PEAK * DEFAULT_EFFICIENCY, cpu_per_gpu=0.0,
                       ram_gb_per_gpu=0.0, nic_gbps_per_gpu=0.0, gpus_per_node=min(per, gpus),
                       time_limit_s=limit, checkpoint_interval_s=1e9, **kw)


def run(conf_text: str, jobs, until: float = 2000.0, qos: str | None = None) -> Engine:
    conf = parse_slurm_conf(conf_text, qos=read_qos(qos) if qos else None)
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})
    users = sorted({j.tenant for j in jobs})
    engine = Engine(plan, Workload(jobs=tuple(jobs),
                                   tenants=tuple(Tenant(u, quota_gpus=0) for u in users)),
                    policy="slurm", slurm_conf=conf)
    engine.run_until(until)
    return engine


def starts(engine: Engine) -> dict[str, float]:
    return {r.spec.name: (None if r.first_start is None else round(r.first_start, 6))
            for r in engine.jobs.runs}


def ends(engine: Engine) -> dict[str, float]:
    return {r.spec.name: (None if r.end_s is None else round(r.end_s, 6))
            for r in engine.jobs.runs}


# ------------------------------------------------------------------ backfill
def test_backfill_fills_a_hole_only_with_jobs_that_delay_no_reservation():
    """j0 holds 16 GPUs for 100 s (limit 120).  j1 wants all 32: it waits, reserved at
    j0's limit (120 s).  j2 (8 GPUs, limit 60) fits the hole and ends by its limit before
    120 s: backfilled at its submission (2 s).  j3 (8 GPUs, limit 180) would still run at
    120 s: it waits behind j1.  Each starts at the poll after its submission (j0 at 0.5 s,
    j2 at 2.5 s); j0 really ends at 100.5 s, so j1 starts once its nodes have completed
    (101 s) and j3 likewise after j1."""
    e = run(ONE_PARTITION, [job(0, 0, 100, 16, limit=120), job(1, 1, 10, 32, limit=60),
                            job(2, 2, 10, 8, limit=60), job(3, 3, 30, 8, limit=180)])
    assert starts(e) == {"j0": 0.5, "j1": 101.0, "j2": 2.5, "j3": 111.5}
    assert e.scheduler.mechanics.counters["backfill_started"] == 1


def test_backfill_waits_for_its_interval():
    """With ``bf_interval=10`` the backfill agent runs 10 s after its last cycle: that
    cycle (at 1.5 s) reserved for j1, so j2, submitted at 2 s behind the blocked j1, starts
    at 11.5 s (the main scheduler never passes j1)."""
    conf = ONE_PARTITION.replace("bf_interval=1", "bf_interval=10")
    e = run(conf, [job(0, 0, 100, 16, limit=120), job(1, 1, 10, 32, limit=60),
                   job(2, 2, 10, 8, limit=60)])
    assert starts(e)["j2"] == 11.5


def test_without_backfill_nothing_passes_a_blocked_job():
    """``sched/builtin``: strict priority order; j2 waits for j1 although it fits now."""
    conf = ONE_PARTITION.replace("SchedulerType=sched/backfill", "SchedulerType=sched/builtin")
    e = run(conf, [job(0, 0, 100, 16, limit=120), job(1, 1, 10, 32, limit=60),
                   job(2, 2, 10, 8, limit=60)])
    assert starts(e) == {"j0": 0.5, "j1": 101.0, "j2": 111.5}


def test_backfill_is_conservative_every_waiting_job_keeps_its_reservation():
    """j0 holds 24 GPUs until 100 s (its limit).  j1 (16 GPUs, limit 60) is reserved at
    [100, 160); j2 (all 32, limit 100) after it at [160, 260).  j3 (8 GPUs, limit 200)
    fits the 8 free GPUs now and beside j1's reservation, so EASY backfill (which protects
    only the first job's start) would start it at 3 s; but it would still run at 160 s and
    delay j2.  Slurm's backfill keeps every reservation: j3 starts when j2 ends, at 260 s."""
    e = run(ONE_PARTITION, [job(0, 0, 100, 24, limit=100), job(1, 1, 60, 16, limit=60),
                            job(2, 2, 100, 32, limit=100), job(3, 3, 10, 8, limit=200)])
    assert starts(e) == {"j0": 0.5, "j1": 101.0, "j2": 161.5, "j3": 262.0}


# ------------------------------------------------------------------ partitions and priority
TWO_TIERS = BASE + ("PartitionName=low Nodes=ALL Default=YES PriorityTier=1\n"
                    "PartitionName=high Nodes=ALL PriorityTier=10\n")


def test_a_higher_partition_tier_goes_first_whatever_its_submit_time():
    """All 32 GPUs busy until 50.5 s.  j1 (low tier) and then j2 (high tier) each want 32:
    j2 starts first when j0 ends, j1 after it."""
    e = run(TWO_TIERS, [job(0, 0, 50, 32, limit=60, partition="low"),
                        job(1, 1, 10, 32, limit=60, partition="low"),
                        job(2, 2, 10, 32, limit=60, partition="high")])
    assert starts(e) == {"j0": 0.5, "j1": 61.5, "j2": 51.0}


MULTIFACTOR = ONE_PARTITION + ("PriorityType=priority/multifactor\nPriorityWeightJobSize=1000\n"
                               "PriorityWeightAge=0\nPriorityCalcPeriod=1\n")


def test_job_size_favours_large_jobs_by_nodes_and_cpus_not_gpus():
    """Job size counts nodes and CPUs, not GPUs: j1 (1 node of 8 GPUs) and j2 (2 nodes of 4
    GPUs, also 8 GPUs) wait for the 2 nodes j0 frees at 50 s; whichever starts first leaves
    no room for the other until 60 s.  j2 asks for more nodes (and CPUs, one per node), so it
    ranks first though submitted later; with PriorityFavorSmall=YES j1 does."""
    jobs = [job(0, 0, 50, 16, limit=60), job(9, 0, 500, 16, limit=600),
            job(1, 1, 10, 8, per=8, limit=60), job(2, 2, 10, 8, per=4, limit=60)]
    e = run(MULTIFACTOR, jobs)
    assert (starts(e)["j2"], starts(e)["j1"]) == (51.0, 61.5)
    e = run(MULTIFACTOR + "PriorityFavorSmall=YES\n", jobs)
    assert (starts(e)["j1"], starts(e)["j2"]) == (51.0, 61.5)


def test_age_is_counted_from_eligibility_and_caps_at_max_age():
    """Age weight 1000, size weight 10, PriorityMaxAge 100 s, recomputed every 60 s.  j1 (1
    node) waits from 1 s; j2 (2 nodes, larger) from 40 s.  At 60 s j1's age is 0.59, j2's
    0.2: j1 ranks first although j2 is larger, and starts when j0 ends at 100 s; j2 (all 32
    GPUs) when j1 ends at 110 s.  Without the age weight the larger j2 goes first."""
    conf = ONE_PARTITION + ("PriorityType=priority/multifactor\nPriorityWeightJobSize=10\n"
                            "PriorityWeightAge=1000\nPriorityMaxAge=00:01:40\n"
                            "PriorityCalcPeriod=1\n")
    jobs = [job(0, 0, 100, 32, limit=120), job(1, 1, 10, 16, per=8, limit=60),
            job(2, 40, 10, 32, per=8, limit=60)]
    e = run(conf, jobs)
    assert starts(e) == {"j0": 0.5, "j1": 101.0, "j2": 111.5}
    # with no age weight the larger job goes first
    e = run(conf.replace("PriorityWeightAge=1000", "PriorityWeightAge=0"), jobs)
    assert starts(e) == {"j0": 0.5, "j1": 111.5, "j2": 101.0}


def test_fair_share_puts_the_heavier_user_behind():
    """Fair-share weight only, recomputed every 60 s, usage not decaying.  User a's j0 fills
    the cluster from 0 to 100 s; a submits j1 at 5 s, b submits j2 at 6 s (both all 32
    GPUs).  At 60 s a has used 32 x 60 GPU-s and b nothing: b's job ranks first (Fair Tree
    1.0 against 0.5; classic 2^0 against 2^-2), so j2 starts at 100 s and j1 at 110 s.
    Without the fair-share weight, first come first served: j1 first."""
    conf = ONE_PARTITION + ("PriorityType=priority/multifactor\nPriorityWeightFairshare=1000\n"
                            "PriorityCalcPeriod=1\nPriorityDecayHalfLife=0\n")
    jobs = [job(0, 0, 100, 32, limit=120, user="a"), job(1, 5, 10, 32, limit=60, user="a"),
            job(2, 6, 10, 32, limit=60, user="b")]
    expected = {"j0": 0.5, "j1": 111.5, "j2": 101.0}
    assert starts(run(conf, jobs)) == expected
    assert starts(run(conf + "PriorityFlags=NO_FAIR_TREE\n", jobs)) == expected
    fifo = conf.replace("PriorityWeightFairshare=1000", "PriorityWeightFairshare=0")
    assert starts(run(fifo, jobs)) == {"j0": 0.5, "j1": 101.0, "j2": 111.5}


# ------------------------------------------------------------------ preemption
QOS = "Name|Priority|Preempt|PreemptMode\nnormal|0||cluster\nhigh|100|normal|cluster\n"
PREEMPT = ONE_PARTITION + ("PreemptType=preempt/qos\nPreemptMode=REQUEUE\n"
                           "AuthInfo=cred_expire=10\n")


def test_qos_preemption_requeues_the_victim_to_run_again_from_its_start():
    """j0 (normal) fills the cluster from 0.5 s for 100 s.  j1 (high QOS, preempts normal)
    arrives at 20 s: at the next poll (20.5 s) j0 is killed and requeued, and j1 starts
    when j0's nodes are released, KILL_S later, for 30 s.  j0 is eligible again 10 + 1 s
    after its eviction (cred_expire + 1) but waits for j1 and reruns its whole 100 s once
    j1's nodes have completed (COMPLETE_S after its end)."""
    e = run(PREEMPT, [job(0, 0, 100, 32, limit=200, qos="normal"),
                      job(1, 20, 30, 32, limit=60, qos="high")], qos=QOS)
    j1 = 20.5 + KILL_S
    assert starts(e)["j1"] == pytest.approx(j1)
    assert ends(e) == pytest.approx({"j0": j1 + 30 + COMPLETE_S + 100, "j1": j1 + 30})
    assert e.scheduler.mechanics.counters["requeued"] == 1


def test_a_requeued_job_waits_for_its_credential_to_expire():
    """j0 (normal, 16 GPUs) and j9 (high, 16 GPUs) fill the cluster.  j1 (high, 16 GPUs,
    5 s) evicts j0 at 20.5 s, starts KILL_S later and ends 5 s on: 16 GPUs are free from
    then, yet j0 may start again only at 20.5 + 10 + 1 = 31.5 s (cred_expire + 1), and
    reruns its 100 s to 131.5 s."""
    e = run(PREEMPT, [job(0, 0, 100, 16, limit=200, qos="normal"),
                      job(9, 0, 500, 16, limit=600, qos="high"),
                      job(1, 20, 5, 16, limit=60, qos="high")], qos=QOS)
    assert starts(e)["j1"] == pytest.approx(20.5 + KILL_S)
    assert ends(e)["j0"] == 131.5


def test_preempt_exempt_time_protects_young_jobs():
    """PreemptExemptTime=00:00:30: j0 started at 0.5 s may not be preempted before 30.5 s.
    j1 (arriving at 20 s) is refused then, and nothing changes after: the backfill agent
    has no more work, so j1 waits for the main scheduler's periodic full pass, which evicts
    j0 (j1 starts KILL_S later): at 60 s with the default sched_interval of 60 s, at 40 s with
    sched_interval=10 (at 30 s j0 is still 0.5 s too young)."""
    conf = PREEMPT + "PreemptExemptTime=00:00:30\n"
    e = run(conf, [job(0, 0, 100, 32, limit=200, qos="normal"),
                   job(1, 20, 30, 32, limit=60, qos="high")], qos=QOS)
    assert starts(e)["j1"] == pytest.approx(60 + KILL_S)
    conf = conf + "SchedulerParameters=bf_interval=1,bf_resolution=1,sched_interval=10\n"
    e = run(conf, [job(0, 0, 100, 32, limit=200, qos="normal"),
                   job(1, 20, 30, 32, limit=60, qos="high")], qos=QOS)
    assert starts(e)["j1"] == pytest.approx(40 + KILL_S)


def test_cancel_mode_ends_the_victim():
    qos = QOS.replace("normal|0||cluster", "normal|0||cancel")
    e = run(PREEMPT, [job(0, 0, 100, 32, limit=200, qos="normal"),
                      job(1, 20, 30, 32, limit=60, qos="high")], qos=qos)
    r0 = e.jobs.runs[0]
    assert r0.state == "cancelled" and r0.end_s == 20.5


# ------------------------------------------------------------------ limits and memory
def test_a_job_is_ended_at_its_time_limit():
    """j0 would run 300 s but its limit is 120 s: Slurm ends it (TIMEOUT) at the first
    time-limit check (every 30 s) after 0.5 + 120 s, at 150 s."""
    e = run(ONE_PARTITION, [job(0, 0, 300, 8, limit=120)])
    assert e.jobs.runs[0].end_s == 150.0
    assert e.scheduler.mechanics.counters["timeouts"] == 1


def test_without_a_memory_default_a_job_takes_its_nodes_whole_memory():
    """CR_Core_Memory and no DefMemPerCPU: two 4-GPU jobs cannot share a node, so with one
    node the second waits; with CR_Core they share it."""
    one_node = ("SchedulerType=sched/backfill\nSchedulerParameters=bf_interval=1\n"
                "NodeName=gpu[1-4] Gres=gpu:8 CPUs=64 RealMemory=512000\n"
                "PartitionName=one Nodes=gpu1 Default=YES\n")
    jobs = [job(0, 0, 50, 4, per=4, limit=60), job(1, 1, 50, 4, per=4, limit=60)]
    e = run(one_node + "SelectTypeParameters=CR_Core_Memory\n", jobs)
    assert starts(e) == {"j0": 0.5, "j1": 51.0}
    e = run(one_node + "SelectTypeParameters=CR_Core_Memory\nDefMemPerCPU=1000\n", jobs)
    assert starts(e) == {"j0": 0.5, "j1": 1.5}


# ------------------------------------------------------------------ the configuration
def test_unmodelled_keys_are_named_in_one_warning_line():
    conf = parse_slurm_conf(ONE_PARTITION + "FairShareDampeningFactor=2\n"
                            "SchedulerParameters=bf_interval=1,bf_busy_nodes\n"
                            "SelectType=select/linear\nSlurmctldPort=6817\n")
    assert conf.warning() == ("slurm.conf: not modelled by the twin, so not applied: "
                              "FairShareDampeningFactor, SchedulerParameters=bf_busy_nodes, "
                              "SelectType=select/linear (the twin allocates as "
                              "select/cons_tres)")
    assert parse_slurm_conf("SelectType=select/cons_tres\n").warning() is None
    e = run(ONE_PARTITION + "FairShareDampeningFactor=2\n", [job(0, 0, 10, 8)])
    assert [x["text"] for x in e.kernel.events if x["kind"] == "config"] == [
        "slurm.conf: not modelled by the twin, so not applied: FairShareDampeningFactor"]


@pytest.mark.parametrize("text, message", [
    ("PriorityWeightAge=lots\n", "slurm.conf:1: PriorityWeightAge=lots: value must be an "
                                 "integer >= 0, not 'lots'"),
    ("PreemptType=preempt/magic\n", "slurm.conf:1: PreemptType=preempt/magic: PreemptType "
                                    "must be one of preempt/none, preempt/partition_prio, "
                                    "preempt/qos"),
    (NODES + "PartitionName=p Nodes=gpu9\n", "slurm.conf: partition p names node gpu9, which "
                                             "no NodeName line has"),
    ("PartitionName=p Nodes=ALL MaxTime=soon\n", "slurm.conf:1: PartitionName=p Nodes=ALL "
                                                 "MaxTime=soon: not a Slurm time: 'soon'"),
])
def test_a_wrong_value_is_one_error_naming_the_line(text, message):
    with pytest.raises(SlurmConfError) as err:
        parse_slurm_conf(text)
    assert str(err.value) == message


def test_scontrol_show_config_output_reads_like_the_file():
    shown = ("Configuration data as of 2026-12-05T06:00:00\n"
             "PriorityType            = priority/multifactor\n"
             "PriorityWeightAge       = 500\n"
             "SchedulerParameters     = bf_interval=5,bf_window=60\n"
             "PreemptType             = preempt/qos\n")
    conf = parse_slurm_conf(shown, where="scontrol")
    assert conf.multifactor and conf.weights["age"] == 500
    assert (conf.bf_interval_s, conf.bf_window_s) == (5.0, 3600.0)
    assert conf.preempt_type == "preempt/qos"


def test_the_qos_table_beside_the_file_is_read(tmp_path):
    (tmp_path / "slurm.conf").write_text(PREEMPT)
    (tmp_path / "sacctmgr-qos.txt").write_text(QOS)
    conf = read_slurm_conf(tmp_path / "slurm.conf")
    assert conf.qos["high"].preempt == ("normal",)
    with pytest.raises(SlurmConfError, match="does not exist"):
        read_slurm_conf(tmp_path / "nope.conf")


def test_the_slurm_policy_needs_a_configuration():
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})
    with pytest.raises(ValueError, match="policy slurm needs the cluster's slurm.conf"):
        Engine(plan, Workload(jobs=(job(0, 0, 10, 8),), tenants=(Tenant("u", quota_gpus=0),)),
               policy="slurm")


FULL = """\
# every key the twin applies, with values that differ from Slurm's defaults
PriorityType=priority/multifactor
PriorityWeightAge=11
PriorityWeightFairshare=12
PriorityWeightJobSize=13
PriorityWeightPartition=14
PriorityWeightQOS=15
PriorityWeightAssoc=16
PriorityMaxAge=2-12
PriorityDecayHalfLife=1:30:00
PriorityCalcPeriod=3
PriorityFavorSmall=YES
PriorityFlags=NO_FAIR_TREE
SchedulerType=sched/builtin
SchedulerParameters=bf_interval=7,bf_window=90,bf_resolution=9,bf_max_job_test=77,\\
bf_max_job_user=5,bf_continue,default_queue_depth=33,sched_interval=21,batch_sched_delay=0
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
PreemptExemptTime=00:05:00
SelectTypeParameters=CR_Core_Memory
DefMemPerGPU=1024
AuthInfo=socket=/run/munge.socket,cred_expire=45
NodeName=gpu[1-2] Gres=gpu:h100:4,gpu:a100:2 CPUs=32 RealMemory=1000
NodeName=DEFAULT CPUs=8
PartitionName=p1 Nodes=gpu1 PriorityTier=3 PriorityJobFactor=4 MaxTime=1-00:00:00 \\
DefaultTime=30 Default=YES State=DOWN QOS=q PreemptMode=REQUEUE
"""


def test_every_applied_key_lands_in_its_field():
    c = parse_slurm_conf(FULL)
    assert c.weights == {"age": 11, "fairshare": 12, "jobsize": 13, "partition": 14,
                         "qos": 15, "assoc": 16}
    assert (c.max_age_s, c.decay_half_life_s, c.calc_period_s) == (216000.0, 5400.0, 180.0)
    assert c.favor_small and not c.fair_tree and c.multifactor and not c.backfill
    assert (c.bf_interval_s, c.bf_window_s, c.bf_resolution_s, c.bf_max_job_test,
            c.bf_max_job_user, c.bf_continue, c.default_queue_depth, c.sched_interval_s,
            c.batch_sched_delay_s) == (7.0, 5400.0, 9.0, 77, 5, True, 33, 21.0, 0.0)
    assert (c.preempt_type, c.preempt_mode, c.preempt_exempt_time_s) == (
        "preempt/partition_prio", "CANCEL", 300.0)
    assert not c.memory_whole_node and c.def_mem and c.cred_expire_s == 45.0
    assert [(n.name, n.gpus, n.cpus, n.real_memory_mb) for n in c.nodes] == [
        ("gpu1", 6, 32, 1000.0), ("gpu2", 6, 32, 1000.0)]
    [p] = c.partitions
    assert (p.name, p.nodes, p.priority_tier, p.priority_job_factor, p.max_time_s,
            p.default_time_s, p.default, p.up, p.qos, p.preempt_mode) == (
        "p1", ("gpu1",), 3, 4, 86400.0, 1800.0, True, False, "q", "REQUEUE")
    assert c.warning() is None


def test_slurms_defaults_where_the_file_says_nothing():
    c = parse_slurm_conf("")
    assert (c.priority_type, c.max_age_s, c.decay_half_life_s, c.calc_period_s) == (
        "priority/basic", 7 * 86400.0, 7 * 86400.0, 300.0)
    assert (c.bf_interval_s, c.bf_window_s, c.bf_resolution_s, c.bf_max_job_test,
            c.default_queue_depth, c.sched_interval_s, c.batch_sched_delay_s) == (
        30.0, 86400.0, 60.0, 500, 100, 60.0, 3.0)
    assert (c.preempt_type, c.preempt_mode, c.cred_expire_s) == ("preempt/none", "OFF", 120.0)
    assert c.memory_whole_node and c.fair_tree and c.backfill and not c.favor_small


@pytest.mark.parametrize("text, seconds", [
    ("10", 600.0), ("10:30", 630.0), ("1:02:03", 3723.0), ("3-4", 273600.0),
    ("3-4:05", 273900.0), ("3-4:05:06", 273906.0), ("INFINITE", None), ("UNLIMITED", None),
])
def test_slurm_times_read_as_slurm_conf_5_documents_them(text, seconds):
    from scheduler.scheduling.slurm.conf import parse_time
    assert parse_time(text) == seconds


def test_the_qos_table_reads_every_column():
    q = read_qos("Name|Priority|Preempt|PreemptMode|PreemptExemptTime|GraceTime|MaxWall\n"
                 "low|1|||00:02:00|00:00:30|1:00:00\nhigh|9|low,mid|requeue|||\n"
                 "mid|5||cluster|||\n")
    assert (q["low"].priority, q["low"].preempt_exempt_time_s, q["low"].grace_time_s,
            q["low"].max_wall_s) == (1, 120.0, 30.0, 3600.0)
    assert (q["high"].preempt, q["high"].preempt_mode) == (("low", "mid"), "REQUEUE")
    assert q["mid"].preempt_mode is None
    with pytest.raises(SlurmConfError, match="QOS high preempts QOS mid, which is not"):
        parse_slurm_conf("", qos=read_qos("Name|Priority|Preempt\nhigh|9|mid\n"))
