"""ASGI entry point: HTTP through Django, WebSockets through Channels (served by daphne).

WebSockets pass the origin check and the cookie parser only: the consumer accepts first and
then checks the session itself (see :mod:`twin.routing`).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from channels.sessions import CookieMiddleware  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from twin.routing import SocketTransport, websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SocketTransport(
            AllowedHostsOriginValidator(CookieMiddleware(URLRouter(websocket_urlpatterns)))
        ),
    }
)
