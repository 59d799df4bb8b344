"""``/ws/twin/``: who may connect, snapshot then frames in order, resync, client messages."""

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from tests import frames
from tests.waiting import until
from tests.web import sockets
from twin.config.asgi import application
from twin.live import broadcast, services
from twin.sockets import consumers

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
cookie, fan_out, fresh_layer = sockets.cookie, sockets.fan_out, sockets.fresh_layer


async def connect(cookie=None, origin="http://testserver"):
    headers = [(b"host", b"testserver"), (b"origin", origin.encode())]
    if cookie:
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    comm = WebsocketCommunicator(application, "/ws/twin/", headers=headers)
    connected, code = await comm.connect()
    return comm, connected, code


def frame(t):
    return {"t": t, "util": {"gpus": 96, "allocated": 40}, "health": "ok"}


async def live_state(seq, t):
    await database_sync_to_async(services.live_state_write)(
        seq=seq, t_sim=t, frame=frames.frame(t=t, util={"gpus": 96, "allocated": 40}), health="ok",
        last_error="", speed=60.0, paused=False)


async def test_anonymous_users_are_closed_with_4401_and_told_nothing():
    await live_state(3, 180.0)
    comm, connected, _ = await connect()
    assert connected
    await comm.send_json_to({"type": "resync"})
    assert await comm.receive_output() == {"type": "websocket.close", "code": 4401}
    await broadcast.frame_publish(frame(240.0), 4, 240.0)
    assert await comm.receive_nothing()


async def test_open_sockets_are_counted_for_metrics(cookie):
    before = consumers.stream_metrics()["connections"]
    comm, _, _ = await connect(cookie("operator"))
    await comm.receive_json_from()
    assert consumers.stream_metrics()["connections"] == before + 1
    await comm.disconnect()
    assert consumers.stream_metrics()["connections"] == before


async def test_a_foreign_origin_is_refused(cookie):
    comm, connected, _ = await connect(cookie("operator"), origin="http://evil.example")
    assert not connected


async def test_before_the_engine_ran_the_snapshot_is_pending(cookie):
    comm, connected, _ = await connect(cookie("operator"))
    assert connected
    assert await comm.receive_json_from() == {"type": "snapshot", "seq": 0, "pending": True}
    await comm.disconnect()


async def test_snapshot_on_connect_then_frames_with_increasing_seq(cookie, fan_out):
    await live_state(3, 180.0)
    comm, _, _ = await connect(cookie("operator"))
    snap = await comm.receive_json_from()
    assert snap["type"] == "snapshot" and snap["seq"] == 3 and snap["t"] == 180.0
    assert snap["util"]["gpus"] == 96
    await broadcast.frame_publish(frame(200.0), 2, 200.0)  # older than the snapshot: skipped
    for seq in (4, 5):
        await broadcast.frame_publish(frame(60.0 * seq), seq, 60.0 * seq)
        got = await comm.receive_json_from()
        assert (got["type"], got["seq"], got["t"]) == ("frame", seq, 60.0 * seq)
        assert "sent_at" in got and "dropped" not in got
    assert await comm.receive_nothing()
    await comm.disconnect()


async def test_a_client_that_sees_a_gap_resyncs_and_gets_a_fresh_snapshot(cookie, fan_out):
    await live_state(1, 60.0)
    comm, _, _ = await connect(cookie("operator"))
    assert (await comm.receive_json_from())["seq"] == 1
    await broadcast.frame_publish(frame(120.0), 2, 120.0)
    assert (await comm.receive_json_from())["seq"] == 2
    await live_state(7, 420.0)
    await broadcast.frame_publish(frame(420.0), 7, 420.0)
    got = await comm.receive_json_from()
    assert got["seq"] == 7  # 3..6 never arrived: ask for the full state
    await comm.send_json_to({"type": "resync"})
    snap = await comm.receive_json_from()
    assert snap["type"] == "snapshot" and snap["seq"] == 7 and snap["t"] == 420.0
    await comm.disconnect()


@pytest.mark.parametrize("text, says", [
    ('{"type": "hello"}', "unknown message type"),
    ("not json", "not valid JSON"),
    ("[1, 2]", '"type"'),
    ('{"type": "resync", "pad": "%s"}' % ("x" * 2000), "too big"),
    ("[" * 1000, "levels deep"),  # past the parser's recursion limit, were it parsed
])
async def test_bad_client_messages_get_an_error_and_the_socket_stays_open(cookie, text, says):
    comm, _, _ = await connect(cookie("operator"))
    await comm.receive_json_from()
    await comm.send_to(text_data=text)
    error = await comm.receive_json_from()
    assert error["type"] == "error" and says in error["message"]
    await comm.send_json_to({"type": "resync"})
    assert (await comm.receive_json_from())["type"] == "snapshot"
    await comm.disconnect()


async def test_binary_messages_are_refused(cookie):
    comm, _, _ = await connect(cookie("operator"))
    await comm.receive_json_from()
    await comm.send_to(bytes_data=b"\x00\x01")
    assert (await comm.receive_json_from())["type"] == "error"
    await comm.disconnect()


