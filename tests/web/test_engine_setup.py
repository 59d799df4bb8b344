"""Engine modes, the embedded driver's start, and system checks for setup mistakes."""

import asyncio

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.waiting import until
from twin.config import checks
from twin.live import embedded


def engine_mode(settings, mode):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ENGINE_MODE": mode}


def test_in_the_off_mode_nothing_starts(settings):
    loop = asyncio.new_event_loop()
    try:
        assert embedded.embedded_start(loop) is False
        assert embedded.driver_ensure_started() is False
        assert embedded.embedded_driver() is None
    finally:
        loop.close()


def test_from_plain_sync_code_the_embedded_driver_does_not_start(settings):
    engine_mode(settings, "embedded")
    assert embedded.driver_ensure_started() is False  # no server loop to run it on


def test_importing_the_asgi_application_starts_nothing(settings):
    engine_mode(settings, "embedded")
    import twin.config.asgi  # noqa: F401

    assert embedded.embedded_driver() is None


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_embedded_driver_starts_once_per_process(settings, monkeypatch):
    engine_mode(settings, "embedded")
    runs = []

    async def fake_run(d):
        runs.append(d)
        await asyncio.sleep(3600)  # sleep-ok: an engine that runs until cancelled

    monkeypatch.setattr(embedded, "_embedded_run", fake_run)
    assert embedded.driver_ensure_started() is True
    assert embedded.driver_ensure_started() is True
    await until(lambda: runs, what="the embedded engine's task running")
    assert len(runs) == 1 and embedded.embedded_driver() is runs[0]
    embedded._embedded["task"].cancel()
    await until(lambda: embedded.embedded_driver() is None, what="the cancelled task done")


def ids(settings, *, deploy=False):
    """The twin's check ids, for a deployment with its own key and no demo flag (the
    security checks have their own tests)."""
    settings.SECRET_KEY = "a-deployment-key-" + "x" * 50
    settings.CLUSTERTWIN_INSECURE_DEMO = False
    return [m.id for m in run_checks(include_deployment_checks=deploy)
            if m.id.startswith("clustertwin.")]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_serving_process_starts_it_on_its_loop_with_its_driver(settings, monkeypatch):
    """What ``manage.py serve`` does as daphne's loop is about to run: the engine starts
    there, made by the driver the server names; a dashboard connecting later starts no other."""
    engine_mode(settings, "embedded")
    runs, made = [], []

    async def fake_run(d):
        runs.append(d)
        await asyncio.sleep(3600)  # sleep-ok: an engine that runs until cancelled

    def make_driver():
        made.append(object())
        return made[-1]

    monkeypatch.setattr(embedded, "_embedded", {**embedded._embedded})
    monkeypatch.setattr(embedded, "_embedded_run", fake_run)
    assert embedded.embedded_start(asyncio.get_running_loop(), make_driver=make_driver)
    assert runs == []  # scheduled on the loop, not run from the hook
    await until(lambda: runs, what="the engine started on the loop")
    assert embedded.driver_ensure_started() is True
    assert len(made) == 1  # the dashboard's start found it running: no second driver
    await until(lambda: runs == made, what=lambda: f"the driver made run (made {made}, "
                                                   f"runs {runs})")
    embedded._embedded["task"].cancel()


def test_separate_engine_with_the_in_memory_layer_is_an_error(settings):
    engine_mode(settings, "separate")
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": checks.IN_MEMORY_LAYER}}
    assert ids(settings) == ["clustertwin.E001"]


def test_in_memory_layer_without_debug_is_a_deployment_warning(settings):
    engine_mode(settings, "embedded")
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": checks.IN_MEMORY_LAYER}}
    settings.DEBUG = False
    assert ids(settings) == []
    assert ids(settings, deploy=True) == ["clustertwin.W001"]
    settings.DEBUG = True
    assert ids(settings, deploy=True) == []


def test_redis_layer_passes_the_checks(settings):
    engine_mode(settings, "separate")
    settings.CHANNEL_LAYERS = {"default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"]}}}
    assert ids(settings, deploy=True) == []


@pytest.mark.parametrize("speed", ["0", "-1", "10001", "fast"])
def test_run_engine_refuses_a_bad_speed(speed):
    with pytest.raises(CommandError, match="speed"):
        call_command("run_engine", "--speed", speed)


@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_serve_refuses_a_bad_port(port):
    with pytest.raises(CommandError, match="port"):
        call_command("serve", "--port", port)
