"""Dashboard sockets against revoked users, floods and clients that do not read.

In process, through ``twin.config.asgi.application`` and ``WebsocketCommunicator``. A client
that does not read is played by :class:`Socket`: it stands in for daphne's protocol of one
connection (and its transport, which ``manage.py serve`` advertises in the scope) and buffers
what the server sends as Twisted does, pausing the consumer (a push producer) past the
64 kB high-water mark; the tests measure that buffer, never the clock (timeouts only guard
against a hang).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission

from tests import frames
from tests.waiting import until
from twin.config.asgi import application
from twin.live import broadcast, services
from twin.sockets import consumers
from twin.sockets import sessions as socket_sessions
from twin.sockets.flow import scope_with_transport
from twin.sockets.sessions import sockets_recheck

pytestmark = [pytest.mark.faults, pytest.mark.asyncio, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("engine_off", "fresh_layer")]

HIGH_WATER = 65_536
"""Twisted's send-buffer mark (``FileDescriptor.bufferSize``)."""


class Socket:
    """One client connection as daphne holds it: what the server sends waits in ``buffered``
    until the client reads; past ``HIGH_WATER`` the registered producer is paused, and it is
    resumed once the client has read it all."""

    def __init__(self, forward):
        self.forward = forward
        self.transport = self  # daphne's protocol and its transport, in one
        self.buffered = 0
        self.most_buffered = 0
        self.producer = None
        self.paused = False
        self.reading = True

    def registerProducer(self, producer, streaming):  # noqa: N802 (Twisted's name)
        assert streaming and self.producer is None
        self.producer = producer

    def unregisterProducer(self):  # noqa: N802
        self.producer = None

    def pauseProducing(self):  # noqa: N802 (the transport stops reading the client)
        self.reading = False

    async def reply(self, message):
        if message["type"] == "websocket.send":
            self.buffered += len(message.get("text") or message.get("bytes") or "")
            self.most_buffered = max(self.most_buffered, self.buffered)
        await self.forward(message)
        if self.buffered > HIGH_WATER and self.producer is not None and not self.paused:
            self.paused = True
            self.producer.pauseProducing()

    def client_reads(self):
        self.buffered = 0
        if self.paused and self.producer is not None:
            self.paused = False
            self.producer.resumeProducing()


async def connect(login=None, *, socket: bool = False, producer=None):
    """A communicator on ``/ws/twin/``; with ``socket``, behind a :class:`Socket` (returned),
    whose transport already has ``producer`` (as daphne's has the HTTP channel)."""
    headers = [(b"host", b"testserver"), (b"origin", b"http://testserver")]
    if login is not None:
        headers.append((b"cookie", f"sessionid={login.cookies['sessionid'].value}".encode()))
    held = []

    async def behind_daphne(scope, receive, send):
        held.append(Socket(send))
        held[0].producer = producer
        # as manage.py serve runs daphne: the scope advertises the socket's transport
        await application(scope_with_transport(scope, held[0]), receive, held[0].reply)

    comm = WebsocketCommunicator(behind_daphne if socket else application, "/ws/twin/",
                                 headers=headers)
    connected, _ = await comm.connect()
    assert connected
    return (comm, held[0]) if socket else comm


def frame(t, pad: int = 0):
    body = {"t": t, "util": {"gpus": 96, "allocated": 40}, "health": "ok"}
    if pad:
        body["pad"] = "x" * pad
    return body


async def live_state(seq, t, pad: int = 0):
    await database_sync_to_async(services.live_state_write)(
        seq=seq, t_sim=t, frame=frames.frame(
            t=t, util={"gpus": 96, "allocated": 40},
            # a big frame: one long event line (the schema has no room for padding)
            events=[{"t": t, "kind": "note", "text": "x" * pad}] if pad else []),
        health="ok",
        last_error="", speed=60.0, paused=False)


async def publish(seq, pad: int = 0):
    return await broadcast.frame_publish(frame(60.0 * seq, pad), seq, 60.0 * seq)


async def engine_inbox():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(broadcast.ENGINE_GROUP, channel)
    return layer, channel


async def nothing_reached(layer, channel) -> bool:
    try:
        await asyncio.wait_for(layer.receive(channel), 0.3)
    except TimeoutError:
        return True
    return False


def queued_bytes(comm) -> int:
    """Bytes of text the server has written to the communicator and the client not read."""
    return sum(len(m.get("text") or "") for m in list(comm.output_queue._queue))


# ----------------------------------------------------------------- revocation
@database_sync_to_async
def revoke(how: str, user, login) -> None:
    if how == "logs out":
        login.logout()
    elif how == "is deactivated":
        user.is_active = False
        user.save()
    elif how == "changes password":
        user.set_password("another-pass-456")
        user.save()
    elif how == "loses run_drill":
        user.user_permissions.remove(Permission.objects.get(codename="run_drill"))
    elif how == "loses staff":
        user.is_staff = False
        user.save()


