"""Django settings for ClusterTwin, read from the environment.

Unset variables give the embedded default: SQLite and the in-memory channel layer.
``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` (channels-redis) are the scale-out path.

With ``DEBUG`` off the defaults are production ones: a ``SECRET_KEY`` of your own is required,
cookies are HTTPS-only and HTTP is redirected to HTTPS. ``CLUSTERTWIN_INSECURE_DEMO=1``
(``make run``, the tests) declares a local demo over plain HTTP instead.
"""

from datetime import timedelta
from pathlib import Path

import dj_database_url
import plotly
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from scheduler.presets import LIVE_SPEEDUP
from twin.config.env import env_bool, env_float, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent

DEBUG = env_bool("DEBUG", False)
# The published demo: the development key, demo passwords, plain HTTP on 127.0.0.1.
CLUSTERTWIN_INSECURE_DEMO = env_bool("CLUSTERTWIN_INSECURE_DEMO", False)
DEVELOPMENT_SECRET_KEY = "clustertwin-insecure-development-key-set-SECRET_KEY-in-production"
SECRET_KEY = env_str("SECRET_KEY", DEVELOPMENT_SECRET_KEY)
if SECRET_KEY == DEVELOPMENT_SECRET_KEY and not (DEBUG or CLUSTERTWIN_INSECURE_DEMO):
    # Everyone has this key: with it anyone can sign cookies (sessions, messages) the server
    # trusts. A fixed key keeps `make run` sessions valid across restarts, so the demo says so.
    raise ImproperlyConfigured(
        "SECRET_KEY is the published development key and DEBUG is off: set SECRET_KEY (e.g. "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))'), or "
        "CLUSTERTWIN_INSECURE_DEMO=1 for a local demo over plain HTTP")
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
    "axes",
    "csp",
    "twin",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "twin.config.stopping.RefuseWhileStopping",  # 503 for commands while the server stops
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "twin.config.middleware.LoginRequiredEverywhere",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last, as django-axes asks: it turns a locked-out login into its 429 answer
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "twin.config.urls"
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
ASGI_APPLICATION = "twin.config.asgi.application"

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}", conn_max_age=60,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the live engine write snapshots while daphne serves reads. IMMEDIATE takes the
    # write lock at BEGIN, so concurrent writers queue for up to `timeout` seconds (SQLite's
    # busy_timeout) rather than failing at once with "database is locked" when a read
    # transaction tries to become a write. One writer at a time is SQLite's limit: past it,
    # move to PostgreSQL (docs/live.md).
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": env_float("CLUSTERTWIN_SQLITE_TIMEOUT_S", 20.0, minimum=0.0),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL and SECRET_KEY == DEVELOPMENT_SECRET_KEY:
    # Frames and commands crossing Redis are signed with a key derived from SECRET_KEY: with the
    # published one, anyone who reaches Redis could show dashboards anything and steer the
    # engine. The demo flag does not lift this: a demo has no Redis.
    raise ImproperlyConfigured(
        "SECRET_KEY is the published development key and REDIS_URL is set: anyone who reaches "
        "Redis could sign frames and engine commands with it; set SECRET_KEY (the same in "
        "every process of this instance), demo flag or not")
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
AUTHENTICATION_BACKENDS = [
    # django-axes first: it refuses a locked-out username+address before a password is checked
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
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
# `collectstatic` (run by `make run`) writes gzip (and brotli, where installed) copies that
# WhiteNoise serves to clients that accept them: plotly.min.js is 4.8 MB plain, ~1.4 MB gzip
STORAGES = {"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"}}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
# CSRF failures on the JSON API answer in JSON (and as a page elsewhere)
CSRF_FAILURE_VIEW = "twin.pages.views.csrf_failure"
X_FRAME_OPTIONS = "DENY"

# HTTPS: on by default unless DEBUG or the demo flag says this is plain HTTP on a desk.
# Behind a TLS-terminating proxy set SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,https
# (the proxy must overwrite that header), or the redirect loops.
_HTTPS = not (DEBUG or CLUSTERTWIN_INSECURE_DEMO)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _HTTPS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _HTTPS)
# An hour to start with: raise it (31536000) once HTTPS is known to work, as browsers then
# refuse plain HTTP to this host for that long.
SECURE_HSTS_SECONDS = int(env_float("SECURE_HSTS_SECONDS", 3600 if _HTTPS else 0, minimum=0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
_PROXY_SSL_HEADER = env_list("SECURE_PROXY_SSL_HEADER", [])
if _PROXY_SSL_HEADER:
    if len(_PROXY_SSL_HEADER) != 2:
        raise ImproperlyConfigured("SECURE_PROXY_SSL_HEADER: give a header and a value, e.g. "
                                   "HTTP_X_FORWARDED_PROTO,https")
    SECURE_PROXY_SSL_HEADER = tuple(_PROXY_SSL_HEADER)

# Content-Security-Policy (django-csp): scripts only from our own static files, no inline
# script, no eval (Plotly's SVG and canvas traces need neither). Styles allow 'unsafe-inline':
# Plotly writes style attributes on its SVG and injects a <style> for its modebar and hover
# labels. Heatmaps are drawn to a canvas and shown as a data: image. The WebSocket is
# same-origin ('self' covers ws:/wss: to this host in current browsers).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "report-uri": env_list("CSP_REPORT_URI", []) or None,
    },
}

