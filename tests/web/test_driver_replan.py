"""Structural edits of the inventory reach the running engine: it re-plans between two steps,
and jobs on untouched nodes keep running."""

import pytest
from channels.db import database_sync_to_async

from tests.web.test_driver import FakeClock, drivers  # noqa: F401  (the fixture)
from twin import models as m
from twin.inventory.adapter import EngineIds, cluster_plan_write

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def running_driver(drivers, small_plan):  # noqa: F811
    cluster = await database_sync_to_async(cluster_plan_write)(small_plan)
    driver = await drivers(speed=3600.0, clock=FakeClock())
    for _ in range(3):
        driver.clock.now += 2.0
        await driver.step_once()
    assert driver.engine.running, "the test needs jobs running"
    return cluster, driver


def busy_and_idle_nodes(cluster, engine):
    """Node rows by engine id: one holding a gang, one holding nothing."""
    busy = {int(n) for r in engine.running.values() for n in r.placement.nodes}
    keys = EngineIds(cluster).node_keys()
    idle = [i for i in range(len(keys)) if i not in busy and not engine.state.node_spare[i]]
    return (m.Node.objects.get(pk=int(keys[min(busy)])), m.Node.objects.get(pk=int(keys[idle[0]])))


async def step(driver, times=1):
    for _ in range(times):
        driver.clock.now += 3.0  # past the inventory poll interval
        await driver.step_once()


async def test_an_idle_node_removed_in_the_admin_leaves_the_live_engine_at_the_next_step(
        drivers, small_plan):  # noqa: F811
    cluster, driver = await running_driver(drivers, small_plan)
    engine = driver.engine
    before = {r.spec.name: (r.expected_end, r.seg_start) for r in engine.running.values()}
    _, idle = await database_sync_to_async(busy_and_idle_nodes)(cluster, engine)
    t = engine.now
    await database_sync_to_async(idle.delete)()
    await step(driver)
    new = driver.engine
    assert new is not engine and new.replans == 1
    assert new.plan.n_nodes == small_plan.n_nodes - 1
    assert new.now > t  # the clock went on
    after = {r.spec.name: (r.expected_end, r.seg_start) for r in new.running.values()}
    assert {k: after[k] for k in before if k in after} == before  # untouched gangs run on
    assert set(before) <= set(after) | {r.spec.name for r in new.runs if r.state == "done"}
    assert driver.replan_summary["nodes_removed"] == 1
    kinds = await database_sync_to_async(
        lambda: list(m.EngineEvent.objects.filter(inventory=driver.log_key)
                     .values_list("kind", flat=True)))()
    assert "replan" in kinds


async def test_a_busy_node_changed_in_the_admin_stops_only_its_gang(drivers, small_plan):  # noqa: F811
    cluster, driver = await running_driver(drivers, small_plan)
    engine = driver.engine
    busy, _ = await database_sync_to_async(busy_and_idle_nodes)(cluster, engine)
    keys = await database_sync_to_async(lambda: EngineIds(cluster).node_keys())()
    n = int(list(keys).index(busy.pk))
    victims = {r.spec.name for r in engine.running.values() if n in r.placement.nodes}
    busy.is_spare = True  # it becomes a hot spare: its gang must leave it
    await database_sync_to_async(busy.save)()
    await step(driver)
    assert driver.engine.replans == 1
    assert set(driver.replan_summary["stopped"]) == victims
    assert not any(n in r.placement.nodes for r in driver.engine.running.values())


async def test_a_status_edit_is_no_re_plan(drivers, small_plan):  # noqa: F811
    cluster, driver = await running_driver(drivers, small_plan)
    engine = driver.engine

    def rename():  # an edit the plan does not see (a hostname) bumps the revision only
        node = m.Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")[0]
        node.hostname = "renamed-0"
        node.save()
    await database_sync_to_async(rename)()
    await step(driver, 2)
    assert driver.engine is engine and engine.replans == 0
