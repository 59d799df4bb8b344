"""Fixtures of the fault tests: logged-in demo users, their session cookies, a clean layer.

None is autouse: the tests of real processes here (``test_crash``) need none of them.
"""

from __future__ import annotations

import pytest
import pytest_asyncio
from channels.layers import get_channel_layer
from django.test import Client

from twin.config.demo import demo_accounts_seed
from twin.live import broadcast


def pytest_configure(config):
    config.addinivalue_line("markers", "redis: needs a Redis server at REDIS_TEST_URL")


@pytest.fixture
def engine_off(settings):
    """No test here starts the embedded live engine unless it asks for one."""
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ENGINE_MODE": "off"}


@pytest.fixture
def demo_users(db):
    demo_accounts_seed(password="demo-pass-123")
    from django.contrib.auth import get_user_model
    return {u.username: u for u in get_user_model().objects.all()}


@pytest.fixture
def logins(demo_users):
    """``logins("staff")``: the logged-in browser of a demo user (``.cookies["sessionid"]``),
    logged in before the test (async tests cannot)."""
    clients = {}
    for name, user in demo_users.items():
        clients[name] = Client()
        clients[name].force_login(user)
    return clients.__getitem__


@pytest_asyncio.fixture
async def fresh_layer():
    """Flush the channel layer and forget in-process listeners after the test."""
    yield
    await get_channel_layer().flush()
    broadcast._local_listeners.clear()
