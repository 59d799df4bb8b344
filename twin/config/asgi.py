"""ASGI entry point: HTTP through Django, WebSockets through Channels (served by daphne).

WebSockets pass the origin check and the cookie parser only: the consumer accepts first and
then checks the session itself (see :mod:`twin.sockets.routing`).

Importing this module starts nothing. ``python manage.py serve`` (``make run``) serves this
application and starts the embedded live engine with the server (see
:mod:`twin.live.embedded`); served any other way, the first dashboard socket starts it.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.config.settings")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from channels.sessions import CookieMiddleware  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from twin.sockets.flow import ClientInboxMiddleware  # noqa: E402
from twin.sockets.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": ClientInboxMiddleware(
            AllowedHostsOriginValidator(CookieMiddleware(URLRouter(websocket_urlpatterns)))
        ),
    }
)
