"""Redis between the processes of an instance: what anyone who reaches it can and cannot do.

Forged messages are published with redis-py straight to the channels the layer uses (found
with ``PUBSUB CHANNELS``, as an intruder would); the dashboards and the engine must ignore
them. Two instances on one server stay apart. A private ``redis-server`` with a password and
TLS shows the layer works with both.

Needs a Redis server at ``REDIS_TEST_URL``; skipped without it. Timeouts only guard against a
hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
import uuid

import msgpack
import pytest
import pytest_asyncio
import redis
import redis.asyncio
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.test import Client

from bench.live_server import free_port, redis_reachable
from tests import frames
from twin.config import demo as config_demo
from twin.config.asgi import application
from twin.live import broadcast
from twin.live import services as live_services
from twin.live.driver import EngineDriver

REDIS_URL = os.environ.get("REDIS_TEST_URL")

pytestmark = [
    pytest.mark.faults,
    pytest.mark.redis,
    pytest.mark.asyncio,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not redis_reachable(REDIS_URL), reason="no Redis at REDIS_TEST_URL"),
    pytest.mark.usefixtures("engine_off"),
]

BACKEND = "channels_redis.pubsub.RedisPubSubChannelLayer"


def with_db(url: str, number: int) -> str:
    return url.rsplit("/", 1)[0] + f"/{number}" if url.count("/") > 2 else f"{url}/{number}"


def prefix_for(url: str) -> str:
    """The default prefix of an instance of its own (a database no other test run uses)."""
    return broadcast.channel_prefix(f"test-{uuid.uuid4().hex}", url)


@pytest_asyncio.fixture
async def instance(settings):
    """This test's instance: the Redis layer at ``REDIS_TEST_URL`` with the prefix it derives."""
    prefix = prefix_for(REDIS_URL)
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": BACKEND,
                                           "CONFIG": {"hosts": [REDIS_URL], "prefix": prefix}}}
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "CHANNEL_PREFIX": prefix}
    yield prefix
    await get_channel_layer().flush()


@pytest_asyncio.fixture
async def intruder():
    """redis-py on the same server, publishing what it likes."""
    client = redis.asyncio.Redis.from_url(REDIS_URL)
    yield client
    await client.aclose()


@pytest.fixture
def cookies(db):
    config_demo.demo_accounts_seed(password="demo-pass-123")
    from django.contrib.auth import get_user_model
    found = {}
    for user in get_user_model().objects.all():
        client = Client()
        client.force_login(user)
        found[user.username] = client.cookies["sessionid"].value
    return found


async def connect(cookie):
    comm = WebsocketCommunicator(application, "/ws/twin/", headers=[
        (b"host", b"testserver"), (b"origin", b"http://testserver"),
        (b"cookie", f"sessionid={cookie}".encode())])
    connected, _ = await comm.connect()
    assert connected
    return comm


async def live_state(seq, t):
    await database_sync_to_async(live_services.live_state_write)(
        seq=seq, t_sim=t, frame=frames.frame(t=t),
        health="ok", last_error="", speed=60.0, paused=False)


async def channels_of(client, prefix: str, part: str, count: int = 1) -> list[str]:
    """The layer's channels named ``prefix...part...`` (once the subscriptions are made)."""
    end = time.monotonic() + 10
    while True:
        found = sorted(c.decode() for c in await client.pubsub_channels(f"{prefix}*{part}*"))
        if len(found) >= count or time.monotonic() > end:
            return found
        await asyncio.sleep(0.02)


async def subscribed(client, prefix: str, group: str) -> None:
    """Once the layer at ``prefix`` has subscribed to ``group`` (made after a handshake)."""
    found = await channels_of(client, prefix, "__group__" + group)
    assert found, f"no subscription to {group!r} under {prefix!r} within 10 s"


