"""Many dashboards on one process: one subscription to the frames, every socket served.

Frames reach the process in-process (the in-memory layer, one daphne with the engine) or
through the layer's group (Redis in production, the in-memory layer's group here): either way
the process holds one channel in ``twin.frames`` (:mod:`twin.sockets.fanout`), and every
socket gets every frame, in order, once; a socket that does not take its frames delays
nobody; commands on open sockets are still checked against the user as they are now. Served
by ``manage.py serve``, sockets write the frame built once as WebSocket bytes
(:class:`twin.sockets.flow.DirectFrames`); real clients of a real server read it.
"""

import asyncio
import itertools
import json
import random
from unittest.mock import Mock

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader

from bench.live_server import database_prepare, free_port, live_env, serve_start, stop
from bench.ws_client import DashboardClient
from tests import frames
from tests.waiting import until
from tests.web import sockets
from twin.config.asgi import application
from twin.live import broadcast, services
from twin.sockets import consumers
from twin.sockets.flow import scope_with_transport, websocket_text_frame

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
cookie, fan_out, fresh_layer = sockets.cookie, sockets.fan_out, sockets.fresh_layer

SOCKETS = 12


async def connect(cookie):
    comm = WebsocketCommunicator(application, "/ws/twin/", headers=[
        (b"host", b"testserver"), (b"origin", b"http://testserver"),
        (b"cookie", f"sessionid={cookie}".encode())])
    connected, _ = await comm.connect()
    assert connected
    return comm


async def dashboards(cookie, n: int = SOCKETS, name: str = "operator"):
    """``n`` open sockets, each past its snapshot."""
    await database_sync_to_async(services.live_state_write)(
        seq=1, t_sim=60.0, frame=frames.frame(t=60.0), health="ok", last_error="",
        speed=60.0, paused=False)
    comms = [await connect(cookie(name)) for _ in range(n)]
    for comm in comms:
        assert (await comm.receive_json_from(timeout=5))["seq"] == 1
    return comms


async def publish(seq: int) -> str:
    return await broadcast.frame_publish({"t": 60.0 * seq, "health": "ok"}, seq, 60.0 * seq)


def frames_subscribers(layer) -> int:
    """Channels of the in-memory layer in ``twin.frames`` (what a Redis layer subscribes)."""
    return len(layer.groups.get(broadcast.FRAMES_GROUP, {}))


async def test_every_socket_gets_every_frame_in_order_once_through_one_subscription(
        cookie, fan_out):
    comms = await dashboards(cookie)
    layer = get_channel_layer()
    assert frames_subscribers(layer) == (1 if fan_out == "layer group" else 0)
    assert len(broadcast._local_listeners) == (1 if fan_out == "in-process" else 0)
    for seq in range(2, 7):
        text = await publish(seq)
        for comm in comms:  # the very text the publisher encoded, nothing spliced in
            assert await comm.receive_from(timeout=5) == text
    for comm in comms:
        assert await comm.receive_nothing(timeout=0.05)
        await comm.disconnect()
    await until(lambda: frames_subscribers(layer) == 0 and not broadcast._local_listeners,
                what="the fan-out to leave the frames group")


async def test_a_socket_that_does_not_take_its_frames_delays_no_other(
        cookie, fan_out, monkeypatch):
    slow = (await dashboards(cookie, 1, "staff"))[0]
    others = await dashboards(cookie, 4)
    real_send = consumers.TwinConsumer.send
    release = asyncio.Event()

    async def send(self, *args, **kwargs):
        if self.session_key == cookie("staff"):
            await release.wait()
        await real_send(self, *args, **kwargs)

    monkeypatch.setattr(consumers.TwinConsumer, "send", send)
    for seq in range(2, 6):  # the staff socket is stuck sending 2; 3 and 4 are replaced
        await publish(seq)
        for comm in others:
            assert (await comm.receive_json_from(timeout=5))["seq"] == seq
    assert await slow.receive_nothing(timeout=0.05)
    release.set()
    got = [await slow.receive_json_from(timeout=5) for _ in range(2)]
    assert [(m["seq"], m.get("dropped")) for m in got] == [(2, None), (5, 2)]
    for comm in (slow, *others):
        assert await comm.receive_nothing(timeout=0.05)
        await comm.disconnect()


