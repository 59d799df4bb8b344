import pytest
from django.core.management import call_command

from twin.config.demo import demo_accounts_seed
from twin.inventory.adapter import cluster_plan_write

PASSWORD = "demo-pass-123"


@pytest.fixture
def demo_users(db):
    demo_accounts_seed(password=PASSWORD)
    from django.contrib.auth import get_user_model
    return {u.username: u for u in get_user_model().objects.all()}


@pytest.fixture
def small_cluster(db, small_plan):
    return cluster_plan_write(small_plan)


@pytest.fixture
def login(client, demo_users):
    def as_user(username):
        client.force_login(demo_users[username])
        return client
    return as_user


@pytest.fixture
def build(db):
    def run(*args):
        call_command("build_cluster", *args)
    return run


@pytest.fixture(autouse=True)
def engine_off(settings):
    """No test starts the embedded live engine unless it asks for one."""
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ENGINE_MODE": "off"}


def pytest_configure(config):
    config.addinivalue_line("markers", "redis: needs a Redis server at REDIS_TEST_URL")
