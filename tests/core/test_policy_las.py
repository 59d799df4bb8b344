"""``las``: Tiresias' discretised two-dimensional least attained service, on hand-derived cases.

One 8-GPU H100 node, failures and physics off, 8-GPU jobs of whole or tenth hours of compute
with a checkpoint every compute hour unless given (writes take no time, a restart costs
:data:`RESTART_FIXED_S` = 180 s).  The defaults: two queues split at 3,600 GPU-seconds of
attained service, so an 8-GPU job leaves queue 0 after 450 s; PROMOTEKNOB 8.  A gang is
exempt from preemption for a while after a start (:func:`exempt_until`, the rule of every
policy): the cases let it end before the preemptions they derive."""

from __future__ import annotations

import pytest

from scheduler.control.whatif import action_check
from scheduler.model.job_run import DONE, QUEUED, RUNNING
from scheduler.reliability.checkpoint import RESTART_FIXED_S
from scheduler.scheduling.attained import PROMOTE_KNOB, THRESHOLDS_GPU_S
from scheduler.scheduling.policies import REGISTRY
from scheduler.scheduling.preemption import exempt_until
from scheduler.sim import Kind
from scheduler.simulate import Scenario
from tests.core.factories import HOUR, job, run_engine, small_plan, workload

NEW = ("sjf", "sjf-limit", "sjf-history", "las")


def hours(t: float | None) -> float | None:
    return None if t is None else round(t / HOUR, 9)


def test_the_defaults_are_the_papers_two_queues_at_one_gpu_hour_and_knob_eight():
    assert (THRESHOLDS_GPU_S, PROMOTE_KNOB) == ((3600.0,), 8.0)


TENTH = 0.1 * HOUR  # a checkpoint every 0.1 compute hours: little is lost to a preemption


def test_a_demoted_long_job_is_preempted_by_a_new_short_one_and_resumes_from_its_checkpoint():
    """L (3 h, a checkpoint every 0.1 h) starts at 0 in queue 0 and is demoted at exactly 450 s
    (3,600 GPU-s on 8 GPUs).  S (0.5 h) arrives at 1.55 h in queue 0 and preempts L at once:
    L loses the 0.05 h since its checkpoint at 1.5 h (8 x 0.05 = 0.4 GPU-h booked preempted).
    S runs 1.55-2.05 h; L restarts at 2.05 h, pays the 180 s relaunch (8 x 180 s booked
    recovery) and computes its 1.5 h left: it ends at 3.6 h.  Under FIFO S waits until 3 h."""
    wl = workload(job(hours=3, name="L", checkpoint_interval_s=TENTH),
                  job(hours=0.5, submit_h=1.55, name="S"))
    e = run_engine(small_plan(1), wl, policy="las")
    las = e.scheduler.ranking
    long_, short = e.runs
    e.run_until(449.999)
    assert las.queue_of(long_) == 0
    e.run_until(450.0)
    assert las.queue_of(long_) == 1 and las.attained_gpu_s(long_) == pytest.approx(3600.0)
    e.run_until(1.55 * HOUR)
    assert (short.state, long_.state, long_.preemptions) == (RUNNING, QUEUED, 1)
    assert hours(short.first_start) == 1.55
    e.run_until(10 * HOUR)
    assert hours(short.end_s) == pytest.approx(2.05)
    assert long_.state == DONE
    assert long_.end_s / HOUR == pytest.approx(2.05 + RESTART_FIXED_S / HOUR + 1.5)
    led = e.horizon_ledger().gpu_hours()
    assert led["preempted"] == pytest.approx(8 * 0.05)
    assert led["recovery"] == pytest.approx(8 * RESTART_FIXED_S / HOUR)
    assert led["productive"] == pytest.approx(8 * 3 + 8 * 0.5)
    fifo = run_engine(small_plan(1), wl, policy="fifo", until_h=10)
    assert hours(fifo.runs[1].first_start) == 3.0


def test_a_waiting_job_of_queue_zero_goes_before_one_of_queue_one_that_waited_longer():
    """A (3 h, a checkpoint every 0.1 h) starts at 0 and is demoted at 450 s.  B (0.1 h)
    arrives at 1.55 h and preempts A (A keeps its 1.5 h checkpoint); C (1 h) arrives at 1.6 h,
    in queue 0 like B (running 360 s only: 2,880 GPU-s, it stays in queue 0), so it waits.
    When B ends at 1.65 h, C (queue 0) starts before A (queue 1), though A has waited longer
    and was submitted first: C runs 1.65-2.65 h, then A restarts, pays 180 s and computes its
    1.5 h left: it ends at 4.2 h."""
    wl = workload(job(hours=3, name="A", checkpoint_interval_s=TENTH),
                  job(hours=0.1, submit_h=1.55, name="B"),
                  job(hours=1, submit_h=1.6, name="C"))
    e = run_engine(small_plan(1), wl, policy="las", until_h=10)
    a, b, c = e.runs
    assert (hours(b.first_start), hours(c.first_start)) == pytest.approx((1.55, 1.65))
    assert (a.preemptions, b.preemptions, c.preemptions) == (1, 0, 0)
    assert a.end_s / HOUR == pytest.approx(2.65 + RESTART_FIXED_S / HOUR + 1.5)


