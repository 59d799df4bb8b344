"""WebSocket routes (``twin.asgi`` wraps them in origin checks and session auth)."""

from django.urls import path

from twin.consumers import TwinConsumer

websocket_urlpatterns = [
    path("ws/twin/", TwinConsumer.as_asgi()),
]
