"""How far a dashboard socket's client is behind, both ways, through public interfaces only.

* Out (server to client): :class:`OutboundFlow`, a Twisted push producer of the socket's
  transport, which Twisted pauses while the socket's send buffer is over its high-water mark.
  The transport reaches the application as an ASGI scope extension (:data:`TRANSPORT_EXTENSION`,
  read with :func:`scope_transport`) that ``manage.py serve`` adds to every WebSocket scope
  (:class:`twin.config.serving.TwinServer`). Served another way (plain ``daphne``, another
  server, the tests' communicator) there is no transport and nothing measures the client.
* Frames out: the same extension carries daphne's WebSocket protocol of the socket, so a frame
  built once as WebSocket bytes (:func:`websocket_text_frame`) is written as it is to every
  socket (:class:`DirectFrames`) instead of being encoded and framed again per socket.
* In (client to server): :class:`ClientInbox` reads the client's messages as soon as the
  server has them, so the consumer sees how many wait unanswered (a client that sends faster
  than it is answered). :class:`ClientInboxMiddleware` puts one in every WebSocket scope
  (:data:`INBOX_SCOPE_KEY`).
"""

from __future__ import annotations

import asyncio
import logging

logger = logging.getLogger("twin.sockets.consumers")

TRANSPORT_EXTENSION = "twin.transport"
"""ASGI scope extension: ``{"transport": <the socket's Twisted transport>}``."""

INBOX_SCOPE_KEY = "twin.inbox"
"""Scope key of the socket's :class:`ClientInbox`."""


def scope_with_transport(scope: dict, transport, websocket=None) -> dict:
    """``scope`` advertising ``transport`` (one that takes a push producer) and the server's
    ``websocket`` protocol of the connection (autobahn's, as daphne has it) as an extension."""
    extension = {"transport": transport, "websocket": websocket}
    extensions = {**(scope.get("extensions") or {}), TRANSPORT_EXTENSION: extension}
    return {**scope, "extensions": extensions}


def scope_transport(scope: dict):
    """The socket's transport the server advertised in ``scope``, else ``None``."""
    extension = (scope.get("extensions") or {}).get(TRANSPORT_EXTENSION) or {}
    transport = extension.get("transport")
    return transport if callable(getattr(transport, "registerProducer", None)) else None


# ----------------------------------------------------------------- frames out
def websocket_text_frame(data: bytes) -> bytes:
    r"""UTF-8 ``data`` as one final, unmasked WebSocket text frame (RFC 6455, 5.2): what a
    server writes for a text message, built once for every socket.

    >>> websocket_text_frame(b'{"seq":1}')
    b'\x81\t{"seq":1}'
    >>> websocket_text_frame(b"x" * 200)[:4], websocket_text_frame(b"x" * 70000)[:10]
    (b'\x81~\x00\xc8', b'\x81\x7f\x00\x00\x00\x00\x00\x01\x11p')
    """
    n = len(data)
    if n <= 125:
        head = bytes((0x81, n))
    elif n <= 0xFFFF:
        head = bytes((0x81, 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x81, 127)) + n.to_bytes(8, "big")
    return head + data


_WEBSOCKET_STATE = ("state", "STATE_OPEN", "send_queue", "transport")
"""What :class:`DirectFrames` reads of autobahn's protocol to know it would write the same
(and ``websocket_extensions_in_use``, set once the handshake succeeded)."""


class DirectFrames:
    """Writes built frames (:func:`websocket_text_frame`) straight to a socket's transport.

    daphne encodes the text and autobahn frames it again for every socket, and those copies
    wait in the sockets' send buffers together: per 84 kB frame to 1,000 sockets, 56 ms of CPU
    and 84 MB touched afresh, against 0.2 ms for one shared bytes object (issue 28). Written
    only while autobahn would write the very same bytes: the connection open, no extension
    (such as permessage-deflate) in use and none of its own output queued; otherwise
    :meth:`write` returns False and the frame goes through ASGI as before.
    """

    def __init__(self, websocket):
        self.websocket = websocket

    @classmethod
    def of(cls, scope: dict) -> DirectFrames | None:
        """The writer of the socket the server advertised in ``scope``, else ``None``."""
        extension = (scope.get("extensions") or {}).get(TRANSPORT_EXTENSION) or {}
        websocket = extension.get("websocket")
        if websocket is None:
            return None
        if not all(hasattr(websocket, name) for name in _WEBSOCKET_STATE):
            _log_once("WebSocket protocols of %s are not autobahn's as expected: frames are "
                      "encoded per socket", type(websocket).__name__)
            return None
        return cls(websocket)

    def write(self, frame: bytes) -> bool:
        ws = self.websocket
        extensions = getattr(ws, "websocket_extensions_in_use", None)
        if (ws.state != ws.STATE_OPEN or extensions is None or extensions or ws.send_queue
                or ws.transport is None):
            return False
        ws.transport.write(frame)
        return True


