"""Advance reservations (maintenance windows) in the ``slurm`` policy, as slurmctld 22.05's
``job_test_resv`` applies them.

Each case runs sleep jobs on nodes of 8 GPUs with physics and failures off; the expected
starts are worked out by hand in each docstring.  As in ``test_policy_slurm.py``, a job starts
at the scheduler's poll half a second after its submission (``TICK_PHASE_S``).  Reservation
times are written as ``scontrol show reservation`` prints them and read from the Unix epoch
(``epoch_s`` 0), so ``1970-01-01T00:01:40`` is t = 100 s.
"""

from __future__ import annotations

import pytest

from scheduler.engine import Engine
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.scheduling.slurm.conf import SlurmConfError, parse_slurm_conf, read_slurm_conf
from scheduler.scheduling.slurm.reservations import (
    MAINTENANCE,
    NOT_AVAILABLE,
    WAITING,
    read_reservations,
    unmodelled,
)
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, Tenant, TrainingJob, Workload

PEAK = get("H100-SXM").bf16_tflops * 1e12
TWO_NODES = ("SchedulerType=sched/backfill\nSchedulerParameters=bf_interval=1,bf_resolution=1\n"
             "SelectTypeParameters=CR_Core\n"
             "NodeName=gpu[1-2] Gres=gpu:8 CPUs=64 RealMemory=512000\n"
             "PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE\n")
BUILTIN = TWO_NODES.replace("sched/backfill", "sched/builtin")


def resv(name="maint", start="00:01:40", end="00:03:20", nodes="gpu1",
         flags="MAINT,IGNORE_JOBS,SPEC_NODES", users="root", accounts="(null)") -> str:
    """One record of ``scontrol show reservation`` (times of 1970-01-01)."""
    return (f"ReservationName={name} StartTime=1970-01-01T{start} "
            f"EndTime=1970-01-01T{end} Duration=00:01:40\n"
            f"   Nodes={nodes} NodeCnt=1 CoreCnt=64 Features=(null) PartitionName=(null) "
            f"Flags={flags}\n   TRES=cpu=64\n"
            f"   Users={users} Groups=(null) Accounts={accounts} Licenses=(null) "
            "State=INACTIVE BurstBuffer=(null) Watts=n/a\n   MaxStartDelay=(null)\n\n")


def job(i, submit, duration, gpus, *, limit, user="u", **kw) -> TrainingJob:
    return TrainingJob(i, f"j{i}", user, float(submit), gpus,
                       duration * gpus * PEAK * DEFAULT_EFFICIENCY, cpu_per_gpu=0.0,
                       ram_gb_per_gpu=0.0, nic_gbps_per_gpu=0.0, gpus_per_node=min(8, gpus),
                       time_limit_s=float(limit), checkpoint_interval_s=1e9, user=user, **kw)


def engine(conf_text: str, reservations: str, jobs, until: float) -> Engine:
    conf = parse_slurm_conf(conf_text)
    conf = type(conf)(**{**conf.__dict__, "reservations": read_reservations(reservations)})
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 2),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})
    e = Engine(plan, Workload(jobs=tuple(jobs), tenants=tuple(
        Tenant(u, quota_gpus=0) for u in sorted({j.tenant for j in jobs}))),
        policy="slurm", slurm_conf=conf)
    e.run_until(until)
    return e


def where(e: Engine, name: str) -> list[int]:
    run = next(r for r in e.jobs.runs if r.spec.name == name)
    return run.placement.nodes.tolist()


def start_of(e: Engine, name: str) -> float | None:
    run = next(r for r in e.jobs.runs if r.spec.name == name)
    return None if run.first_start is None else round(run.first_start, 6)


def reason(e: Engine, name: str) -> str | None:
    run = next(r for r in e.jobs.runs if r.spec.name == name)
    return e.scheduler.reasons.get(run.idx)


# ------------------------------------------------------------------ jobs outside it
def test_a_job_whose_limit_crosses_the_window_goes_to_the_other_node():
    """Maintenance on gpu1 over [100, 200).  With both nodes idle cons_tres takes gpu1 (the
    first of equals).  j0, submitted at 10 with a 1-minute limit, ends by 70.5: before the
    window, so gpu1.  j1, submitted at 50 with a 2-minute limit, would run to 170.5 across
    the window's start: gpu2.  Without the reservation it would take gpu1."""
    jobs = [job(0, 10, 5, 8, limit=60), job(1, 50, 5, 8, limit=120)]
    e = engine(TWO_NODES, resv(), jobs, until=80.0)
    assert (start_of(e, "j0"), start_of(e, "j1")) == (10.5, 50.5)
    assert where(e, "j1") == [1]
    assert where(e, "j0") == [0]
    e = engine(TWO_NODES, "", jobs, until=60.0)
    assert where(e, "j1") == [0]


