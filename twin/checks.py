"""System checks for setup mistakes of the live engine and its channel layer."""

from django.conf import settings
from django.core import checks

from twin.conf import app_setting

IN_MEMORY_LAYER = "channels.layers.InMemoryChannelLayer"


def channel_layer_backend() -> str:
    return getattr(settings, "CHANNEL_LAYERS", {}).get("default", {}).get("BACKEND", "")


@checks.register("clustertwin")
def separate_engine_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """The in-memory layer cannot carry frames from ``run_engine`` to the web processes."""
    if channel_layer_backend() == IN_MEMORY_LAYER and app_setting("ENGINE_MODE") == "separate":
        return [checks.Error(
            "CLUSTERTWIN_ENGINE=separate with the in-memory channel layer: frames from "
            "`manage.py run_engine` cannot reach the web processes",
            hint="Set REDIS_URL (channels-redis), or CLUSTERTWIN_ENGINE=embedded.",
            id="clustertwin.E001")]
    return []


# A deployment check (`manage.py check --deploy`): the single-process `make run` demo uses the
# in-memory layer with DEBUG off on purpose, and every command would print it otherwise.
@checks.register("clustertwin", deploy=True)
def in_memory_layer_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if channel_layer_backend() == IN_MEMORY_LAYER and not settings.DEBUG:
        return [checks.Warning(
            "the in-memory channel layer with DEBUG=False: it serves one process only",
            hint="Set REDIS_URL for more than one daphne worker or a separate engine.",
            id="clustertwin.W001")]
    return []
