"""The serving process: daphne, run in-process through its public ``Server`` class.

``manage.py serve`` (``make run``) builds a :class:`TwinServer` and runs it. Two things set it
apart from plain ``daphne twin.config.asgi:application``, both through daphne's public API:

* the embedded live engine starts with the server: daphne calls ``ready_callable`` once it
  has made its reactor's event loop the current one, just before it runs it, and that hook
  hands the loop to :func:`twin.live.embedded.embedded_start`;
* every WebSocket scope advertises the socket's Twisted transport as an ASGI extension
  (:func:`twin.sockets.flow.scope_with_transport`), through ``Server.create_application``, the
  call daphne's protocols make to create an application instance for a connection: with it
  the dashboard consumer measures what a slow client has not read, and writes a frame built
  once for all sockets (:class:`twin.sockets.flow.DirectFrames`).
"""

from __future__ import annotations

import asyncio
import logging
import sys

from daphne.access import AccessLogGenerator
from daphne.endpoints import build_endpoint_description_strings
from daphne.server import Server

from twin.config.stopping import stopping_on_shutdown
from twin.live.embedded import embedded_start
from twin.sockets.flow import scope_with_transport

logger = logging.getLogger("twin.live.driver")

WEBSOCKET_CONNECT_TIMEOUT_S = 5
"""Handshake limit, as daphne's command line sets it."""

LISTEN_BACKLOG = 4096
"""Connections the kernel queues before the server accepts them (capped by
``net.core.somaxconn``). Twisted's default, 50, dropped the SYNs of a thousand dashboards
reconnecting at once: their clients retried after 1, 3, 7 s, past the handshake limit."""


class TwinServer(Server):
    """daphne's ``Server``; WebSocket scopes carry their transport (see the module)."""

    def create_application(self, protocol, scope):
        if scope.get("type") == "websocket":
            scope = scope_with_transport(scope, protocol.transport, websocket=protocol)
        return super().create_application(protocol, scope)


def server_build(application, *, bind: str, port: int, make_driver, access_log: bool = True,
                 proxy_headers: bool = False, on_ready=None) -> TwinServer:
    """A server of ``application`` on ``bind:port`` that starts the embedded engine (when
    ``CLUSTERTWIN_ENGINE=embedded``; ``make_driver()`` makes its driver) as it starts;
    ``on_ready()`` after that."""

    def ready() -> None:
        # daphne made its reactor's loop the current one before calling this, and runs it next
        stopping_on_shutdown()  # first: commands are refused before the engine stops
        if embedded_start(asyncio.get_event_loop(), make_driver=make_driver):
            logger.info("live engine: starting with the server")
        if on_ready is not None:
            on_ready()

    return TwinServer(
        application=application,
        endpoints=[f"{e}:backlog={LISTEN_BACKLOG}"
                   for e in build_endpoint_description_strings(host=bind, port=port)],
        action_logger=AccessLogGenerator(sys.stdout) if access_log else None,
        websocket_connect_timeout=WEBSOCKET_CONNECT_TIMEOUT_S,
        websocket_handshake_timeout=WEBSOCKET_CONNECT_TIMEOUT_S,
        proxy_forwarded_address_header="X-Forwarded-For" if proxy_headers else None,
        proxy_forwarded_port_header="X-Forwarded-Port" if proxy_headers else None,
        proxy_forwarded_proto_header="X-Forwarded-Proto" if proxy_headers else None,
        ready_callable=ready,
    )