REVOCATIONS = [("logs out", consumers.CLOSE_UNAUTHENTICATED),
               ("is deactivated", consumers.CLOSE_UNAUTHENTICATED),
               ("changes password", consumers.CLOSE_UNAUTHENTICATED),
               ("loses run_drill", consumers.CLOSE_FORBIDDEN),
               ("loses staff", consumers.CLOSE_FORBIDDEN)]


@pytest.mark.parametrize("how, code", REVOCATIONS)
async def test_the_recheck_closes_a_socket_whose_user_lost_the_session_or_a_right(
        demo_users, logins, how, code):
    await live_state(1, 60.0)
    login = logins("staff")
    comm = await connect(login)
    assert (await comm.receive_json_from())["type"] == "snapshot"
    await sockets_recheck()  # nothing changed: the socket stays and frames flow
    await publish(2)
    assert (await comm.receive_json_from())["seq"] == 2
    await revoke(how, demo_users["staff"], login)
    await sockets_recheck()
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": code}
    await publish(3)
    assert await comm.receive_nothing()


@pytest.mark.parametrize("how, code", REVOCATIONS)
async def test_a_command_after_revocation_changes_nothing_and_closes_the_socket(
        demo_users, logins, how, code):
    layer, channel = await engine_inbox()
    login = logins("staff")
    comm = await connect(login)
    await comm.receive_json_from()
    await revoke(how, demo_users["staff"], login)
    await comm.send_json_to({"type": "pause", "paused": True})
    assert (await comm.receive_json_from())["type"] == "error"
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": code}
    assert await nothing_reached(layer, channel)


async def test_the_periodic_recheck_runs_by_itself(demo_users, logins, settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "WS_RECHECK_S": 0.05}
    login = logins("operator")
    comm = await connect(login)
    await comm.receive_json_from()
    await revoke("logs out", demo_users["operator"], login)
    assert await comm.receive_output(timeout=10) == {
        "type": "websocket.close", "code": consumers.CLOSE_UNAUTHENTICATED}


async def test_a_session_of_a_deactivated_user_is_refused_on_connect(demo_users, logins):
    login = logins("operator")
    await revoke("is deactivated", demo_users["operator"], login)
    comm = await connect(login)
    assert await comm.receive_output(timeout=5) == {
        "type": "websocket.close", "code": consumers.CLOSE_UNAUTHENTICATED}


# ----------------------------------------------------------------- floods
@pytest.mark.parametrize("pace", ["all at once", "one by one"])
async def test_a_client_that_floods_messages_is_closed_with_4429_and_no_longer_read(
        demo_users, logins, settings, pace):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "WS_MESSAGES_PER_S": 1.0,
                            "WS_MESSAGE_BURST": 5}
    comm, socket = await connect(logins("operator"), socket=True)
    await comm.receive_json_from()
    outputs = []
    for _ in range(50):
        await comm.send_json_to({"type": "resync"})
        if pace == "one by one":  # answered before the next: no backlog, the rate says it
            outputs.append(await comm.receive_output(timeout=5))
            if outputs[-1]["type"] == "websocket.close":
                break
    while not outputs or outputs[-1]["type"] != "websocket.close":
        outputs.append(await comm.receive_output(timeout=5))
    assert outputs[-1]["code"] == consumers.CLOSE_TOO_MANY_MESSAGES
    assert len(outputs) - 1 < 50  # not every message was answered
    assert not socket.reading  # what it still sends is not read (and not queued)


async def test_a_client_that_reads_nothing_is_closed_and_its_frames_wait_in_one_slot(
        demo_users, logins, settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "WS_STALLED_FRAMES": 10}
    await live_state(1, 60.0, pad=20_000)
    comm, socket = await connect(logins("operator"), socket=True)
    outputs = [await comm.receive_output(timeout=5)]  # the test sees it; the client reads nothing
    assert '"snapshot"' in outputs[0]["text"] and socket.producer is not None
    for seq in range(2, 300):
        sent = socket.buffered
        await publish(seq, pad=20_000)
        await asyncio.sleep(0)  # sleep-ok: the sender's turn, even when nothing is to be seen
        # the consumer has dealt with the frame: sent it, holds it (paused), or closed
        await until(lambda sent=sent: socket.buffered > sent or socket.paused
                    or socket.producer is None,
                    what=f"frame {seq} sent, held or refused")
        if socket.producer is None:  # closed: the consumer let go of the transport
            break
    while outputs[-1]["type"] != "websocket.close":
        outputs.append(await comm.receive_output(timeout=5))
    assert outputs[-1]["code"] == consumers.CLOSE_SLOW_READER
    # the server never held more than its high-water mark and one frame for this client
    assert socket.most_buffered <= HIGH_WATER + 21_000
    assert len(outputs) < 10


