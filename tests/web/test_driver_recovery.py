"""Crash consistency of the live engine: a durable command log, replay after a crash, poisoned
commands taken back, pending drills never left pending, and a heartbeat for health."""

import numpy as np
import pytest
from channels.db import database_sync_to_async

from tests.web.test_driver import FakeClock, commands_arrived, drivers, request_drill  # noqa: F401
from twin import models as m
from twin.live import command_log

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def steps(driver, n=1, dt=2.0):
    for _ in range(n):
        driver.clock.now += dt
        await driver.step_once()


async def refreshed(row):
    await database_sync_to_async(row.refresh_from_db)()
    return row


def node_state(engine):
    s = engine.state
    return s.node_up.copy(), s.node_free.copy(), engine.kernel.logged


async def test_a_drill_applied_after_the_last_snapshot_survives_a_crash(drivers, demo_users):  # noqa: F811
    first = await drivers(speed=600.0)
    await steps(first)
    await first.snapshot()
    drill = await request_drill(demo_users, kind="node", target="3", params={})
    await commands_arrived(first, "drill")
    await steps(first, 2)
    assert (await refreshed(drill)).status == m.DrillStatus.APPLIED
    assert not first.engine.state.node_up[3]
    up, free, logged = node_state(first.engine)
    t = first.engine.now
    # the process dies here (no closing snapshot); the next one resumes from the snapshot,
    # which predates the drill, and replays the log
    second = await drivers(speed=600.0)
    assert second.engine.now == t  # time did not go back
    s_up, s_free, s_logged = node_state(second.engine)
    np.testing.assert_array_equal(s_up, up)
    np.testing.assert_array_equal(s_free, free)
    assert s_logged == logged
    assert not second.engine.state.node_up[3]


async def test_a_command_that_poisons_the_next_step_is_taken_back_and_the_engine_runs_on(
        drivers, demo_users):  # noqa: F811
    driver = await drivers(speed=600.0)
    await steps(driver)
    await driver.snapshot()
    drill = await request_drill(demo_users, kind="node", target="5", params={})
    await commands_arrived(driver, "drill")
    driver.clock.now += 2.0
    await driver.commands.apply_all()
    assert (await refreshed(drill)).status == m.DrillStatus.APPLIED

    def poisoned(t_end, progress=None):
        raise OverflowError("math range error")
    driver.engine.run_until = poisoned  # the state the drill left cannot step
    assert await driver.snapshot() is None  # never a snapshot of an unproven state
    frame = await driver.step_once()
    assert frame["health"] == "error"
    drill = await refreshed(drill)
    assert drill.status == m.DrillStatus.REFUSED
    assert "OverflowError" in drill.outcome["error"] and "taken back" in drill.outcome["error"]
    row = await database_sync_to_async(m.EngineCommand.objects.get)(drill=drill)
    assert row.status == m.EngineCommand.Status.REFUSED
    assert driver.engine.state.node_up[5]  # the restored engine never saw it
    await steps(driver)
    assert driver.health == "ok"
    # and a restart does not bring it back
    again = await drivers(speed=600.0)
    assert again.engine.state.node_up[5]


async def test_a_drill_posted_while_no_engine_runs_is_applied_when_one_starts(demo_users):
    def post():
        return m.Drill.objects.create(kind="node", target="2", params={},
                                      requested_by=demo_users["staff"])
    drill = await database_sync_to_async(post)()
    from tests.web.test_driver import EngineDriver
    driver = EngineDriver(preset="dev-small", clock=FakeClock())
    await driver.start()
    try:
        await driver.step_once()
        drill = await refreshed(drill)
        assert drill.status == m.DrillStatus.APPLIED
        assert not driver.engine.state.node_up[2]
    finally:
        await driver.close(snapshot=False)


async def test_a_command_left_applying_by_a_crash_is_refused_at_the_next_start(drivers):  # noqa: F811
    first = await drivers()
    await steps(first)
    await first.snapshot()
    row = await database_sync_to_async(command_log.command_open)(
        run=first.log_key, name="node_down", params={"node": 1}, t_sim=first.engine.now)
    second = await drivers()
    status, error = await database_sync_to_async(
        lambda: m.EngineCommand.objects.values_list("status", "error").get(pk=row))()
    assert status == "refused" and "stopped while applying" in error
    assert second.engine.state.node_up[1]


async def test_a_command_that_breaks_half_way_is_rolled_back_and_refused(drivers):  # noqa: F811
    from twin.live.engine_commands import command_parse
    driver = await drivers(speed=600.0)
    await steps(driver)
    await driver.snapshot()
    engine = driver.engine

    def half_way(name, **params):
        engine.state.set_node_flags([7], up=False)  # a change made, then a crash
        raise RuntimeError("broke half-way")
    engine.command = half_way
    await driver.command_apply(command_parse({"command": "node_down",
                                              "params": {"node": 7}}))
    assert driver.engine is not engine and driver.engine.state.node_up[7]
    status, error = await database_sync_to_async(
        lambda: m.EngineCommand.objects.values_list("status", "error").get(name="node_down"))()
    assert status == "refused" and "broke half-way" in error
    await steps(driver)
    assert driver.health == "ok"
