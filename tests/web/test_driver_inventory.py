"""The live engine runs the inventory in the database, and a snapshot of another inventory is
not resumed."""

import numpy as np
import pytest
from channels.db import database_sync_to_async

from scheduler.snapshot import plan_digest
from tests.web.test_driver import FakeClock, drivers  # noqa: F401  (the fixture)
from twin import models as m
from twin.inventory.adapter import cluster_plan_read, cluster_plan_write

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_the_live_engine_runs_the_selected_inventory(drivers, small_plan):  # noqa: F811
    cluster = await database_sync_to_async(cluster_plan_write)(small_plan)
    driver = await drivers(speed=3600.0)
    plan = await database_sync_to_async(cluster_plan_read)(cluster=cluster)
    state = driver.engine.state
    assert state.n_gpus == small_plan.n_gpus == 96  # not dev-small's 256
    np.testing.assert_array_equal(state.node_spare, plan.node_spare)
    assert driver.inventory == plan_digest(plan)


async def test_a_snapshot_of_an_older_inventory_is_carried_onto_the_new_one(drivers, small_plan):  # noqa: F811,E501
    cluster = await database_sync_to_async(cluster_plan_write)(small_plan)
    first = await drivers(speed=3600.0)
    clock = first.clock
    clock.now += 2.0
    await first.step_once()
    await first.snapshot()
    assert first.engine.now > 0

    # same inventory: resumed where it stopped
    again = await drivers(clock=FakeClock())
    assert again.engine.now == first.engine.now and again.engine.replans == 0

    # a node made a hot spare in the admin while the engine was down: another inventory, so
    # the snapshot's run is re-planned onto it (its clock goes on) and the log says so
    def make_spare():
        node = m.Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")[0]
        node.is_spare = True
        node.save()
    await database_sync_to_async(make_spare)()
    moved = await drivers(clock=FakeClock())
    assert moved.engine.now == first.engine.now and moved.engine.replans == 1
    assert moved.inventory != first.inventory
    assert moved.engine.state.node_spare[0]
    assert moved.log_key == first.log_key  # one run, one log
    assert moved.engine.events[-1]["kind"] == "replan"


async def test_a_snapshot_of_another_cluster_is_not_carried_over(drivers, small_plan):  # noqa: F811
    cluster = await database_sync_to_async(cluster_plan_write)(small_plan)
    first = await drivers(speed=3600.0)
    first.clock.now += 2.0
    await first.step_once()
    await first.snapshot()

    def rebuilt():  # the same layout written again: a new cluster, new rows
        from twin.inventory.adapter import cluster_delete
        cluster_delete(cluster=cluster)
        cluster_plan_write(small_plan)
    await database_sync_to_async(rebuilt)()
    fresh = await drivers(clock=FakeClock())
    assert fresh.engine.now == 0 and fresh.engine.replans == 0


def stored_log(key):
    return list(m.EngineEvent.objects.filter(inventory=key).order_by("seq")
                .values_list("seq", "kind", "text"))


async def test_the_event_log_is_kept_as_the_engine_runs_and_across_a_restart(drivers):  # noqa: F811
    first = await drivers(speed=6 * 3600.0)
    for _ in range(4):
        first.clock.now += 2.0
        await first.step_once()
    kept = await database_sync_to_async(stored_log)(first.log_key)
    logged = first.engine.kernel.logged
    assert logged > 0 and [s for s, *_ in kept] == list(range(logged))
    assert [(k, t) for _, k, t in kept][-len(first.engine.events):] == [
        (e["kind"], e["text"]) for e in first.engine.events]
    await first.snapshot()
    for _ in range(2):  # a future past the snapshot: the next process lives it again
        first.clock.now += 2.0
        await first.step_once()
    shown_t, shown_log = first.engine.now, list(first.engine.events)

    second = await drivers(speed=6 * 3600.0)
    # it resumed from the snapshot and caught up with the last frame shown: time did not go
    # back on screen, and the same (deterministic) events were logged again
    assert second.engine.now == shown_t
    assert list(second.engine.events) == shown_log
    kept = await database_sync_to_async(stored_log)(second.log_key)
    assert [s for s, *_ in kept] == list(range(second.engine.kernel.logged))
    for _ in range(3):
        second.clock.now += 2.0
        await second.step_once()
    kept = await database_sync_to_async(stored_log)(second.log_key)
    assert [s for s, *_ in kept] == list(range(second.engine.kernel.logged))
