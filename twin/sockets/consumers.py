"""``/ws/twin/``: the live dashboard's WebSocket. Transport only.

Connecting is cheap: the socket is accepted before anything reads the database (daphne drops a
handshake that takes 5 s, and a thousand dashboards reconnecting at once would queue behind the
one database thread), then its session is checked (batched with every other socket's check, and
reused for ``WS_RECHECK_S`` by sockets of the same session), then it joins the process's frame
fan-out (one subscription to ``twin.frames`` for all sockets, :mod:`twin.sockets.fanout`) and its
sender task sends the snapshot, then frames.

A socket keeps no rights of its own: every command re-reads the session and the user (active,
still logged in with this password, staff with ``twin.run_drill`` to steer), and every
``WS_RECHECK_S`` one batched check looks at the sessions of all open sockets. Close codes:

* 4401: not logged in, or no longer: logged out, session expired, user deactivated, password
  changed.
* 4403: the user lost a right this socket had (``twin.run_drill``, staff); reconnecting gives
  the socket the rights the user has now.
* 4408: the client does not read: bytes written while its send buffer was full passed
  ``WS_MAX_QUEUED_BYTES``, or ``WS_STALLED_FRAMES`` frames in a row found it full.
* 4429: more than ``WS_MESSAGE_BURST`` messages at once, or ``WS_MESSAGES_PER_S`` sustained.

Frames are never queued per client: each consumer holds at most one pending frame and sends it
when the socket can take it (served by ``manage.py serve`` the consumer is a Twisted push
producer of its socket, paused while the socket's send buffer is over its high-water mark; see
:mod:`twin.sockets.flow`), so a slow client skips frames
(and is told how many, in a ``dropped`` field) instead of growing the server. From the channel
layer only signed frames are taken (:func:`twin.live.broadcast.frame_verify`), and a frame whose
``seq`` jumps more than ``WS_MAX_SEQ_JUMP`` ahead is not trusted: the next re-check sends the
stored snapshot instead. Clients may only send the allow-listed messages below, and those go to
services, never back out to other clients.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError

from scheduler.limits import documents
from twin import app_setting
from twin.live import broadcast, selectors, stopping
from twin.live.embedded import driver_ensure_started
from twin.sockets.fanout import FrameFanout, frame_fanout
from twin.sockets.flow import (
    INBOX_SCOPE_KEY,
    DirectFrames,
    OutboundFlow,
    scope_transport,
    websocket_text_frame,
)
from twin.sockets.sessions import (
    RightLost,
    Rights,
    SessionEnded,
    SocketSessions,
    socket_sessions,
    steer,
)

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_SLOW_READER = 4408
CLOSE_TOO_MANY_MESSAGES = 4429
MAX_CLIENT_MESSAGE = 1024
MAX_CLIENT_DEPTH = 4
"""A client message is one flat object; 1,024 ``[`` would otherwise reach the parser's
recursion limit inside the consumer."""
"""Largest client message accepted, characters."""

_CLOSED = {CLOSE_UNAUTHENTICATED: "closed_unauthenticated", CLOSE_FORBIDDEN: "closed_forbidden",
           CLOSE_SLOW_READER: "closed_slow_reader",
           CLOSE_TOO_MANY_MESSAGES: "closed_too_many_messages"}
"""The counter of each close code (``stream_metrics``); 4408 and 4429 are also logged."""
_counters = {"connections": 0, "frames_sent": 0, "frames_dropped": 0, "client_errors": 0,
             "frames_untrusted": 0, **dict.fromkeys(_CLOSED.values(), 0)}
_snapshot_cache: dict = {"key": None, "text": None, "wire": None}


def stream_metrics() -> dict[str, int]:
    """Per-process counters for /metrics: open sockets, frames sent and dropped (coalesced),
    sockets closed by code, frames not trusted, and layer messages refused (by kind)."""
    refused = {f"layer_refused_{k.replace(' ', '_')}": n
               for k, n in broadcast.refused_counts().items()}
    return {**_counters, **refused}


# ----------------------------------------------------------------- rate limits
class _Bucket:
    """At most ``burst`` messages at once and ``rate`` per second sustained."""

    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.at = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


@dataclass(frozen=True)
class _Limits:
    recheck_s: float
    max_queued_bytes: int
    stalled_frames: int
    max_seq_jump: int
    messages_per_s: float
    message_burst: int

    @classmethod
    def now(cls) -> _Limits:
        return cls(app_setting("WS_RECHECK_S"), app_setting("WS_MAX_QUEUED_BYTES"),
                   app_setting("WS_STALLED_FRAMES"), app_setting("WS_MAX_SEQ_JUMP"),
                   app_setting("WS_MESSAGES_PER_S"), app_setting("WS_MESSAGE_BURST"))


# ----------------------------------------------------------------- the consumer
class TwinConsumer(AsyncWebsocketConsumer):
    joined = False
    closing = False
    session_key: str | None = None
    sender: asyncio.Task | None = None
    flow: OutboundFlow | None = None
    registry: SocketSessions | None = None
    fanout: FrameFanout | None = None

    channel_layer_alias = None
    """No layer channel of channels' making: its messages would reach the handlers whatever
    their type (a forged "websocket.receive" with a command, say, from anyone who reaches
    Redis). Frames come from the process's one fan-out (:mod:`twin.sockets.fanout`), which
    takes only signed frames from the layer."""
    inbox = None

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:  # also when the server cancels the consumer (shutdown) without a disconnect
            self._release()

    async def dispatch(self, message):
        # No hop to close stale database connections before every handler (channels' default):
        # with hundreds of sockets that hop per frame per client serialises the fan-out, per
        # connect it delays the handshake; what reads the database here closes them itself.
        kind = message["type"]
        if kind == "websocket.connect":
            await self.websocket_connect(message)
        elif kind == "websocket.receive":
            await self.websocket_receive(message)
        elif kind == "websocket.disconnect":
            await self.disconnect(message.get("code"))
            raise StopConsumer()

    async def connect(self):
        await self.accept()  # first: the handshake is done before any database work
        self.limits = _Limits.now()
        self.session_key = self.scope.get("cookies", {}).get(settings.SESSION_COOKIE_NAME)
        self.registry = socket_sessions()
        rights = None
        if self.session_key:
            rights = await self.registry.rights(self.session_key,
                                                max_age=self.limits.recheck_s)
        if rights is None:  # accepted then closed, so a browser sees the code (not 1006)
            await self._shut(CLOSE_UNAUTHENTICATED)
            return
        self.rights = rights
        self.last_seq = -1
        self.pending: dict | None = None
        self.dropped = 0
        self.stalled = 0
        self.seq_suspect = False
        self.wake = asyncio.Event()
        self.bucket = _Bucket(self.limits.messages_per_s, self.limits.message_burst)
        self.flow = OutboundFlow()
        transport = scope_transport(self.scope)
        if transport is not None:
            self.flow.attach(transport)
        self.direct = DirectFrames.of(self.scope)
        # a backlog of the client's messages is a client sending faster than it is answered
        self.inbox = self.scope.get(INBOX_SCOPE_KEY)
        self.fanout = frame_fanout(get_channel_layer())
        await self.fanout.add(self)
        self.joined = True
        _counters["connections"] += 1
        self.registry.add(self)
        driver_ensure_started()
        self.sender = asyncio.create_task(self._send_loop())

    async def disconnect(self, code):
        self._release()

    def _release(self) -> None:
        """Stop sending, leave the fan-out and the registry (idempotent; no await: also runs
        on cancel)."""
        if self.sender is not None and self.sender is not asyncio.current_task():
            self.sender.cancel()
        if self.flow is not None:
            self.flow.detach()
        if self.fanout is not None:
            self.fanout.discard(self)
        if self.joined:
            self.joined = False
            _counters["connections"] -= 1
            self.registry.discard(self)

    async def _shut(self, code: int) -> None:
        """Close the socket with ``code``; nothing more is sent or answered."""
        if self.closing:
            return
        self.closing = True
        _counters[_CLOSED[code]] += 1
        if code in (CLOSE_SLOW_READER, CLOSE_TOO_MANY_MESSAGES):
            logger.warning("closing a dashboard socket with %d (%s)", code, _CLOSED[code][7:])
            if self.flow is not None:  # what it still sends is not read: daphne would queue it
                self.flow.detach(deaf=True)
        self._release()
        await self.close(code=code)

    def _shut_soon(self, code: int) -> None:
        if not self.closing:
            self._shutting = asyncio.get_running_loop().create_task(self._shut(code))

    def rights_check(self, rights: Rights | None) -> None:
        """The periodic re-check's verdict on this socket's session."""
        if self.closing or not self.joined:
            return
        if rights is None or rights.user_id != self.rights.user_id:
            self._shut_soon(CLOSE_UNAUTHENTICATED)
        elif self.rights.steer and not rights.steer:
            self._shut_soon(CLOSE_FORBIDDEN)
        elif self.seq_suspect:  # a frame jumped too far ahead: the database says where we are
            self.seq_suspect = False
            self._resync = asyncio.get_running_loop().create_task(
                self._send_snapshot(newer_only=True))

    # ----------------------------------------------------------------- frames out
    def frames_lost(self) -> None:
        """The fan-out lost the channel layer: close; the client reconnects for a snapshot."""
        self._release()
        if not self.closing:
            self.closing = True
            self._shutting = asyncio.get_running_loop().create_task(self.close(code=1011))

    def frame_offer(self, event: dict) -> None:
        """A frame for this client: keep only the newest one not yet sent."""
        if self.closing or not self.joined or event["seq"] <= self.last_seq:
            return  # closed, or the client's snapshot is already newer
        if self.pending is not None and self.pending["seq"] > self.last_seq:
            self.dropped += 1
            _counters["frames_dropped"] += 1
        self.pending = event
        if self.flow.paused:
            self.stalled += 1
            if self.stalled >= self.limits.stalled_frames:
                self._shut_soon(CLOSE_SLOW_READER)
        self.wake.set()

    async def _send_loop(self):
        await self._send_snapshot()
        while not self.closing:
            await self.wake.wait()
            await self.flow.writable.wait()  # meanwhile newer frames replace the pending one
            self.wake.clear()
            event, self.pending = self.pending, None
            if self.closing or event is None or event["seq"] <= self.last_seq:
                continue
            if event["seq"] > self.last_seq + self.limits.max_seq_jump:
                self.seq_suspect = True
                _counters["frames_untrusted"] += 1
                continue
            text, wire = event["text"], event.get("wire")
            if self.dropped:
                text, wire = broadcast.frame_with_dropped(text, self.dropped), None
                self.dropped = 0
            self.last_seq = event["seq"]
            self.stalled = 0
            await self._send_text(text, wire)
            _counters["frames_sent"] += 1

    async def _send_snapshot(self, *, newer_only: bool = False):
        seq, text, wire = await _snapshot_text()
        if self.closing or (newer_only and seq <= self.last_seq):
            return
        self.last_seq = max(self.last_seq, seq)
        await self._send_text(text, wire)

    async def _send_text(self, text: str, wire: bytes | None = None) -> None:
        """Send ``text``; ``wire``, the same text built as a WebSocket frame, is written as it
        is where the socket allows it (:class:`~twin.sockets.flow.DirectFrames`)."""
        if wire is None or self.direct is None or not self.direct.write(wire):
            await self.send(text_data=text)
        self.flow.wrote(len(text))
        if self.flow.queued > self.limits.max_queued_bytes:
            await self._shut(CLOSE_SLOW_READER)

    # ----------------------------------------------------------------- client messages
    async def receive(self, text_data=None, bytes_data=None):
        if not self.joined or self.closing:
            return  # refused (anonymous) or leaving: nothing a client says is answered
        backlog = 0 if self.inbox is None else self.inbox.waiting()
        if not self.bucket.take() or backlog >= self.limits.message_burst:
            await self._shut(CLOSE_TOO_MANY_MESSAGES)
            return
        try:
            message = _client_message(text_data)
            kind = message["type"]
            if kind == "resync":
                await self._send_snapshot()
            elif kind in ("speed", "pause"):
                if stopping.stopping():  # as the HTTP commands are (503): it could be lost
                    raise ValidationError("the twin is stopping; nothing was changed, try "
                                          f"again in {stopping.RETRY_AFTER_S} s")
                values = await database_sync_to_async(steer)(
                    session_key=self.session_key, rights=self.rights, kind=kind,
                    value=message.get("factor" if kind == "speed" else "paused"))
                await self._send_text(broadcast.ack_encode(kind, **values))
            else:
                raise ValidationError(f"unknown message type {kind!r}; "
                                      "send resync, speed or pause")
        except (SessionEnded, RightLost) as exc:  # refused, then closed
            await self._send_text(broadcast.error_encode(str(exc)))
            await self._shut(CLOSE_UNAUTHENTICATED if isinstance(exc, SessionEnded)
                             else CLOSE_FORBIDDEN)
        except (ValidationError, PermissionDenied) as exc:
            _counters["client_errors"] += 1
            await self._send_text(broadcast.error_encode(_message_of(exc)))


def _client_message(text: str | None) -> dict:
    if text is None:
        raise ValidationError("send JSON text, not binary")
    if len(text) > MAX_CLIENT_MESSAGE:
        raise ValidationError(f"message too big ({len(text)} > {MAX_CLIENT_MESSAGE} characters)")
    try:
        message = documents.json_loads(text, what="the message", max_depth=MAX_CLIENT_DEPTH)
    except documents.DocumentError as exc:  # not JSON, or nested past any real message
        raise ValidationError(str(exc)) from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ValidationError('a message is an object with a "type"')
    return message


def _message_of(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(exc.messages)
    return str(exc) or "permission denied"


_snapshot_reads: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""The snapshot read in flight, per event loop: sockets connecting together share it."""


async def _snapshot_text() -> tuple[int, str, bytes | None]:
    """The latest frame as a snapshot (seq, text, the text built as a WebSocket frame); read
    once for the sockets that ask at the same time, encoded once per version for every
    client."""
    loop = asyncio.get_running_loop()
    read = _snapshot_reads.get(loop)
    if read is None or read.done():
        read = _snapshot_reads[loop] = loop.create_task(_snapshot_read())
    return await asyncio.shield(read)


async def _snapshot_read() -> tuple[int, str, bytes | None]:
    version = await database_sync_to_async(selectors.live_state_version)()
    if version is not None and version == _snapshot_cache["key"]:
        return version[0], _snapshot_cache["text"], _snapshot_cache["wire"]
    state = await database_sync_to_async(selectors.live_state_get)()
    if state is None:
        return 0, broadcast.snapshot_encode({}, seq=0), None
    text = broadcast.snapshot_encode(state.frame, seq=state.seq, health=state.health,
                                     speed=state.speed, paused=state.paused,
                                     last_error=state.last_error)
    wire = websocket_text_frame(text.encode())
    _snapshot_cache.update(key=(state.seq, state.health, state.updated_at), text=text,
                           wire=wire)
    return state.seq, text, wire