async def test_a_client_that_floods_resync_without_reading_is_closed_before_its_queue_grows(
        demo_users, logins, settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "WS_MESSAGES_PER_S": 1000.0,
                            "WS_MESSAGE_BURST": 1000, "WS_MAX_QUEUED_BYTES": 200_000}
    await live_state(1, 60.0, pad=20_000)
    comm, socket = await connect(logins("operator"), socket=True)
    for _ in range(300):
        await comm.send_json_to({"type": "resync"})
    snapshots = 0
    while True:
        out = await comm.receive_output(timeout=5)
        if out["type"] == "websocket.close":
            break
        snapshots += 1
    assert out["code"] == consumers.CLOSE_SLOW_READER
    assert socket.most_buffered <= HIGH_WATER + 200_000 + 2 * 21_000
    assert snapshots < 300
    assert not socket.reading


async def test_a_slow_reader_gets_the_newest_frame_and_the_drop_count_when_it_catches_up(
        demo_users, logins):
    await live_state(1, 60.0, pad=70_000)
    comm, socket = await connect(logins("operator"), socket=True)
    assert (await comm.receive_json_from())["seq"] == 1
    assert socket.paused  # the snapshot alone filled the send buffer
    for seq in range(2, 8):
        await publish(seq)
        await asyncio.sleep(0)  # sleep-ok: one turn for the sender, which must hold them
    assert await comm.receive_nothing()  # held while the client is behind
    socket.client_reads()
    got = await comm.receive_json_from()
    assert (got["seq"], got["dropped"]) == (7, 5)
    assert queued_bytes(comm) == 0
    await comm.disconnect()


class HttpChannel:
    """The producer daphne's transport has after the upgrade: Twisted's HTTP channel."""

    def __init__(self):
        self.calls = []

    def pauseProducing(self):  # noqa: N802
        self.calls.append("pause")

    def resumeProducing(self):  # noqa: N802
        self.calls.append("resume")


async def test_the_transports_own_producer_is_kept_informed_and_given_back(demo_users, logins):
    channel = HttpChannel()
    await live_state(1, 60.0, pad=70_000)
    comm, socket = await connect(logins("operator"), socket=True, producer=channel)
    await comm.receive_json_from()
    assert socket.producer is not channel and socket.paused
    socket.client_reads()
    assert channel.calls == ["pause", "resume"]
    await comm.disconnect()
    assert socket.producer is channel


# ----------------------------------------------------------------- seq
async def test_a_frame_whose_seq_jumps_absurdly_is_not_sent_and_does_not_freeze_the_socket(
        demo_users, logins):
    await live_state(1, 60.0)
    comm = await connect(logins("operator"))
    assert (await comm.receive_json_from())["seq"] == 1
    await publish(10**15)
    assert await comm.receive_nothing()
    await publish(2)
    assert (await comm.receive_json_from())["seq"] == 2
    await sockets_recheck()  # the database does not confirm the jump: nothing more is sent
    assert await comm.receive_nothing()
    await comm.disconnect()


async def test_a_jump_the_database_confirms_heals_with_a_snapshot_at_the_next_recheck(
        demo_users, logins):
    await live_state(1, 60.0)
    comm = await connect(logins("operator"))
    await comm.receive_json_from()
    await live_state(50_000, 3_000_000.0)  # e.g. the layer was down for hours
    await publish(50_000)
    assert await comm.receive_nothing()
    await sockets_recheck()
    snap = await comm.receive_json_from()
    assert (snap["type"], snap["seq"]) == ("snapshot", 50_000)
    await publish(50_001)
    assert (await comm.receive_json_from())["seq"] == 50_001
    await comm.disconnect()


async def test_sockets_connecting_together_share_their_session_checks(
        demo_users, logins, monkeypatch):
    """What keeps a thousand simultaneous connects cheap: one trip to the database checks the
    sessions of all the sockets that connect together."""
    checked = []
    real = socket_sessions.sessions_rights

    def counted(keys):
        checked.append(sorted(keys))
        return real(keys)

    monkeypatch.setattr(socket_sessions, "sessions_rights", counted)
    logins_ = [logins("operator"), logins("staff"), logins("admin")]
    comms = await asyncio.gather(*(connect(logins_[i % 3]) for i in range(30)))
    for comm in comms:
        assert json.loads(await comm.receive_from())["type"] == "snapshot"
    assert len(checked) <= 2  # a batch, and perhaps the stragglers of the same turn
    assert sum(len(keys) for keys in checked) == 3
    for comm in comms:
        await comm.disconnect()