def test_a_job_of_the_same_queue_does_not_preempt():
    """L (3 h) and S (0.5 h) arrive together: both in queue 0, first in first out: L runs, S
    waits, though shorter.  Once L is demoted (450 s) S preempts it, as soon as L's exemption
    after its start ends (:func:`exempt_until`, the rule of every policy)."""
    wl = workload(job(hours=3, name="L", checkpoint_interval_s=TENTH), job(hours=0.5, name="S"))
    e = run_engine(small_plan(1), wl, policy="las", until_h=0)
    long_, short = e.runs
    preempt_at = max(450.0, exempt_until(long_))
    e.run_until(preempt_at - 1.0)
    assert (long_.state, short.state) == (RUNNING, QUEUED)
    e.run_until(preempt_at)
    assert short.first_start == pytest.approx(preempt_at) and long_.preemptions == 1


def test_a_starving_job_returns_to_queue_zero_after_knob_times_its_executed_time():
    """L (10 h, a checkpoint every 0.1 h) starts at 0 and is demoted at 450 s.  S (20 h, a
    checkpoint every hour) arrives at 1.35 h and preempts L (L keeps its 1.3 h checkpoint);
    S is demoted at 1.35 h + 450 s, into L's queue, where L (waiting) may not preempt it.
    L executed 1.35 h, so after waiting 8 x 1.35 h = 10.8 h, at 12.15 h, it returns to queue 0
    with its attained service reset and preempts S at once (S computed 10.8 h: it loses the
    0.8 h since its 10 h checkpoint).  L restarts at 12.15 h, pays 180 s and computes its 8.7 h
    left: it ends at 20.9 h.  S waits in queue 1 (its own promotion would come after
    8 x 10.8 h) and, though L is demoted again at 12.15 h + 450 s, same queue: no preemption.
    S restarts at 20.9 h, pays 180 s and computes its 10 h left: it ends at 30.95 h."""
    wl = workload(job(hours=10, name="L", checkpoint_interval_s=TENTH),
                  job(hours=20, submit_h=1.35, name="S"))
    e = run_engine(small_plan(1), wl, policy="las", until_h=12.14)
    las = e.scheduler.ranking
    long_, short = e.runs
    assert (hours(short.first_start), long_.state, las.queue_of(long_)) == (1.35, QUEUED, 1)
    e.run_until(12.15 * HOUR)
    assert las.counters["promotions"] == 1
    assert (long_.state, short.state, short.preemptions) == (RUNNING, QUEUED, 1)
    assert las.queue_of(long_) == 0 and las.attained_gpu_s(long_) == 0.0
    e.run_until(40 * HOUR)
    restart_h = RESTART_FIXED_S / HOUR
    assert long_.end_s / HOUR == pytest.approx(12.15 + restart_h + 8.7)
    assert short.end_s / HOUR == pytest.approx(20.9 + restart_h + 10)
    assert (long_.preemptions, short.preemptions) == (1, 1)
    assert e.horizon_ledger().gpu_hours()["preempted"] == pytest.approx(8 * 0.05 + 8 * 0.8)


def test_without_attained_service_rules_fifo_lets_the_long_job_finish():
    """The same workload under FIFO: L runs 0-10 h, S 10-30 h; nobody is preempted."""
    wl = workload(job(hours=10, name="L", checkpoint_interval_s=TENTH),
                  job(hours=20, submit_h=1.35, name="S"))
    e = run_engine(small_plan(1), wl, policy="fifo", until_h=40)
    assert [hours(r.end_s) for r in e.runs] == [10.0, 30.0]
    assert e.counters["preemptions"] == 0


@pytest.mark.parametrize("name", NEW)
def test_the_research_policies_are_selectable_wherever_a_policy_is(name):
    assert name in REGISTRY
    Scenario(preset="dev-small", days=0.01, policy=name)  # simulate --policy, study arms
    assert action_check({"kind": "policy", "name": name}) == {"kind": "policy", "name": name}
    e = run_engine(small_plan(1), workload(job(hours=1)), policy="fifo", until_h=0)
    assert e.command("set_policy", name=name) == {"policy": name, "placement": "first-fit"}


def test_switching_away_from_las_drops_its_timers_and_ranks():
    """Under ``las`` a running gang has its demotion timer and a queued one its rank; after
    ``set_policy fifo`` neither is left, and the queue is first come, first served."""
    wl = workload(job(hours=3), job(hours=1, submit_h=0.1))
    e = run_engine(small_plan(1), wl, policy="las", until_h=0.01)
    rank_timers = [h for h in e.kernel.pending(Kind.BACKFILL)
                   if h.payload and h.payload[0] == "rank"]
    assert rank_timers and e.scheduler.ranking is not None
    e.run_until(0.2 * HOUR)
    assert e.runs[1].rank == (0, 0.1 * HOUR)
    e.command("set_policy", name="fifo")
    assert e.scheduler.ranking is None and e.runs[1].rank == ()
    assert not [h for h in e.kernel.pending(Kind.BACKFILL)
                if h.payload and h.payload[0] == "rank"]
    assert e.jobs.run_watchers == []