async def test_commands_on_sockets_that_share_the_fan_out_are_checked_as_the_user_is_now(
        cookie, demo_users, fan_out):
    staff = (await dashboards(cookie, 2, "staff"))
    operator = (await dashboards(cookie, 1, "operator"))[0]
    await operator.send_json_to({"type": "pause", "paused": True})
    error = await operator.receive_json_from(timeout=5)
    assert error["type"] == "error" and "run_drill" in error["message"]
    await staff[0].send_json_to({"type": "pause", "paused": True})
    assert (await staff[0].receive_json_from(timeout=5))["type"] == "ack"
    await database_sync_to_async(demo_users["staff"].user_permissions.remove)(
        await database_sync_to_async(Permission.objects.get)(codename="run_drill"))
    await staff[1].send_json_to({"type": "pause", "paused": False})
    assert (await staff[1].receive_json_from(timeout=5))["type"] == "error"
    assert await staff[1].receive_output(timeout=5) == {"type": "websocket.close",
                                                        "code": consumers.CLOSE_FORBIDDEN}
    text = await publish(2)  # the others still stream
    for comm in (staff[0], operator):
        assert await comm.receive_from(timeout=5) == text
        await comm.disconnect()


async def test_when_the_layer_fails_every_socket_closes_and_the_next_ones_stream_again(
        cookie, monkeypatch):
    monkeypatch.setattr(broadcast, "_in_process", lambda layer: False)
    received = broadcast.frame_receive
    broken = asyncio.Event()

    async def receive(layer, channel):
        reading = asyncio.ensure_future(received(layer, channel))
        failing = asyncio.ensure_future(broken.wait())
        done, _ = await asyncio.wait({reading, failing}, return_when=asyncio.FIRST_COMPLETED)
        if failing in done:
            reading.cancel()
            raise ConnectionError("Redis went away")
        failing.cancel()
        return reading.result()

    monkeypatch.setattr(broadcast, "frame_receive", receive)
    comms = await dashboards(cookie, 3)
    broken.set()
    for comm in comms:
        assert await comm.receive_output(timeout=5) == {"type": "websocket.close",
                                                        "code": 1011}
    broken.clear()
    again = await connect(cookie("operator"))
    assert (await again.receive_json_from(timeout=5))["type"] == "snapshot"
    text = await publish(2)
    assert await again.receive_from(timeout=5) == text
    await again.disconnect()


# ----------------------------------------------------------------- frames built once
def frame_read(data: bytes) -> Frame:
    """The one WebSocket frame ``data`` holds, as the ``websockets`` client parses it."""
    reader = StreamReader()
    reader.feed_data(data)
    parser = Frame.parse(reader.read_exact, mask=False)
    with pytest.raises(StopIteration) as done:
        next(parser)
    assert not reader.buffer  # nothing after the frame
    return done.value.value


