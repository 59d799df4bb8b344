"""``/ws/twin/``: the live dashboard's WebSocket. Transport only.

Authenticated users join the ``twin.frames`` group and get a full snapshot, then frames. Frames
are never queued per client: each consumer holds at most one pending frame and sends it when
its previous send has finished, so a slow client skips frames (and is told how many, in a
``dropped`` field) instead of building a backlog. Clients may only send the allow-listed
messages below, and those go to services, never back out to other clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import PermissionDenied, ValidationError

from twin import broadcast, selectors, services
from twin.driver import driver_ensure_started

CLOSE_UNAUTHENTICATED = 4401
MAX_CLIENT_MESSAGE = 1024
"""Largest client message accepted, characters."""

_counters = {"connections": 0, "frames_sent": 0, "frames_dropped": 0, "client_errors": 0}
_snapshot_cache: dict = {"key": None, "text": None}


def stream_metrics() -> dict[str, int]:
    """Per-process counters for /metrics: open sockets, frames sent and dropped (coalesced)."""
    return dict(_counters)


class TwinConsumer(AsyncWebsocketConsumer):
    joined = False
    sender: asyncio.Task | None = None

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:  # also when the server cancels the consumer (shutdown) without a disconnect
            if self.sender is not None:
                self.sender.cancel()
            if self.joined:
                self.joined = False
                _counters["connections"] -= 1

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # accepted then closed, so a browser sees the code (a refused handshake is 1006)
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.last_seq = -1
        self.pending: dict | None = None
        self.dropped = 0
        self.wake = asyncio.Event()
        await self.accept()
        await broadcast.frames_join(self.channel_layer, self.channel_name, self.frame_offer)
        self.joined = True
        _counters["connections"] += 1
        driver_ensure_started()
        await self._send_snapshot()
        self.sender = asyncio.create_task(self._send_loop())

    async def disconnect(self, code):
        if not self.joined:
            return
        self.joined = False
        _counters["connections"] -= 1
        if self.sender is not None:
            self.sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.sender
        await broadcast.frames_leave(self.channel_layer, self.channel_name)

    # ----------------------------------------------------------------- frames out
    async def dispatch(self, message):
        # Channels closes stale database connections before every handler, a hop through the
        # one thread-sensitive executor; with hundreds of sockets that hop per frame per client
        # serialises the fan-out (p50 200 ms at 500 clients). A frame touches no database.
        if message["type"] == broadcast.FRAME_EVENT:
            self.frame_offer(message)
        else:
            await super().dispatch(message)

    async def twin_frame(self, event):
        self.frame_offer(event)

    def frame_offer(self, event: dict) -> None:
        """A frame for this client: keep only the newest one not yet sent."""
        if event["seq"] <= self.last_seq:
            return  # the client's snapshot is already newer
        if self.pending is not None and self.pending["seq"] > self.last_seq:
            self.dropped += 1
            _counters["frames_dropped"] += 1
        self.pending = event
        self.wake.set()

    async def _send_loop(self):
        while True:
            await self.wake.wait()
            self.wake.clear()
            event, self.pending = self.pending, None
            if event is None or event["seq"] <= self.last_seq:
                continue
            text = event["text"]
            if self.dropped:
                text = broadcast.frame_with_dropped(text, self.dropped)
                self.dropped = 0
            self.last_seq = event["seq"]
            await self.send(text_data=text)
            _counters["frames_sent"] += 1

    async def _send_snapshot(self):
        seq, text = await _snapshot_text()
        self.last_seq = max(self.last_seq, seq)
        await self.send(text_data=text)

    # ----------------------------------------------------------------- client messages
    async def receive(self, text_data=None, bytes_data=None):
        if not self.joined:
            return  # refused (anonymous) or leaving: nothing a client says is answered
        try:
            message = _client_message(text_data)
            kind = message["type"]
            if kind == "resync":
                await self._send_snapshot()
            elif kind == "speed":
                factor = await database_sync_to_async(services.engine_speed_set)(
                    user=self.scope["user"], factor=message.get("factor"))
                await self.send(text_data=broadcast.ack_encode("speed", factor=factor))
            elif kind == "pause":
                paused = await database_sync_to_async(services.engine_pause)(
                    user=self.scope["user"], paused=message.get("paused"))
                await self.send(text_data=broadcast.ack_encode("pause", paused=paused))
            else:
                raise ValidationError(f"unknown message type {kind!r}; "
                                      "send resync, speed or pause")
        except (ValidationError, PermissionDenied) as exc:
            _counters["client_errors"] += 1
            await self.send(text_data=broadcast.error_encode(_message_of(exc)))


def _client_message(text: str | None) -> dict:
    if text is None:
        raise ValidationError("send JSON text, not binary")
    if len(text) > MAX_CLIENT_MESSAGE:
        raise ValidationError(f"message too big ({len(text)} > {MAX_CLIENT_MESSAGE} characters)")
    try:
        message = json.loads(text)
    except ValueError:
        raise ValidationError("message is not valid JSON") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ValidationError('a message is an object with a "type"')
    return message


def _message_of(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(exc.messages)
    return str(exc) or "permission denied"


async def _snapshot_text() -> tuple[int, str]:
    """The latest frame as a snapshot; encoded once per version for every client."""
    version = await database_sync_to_async(selectors.live_state_version)()
    if version is not None and version == _snapshot_cache["key"]:
        return version[0], _snapshot_cache["text"]
    state = await database_sync_to_async(selectors.live_state_get)()
    if state is None:
        return 0, broadcast.snapshot_encode({}, seq=0)
    text = broadcast.snapshot_encode(state.frame, seq=state.seq, health=state.health,
                                     speed=state.speed, paused=state.paused,
                                     last_error=state.last_error)
    _snapshot_cache.update(key=(state.seq, state.health, state.updated_at), text=text)
    return state.seq, text
