"""The live engine driver: pace, frames, commands, drills, crashes and snapshots."""

import asyncio
import json
import time

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from scheduler.live import live_frame
from tests.waiting import until
from twin import models as m
from twin.control import services
from twin.live import broadcast
from twin.live.driver import EngineDriver
from twin.live.engine_commands import INVENTORY_COMMANDS, command_parse

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest_asyncio.fixture
async def drivers():
    """Start drivers on dev-small; they are closed (without a snapshot) after the test."""
    started = []

    async def make(**kwargs):
        kwargs.setdefault("preset", "dev-small")
        kwargs.setdefault("clock", FakeClock())
        driver = EngineDriver(**kwargs)
        await driver.start()
        started.append(driver)
        return driver

    yield make
    for driver in started:
        if driver.commands.channel is not None:
            await driver.close(snapshot=False)
    await get_channel_layer().flush()
    broadcast._local_listeners.clear()


async def frames_inbox():
    """Frames published to the dashboards, as a consumer of this process receives them."""
    received = []
    await broadcast.frames_join(get_channel_layer(), "test.frames", received.append)
    return received


async def live_state():
    return await database_sync_to_async(m.LiveState.objects.get)(pk=1)


async def commands_arrived(driver, *names: str) -> None:
    """Until the driver's inbox holds the commands ``names`` (sent, received, not yet applied:
    the next step applies them)."""
    def waiting():
        return [message.get("command") for message in driver.commands.inbox]

    def arrived():
        held = waiting()
        return all(held.count(name) >= names.count(name) for name in names)

    await until(arrived, what=lambda: f"{list(names)} in the engine's inbox (it holds "
                                      f"{waiting()})")


async def test_a_step_advances_by_speed_times_the_wall_time_that_passed(drivers):
    clock = FakeClock()
    driver = await drivers(speed=120.0, clock=clock)
    published = await frames_inbox()
    t0 = driver.engine.now
    clock.now += 2.5
    before = time.time()
    frame = await driver.step_once()
    after = time.time()
    assert driver.engine.now == pytest.approx(t0 + 300.0)
    clock.now += 7.0  # a slow step: the next one covers the whole gap, pace is kept
    await driver.step_once()
    assert driver.engine.now == pytest.approx(t0 + 300.0 + 840.0)
    assert frame["health"] == "ok" and frame["speed"] == 120.0 and frame["paused"] is False
    state = await live_state()
    assert (state.seq, state.health) == (2, "ok")
    assert state.t_sim == pytest.approx(t0 + 1140.0)
    assert state.frame["t"] == pytest.approx(state.t_sim)
    assert [p["seq"] for p in published] == [1, 2]
    first = json.loads(published[0]["text"])
    assert first["type"] == "frame" and first["t"] == pytest.approx(t0 + 300.0)
    assert before <= first["sent_at"] <= after  # the publisher's epoch clock, when it sent


async def test_speed_and_pause_commands_apply_before_the_next_step(drivers):
    clock = FakeClock()
    driver = await drivers(speed=60.0, clock=clock)
    await broadcast.command_send_async("speed", factor=600.0)
    await broadcast.command_send_async("pause")
    await commands_arrived(driver, "speed", "pause")
    t0 = driver.engine.now
    clock.now += 1.0
    frame = await driver.step_once()
    assert (driver.speed, driver.paused, driver.engine.now) == (600.0, True, t0)
    assert frame["paused"] is True
    await broadcast.command_send_async("resume")
    await broadcast.command_send_async("speed", factor=-5)  # refused: logged, not applied
    await commands_arrived(driver, "resume", "speed")
    clock.now += 1.0
    await driver.step_once()
    assert driver.engine.now == pytest.approx(t0 + 600.0)
    state = await live_state()
    assert (state.speed, state.paused) == (600.0, False)


async def request_drill(demo_users, **kw):
    return await database_sync_to_async(services.drill_request)(user=demo_users["staff"], **kw)


async def test_a_drill_command_marks_the_drill_applied_with_its_outcome(drivers, demo_users):
    driver = await drivers()
    drill = await request_drill(demo_users, kind="node", target="3", params={})
    await commands_arrived(driver, "drill")
    await driver.step_once()
    await database_sync_to_async(drill.refresh_from_db)()
    assert drill.status == m.DrillStatus.APPLIED
    assert drill.outcome["kind"] == "node" and drill.outcome["target"] == 3
    assert drill.applied_at_sim == pytest.approx(driver.engine.now)
    assert any(e.get("kind") == "drill" for e in live_frame(driver.engine)["events"])