# ----------------------------------------------------------------- out
class OutboundFlow:
    """How far a socket's client is behind, as a Twisted push producer of its transport.

    Twisted pauses it when the socket's send buffer passes its high-water mark (64 kB) and
    resumes it once the buffer drained. daphne's ``send`` never waits, so the bytes written
    while paused (``queued``) are the only measure of what the client has not taken. Nothing
    pauses it without a transport (other servers, the tests' communicator).

    A transport has one producer: after daphne's upgrade to WebSocket it is still the HTTP
    channel (which stops reading a client whose send buffer is full). The flow takes its place
    and passes every call on to it, and gives it back on :meth:`detach`.
    """

    def __init__(self):
        self.paused = False
        self.queued = 0
        self.writable = asyncio.Event()
        self.writable.set()
        self._transport = None
        self._previous = None

    def attach(self, transport) -> None:
        previous = getattr(transport, "producer", None)
        try:
            if previous is not None:
                transport.unregisterProducer()
            transport.registerProducer(self, True)
        except RuntimeError:  # a transport that keeps its producer private (daphne's own TLS)
            _log_once("socket transports of %s take no second producer: the output queued "
                      "for slow clients is not measured", type(transport).__name__)
            if previous is not None and getattr(transport, "producer", None) is None:
                transport.registerProducer(previous, True)
            return
        self._transport, self._previous = transport, previous

    def detach(self, *, deaf: bool = False) -> None:
        """Give the transport its producer back (one with a producer waits for it to close);
        ``deaf``: stop reading the client instead (nothing it sends matters any more)."""
        transport, self._transport = self._transport, None
        if transport is not None and getattr(transport, "producer", self) is self:
            transport.unregisterProducer()
            if deaf:
                transport.pauseProducing()
            elif self._previous is not None:
                transport.registerProducer(self._previous, True)

    def wrote(self, size: int) -> None:
        if self.paused:
            self.queued += size

    # IPushProducer, passed on to the producer it replaced
    def pauseProducing(self) -> None:
        self.paused = True
        self.writable.clear()
        if self._previous is not None:
            self._previous.pauseProducing()

    def resumeProducing(self) -> None:
        self.paused = False
        self.queued = 0
        self.writable.set()
        if self._previous is not None:
            self._previous.resumeProducing()

    def stopProducing(self) -> None:  # the connection is gone: wake the sender, then it ends
        self._transport = None
        self.paused = False
        self.writable.set()
        if self._previous is not None:
            self._previous.stopProducing()


_logged: set[str] = set()


def _log_once(message: str, *args) -> None:
    if message not in _logged:
        _logged.add(message)
        logger.warning(message, *args)


# ----------------------------------------------------------------- in
class ClientInbox:
    """The client's messages, read from the server's ``receive`` as soon as they arrive.

    :meth:`get` is the ``receive`` the application is given; :meth:`waiting` counts the
    messages read and not yet taken.
    """

    def __init__(self, receive):
        self._queue: asyncio.Queue = asyncio.Queue()
        self._reader = asyncio.get_running_loop().create_task(self._read(receive))

    async def _read(self, receive) -> None:
        while True:
            try:
                message = await receive()
            except Exception:  # the server's receive broke: the application hears a close
                logger.exception("reading a dashboard socket failed")
                message = {"type": "websocket.disconnect", "code": 1011}
            self._queue.put_nowait(message)
            if message["type"] == "websocket.disconnect":
                return

    async def get(self) -> dict:
        return await self._queue.get()

    def waiting(self) -> int:
        return self._queue.qsize()

    def close(self) -> None:
        self._reader.cancel()


class ClientInboxMiddleware:
    """Gives every WebSocket a :class:`ClientInbox` (scope key :data:`INBOX_SCOPE_KEY`)."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.inner(scope, receive, send)
        inbox = ClientInbox(receive)
        try:
            return await self.inner({**scope, INBOX_SCOPE_KEY: inbox}, inbox.get, send)
        finally:
            inbox.close()
