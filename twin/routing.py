"""WebSocket routes. The live dashboard issue adds ``/ws/twin/`` here."""

websocket_urlpatterns: list = []
