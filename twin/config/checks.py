"""System checks for setup mistakes of the live engine and its channel layer."""

from django.conf import settings
from django.core import checks

from twin import app_setting

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


@checks.register("clustertwin")
def live_policy_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """The live twin's policy exists, and the ``slurm`` policy has a slurm.conf it can read."""
    from twin.live.policy import LivePolicyError, live_policy

    try:
        live_policy()
    except LivePolicyError as exc:
        return [checks.Error(str(exc), hint="See docs/slurm_policy.md.", id="clustertwin.E003")]
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


# A deployment check: on a shared Redis the name keeps instances apart (twin.config.instance).
@checks.register("clustertwin", deploy=True)
def instance_name_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    from twin.config.instance import instance_name_default

    name = app_setting("INSTANCE")
    if (getattr(settings, "REDIS_URL", None)
            and name == instance_name_default(settings.DATABASES["default"])):
        return [checks.Warning(
            f"REDIS_URL and no CLUSTERTWIN_INSTANCE: this instance is named {name!r} after its "
            "database (and this host, for a database on it); a process that reaches the "
            "database by another path or host would be another instance",
            hint="Set CLUSTERTWIN_INSTANCE, the same in every process of this instance and in "
            "no other's.", id="clustertwin.W005")]
    return []


# ----------------------------------------------------------------- production security
# Deployment checks: `make run` and the tests are the published demo on purpose.
@checks.register("clustertwin", checks.Tags.security, deploy=True)
def secret_key_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    messages = []
    if settings.SECRET_KEY == getattr(settings, "DEVELOPMENT_SECRET_KEY", None):
        messages.append(checks.Error(
            "SECRET_KEY is the published development key: anyone can sign cookies this "
            "server trusts (sessions, messages)",
            hint="Set SECRET_KEY in the environment (50+ random characters).",
            id="clustertwin.E002"))
    if getattr(settings, "CLUSTERTWIN_INSECURE_DEMO", False):
        messages.append(checks.Warning(
            "CLUSTERTWIN_INSECURE_DEMO is on: the development SECRET_KEY is allowed and "
            "cookies, HTTPS redirect and HSTS default to plain HTTP",
            hint="Unset it in production.", id="clustertwin.W002"))
    return messages


def _csp_sources(directive: str) -> list[str]:
    directives = (getattr(settings, "CONTENT_SECURITY_POLICY", None) or {}).get("DIRECTIVES", {})
    sources = directives.get(directive)
    return list(sources if sources is not None else directives.get("default-src") or [])


@checks.register("clustertwin", checks.Tags.security, deploy=True)
def content_security_policy_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if "csp.middleware.CSPMiddleware" not in settings.MIDDLEWARE:
        return [checks.Warning("no Content-Security-Policy header: csp.middleware.CSPMiddleware "
                               "is not in MIDDLEWARE", id="clustertwin.W003")]
    unsafe = {"'unsafe-inline'", "'unsafe-eval'", "*"} & set(_csp_sources("script-src"))
    if unsafe or not _csp_sources("script-src"):
        return [checks.Warning(
            f"the Content-Security-Policy lets scripts run from anywhere or inline "
            f"({', '.join(sorted(unsafe)) or 'no script-src nor default-src'})",
            hint="Keep script-src to 'self': page scripts live in static/js.",
            id="clustertwin.W003")]
    return []


@checks.register("clustertwin", checks.Tags.security, deploy=True)
def login_throttling_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if not getattr(settings, "AXES_ENABLED", True) or "axes" not in settings.INSTALLED_APPS:
        return [checks.Warning("login throttling (django-axes) is off: passwords can be "
                               "guessed at full speed", id="clustertwin.W004")]
    return []
