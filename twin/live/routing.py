"""WebSocket routes, and the middleware ``twin.config.asgi`` puts outermost around them.

``twin.config.asgi`` wraps the routes in origin checks and the cookie parser, not in channels' session
and auth middleware: those read the session and the user before the handshake completes, and
the consumer reads them itself once the socket is accepted (see :mod:`twin.live.consumers`).
"""

from __future__ import annotations

import functools

from django.urls import path

from twin.live.consumers import TRANSPORT_SCOPE_KEY, TwinConsumer

websocket_urlpatterns = [
    path("ws/twin/", TwinConsumer.as_asgi()),
]


def transport_of(send):
    """The Twisted transport of this socket (it takes a push producer for its send buffer),
    else ``None``.

    daphne binds each socket's protocol (autobahn's) into the ``send`` it hands the
    application: ``functools.partial(server.handle_reply, protocol)``. Other servers, and the
    tests' communicator, have none.
    """
    if isinstance(send, functools.partial) and send.args:
        transport = getattr(send.args[0], "transport", None)
        if callable(getattr(transport, "registerProducer", None)):
            return transport
    return None


class SocketTransport:
    """Puts :func:`transport_of` the server's ``send`` in a WebSocket's scope
    (``TRANSPORT_SCOPE_KEY``). Outermost, where ``send`` is still the server's own."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            scope = {**scope, TRANSPORT_SCOPE_KEY: transport_of(send)}
        return await self.inner(scope, receive, send)