class Inbox:
    """The engine's side of ``twin.engine`` on ``layer``: what ``command_receive`` lets in.

    One receiver for the inbox's life (channels-redis forgets a channel whose receive is
    cancelled, and with it what arrives meanwhile).
    """

    def __init__(self, layer):
        self.layer = layer
        self.got: list[dict] = []

    async def open(self) -> Inbox:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(broadcast.ENGINE_GROUP, self.channel)
        self.task = asyncio.create_task(self._receive())
        return self

    async def _receive(self):
        while True:
            command = await broadcast.command_receive(self.layer, self.channel)
            self.got.append(command)  # to the list of the moment (commands() replaces it)

    async def commands(self, quiet_s: float = 0.5) -> list[str]:
        """The commands received once nothing more came for ``quiet_s``, and forget them."""
        seen = -1
        while seen != len(self.got):
            seen = len(self.got)
            await asyncio.sleep(quiet_s)
        got, self.got = self.got, []
        return got

    async def close(self):
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def forged_frame(seq: int, sign=None) -> dict:
    """A frame as the layer carries it, claiming ``seq``; ``sign(payload)`` its signature."""
    text = json.dumps({"type": "frame", "seq": seq, "t": 1e12, "sent_at": time.time(),
                       "health": "forged"})
    message = {"type": broadcast.FRAME_EVENT, "text": text, "seq": seq}
    if sign is not None:
        message["sig"] = sign(f"{seq}:{text}")
    return message


# ----------------------------------------------------------------- frames
async def test_signed_frames_cross_redis_to_the_dashboards(instance, cookies, intruder):
    await live_state(1, 60.0)
    comm = await connect(cookies["operator"])
    assert (await comm.receive_json_from(timeout=5))["seq"] == 1
    await subscribed(intruder, instance, broadcast.FRAMES_GROUP)
    await broadcast.frame_publish({"t": 120.0}, 2, 120.0)
    assert (await comm.receive_json_from(timeout=5))["seq"] == 2
    await comm.disconnect()


@pytest.mark.parametrize("seq", [2, 2**62], ids=["the next seq", "a huge seq"])
@pytest.mark.parametrize("signature", ["unsigned", "bad", "another instance's", "not msgpack"])
async def test_a_forged_frame_is_ignored_and_freezes_nobody(
        instance, cookies, intruder, signature, seq):
    await live_state(1, 60.0)
    comm = await connect(cookies["operator"])
    assert (await comm.receive_json_from(timeout=5))["seq"] == 1
    [group] = await channels_of(intruder, instance, "__group__" + broadcast.FRAMES_GROUP)
    other = RedisPubSubChannelLayer(hosts=[REDIS_URL], prefix=prefix_for(REDIS_URL))
    payload = {
        "unsigned": lambda: msgpack.packb(forged_frame(seq)),
        "bad": lambda: msgpack.packb(forged_frame(seq, lambda _: "0" * 64)),
        "another instance's": lambda: msgpack.packb(forged_frame(
            seq, lambda part: broadcast._signature("frame", other, part))),
        "not msgpack": lambda: b"\xc1\xc1 not msgpack",
    }[signature]()
    assert await intruder.publish(group, payload) >= 1
    await broadcast.frame_publish({"t": 120.0, "health": "ok"}, 2, 120.0)
    got = await comm.receive_json_from(timeout=5)
    assert (got["type"], got["seq"], got["health"]) == ("frame", 2, "ok")
    await broadcast.frame_publish({"t": 180.0}, 3, 180.0)
    assert (await comm.receive_json_from(timeout=5))["seq"] == 3
    await comm.disconnect()
    await other.flush()