@pytest.mark.parametrize("size", [10, 125, 126, 65535, 65536, 84000])
async def test_a_built_frame_reads_back_as_the_text_message_it_carries(size):
    text = ("é" * (size // 2) + "x" * (size % 2)).encode()  # size bytes of UTF-8
    got = frame_read(websocket_text_frame(text))
    assert (got.opcode, got.fin, bytes(got.data)) == (Opcode.TEXT, True, text)


@pytest.mark.parametrize("seed", range(4))
async def test_the_benchmarks_client_reads_built_frames_however_they_are_split(seed):
    """``bench.ws_client``, which the figures of ``bench.websocket`` rest on: every message
    once, with its length and head, and a ping answered, whatever the reads' sizes."""
    got, written = [], []
    client = DashboardClient(b"", lambda op, head, n, now: got.append((op, n, head)))
    client.transport = Mock(write=written.append)
    texts = [b"x" * n for n in (0, 5, 125, 126, 300, 65535, 65536, 84000, 0)]
    stream = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
              + b"".join(websocket_text_frame(t) for t in texts) + bytes((0x89, 3)) + b"abc")
    sizes, i = random.Random(seed), 0
    while i < len(stream):
        size = sizes.choice([1, 2, 3, 7, 100, 5000, 70000])
        client.data_received(stream[i:i + size])
        i += size
    assert client.opened.done() and not client.closed.done()
    assert got == [(1, len(t), t[:200]) for t in texts]
    [pong] = written
    assert pong[:2] == bytes((0x8A, 0x83))  # masked, the ping's 3 bytes


class Wire:
    """daphne's protocol of one connection (autobahn's state, as DirectFrames reads it) and
    its transport in one; records what is written to the transport."""

    STATE_OPEN, STATE_CLOSING = 3, 2

    def __init__(self):
        self.state = self.STATE_OPEN
        self.websocket_extensions_in_use = []
        self.send_queue = []
        self.transport = self
        self.producer = None
        self.written = []

    def write(self, data):
        self.written.append(data)

    def registerProducer(self, producer, streaming):  # noqa: N802 (Twisted's name)
        self.producer = producer

    def unregisterProducer(self):  # noqa: N802
        self.producer = None


async def connect_wired(cookie):
    """A socket as ``manage.py serve`` serves it (the scope advertises its protocol), past
    its snapshot, which it wrote built once (the same bytes object for every socket)."""
    wire = Wire()

    async def served(scope, receive, send):
        await application(scope_with_transport(scope, wire, websocket=wire), receive, send)

    comm = WebsocketCommunicator(served, "/ws/twin/", headers=[
        (b"host", b"testserver"), (b"origin", b"http://testserver"),
        (b"cookie", f"sessionid={cookie}".encode())])
    assert (await comm.connect())[0]
    await until(lambda: wire.written, what="the snapshot written")
    [snapshot] = wire.written
    assert snapshot == websocket_text_frame(consumers._snapshot_cache["text"].encode())
    assert json.loads(frame_read(snapshot).data)["type"] == "snapshot"
    wire.written.clear()
    return comm, wire, snapshot


async def test_served_sockets_write_one_built_frame_and_the_others_get_the_text(
        cookie, fan_out):
    plain = (await dashboards(cookie, 1))[0]
    wired = [await connect_wired(cookie("operator")) for _ in range(3)]
    assert wired[1][2] is wired[0][2] and wired[2][2] is wired[0][2]
    wired = [(comm, wire) for comm, wire, _ in wired]
    text = await publish(2)
    assert await plain.receive_from(timeout=5) == text
    await until(lambda: all(len(wire.written) == 1 for _, wire in wired),
                what="frame 2 written to every served socket")
    first = wired[0][1].written[0]
    assert first == websocket_text_frame(text.encode())
    assert all(wire.written[0] is first for _, wire in wired)  # one object for all
    (closing_comm, closing), (deflating_comm, deflating), (open_comm, still_open) = wired
    closing.state = Wire.STATE_CLOSING
    deflating.websocket_extensions_in_use = ["permessage-deflate"]
    text = await publish(3)
    for comm in (plain, closing_comm, deflating_comm):  # autobahn's own path
        assert await comm.receive_from(timeout=5) == text
    await until(lambda: len(still_open.written) == 2, what="frame 3 written")
    assert still_open.written[1] == websocket_text_frame(text.encode())
    assert (len(closing.written), len(deflating.written)) == (1, 1)
    assert await open_comm.receive_nothing(timeout=0.05)
    for comm in (plain, *(c for c, _ in wired)):
        await comm.disconnect()


# ----------------------------------------------------------------- served for real
async def test_real_clients_of_manage_py_serve_get_every_frame_once_and_are_still_checked(
        tmp_path):
    """daphne, the embedded engine and real WebSocket clients: frames built once parse as
    text messages, arrive in order, each once (a gap only where the server says it dropped
    frames), and a command is still refused to a user without the right."""
    from websockets.asyncio.client import connect as ws_connect

    env = live_env(tmp_path / "db.sqlite3", mode="embedded", preset="dev-small",
                   speed=600.0, frame_interval_s=0.2, snapshot_interval_s=3600.0)
    cookie = await asyncio.to_thread(database_prepare, env)
    port = free_port()
    server = await asyncio.to_thread(serve_start, env, port, tmp_path / "serve.log")
    try:
        async def client(commands: bool):
            async with ws_connect(f"ws://127.0.0.1:{port}/ws/twin/",
                                  origin=f"http://127.0.0.1:{port}",
                                  additional_headers={"Cookie": f"sessionid={cookie}"},
                                  open_timeout=60) as ws:
                seen, answers = [], []
                while len(seen) < 8 or (commands and not answers):
                    text = await asyncio.wait_for(ws.recv(), 60)
                    assert isinstance(text, str)  # a text message
                    message = json.loads(text)
                    if message["type"] == "frame":
                        seen.append(message)
                        if commands and len(seen) == 2:
                            await ws.send(json.dumps({"type": "pause", "paused": True}))
                    elif message["type"] == "error":
                        answers.append(message)
                return seen, answers

        results = await asyncio.gather(*(client(i == 0) for i in range(6)))
    finally:
        await asyncio.to_thread(stop, server, timeout=30)
    for seen, _ in results:
        seqs = [m["seq"] for m in seen]
        assert seqs == sorted(set(seqs))
        gaps = sum(b - a - 1 for a, b in itertools.pairwise(seqs))
        assert gaps == sum(m.get("dropped", 0) for m in seen[1:])
    assert "run_drill" in results[0][1][0]["message"]
    log = (tmp_path / "serve.log").read_text()
    assert "encoded per socket" not in log and "Traceback" not in log  # built frames went out
