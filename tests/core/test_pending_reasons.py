"""Why a queued gang waits, in Slurm's words, from what the scheduler's last pass saw (issue 16):
``Resources`` (too few free GPUs), ``Topology`` (enough free, but not in one domain the gang
needs) and ``Priority`` (behind a higher-ranked gang); the frame shows a reservation only while
it lies ahead."""

from scheduler.live import QUEUE_COLUMNS, live_frame, live_placement, queue_rows
from scheduler.scheduling.passes import PRIORITY, RESOURCES, TOPOLOGY
from tests.core.factories import HOUR, job, run_engine, small_plan, workload


def reasons(engine):
    return {row["name"]: row["reason"] for row in live_frame(engine)["queue"]}


def test_the_head_that_does_not_fit_waits_for_resources_and_the_rest_for_priority():
    # two 8-GPU nodes: j0 holds both; j1 (higher priority) is the head; j2 waits behind it
    e = run_engine(small_plan(2), workload(job(gpus=16, hours=5, priority=9),
                                           job(gpus=16, hours=1, priority=5),
                                           job(gpus=8, hours=10, priority=0)),
                   failures=False, until_h=0.5)
    assert reasons(e) == {"j1": RESOURCES, "j2": PRIORITY}


def test_free_gpus_split_across_pods_are_a_topology_wait():
    # pods of two 8-GPU nodes; one node of each pod drained: 16 GPUs free, no pod has them.
    # A policy without preemption keeps the gang waiting for one pod (the default starts it
    # across pods rather than evict anyone for compactness: test_preemption_bounds.py)
    e = run_engine(small_plan(4), workload(job(gpus=16, hours=1, affinity="pod")),
                   failures=False, policy="backfill")
    e.command("drain_node", node=1)
    e.command("drain_node", node=2)
    e.run_until(0.5 * HOUR)
    assert e.state.free_counts()[0].sum() == 16
    assert reasons(e) == {"j0": TOPOLOGY}
    e.command("undrain_node", node=1)
    e.run_until(0.6 * HOUR)
    assert reasons(e) == {} and e.runs[0].state == "running"


def test_a_reservation_the_clock_has_passed_is_not_shown_as_a_start():
    # j0 holds two of three nodes for 5 h; j1 needs all three and is reserved for 5 h (j2, too
    # long to backfill, makes the pass reserve); the third node goes down at 1 h, so at 6 h
    # j1 still waits, its reservation behind it
    e = run_engine(small_plan(3), workload(job(gpus=16, hours=5, priority=9),
                                           job(gpus=24, hours=1, priority=5),
                                           job(gpus=8, hours=10, priority=0)),
                   failures=False, until_h=0.5)
    head = live_frame(e)["queue"][0]
    assert head["name"] == "j1" and head["reserved_start_h"] is not None
    assert head["reserved_start_h"] >= e.now / HOUR
    e.run_until(1 * HOUR)
    e.command("node_down", node=2)
    e.run_until(6 * HOUR)
    head = live_frame(e)["queue"][0]
    assert head["name"] == "j1" and head["reason"] == RESOURCES
    assert head["reserved_start_h"] is None


def test_the_placement_lists_the_whole_queue_in_order_with_reasons():
    e = run_engine(small_plan(2), workload(job(gpus=16, hours=5, priority=100),
                                           *(job(gpus=8, hours=1, priority=p)
                                             for p in range(60))),
                   failures=False, until_h=0.5)
    p = live_placement(e)
    assert p["queue_total"] == 60 and len(p["queue"]) == 60
    assert [row[0] for row in p["queue"]] == list(range(1, 61))
    assert [row[QUEUE_COLUMNS.index("priority")] for row in p["queue"]] == list(range(59, -1, -1))
    assert p["queue"] == queue_rows(e)
    assert len(live_frame(e)["queue"]) == 50