async def test_a_forged_client_message_on_a_socket_channel_steers_nothing(
        instance, cookies, intruder):
    inbox = await Inbox(get_channel_layer()).open()
    comm = await connect(cookies["staff"])
    await comm.receive_json_from(timeout=5)
    [socket_channel] = [c for c in await channels_of(intruder, instance, "specific", 2)
                        if c != inbox.channel]
    forged = {"type": "websocket.receive", "text": json.dumps({"type": "pause", "paused": True})}
    assert await intruder.publish(socket_channel, msgpack.packb(forged)) == 1
    assert await inbox.commands() == []
    await comm.send_json_to({"type": "pause", "paused": True})  # the staff user may
    assert (await comm.receive_json_from(timeout=5))["type"] == "ack"
    assert [c["command"] for c in await inbox.commands()] == ["pause"]
    await comm.disconnect()
    await inbox.close()


# ----------------------------------------------------------------- commands
async def test_forged_stale_and_replayed_commands_do_not_reach_the_engine(instance, intruder):
    layer = get_channel_layer()
    inbox = await Inbox(layer).open()
    [group] = await channels_of(intruder, instance, "__group__" + broadcast.ENGINE_GROUP)
    listener = intruder.pubsub()
    await listener.subscribe(group)
    await broadcast.command_send_async("speed", factor=2.0)
    captured = None
    while captured is None:
        captured = await listener.get_message(ignore_subscribe_messages=True, timeout=5)
    await listener.aclose()
    other = RedisPubSubChannelLayer(hosts=[REDIS_URL], prefix=prefix_for(REDIS_URL))
    stale = broadcast.command_message("pause", layer=layer)
    stale["issued"] -= 3600
    stale["sig"] = broadcast._signature("command", layer, broadcast._canonical(
        {k: stale[k] for k in ("command", "params", "issued", "nonce")}))
    for forged in (
        msgpack.packb({"type": broadcast.COMMAND_EVENT, "command": "pause", "params": {}}),
        msgpack.packb({**broadcast.command_message("pause", layer=layer), "command": "pause",
                       "params": {"x": 1}}),
        msgpack.packb(broadcast.command_message("pause", layer=other)),
        msgpack.packb(stale),
        captured["data"],  # a replay of the speed command
        b"\x00 not msgpack",
    ):
        await intruder.publish(group, forged)
    await broadcast.command_send_async("resume")
    got = await inbox.commands()
    assert [(c["command"], c["params"]) for c in got] == [("speed", {"factor": 2.0}),
                                                          ("resume", {})]
    await inbox.close()
    await other.flush()


async def test_a_forged_command_does_not_pause_the_engine(instance, intruder):
    """The engine driver takes its commands through ``broadcast.command_receive``."""
    driver = EngineDriver(preset="dev-small", speed=60.0, snapshot_in_child=False)
    await driver.start()
    try:
        [group] = await channels_of(intruder, instance, "__group__" + broadcast.ENGINE_GROUP)
        await intruder.publish(group, msgpack.packb(
            {"type": broadcast.COMMAND_EVENT, "command": "pause", "params": {}}))
        await broadcast.command_send_async("speed", factor=120.0)
        end = time.monotonic() + 10
        while not any(m.get("command") == "speed" for m in driver.commands.inbox):
            assert time.monotonic() < end, "the signed command never arrived"
            await asyncio.sleep(0.02)
        await driver.step_once()
        assert (driver.speed, driver.paused) == (120.0, False)
    finally:
        await driver.close(snapshot=False)


