"""A light dashboard client for the WebSocket benchmarks: enough of RFC 6455 to play thousands.

The benchmark's clients share the 2-core machine with the server, so what they cost is taken
from the server: the ``websockets`` library (assembling every message, tasks per socket) spent
about 120 CPU-us per 84 kB frame here, this client about 30 (issue 28). :class:`DashboardClient`
is an ``asyncio.Protocol``: the handshake by hand, then frames parsed header by header, keeping
of each message only its first :data:`HEAD` bytes (where a frame's ``type``, ``seq`` and
``sent_at`` are) and its length, and answering pings. It checks what it reads (status 101,
unmasked frames) and reports anything else as an error.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable

HEAD = 200
"""Bytes kept of each message's start."""

OnMessage = Callable[[int, bytes, int, float], None]
"""``(opcode, head, length, arrival time)``, called as each message's last byte arrives."""


class HandshakeRefused(Exception):
    pass


def upgrade_request(port: int, cookie: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET /ws/twin/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Origin: http://127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Cookie: sessionid={cookie}\r\n\r\n").encode()


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A client frame (masked, final), payload under 126 bytes."""
    mask = os.urandom(4)
    return (bytes((0x80 | opcode, 0x80 | len(payload))) + mask
            + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


class DashboardClient(asyncio.Protocol):
    def __init__(self, request: bytes, on_message: OnMessage):
        self.request, self.on_message = request, on_message
        self.opened: asyncio.Future = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self._closing = False
        self._reply = b""  # the handshake's response, until its blank line
        self._header = b""  # a frame header split between two reads
        self._left = 0  # payload bytes of the current frame still to come
        self._in_frame = False
        self._opcode = self._length = 0
        self._head = bytearray()

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc):
        if not self.opened.done():
            self.opened.set_exception(exc or ConnectionError("closed by the server"))
        if not self.closed.done():  # None: this client closed it
            if self._closing:
                self.closed.set_result(None)
            else:
                self.closed.set_exception(exc or ConnectionError("closed by the server"))

    def data_received(self, data: bytes) -> None:
        if not self.opened.done():
            self._reply += data
            end = self._reply.find(b"\r\n\r\n")
            if end < 0:
                return
            status = self._reply[:self._reply.find(b"\r\n")]
            data, self._reply = self._reply[end + 4:], b""
            if b" 101 " not in status:
                self.opened.set_exception(HandshakeRefused(status.decode(errors="replace")))
                self.close()
                return
            self.opened.set_result(time.time())
        try:
            self._frames(memoryview(data))
        except ValueError as exc:
            self._fail(exc)

    def close(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        if not self.closed.done():
            self.closed.set_exception(exc)
        self.close()

    def _frames(self, view: memoryview) -> None:
        i, n = 0, len(view)
        while i < n:
            if not self._in_frame:
                header = self._header + bytes(view[i:i + 14])
                size = _header_size(header)
                if size is None:  # the rest of the header comes with the next read
                    self._header, i = header, n
                    break
                i += size - len(self._header)
                self._header = b""
                self._start(header[:size])
                if not self._left:  # an empty message
                    self._end()
                    continue
            take = min(self._left, n - i)
            if len(self._head) < HEAD:
                self._head += view[i:i + min(take, HEAD - len(self._head))]
            i += take
            self._left -= take
            if not self._left:
                self._end()

    def _start(self, header: bytes) -> None:
        if header[1] & 0x80:
            raise ValueError("a masked frame from the server")
        length = header[1] & 0x7F
        if length == 126:
            length = int.from_bytes(header[2:4], "big")
        elif length == 127:
            length = int.from_bytes(header[2:10], "big")
        self._opcode, self._length, self._left = header[0] & 0x0F, length, length
        self._head = bytearray()
        self._in_frame = True

    def _end(self) -> None:
        self._in_frame = False
        head = bytes(self._head)
        if self._opcode == 0x9:  # ping: pong the same payload
            self.transport.write(masked_frame(0xA, head))
        elif self._opcode == 0x8:
            code = int.from_bytes(head[:2], "big") if len(head) >= 2 else 1005
            if not self.closed.done():
                self.closed.set_result(code)
            self.close()
        elif self._opcode in (0x0, 0x1, 0x2):
            self.on_message(self._opcode, head, self._length, time.time())


def _header_size(header: bytes) -> int | None:
    """Bytes of the frame header at the start of ``header``; None if it is not all there."""
    if len(header) < 2:
        return None
    size = {126: 4, 127: 10}.get(header[1] & 0x7F, 2)
    return size if len(header) >= size else None


async def dashboard_open(port: int, cookie: str, on_message: OnMessage, *,
                         timeout: float) -> tuple[DashboardClient, float]:
    """Connect a dashboard; returns it and its handshake time (s, connect to status 101)."""
    loop = asyncio.get_running_loop()
    t = time.time()
    request = upgrade_request(port, cookie)
    _, client = await asyncio.wait_for(
        loop.create_connection(lambda: DashboardClient(request, on_message), "127.0.0.1", port),
        timeout)
    try:
        opened = await asyncio.wait_for(client.opened, max(0.1, t + timeout - time.time()))
    except BaseException:
        client.close()
        raise
    return client, opened - t