async def test_a_drill_on_a_missing_target_is_refused_and_changes_nothing(drivers, demo_users):
    driver = await drivers()
    await driver.step_once()  # the fake clock stands still: steps only handle t=0 events
    before = live_frame(driver.engine)
    drill = await request_drill(demo_users, kind="node", target=99999, params={})
    await commands_arrived(driver, "drill")
    frame = await driver.step_once()
    await database_sync_to_async(drill.refresh_from_db)()
    assert drill.status == m.DrillStatus.REFUSED
    assert "does not exist" in drill.outcome["error"]
    assert drill.applied_at_sim is None
    assert live_frame(driver.engine) == before
    assert frame["health"] == "ok"


async def test_a_crash_in_a_step_shows_error_restores_the_snapshot_and_carries_on(drivers):
    clock = FakeClock()
    driver = await drivers(speed=100.0, clock=clock)
    clock.now += 10.0
    await driver.step_once()
    await driver.snapshot()
    saved_t = driver.engine.now

    def boom(t_end):
        raise RuntimeError("boom in the core")

    driver.engine.run_until = boom
    clock.now += 10.0
    frame = await driver.step_once()
    assert frame["health"] == "error"
    state = await live_state()
    assert state.health == "error" and "boom in the core" in state.last_error
    assert driver.engine.now == saved_t  # restored from the snapshot
    clock.now += 10.0
    frame = await driver.step_once()
    assert frame["health"] == "ok"
    assert driver.engine.now == pytest.approx(saved_t + 1000.0)


@pytest.mark.parametrize("in_child", [True, False], ids=["forked", "in-thread"])
async def test_a_new_driver_resumes_from_the_snapshot_in_the_same_state(drivers, in_child):
    clock = FakeClock()
    first = await drivers(speed=3600.0, clock=clock, snapshot_in_child=in_child)
    for _ in range(3):
        clock.now += 2.0
        await first.step_once()
    await first.snapshot()
    second = await drivers(clock=FakeClock())
    assert second.engine.now == first.engine.now > 0
    assert (second.seq, second.speed) == (first.seq, 3600.0)
    assert live_frame(second.engine) == live_frame(first.engine)
    for driver in (first, second):
        driver.engine.run_until(driver.engine.now + 6 * 3600.0)
    assert live_frame(second.engine) == live_frame(first.engine)


async def test_run_keeps_pace_when_steps_are_slow_and_stops_with_a_snapshot(drivers):
    """Every step takes 0.12 s of the (fake) wall clock, longer than the 0.05 s frame
    interval: the ticks it overran are skipped and counted, and each step makes up for the
    whole 0.12 s, so simulated time is speed x wall time however slow the machine is."""
    clock = FakeClock()
    driver = await drivers(speed=100.0, clock=clock, frame_interval_s=0.05)
    real_advance = driver._advance

    def slow_advance(advance):
        clock.now += 0.12  # the step's own duration, on the driver's clock
        return real_advance(advance)

    driver._advance = slow_advance
    t0, wall0 = driver.engine.now, clock.now
    task = asyncio.create_task(driver.run())

    await until(lambda: driver.steps >= 6, what="six steps of the running driver")
    driver.request_stop()
    await asyncio.wait_for(task, 60)
    steps = driver.steps
    # the first step covers no wall time (none passed since start); each later one 0.12 s
    assert clock.now - wall0 == pytest.approx(0.12 * steps)
    assert driver.engine.now - t0 == pytest.approx(100.0 * 0.12 * (steps - 1))
    # each 0.12 s step overruns 2.4 frame intervals: one or two ticks skipped per step
    assert steps <= driver.lag_ticks <= 2 * steps
    state = await live_state()
    assert state.health == "stopped" and state.seq == steps + 1  # the last frame, on stop
    assert state.t_sim == pytest.approx(driver.engine.now)
    snaps = await database_sync_to_async(list)(m.EngineSnapshot.objects.all())
    assert len(snaps) == 1 and snaps[0].t_sim == pytest.approx(driver.engine.now)


SAMPLE_PARAMS = {"node": 1, "switch": 0, "link": 0, "rack": 0, "loop": 0, "gpu": 3,
                 "tier": "central", "factor": 0.5}


async def test_every_inventory_command_reaches_the_engine(drivers):
    """One driver takes every command in turn (a driver a command cost 17 dev-small starts)."""
    driver = await drivers()
    missed = {}
    for name in INVENTORY_COMMANDS:
        seen = []
        driver.engine.command = lambda command, seen=seen, **params: seen.append(command)
        params = {k: v for k, v in SAMPLE_PARAMS.items()
                  if k != "factor" or name == "storage_degraded"}
        await driver.command_apply(command_parse({"command": name, "params": params}))
        if seen != [name]:
            missed[name] = seen
    assert len(INVENTORY_COMMANDS) >= 17 and missed == {}, missed
