"""Fixtures shared by the WebSocket tests (``test_consumers``, ``test_sockets_fanout``):
imported by name in each module, so that only the modules that open sockets use them."""

import pytest
import pytest_asyncio
from channels.layers import get_channel_layer
from django.test import Client

from twin.live import broadcast


@pytest.fixture
def cookie(demo_users):
    """Session cookies of the demo users, as their logged-in browsers would send them."""
    cookies = {}
    for name, user in demo_users.items():
        client = Client()
        client.force_login(user)
        cookies[name] = client.cookies["sessionid"].value
    return cookies.__getitem__


@pytest_asyncio.fixture(autouse=True)
async def fresh_layer():
    """Each test starts on an empty layer with no in-process listener left over."""
    yield
    await get_channel_layer().flush()
    broadcast._local_listeners.clear()


@pytest.fixture(params=["in-process", "layer group"])
def fan_out(request, monkeypatch):
    """Frames reach consumers in-process (the in-memory layer) or through the layer's group
    (Redis in production; the in-memory layer's group here)."""
    if request.param == "layer group":
        monkeypatch.setattr(broadcast, "_in_process", lambda layer: False)
    return request.param