# Login throttling (django-axes), for the site's and the admin's login alike: after
# AXES_FAILURE_LIMIT wrong passwords for one username from one address, that pair is locked
# out (429) for AXES_COOLOFF_MINUTES (0: until `manage.py axes_reset` or the admin's "access
# attempts" page clears it). Axes reads REMOTE_ADDR: behind a proxy every client shares the
# proxy's address, so the lockout is then per username.
AXES_FAILURE_LIMIT = int(env_float("AXES_FAILURE_LIMIT", 5, minimum=1))
_COOLOFF_MINUTES = env_float("AXES_COOLOFF_MINUTES", 15, minimum=0)
AXES_COOLOFF_TIME = timedelta(minutes=_COOLOFF_MINUTES) if _COOLOFF_MINUTES else None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False  # no banner on every manage.py command; lockouts are still logged

# App knobs, read through twin.app_setting().
CLUSTERTWIN = {
    "DEMO_PASSWORD": env_str("CLUSTERTWIN_DEMO_PASSWORD", "clustertwin"),
    "DEFAULT_PRESET": env_str("CLUSTERTWIN_PRESET", "noc-4k"),  # tests: dev-small (pyproject)
    # the inventory the live engine runs: a Cluster's name ("" = the most recently built)
    "CLUSTER": env_str("CLUSTERTWIN_CLUSTER", ""),
    # live engine: "embedded" runs it inside the daphne process; "separate" expects
    # `manage.py run_engine` (and REDIS_URL, so frames cross processes); "off" runs none
    # (tests, or a web process that only serves pages)
    "ENGINE_MODE": env_str("CLUSTERTWIN_ENGINE", "embedded"),
    # simulated s per wall s
    "SPEEDUP": env_float("CLUSTERTWIN_SPEEDUP", LIVE_SPEEDUP, minimum=0.0),
    "FRAME_INTERVAL_S": env_float("CLUSTERTWIN_FRAME_INTERVAL_S", 1.0, minimum=0.05),
    "SNAPSHOT_INTERVAL_S": env_float("CLUSTERTWIN_SNAPSHOT_INTERVAL_S", 60.0, minimum=1.0),
    # a live state older than this (wall s) while it says the engine runs reads as "down"
    "HEARTBEAT_S": env_float("CLUSTERTWIN_HEARTBEAT_S", 10.0, minimum=1.0),
    # wall seconds between the live engine's looks at the inventory's revision (re-plans)
    "INVENTORY_POLL_S": env_float("CLUSTERTWIN_INVENTORY_POLL_S", 2.0, minimum=0.1),
    "SEED": int(env_float("CLUSTERTWIN_SEED", 0, minimum=0)),
    # the live twin's scheduling policy (a name of scheduler.scheduling.policies.REGISTRY;
    # "slurm" schedules by CLUSTERTWIN_SLURM_CONF, see docs/slurm_policy.md)
    "POLICY": env_str("CLUSTERTWIN_POLICY", "default"),
    # what drives the live state: "simulate" (the engine's own events) or "mirror" (a real
    # cluster: Slurm for nodes and jobs, Prometheus/DCGM for GPU telemetry; see docs/mirror.md)
    "SOURCE": env_str("CLUSTERTWIN_SOURCE", "simulate"),
    "MIRROR_POLL_S": env_float("CLUSTERTWIN_MIRROR_POLL_S", 15.0, minimum=0.2),
    "MIRROR_TIMEOUT_S": env_float("CLUSTERTWIN_MIRROR_TIMEOUT_S", 10.0, minimum=0.1),
    # the most one source may answer, in bytes (over it: one error line, nothing applied)
    "MIRROR_MAX_BYTES": int(env_float("CLUSTERTWIN_MIRROR_MAX_BYTES", 256 * 2**20,
                                      minimum=1024)),
    # Slurm: its commands (sinfo/squeue/sacct --json, SLURM_CONF if given) or slurmrestd
    "SLURM_CONF": env_str("CLUSTERTWIN_SLURM_CONF", ""),
    "SLURM_REST_URL": env_str("CLUSTERTWIN_SLURM_REST_URL", ""),
    "SLURM_REST_USER": env_str("CLUSTERTWIN_SLURM_REST_USER", ""),
    "SLURM_REST_TOKEN": env_str("CLUSTERTWIN_SLURM_REST_TOKEN", ""),
    # Prometheus scraping the DCGM exporter ("" = no telemetry source)
    "PROMETHEUS_URL": env_str("CLUSTERTWIN_PROMETHEUS_URL", ""),
    "PROMETHEUS_TOKEN": env_str("CLUSTERTWIN_PROMETHEUS_TOKEN", ""),
    # history (twin.live.history): one sample every HISTORY_STEP_S simulated seconds, kept for
    # HISTORY_RETENTION_S simulated seconds
    "HISTORY_STEP_S": env_float("CLUSTERTWIN_HISTORY_STEP_S", 300.0, minimum=1.0),
    "HISTORY_RETENTION_S": env_float("CLUSTERTWIN_HISTORY_RETENTION_S", 90 * 86400.0,
                                     minimum=3600.0),
    # studies (docs/studies.md): their files under STUDY_DIR/ID; run on the Dask scheduler at
    # STUDY_SCHEDULER (tcp://HOST:8786), or on an embedded LocalCluster of STUDY_WORKERS
    # processes (0: one per core but one, which the web process keeps)
    "STUDY_DIR": env_str("CLUSTERTWIN_STUDY_DIR", str(BASE_DIR / "var" / "studies")),
    "STUDY_SCHEDULER": env_str("CLUSTERTWIN_STUDY_SCHEDULER", ""),
    "STUDY_WORKERS": int(env_float("CLUSTERTWIN_STUDY_WORKERS", 0, minimum=0)),
}
SOURCES = ("simulate", "mirror")
if CLUSTERTWIN["SOURCE"] not in SOURCES:
    raise ImproperlyConfigured(f"CLUSTERTWIN_SOURCE={CLUSTERTWIN['SOURCE']!r}: "
                               f"choose one of {', '.join(SOURCES)}")