async def engine_inbox():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(broadcast.ENGINE_GROUP, channel)
    return layer, channel


async def test_an_operator_cannot_change_the_speed_nor_pause(cookie):
    layer, channel = await engine_inbox()
    comm, _, _ = await connect(cookie("operator"))
    await comm.receive_json_from()
    for message in ({"type": "speed", "factor": 600}, {"type": "pause", "paused": True}):
        await comm.send_json_to(message)
        error = await comm.receive_json_from()
        assert error["type"] == "error" and "run_drill" in error["message"]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), 0.2)
    await comm.disconnect()


async def test_staff_change_the_speed_and_pause_through_the_engine_group(cookie):
    layer, channel = await engine_inbox()
    comm, _, _ = await connect(cookie("staff"))
    await comm.receive_json_from()
    await comm.send_json_to({"type": "speed", "factor": 600})
    assert await comm.receive_json_from() == {"type": "ack", "of": "speed", "factor": 600.0}
    message = broadcast.command_verify(await asyncio.wait_for(layer.receive(channel), 1),
                                       layer=layer)
    assert message == {"type": "engine.command", "command": "speed",
                       "params": {"factor": 600.0}}
    await comm.send_json_to({"type": "pause", "paused": True})
    assert (await comm.receive_json_from())["paused"] is True
    assert (await asyncio.wait_for(layer.receive(channel), 1))["command"] == "pause"
    await comm.disconnect()


async def test_while_the_server_stops_staff_speed_and_pause_are_refused_and_sent_nowhere(
        cookie):
    from twin.live import stopping
    layer, channel = await engine_inbox()
    comm, _, _ = await connect(cookie("staff"))
    await comm.receive_json_from()
    stopping.stopping_begin()
    try:
        for message in ({"type": "speed", "factor": 600}, {"type": "pause", "paused": True}):
            await comm.send_json_to(message)
            error = await comm.receive_json_from()
            assert error["type"] == "error" and "stopping" in error["message"], error
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(layer.receive(channel), 0.2)
    finally:
        stopping.stopping_end()
    await comm.disconnect()


@pytest.mark.parametrize("message", [
    {"type": "speed", "factor": "fast"}, {"type": "speed", "factor": 0},
    {"type": "speed", "factor": 1e6}, {"type": "speed", "factor": True},
    {"type": "pause", "paused": "yes"},
])
async def test_staff_messages_with_bad_values_are_refused(cookie, message):
    layer, channel = await engine_inbox()
    comm, _, _ = await connect(cookie("staff"))
    await comm.receive_json_from()
    await comm.send_json_to(message)
    assert (await comm.receive_json_from())["type"] == "error"
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), 0.1)
    await comm.disconnect()


async def test_a_slow_client_gets_the_newest_frame_and_the_drop_count_never_a_backlog(
        cookie, monkeypatch, fan_out):
    await live_state(1, 60.0)
    comm, _, _ = await connect(cookie("operator"))
    assert (await comm.receive_json_from())["seq"] == 1
    real_send = consumers.TwinConsumer.send
    sending, delivered = asyncio.Event(), asyncio.Event()

    async def slow_send(self, *args, **kwargs):  # the client reads once the test says so
        sending.set()
        await delivered.wait()
        await real_send(self, *args, **kwargs)

    monkeypatch.setattr(consumers.TwinConsumer, "send", slow_send)
    dropped_before = consumers.stream_metrics()["frames_dropped"]

    def dropped():
        return consumers.stream_metrics()["frames_dropped"] - dropped_before

    await broadcast.frame_publish(frame(120.0), 2, 120.0)
    await until(sending.is_set, what="frame 2 being sent")
    for seq in range(3, 8):
        await broadcast.frame_publish(frame(60.0 * seq), seq, 60.0 * seq)
    # 3 waits in the slot, 4..7 replace it in turn: four drops, then the client catches up
    await until(lambda: dropped() >= 4, what=lambda: f"4 frames dropped (so far {dropped()})")
    delivered.set()
    first = await comm.receive_json_from(timeout=10)
    last = await comm.receive_json_from(timeout=10)
    assert first["seq"] == 2 and "dropped" not in first
    assert last["seq"] == 7 and last["dropped"] == 4  # 3..6 replaced while 2 was sending
    assert await comm.receive_nothing(timeout=0.5)
    assert dropped() == 4
    await comm.disconnect()


async def test_frames_are_encoded_once_for_every_client(cookie, fan_out):
    await live_state(1, 60.0)
    comms = []
    for name in ("operator", "staff"):
        comm, _, _ = await connect(cookie(name))
        await comm.receive_json_from()
        comms.append(comm)
    text = await broadcast.frame_publish(frame(120.0), 2, 120.0)
    for comm in comms:
        assert await comm.receive_from() == text
        await comm.disconnect()
    assert json.loads(text)["seq"] == 2
