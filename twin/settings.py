"""Django settings for ClusterTwin, read from the environment.

Unset variables give the embedded default: SQLite and the in-memory channel layer.
``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` (channels-redis) are the scale-out path.
"""

from pathlib import Path

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured

from twin.env import env_bool, env_float, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if SECRET_KEY is None:
    if not DEBUG and env_bool("CLUSTERTWIN_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("SECRET_KEY must be set in the environment")
    # A fixed development key keeps sessions valid across restarts of `make run`; production
    # deployments set SECRET_KEY (and CLUSTERTWIN_REQUIRE_SECRET_KEY=1 to enforce it).
    SECRET_KEY = "clustertwin-insecure-development-key-set-SECRET_KEY-in-production"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "twin",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "twin.middleware.LoginRequiredEverywhere",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "twin.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = None
ASGI_APPLICATION = "twin.asgi.application"

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}", conn_max_age=60,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the live engine write snapshots while daphne serves reads.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
# Plotly's bundle ships inside the plotly package: served from there, never from a CDN.
STATICFILES_DIRS = [BASE_DIR / "static",
                    ("vendor/plotly", Path(plotly.__file__).resolve().parent / "package_data")]
STATIC_ROOT = BASE_DIR / "staticfiles"
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
# CSRF failures on the JSON API answer in JSON (and as a page elsewhere)
CSRF_FAILURE_VIEW = "twin.views.csrf_failure"
X_FRAME_OPTIONS = "DENY"

# App knobs, read through twin.conf.app_setting().
CLUSTERTWIN = {
    "DEMO_PASSWORD": env_str("CLUSTERTWIN_DEMO_PASSWORD", "clustertwin"),
    "DEFAULT_PRESET": env_str("CLUSTERTWIN_PRESET", "dev-small"),
    # the inventory the live engine runs: a Cluster's name ("" = the most recently built)
    "CLUSTER": env_str("CLUSTERTWIN_CLUSTER", ""),
    # live engine: "embedded" runs it inside the daphne process; "separate" expects
    # `manage.py run_engine` (and REDIS_URL, so frames cross processes); "off" runs none
    # (tests, or a web process that only serves pages)
    "ENGINE_MODE": env_str("CLUSTERTWIN_ENGINE", "embedded"),
    "SPEEDUP": env_float("CLUSTERTWIN_SPEEDUP", 60.0, minimum=0.0),  # simulated s per wall s
    "FRAME_INTERVAL_S": env_float("CLUSTERTWIN_FRAME_INTERVAL_S", 1.0, minimum=0.05),
    "SNAPSHOT_INTERVAL_S": env_float("CLUSTERTWIN_SNAPSHOT_INTERVAL_S", 60.0, minimum=1.0),
    # wall seconds between the live engine's looks at the inventory's revision (re-plans)
    "INVENTORY_POLL_S": env_float("CLUSTERTWIN_INVENTORY_POLL_S", 2.0, minimum=0.1),
    "SEED": int(env_float("CLUSTERTWIN_SEED", 0, minimum=0)),
}
ENGINE_MODES = ("embedded", "separate", "off")
if CLUSTERTWIN["ENGINE_MODE"] not in ENGINE_MODES:
    raise ImproperlyConfigured(f"CLUSTERTWIN_ENGINE={CLUSTERTWIN['ENGINE_MODE']!r}: "
                               f"choose one of {', '.join(ENGINE_MODES)}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
