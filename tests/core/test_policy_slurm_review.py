"""Hand-derived cases from a reading of Slurm 22.05.8's own source (tag slurm-22-05-8-1),
for discrepancies between the ``slurm`` policy and slurmctld found in review
(``/work/notes/slurm_review.md``).  Each test names the source lines it follows.

Same set-up as ``test_policy_slurm.py``: 4 nodes of 8 GPUs and 64 CPUs, physics and failures
off, so a job runs exactly its duration.  Times in Slurm are whole seconds and its threads
run on their own clocks (the background loop ticks about every second, the backfill agent
every ``bf_interval``), so where a case depends on those phases it asserts a window, not an
instant.
"""

from __future__ import annotations

from tests.core.test_policy_slurm import ONE_PARTITION, PREEMPT, QOS, job, run, starts


def test_a_batch_job_is_never_started_at_its_submission():
    """proc_req.c ``_slurm_rpc_submit_batch_job`` calls ``job_allocate(..., allocate=0, ...)``
    and job_mgr.c ``job_allocate`` sets ``test_only = will_run || ... || (allocate == 0)``,
    so ``no_alloc`` is true: a batch job is only tested at submission.  It then waits for
    ``queue_job_scheduler()`` (controller.c ``_slurmctld_background``: ``schedule()`` once
    ``job_sched_cnt && now - last_sched_time >= batch_sched_delay`` (3 s), on a loop of
    10 x 100 ms sleeps) or for the backfill agent (backfill.c ``backfill_agent``: polls every
    1 s once ``bf_interval`` has passed since its last cycle).  On an idle cluster with
    ``bf_interval=1`` the job starts strictly after its submission, within about 2 s."""
    e = run(ONE_PARTITION, [job(0, 10.3, 10, 8, limit=60)])
    delay = starts(e)["j0"] - 10.3
    assert 0.0 < delay <= 2.0


def test_a_one_node_job_goes_to_the_busiest_node_that_fits_not_the_lowest_numbered():
    """cons_tres job_test.c ``_eval_nodes``: nodes that can take the job form runs of
    consecutive nodes; the sufficient run with the fewest available CPUs wins, and for a
    one-node job ``/* No required nodes, try best fit single node */`` picks the node of that
    run with the fewest available CPUs (``avail_cpu_per_node[i] < best_size``), the first
    on ties.  j0 (8 GPUs) takes gpu1 and j9 (4 GPUs, 200 s) gpu2 at 0 s; j0 ends at 10 s.
    j1 (4 GPUs on one node) arrives at 11 s: all four nodes can take it and form one run;
    gpu2 has the fewest free CPUs (j9 holds a core), so j1 joins j9 on gpu2.  j2 (3 whole
    nodes) arrives at 12 s and starts at once on gpu1, gpu3 and gpu4.  Lowest-numbered
    first would put j1 on gpu1 and hold j2 until j1 ends at 111 s."""
    e = run(ONE_PARTITION, [job(0, 0, 10, 8, limit=60), job(9, 0, 200, 4, per=4, limit=300),
                            job(1, 11, 100, 4, per=4, limit=120),
                            job(2, 12, 10, 24, per=8, limit=60)])
    runs = {r.spec.name: r for r in e.jobs.runs}
    assert runs["j1"].placement is None or set(runs["j1"].placement.nodes.tolist()) == \
        set(runs["j9"].placement.nodes.tolist())
    assert starts(e)["j2"] - 12.0 <= 3.0


def test_a_backfill_reservation_holds_whole_nodes_not_gpu_counts():
    """backfill.c ``_attempt_backfill``: a pending job's reservation is
    ``bit_not(avail_bitmap); _add_reservation(start_time, end_reserve, avail_bitmap, ...)``
    and ``_add_reservation`` does ``bit_and(node_space[j].avail_bitmap, res_bitmap)``: the
    node_space map is node bitmaps, so a reserved node is withheld whole from every later
    job whose [now, now + limit] overlaps the reservation (``bit_and(avail_bitmap,
    node_space[j].avail_bitmap)`` for each record with ``begin_time <= end_time``).
    j0-j2 fill gpu1-gpu3 until 100 s; j3 holds 4 GPUs of gpu4 until 45 s (limit 50).
    P (6 GPUs, one node) is reserved on gpu4 from 50 s.  L (2 GPUs, limit 100) would fit
    beside P on gpu4 by GPU count, but gpu4 is withheld, so L waits; when j3 ends at 45 s
    the main scheduler starts P on gpu4 and then L in the 2 GPUs left there."""
    jobs = [job(0, 0, 100, 8, limit=100), job(1, 0, 100, 8, limit=100),
            job(2, 0, 100, 8, limit=100), job(3, 0, 45, 4, per=4, limit=50),
            job(4, 1, 60, 6, per=6, limit=100), job(5, 2, 30, 2, per=2, limit=100)]
    s = starts(run(ONE_PARTITION, jobs))
    assert 45.0 <= s["j4"] <= 47.0
    assert s["j5"] >= 45.0