ENGINE_MODES = ("embedded", "separate", "off")
if CLUSTERTWIN["ENGINE_MODE"] not in ENGINE_MODES:
    raise ImproperlyConfigured(f"CLUSTERTWIN_ENGINE={CLUSTERTWIN['ENGINE_MODE']!r}: "
                               f"choose one of {', '.join(ENGINE_MODES)}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"refusals": {"()": "twin.config.log_filters.RefusalsWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["refusals"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# --- WebSocket and Redis hardening (issue 13) ---
# Redis: REDIS_URL may carry a password and TLS, e.g. rediss://:PASSWORD@redis.example:6380/0
# (rediss:// checks the server's certificate against the system CAs, or against
# ?ssl_ca_certs=/path/ca.pem; rediss://USER:PASSWORD@... with Redis ACLs). Redis pub/sub ignores
# the database number, so every channel, group and key of this instance starts with
# ct.<INSTANCE>.<Redis db number>. (twin.config.instance): CLUSTERTWIN_INSTANCE, by default
# derived from the database taken absolutely (a SQLite file's resolved path and this host's
# name; a server's host:port/name); every process of one instance must agree. serve and
# run_engine claim the name on Redis while they run (expiring INSTANCE_CLAIM_S after a process
# dies); another deployment under that name, or a second engine, is refused. Frames and
# commands that cross Redis are signed with a key derived from SECRET_KEY (never the published
# one: refused above): every process of an instance shares SECRET_KEY, and the clocks of web
# and engine hosts agree within COMMAND_MAX_AGE_S.
# Dashboard sockets (twin.sockets.consumers; close codes 4401 4403 4408 4429): sessions re-checked
# every
# WS_RECHECK_S wall s; WS_MESSAGES_PER_S sustained and WS_MESSAGE_BURST at once from a client;
# WS_MAX_QUEUED_BYTES written while a client's send buffer is full, or WS_STALLED_FRAMES frames
# in a row that find it full, close a client that does not read; a frame more than
# WS_MAX_SEQ_JUMP ahead of the last one sent is not trusted.
from twin.config.instance import instance_name  # noqa: E402
from twin.live.broadcast import channel_prefix  # noqa: E402

if env_str("CLUSTERTWIN_CHANNEL_PREFIX"):
    raise ImproperlyConfigured("CLUSTERTWIN_CHANNEL_PREFIX is no longer read: name this instance "
                               "with CLUSTERTWIN_INSTANCE (the same in all its processes)")
_INSTANCE = instance_name(env_str("CLUSTERTWIN_INSTANCE"), DATABASES["default"])
CLUSTERTWIN.update({
    "INSTANCE": _INSTANCE,
    "CHANNEL_PREFIX": channel_prefix(_INSTANCE, REDIS_URL),
    "INSTANCE_CLAIM_S": env_float("CLUSTERTWIN_INSTANCE_CLAIM_S", 30.0, minimum=1.0),
    "COMMAND_MAX_AGE_S": env_float("CLUSTERTWIN_COMMAND_MAX_AGE_S", 60.0, minimum=1.0),
    "WS_RECHECK_S": env_float("CLUSTERTWIN_WS_RECHECK_S", 10.0, minimum=0.01),
    "WS_MESSAGES_PER_S": env_float("CLUSTERTWIN_WS_MESSAGES_PER_S", 5.0, minimum=0.01),
    "WS_MESSAGE_BURST": int(env_float("CLUSTERTWIN_WS_MESSAGE_BURST", 20, minimum=1)),
    "WS_MAX_QUEUED_BYTES": int(env_float("CLUSTERTWIN_WS_MAX_QUEUED_BYTES", 1_048_576,
                                         minimum=65_536)),
    "WS_STALLED_FRAMES": int(env_float("CLUSTERTWIN_WS_STALLED_FRAMES", 30, minimum=1)),
    "WS_MAX_SEQ_JUMP": int(env_float("CLUSTERTWIN_WS_MAX_SEQ_JUMP", 10_000, minimum=1)),
})
if REDIS_URL:
    CHANNEL_LAYERS["default"].setdefault("CONFIG", {})["prefix"] = CLUSTERTWIN["CHANNEL_PREFIX"]

# --- Prometheus scrapers: who may read /metrics and /metrics/dcgm (issue 14) ---
# Besides logged-in users: a bearer token (CLUSTERTWIN_METRICS_TOKEN; unset = bearer access
# off) and an allow list of client networks (CLUSTERTWIN_METRICS_ALLOW, comma-separated CIDRs
# such as 10.0.0.0/8,127.0.0.1/32; empty = off), matched against REMOTE_ADDR only: behind a
# proxy that is the proxy's address, so allow the proxy or use the token.
import ipaddress  # noqa: E402

_METRICS_ALLOW = []
for _cidr in env_list("CLUSTERTWIN_METRICS_ALLOW", []):
    try:
        _METRICS_ALLOW.append(ipaddress.ip_network(_cidr))
    except ValueError as _exc:
        raise ImproperlyConfigured(f"CLUSTERTWIN_METRICS_ALLOW: {_exc} (give networks such as "
                                   "10.0.0.0/8,127.0.0.1/32, comma-separated)") from None
CLUSTERTWIN.update({
    "METRICS_TOKEN": env_str("CLUSTERTWIN_METRICS_TOKEN"),
    "METRICS_ALLOW": tuple(_METRICS_ALLOW),
})

# --- Alerts (issue 16; twin.alerts.rules) ---
# Rules are re-read every ALERT_RULES_REFRESH_S wall s (edits in the admin of another process).
# CLUSTERTWIN_ALERT_WEBHOOK_URL (unset = off): an Alertmanager-style receiver; each fire and
# resolve is POSTed as Alertmanager's webhook JSON (version "4") from a background thread, with
# ALERT_WEBHOOK_TIMEOUT_S per try, ALERT_WEBHOOK_RETRIES retries (backoff 1, 2, 4 … times
# ALERT_WEBHOOK_BACKOFF_S) and at most ALERT_WEBHOOK_QUEUE messages waiting (more are dropped).
_ALERT_WEBHOOK_URL = env_str("CLUSTERTWIN_ALERT_WEBHOOK_URL", "")
if _ALERT_WEBHOOK_URL and not _ALERT_WEBHOOK_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"CLUSTERTWIN_ALERT_WEBHOOK_URL={_ALERT_WEBHOOK_URL!r}: give an "
                               "http:// or https:// URL")
CLUSTERTWIN.update({
    "ALERT_RULES_REFRESH_S": env_float("CLUSTERTWIN_ALERT_RULES_REFRESH_S", 5.0, minimum=0.0),
    "ALERT_WEBHOOK_URL": _ALERT_WEBHOOK_URL,
    "ALERT_WEBHOOK_TIMEOUT_S": env_float("CLUSTERTWIN_ALERT_WEBHOOK_TIMEOUT_S", 5.0,
                                         minimum=0.1),
    "ALERT_WEBHOOK_RETRIES": int(env_float("CLUSTERTWIN_ALERT_WEBHOOK_RETRIES", 3, minimum=0)),
    "ALERT_WEBHOOK_BACKOFF_S": env_float("CLUSTERTWIN_ALERT_WEBHOOK_BACKOFF_S", 1.0, minimum=0.0),
    "ALERT_WEBHOOK_QUEUE": int(env_float("CLUSTERTWIN_ALERT_WEBHOOK_QUEUE", 1000, minimum=1)),
})
