"""Engine modes, the embedded driver's start, and system checks for setup mistakes."""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError

from twin.config import checks
from twin.live import driver


def engine_mode(settings, mode):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ENGINE_MODE": mode}


def test_in_the_off_mode_nothing_starts(settings):
    assert driver.driver_ensure_started() is False
    assert driver.embedded_driver() is None


def test_from_plain_sync_code_the_embedded_driver_does_not_start(settings):
    engine_mode(settings, "embedded")
    assert driver.driver_ensure_started() is False  # no server loop to run it on


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_embedded_driver_starts_once_per_process(settings, monkeypatch):
    engine_mode(settings, "embedded")
    runs = []

    async def fake_run(d):
        runs.append(d)
        await asyncio.sleep(3600)

    monkeypatch.setattr(driver, "_embedded_run", fake_run)
    assert driver.driver_ensure_started() is True
    assert driver.driver_ensure_started() is True
    await asyncio.sleep(0)
    assert len(runs) == 1 and driver.embedded_driver() is runs[0]
    driver._embedded["task"].cancel()
    await asyncio.sleep(0)
    assert driver.embedded_driver() is None


def ids(settings, *, deploy=False):
    """The twin's check ids, for a deployment with its own key and no demo flag (the
    security checks have their own tests)."""
    settings.SECRET_KEY = "a-deployment-key-" + "x" * 50
    settings.CLUSTERTWIN_INSECURE_DEMO = False
    return [m.id for m in run_checks(include_deployment_checks=deploy)
            if m.id.startswith("clustertwin.")]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_sync_view_served_by_the_server_can_start_it(settings, monkeypatch):
    engine_mode(settings, "embedded")
    runs = []

    async def fake_run(d):
        runs.append(d)

    monkeypatch.setattr(driver, "_embedded_run", fake_run)
    assert await sync_to_async(driver.driver_ensure_started)() is True
    await asyncio.sleep(0.05)
    assert len(runs) == 1


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