def test_the_window_holds_the_whole_cluster_job_until_it_ends():
    """j0 wants both nodes for up to 2 minutes from 50.5: it would cross the window on gpu1,
    so it waits, and starts once the window ends (the reservation's end wakes the scheduler:
    its next poll, 200.5 s).  Main scheduler only (sched/builtin): it cannot fit on the nodes
    left even were they idle and none is busy (ReqNodeNotAvail), so it does not block its
    partition: j1, submitted with it and behind it in the queue, starts on gpu2 in the same
    pass."""
    jobs = [job(0, 50, 5, 16, limit=120), job(1, 50, 5, 8, limit=60)]
    e = engine(BUILTIN, resv(), jobs, until=120.0)
    assert start_of(e, "j1") == 50.5 and where(e, "j1") == [1]
    assert start_of(e, "j0") is None and reason(e, "j0") == NOT_AVAILABLE
    e.run_until(260.0)
    assert start_of(e, "j0") == 200.5


def test_with_backfill_the_whole_cluster_job_starts_when_the_window_ends():
    jobs = [job(0, 50, 5, 16, limit=120), job(1, 51, 5, 8, limit=60)]
    e = engine(TWO_NODES, resv(), jobs, until=260.0)
    assert (start_of(e, "j0"), start_of(e, "j1")) == (200.5, 51.5)


def test_a_maintenance_window_over_the_whole_partition_is_named_as_such():
    """MAINT on both nodes of the partition: ``ReqNodeNotAvail, Reserved for maintenance``;
    a job short enough to end before the window still starts."""
    jobs = [job(0, 50, 5, 8, limit=120), job(1, 50, 5, 8, limit=40)]
    e = engine(BUILTIN, resv(nodes="gpu[1-2]"), jobs, until=60.0)
    assert reason(e, "j0") == MAINTENANCE
    assert start_of(e, "j1") == 50.5


# ------------------------------------------------------------------ jobs inside it
def test_a_job_of_the_reservation_waits_for_it_runs_on_its_nodes_and_ends_with_it():
    """j0 (user root, ``--reservation=maint``) is submitted at 20: it waits for the window
    (reason ``Reservation``), starts when it opens (the scheduler's poll at 100.5) on gpu1,
    the reservation's node, and is ended at the first time-limit check after the window's
    end (210 s), though its limit and work run longer."""
    jobs = [job(0, 20, 500, 8, limit=600, user="root", reservation="maint")]
    e = engine(TWO_NODES, resv(), jobs, until=60.0)
    assert reason(e, "j0") == WAITING and start_of(e, "j0") is None
    e.run_until(400.0)
    run = e.jobs.runs[0]
    assert (run.first_start, where(e, "j0"), run.end_s) == (100.5, [0], 210.0)


def test_a_job_naming_a_reservation_it_may_not_use_is_refused():
    jobs = [job(0, 20, 5, 8, limit=60, user="alice", reservation="maint"),
            job(1, 20, 5, 8, limit=60, user="alice", reservation="nope")]
    e = engine(TWO_NODES, resv(), jobs, until=60.0)
    assert [r.state for r in e.jobs.runs] == ["cancelled", "cancelled"]
    texts = [x["text"] for x in e.kernel.events if x["kind"] == "slurm"]
    assert "j0 refused: reservation 'maint': access denied to user alice" in texts
    assert "j1 refused: reservation 'nope' does not exist" in texts
    e = engine(TWO_NODES, resv(users="(null)", accounts="alice"), jobs[:1], until=150.0)
    assert start_of(e, "j0") == 100.5  # the account (the twin's tenant) is listed


# ------------------------------------------------------------------ reading
def test_scontrol_output_reads_every_record_and_field():
    text = (resv() + "ReservationName=train StartTime=1970-01-02T00:00:00 "
            "EndTime=(null) Duration=1-00:00:00\n   Nodes=gpu[1-2] Flags=MAGNETIC "
            "Users=-bob Accounts=ml,cv\n")
    a, b = read_reservations(text)
    assert (a.name, a.start_s, a.end_s, a.nodes, a.maint, a.users) == (
        "maint", 100.0, 200.0, ("gpu1",), True, ("root",))
    assert (b.start_s, b.end_s, b.nodes, b.accounts) == (86400.0, 172800.0,
                                                         ("gpu1", "gpu2"), ("ml", "cv"))
    assert unmodelled((a, b)) == ["reservation train Flags=MAGNETIC",
                                  "reservation train: excluded users or accounts (-name)"]
    assert read_reservations(resv(), epoch_s=50.0)[0].start_s == 50.0


def test_a_record_without_an_end_is_one_error():
    with pytest.raises(SlurmConfError, match=r"scontrol-reservations.txt:1: reservation x: "
                                             "no EndTime or Duration"):
        read_reservations("ReservationName=x StartTime=1970-01-01T00:00:00 Nodes=gpu1")


def test_the_reservations_beside_the_configuration_are_read(tmp_path):
    (tmp_path / "slurm.conf").write_text(TWO_NODES)
    assert read_slurm_conf(tmp_path / "slurm.conf").reservations == ()
    (tmp_path / "scontrol-reservations.txt").write_text(resv(flags="MAINT,FLEX"))
    conf = read_slurm_conf(tmp_path / "slurm.conf", epoch_s=100.0)
    assert [(r.name, r.start_s) for r in conf.reservations] == [("maint", 0.0)]
    assert conf.warning() == ("slurm.conf: not modelled by the twin, so not applied: "
                              "reservation maint Flags=FLEX")
