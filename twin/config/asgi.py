"""ASGI entry point: HTTP through Django, WebSockets through Channels (served by daphne).

WebSockets pass the origin check and the cookie parser only: the consumer accepts first and
then checks the session itself (see :mod:`twin.live.routing`).

Served by daphne with ``CLUSTERTWIN_ENGINE=embedded`` (``make run``), the live engine starts
with the server (when its event loop first runs), not with the first dashboard: counters,
``/metrics`` and history are live before anyone opens a page.
"""

import asyncio
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.config.settings")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from channels.sessions import CookieMiddleware  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from twin.live.routing import SocketTransport, websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SocketTransport(
            AllowedHostsOriginValidator(CookieMiddleware(URLRouter(websocket_urlpatterns)))
        ),
    }
)


def _under_daphne() -> bool:
    """This process is daphne (``daphne ...`` or ``python -m daphne ...``)."""
    if "daphne.server" not in sys.modules:
        return False
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name.split(".")[0] == "daphne":
        return True
    return os.path.basename(getattr(main, "__file__", "") or "") == "daphne"


def _start_the_engine_with_the_server() -> bool:
    """Under daphne (its asyncio reactor installed, its loop about to run), schedule the
    embedded engine's start; anywhere else (tests, a shell, other servers) do nothing: the
    first dashboard connection starts it (``twin.live.driver.driver_ensure_started``)."""
    from django.conf import settings
    if settings.CLUSTERTWIN["ENGINE_MODE"] != "embedded" or not _under_daphne():
        return False
    # the loop daphne's Twisted reactor runs on (daphne.server creates it at import and
    # makes it the global loop only when the server starts, after this module is imported)
    loop = getattr(sys.modules["daphne.server"], "twisted_loop", None)
    if not isinstance(loop, asyncio.AbstractEventLoop):
        return False
    from twin.live.driver import _embedded_start
    loop.call_soon(_embedded_start, loop)
    return True


_start_the_engine_with_the_server()
