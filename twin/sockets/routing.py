"""WebSocket routes.

``twin.config.asgi`` wraps them in origin checks and the cookie parser, not in channels' session
and auth middleware: those read the session and the user before the handshake completes, and
the consumer reads them itself once the socket is accepted (see :mod:`twin.sockets.consumers`).
Outermost, :class:`twin.sockets.flow.ClientInboxMiddleware` reads each socket's client messages
as they arrive, so the consumer can tell a client that sends faster than it is answered.
"""

from __future__ import annotations

from django.urls import path

from twin.sockets.consumers import TwinConsumer

websocket_urlpatterns = [
    path("ws/twin/", TwinConsumer.as_asgi()),
]