QOS_TWO = "Name|Priority|Preempt|PreemptMode\nnormal|0||cluster\nhigh|100|normal|cluster\n"


def test_preempt_qos_evicts_the_smallest_job_of_the_lowest_qos_first_not_the_youngest():
    """slurmctld/preempt.c ``slurm_find_preemptable_jobs``: candidates are sorted with
    ``_sort_by_prio`` unless ``PreemptParameters=youngest_order``; preempt_qos.c
    ``_gen_job_prio`` is ``(QOS priority << 16) + node_cnt`` ("We want to put smaller jobs
    at the top of the preemption queue"), and cons_common job_test.c ``_run_now`` removes
    candidates in that order until the job fits.  A (normal, 2 nodes) started at 5 s is
    younger than B (normal, 1 node, from 0 s); C (high) holds the fourth node.  H (high,
    one node) at 20 s: B, the one-node job, is requeued; A keeps running."""
    jobs = [job(0, 0, 300, 8, limit=400, qos="normal"),       # B: 1 node
            job(1, 5, 300, 16, limit=400, qos="normal"),      # A: 2 nodes, younger
            job(2, 0, 300, 8, limit=400, qos="high"),         # C
            job(3, 20, 30, 8, limit=60, qos="high")]          # H
    e = run(PREEMPT, jobs, until=100.0, qos=QOS_TWO)
    runs = {r.spec.name: r for r in e.jobs.runs}
    assert runs["j0"].preemptions == 1
    assert runs["j1"].preemptions == 0


def test_the_preemptor_starts_in_a_later_pass_than_the_one_that_evicts():
    """node_scheduler.c ``_preempt_jobs``: ``if (job_cnt > 0) *error_code =
    ESLURM_NODES_BUSY`` -- ``select_nodes`` signals the victims and returns busy; the
    preemptor starts in a later pass once the victims' nodes are released (requeue sets
    JOB_COMPLETING; the epilog-complete RPC then calls ``schedule(false)``).  So it never
    starts at the same instant as the eviction, and a main pass that evicts also marks the
    preemptor's partition failed (job_scheduler.c: ``ESLURM_NODES_BUSY`` ->
    ``fail_by_part = true``).  j1 arrives at 20 s and is itself a batch job: it starts
    strictly after 20 s."""
    e = run(PREEMPT, [job(0, 0, 100, 32, limit=200, qos="normal"),
                      job(1, 20, 30, 32, limit=60, qos="high")], qos=QOS)
    assert 20.0 < starts(e)["j1"] <= 23.0


def test_a_requeued_job_keeps_its_priority_basic_rank():
    """priority_basic.c ``priority_p_set``: each new job gets ``last_prio - 1`` (first come,
    first served by priority value, not by submit time).  job_mgr.c ``_job_requeue_op`` /
    ``batch_requeue_fini`` reset ``submit_time``, ``begin_time`` and ``accrue_time`` but
    never call ``set_job_prio``: the victim keeps its old, higher priority, and
    job_scheduler.c ``sort_job_queue2`` compares priority before submit time.  j0 (normal,
    whole cluster) is requeued at 20 s by j2 (high, 30 s); j1 (normal, whole cluster) was
    submitted at 5 s.  When j2 ends, j0 -- submitted first -- runs again before j1."""
    e = run(PREEMPT, [job(0, 0, 100, 32, limit=200, qos="normal"),
                      job(1, 5, 100, 32, limit=200, qos="normal"),
                      job(2, 20, 30, 32, limit=60, qos="high")], until=400.0, qos=QOS)
    runs = {r.spec.name: r for r in e.jobs.runs}
    assert runs["j0"].preemptions == 1
    assert runs["j0"].end_s < starts(e)["j1"] + 1.0  # j0 reran first, j1 after it