# ----------------------------------------------------------------- two instances
async def test_two_instances_on_one_redis_do_not_see_each_others_frames_or_commands(
        instance, cookies, settings, intruder):
    await live_state(1, 60.0)
    mine = get_channel_layer()
    other_url = with_db(REDIS_URL, 1)
    other_prefix = prefix_for(other_url)
    other = RedisPubSubChannelLayer(hosts=[other_url], prefix=other_prefix)
    comm = await connect(cookies["operator"])
    await comm.receive_json_from(timeout=5)
    my_inbox, other_inbox = await Inbox(mine).open(), await Inbox(other).open()
    await subscribed(intruder, instance, broadcast.FRAMES_GROUP)
    await subscribed(intruder, instance, broadcast.ENGINE_GROUP)
    await subscribed(intruder, other_prefix, broadcast.ENGINE_GROUP)
    await broadcast.frame_publish({"t": 600.0}, 10, 600.0, layer=other)
    await broadcast.command_send_async("pause", layer=other)
    assert await comm.receive_nothing(timeout=0.5)
    assert await my_inbox.commands() == []
    assert [c["command"] for c in await other_inbox.commands()] == ["pause"]
    await broadcast.frame_publish({"t": 120.0}, 2, 120.0, layer=mine)
    assert (await comm.receive_json_from(timeout=5))["seq"] == 2
    await comm.disconnect()
    await my_inbox.close()
    await other_inbox.close()
    await other.flush()


async def test_without_their_own_prefixes_two_redis_databases_would_share_messages(instance):
    """Why the prefix: Redis pub/sub ignores the database number."""
    prefix = prefix_for(REDIS_URL)
    on_0 = RedisPubSubChannelLayer(hosts=[with_db(REDIS_URL, 0)], prefix=prefix)
    on_1 = RedisPubSubChannelLayer(hosts=[with_db(REDIS_URL, 1)], prefix=prefix)
    inbox = await Inbox(on_1).open()
    await broadcast.command_send_async("pause", layer=on_0)
    assert [c["command"] for c in await inbox.commands()] == ["pause"]
    await inbox.close()
    assert broadcast.channel_prefix("twin", with_db(REDIS_URL, 0)) != \
        broadcast.channel_prefix("twin", with_db(REDIS_URL, 1))
    await on_0.flush()
    await on_1.flush()


# ----------------------------------------------------------------- password and TLS
@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of this test's own, with a password, on TLS (self-signed certificate)."""
    if not (shutil.which("redis-server") and shutil.which("openssl")):
        pytest.skip("needs redis-server and openssl")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", tmp_path / "key.pem", "-out", tmp_path / "cert.pem"],
                   check=True, capture_output=True)
    port, password = free_port(), uuid.uuid4().hex
    proc = subprocess.Popen(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--save", "",
         "--appendonly", "no", "--requirepass", password, "--tls-auth-clients", "no",
         "--tls-cert-file", tmp_path / "cert.pem", "--tls-key-file", tmp_path / "key.pem",
         "--tls-ca-cert-file", tmp_path / "cert.pem"],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"rediss://:{password}@127.0.0.1:{port}/0?ssl_ca_certs={tmp_path / 'cert.pem'}"
    end = time.monotonic() + 10
    while not redis_reachable(url):
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            pytest.skip("redis-server did not start with TLS")
        time.sleep(0.05)
    yield url, password
    proc.terminate()
    proc.wait(10)


async def test_the_layer_works_over_tls_with_a_password_and_not_without_it(
        private_redis, settings, cookies):
    url, password = private_redis
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": BACKEND,
                                           "CONFIG": {"hosts": [url], "prefix": "ct.tls."}}}
    await live_state(1, 60.0)
    comm = await connect(cookies["operator"])
    assert (await comm.receive_json_from(timeout=5))["seq"] == 1
    watcher = redis.asyncio.Redis.from_url(url)
    try:
        await subscribed(watcher, "ct.tls.", broadcast.FRAMES_GROUP)
    finally:
        await watcher.aclose()
    await broadcast.frame_publish({"t": 120.0}, 2, 120.0)
    assert (await comm.receive_json_from(timeout=5))["seq"] == 2
    await comm.disconnect()
    await get_channel_layer().flush()
    plain = url.split("?")[0].replace("rediss://", "redis://")
    for refused in (url.replace(f":{password}@", "@"), plain):
        with pytest.raises(redis.exceptions.ConnectionError):
            await redis.asyncio.Redis.from_url(refused, socket_connect_timeout=2,
                                              socket_timeout=2).ping()
