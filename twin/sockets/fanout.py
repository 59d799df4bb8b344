"""One process's fan-out of live frames to its dashboard sockets.

A process joins the frames group once, however many sockets it serves: :class:`FrameFanout`
holds one channel-layer channel in ``twin.frames`` (:func:`twin.live.broadcast.frames_join`),
takes each frame from it once (with Redis: one message per frame and process, decoded and its
signature checked once, :func:`twin.live.broadcast.frame_receive`) and offers it to every
socket of the process (``frame_offer``: the socket keeps the newest and wakes its own sender,
so a slow socket delays nobody). The text the publisher encoded once is built once more here
as WebSocket bytes, which every socket served by ``manage.py serve`` writes as they are
(:class:`twin.sockets.flow.DirectFrames`). With the in-memory layer the publisher calls
:meth:`FrameFanout.offer` directly.

A channel per socket, as before (issue 28), cost every connect a ``SUBSCRIBE`` on Redis and
every frame a decode, a queue and a receiving task per socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from typing import Protocol

from twin.live import broadcast
from twin.sockets.flow import websocket_text_frame

logger = logging.getLogger("twin.sockets.consumers")


class FrameListener(Protocol):
    def frame_offer(self, message: dict) -> None:
        """A frame for this socket (must not block: called for every socket in turn)."""

    def frames_lost(self) -> None:
        """The channel layer failed: no more frames will come through this fan-out."""


class FrameFanout:
    """The frames of one channel layer for the sockets of one event loop (see the module)."""

    def __init__(self, layer, loop: asyncio.AbstractEventLoop):
        self.layer, self.loop = layer, loop
        self.channel: str | None = None
        self.listeners: dict[int, weakref.ref] = {}
        """Weak: a socket that died without leaving is dropped. In joining order."""
        self._joined: asyncio.Future | None = None
        self._reader: asyncio.Task | None = None
        self._closed = False

    async def add(self, listener: FrameListener) -> None:
        """Offer ``listener`` every frame published from now on (joins the group once)."""
        self.listeners[id(listener)] = weakref.ref(listener)
        if self._joined is None:
            self._joined = asyncio.ensure_future(self._join())
        try:
            await asyncio.shield(self._joined)
        except Exception:  # the layer refused: the next socket tries with a fresh fan-out
            self.listeners.pop(id(listener), None)
            self._close()
            raise

    def discard(self, listener: FrameListener) -> None:
        """No more frames for ``listener``; the last one to leave closes the fan-out."""
        self.listeners.pop(id(listener), None)
        if not self.listeners:
            self._close()

    def offer(self, message: dict) -> None:
        """Offer a verified frame message to every listener, in joining order, with its text
        built once as a WebSocket frame (``"wire"``: :class:`~twin.sockets.flow.DirectFrames`).
        """
        message = {**message, "wire": websocket_text_frame(message["text"].encode())}
        for key, ref in list(self.listeners.items()):
            listener = ref()
            if listener is None:
                self.listeners.pop(key, None)
                continue
            try:
                listener.frame_offer(message)
            except Exception:  # one socket's fault must not starve the others
                logger.exception("offering a frame to a dashboard socket failed")

    async def _join(self) -> None:
        self.channel = await self.layer.new_channel()
        await broadcast.frames_join(self.layer, self.channel, self.offer)
        if self._closed:  # every socket left while it joined
            await self._leave()
            return
        # frames that cross the layer arrive on the channel (in-process ones come to offer)
        self._reader = asyncio.create_task(self._read(), name="twin-frames-fanout")

    async def _read(self) -> None:
        try:
            while True:
                self.offer(await broadcast.frame_receive(self.layer, self.channel))
        except Exception:  # the layer is gone: every socket closes, its client reconnects
            logger.exception("the dashboards lost the channel layer; closing their sockets")
            listeners = [ref() for ref in self.listeners.values()]
            self.listeners.clear()
            self._close()
            for listener in listeners:
                if listener is not None:
                    listener.frames_lost()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        fanouts = _by_loop.get(self.loop)
        if fanouts is not None and fanouts.get(id(self.layer)) is self:
            del fanouts[id(self.layer)]
        reader = self._reader
        if reader is not None:  # joined (a join still under way leaves by itself)
            if reader is not asyncio.current_task():
                reader.cancel()
            self._leaving = asyncio.ensure_future(self._leave())

    async def _leave(self) -> None:
        with contextlib.suppress(Exception):  # the layer is gone: nothing to leave
            await broadcast.frames_leave(self.layer, self.channel)


_by_loop: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""The open fan-outs of each event loop (a server has one loop; tests one each), by layer."""


def frame_fanout(layer) -> FrameFanout:
    """The fan-out of ``layer`` on the running event loop (made on first use)."""
    loop = asyncio.get_running_loop()
    fanouts = _by_loop.setdefault(loop, {})
    fanout = fanouts.get(id(layer))
    if fanout is None or fanout.layer is not layer:
        fanout = fanouts[id(layer)] = FrameFanout(layer, loop)
    return fanout
