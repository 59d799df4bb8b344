"""This instance's name on a shared Redis, and its claim to that name while it runs.

Every channel, group and key an instance uses on Redis starts with ``ct.<name>.<n>.``
(:func:`twin.live.broadcast.channel_prefix`), and frames and commands are signed with a key
salted with that prefix: two instances with different names never hear each other. The name is
``CLUSTERTWIN_INSTANCE``, or else one derived from the database the instance runs on, taken
absolutely: a SQLite file by its resolved path on this host (so ``sqlite:///db.sqlite3`` in
two folders names two instances), a server database by ``host:port/name``, with this host's
name too when the server is this host's own (``localhost``, a socket path).

While it runs, a process that serves sockets or runs the engine on Redis (``manage.py serve``,
``manage.py run_engine``) holds a claim on its name, refreshed by a heartbeat thread, released
on a clean exit, expiring ``CLUSTERTWIN_INSTANCE_CLAIM_S`` after a process died:

* ``<prefix>instance``: who the name belongs to, a fingerprint of the database and
  ``SECRET_KEY``. The processes of one deployment share it (several web workers, the engine);
  another deployment under the same name is refused.
* ``<prefix>instance.holders``: the processes holding it (a sorted set, each member's score
  its expiry in Redis's clock); the name is free once none is left.
* ``<prefix>engine``: the one process that runs the live engine of the instance.

A refused start is one line on stderr and exit status 2; a process that finds its claim taken
by another (after it stalled past the expiry) stops itself with SIGTERM, its clean shutdown.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import secrets
import signal
import socket
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,47}")
"""An instance name: letters, digits, ``-`` and ``_``, at most 48 (it sits in channel names)."""

_LOCAL_HOSTS = {"", "localhost", "localhost.localdomain", "127.0.0.1", "::1", "[::1]"}
_DEFAULT_PORTS = {"postgresql": "5432", "postgis": "5432", "mysql": "3306"}


# ----------------------------------------------------------------- the name
def database_identity(database: dict, *, hostname: str | None = None) -> str:
    """The database of a ``DATABASES`` entry, absolutely: what tells two instances apart.

    >>> pg = {"ENGINE": "django.db.backends.postgresql", "HOST": "DB.example", "PORT": "",
    ...       "NAME": "twin"}
    >>> database_identity(pg, hostname="web1")
    'postgresql://db.example:5432/twin'
    >>> database_identity({**pg, "HOST": "localhost"}, hostname="web1")
    'web1/postgresql://localhost:5432/twin'
    >>> database_identity({"ENGINE": "django.db.backends.sqlite3", "NAME": "/srv/t.db"},
    ...                   hostname="web1")
    'web1/sqlite:/srv/t.db'
    """
    hostname = (hostname or socket.gethostname()).lower()
    vendor = str(database.get("ENGINE") or "").rsplit(".", 1)[-1]
    name = str(database.get("NAME") or "")
    if vendor == "sqlite3":
        if name in ("", ":memory:") or name.startswith("file:"):
            # a private database of this process: nobody else can be the same instance
            return f"{hostname}/sqlite:memory:{os.getpid()}"
        return f"{hostname}/sqlite:{os.path.realpath(name)}"
    host = str(database.get("HOST") or "").lower()
    port = str(database.get("PORT") or _DEFAULT_PORTS.get(vendor, ""))
    identity = f"{vendor}://{host}:{port}/{name}"
    local = host in _LOCAL_HOSTS or host.startswith("127.") or host.startswith("/")
    return f"{hostname}/{identity}" if local else identity


def instance_name_default(database: dict, *, hostname: str | None = None) -> str:
    """``<database name>-<digest>``, the digest of :func:`database_identity`.

    >>> pg = {"ENGINE": "django.db.backends.postgresql", "HOST": "db", "NAME": "twin"}
    >>> a = instance_name_default(pg, hostname="web1")
    >>> a.startswith("twin-"), a == instance_name_default(pg, hostname="web2")
    (True, True)
    >>> a == instance_name_default({**pg, "NAME": "twin-staging"}, hostname="web1")
    False
    """
    identity = database_identity(database, hostname=hostname)
    stem = os.path.splitext(os.path.basename(str(database.get("NAME") or "")))[0]
    label = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:24] or "twin"
    return f"{label}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def instance_name(given: str | None, database: dict) -> str:
    """``given`` (``CLUSTERTWIN_INSTANCE``) checked, else :func:`instance_name_default`."""
    if given is None:
        return instance_name_default(database)
    if not NAME_RE.fullmatch(given):
        raise ImproperlyConfigured(
            f"CLUSTERTWIN_INSTANCE={given!r}: give 1-48 letters, digits, '-' or '_', starting "
            "with a letter or digit")
    return given


# ----------------------------------------------------------------- the claim
_CLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local owner = redis.call('GET', KEYS[1])
if owner and owner ~= ARGV[1] and redis.call('ZCARD', KEYS[2]) > 0 then
  return {'deployment', redis.call('ZRANGE', KEYS[2], 0, 0)[1]}
end
if ARGV[4] == '1' then
  local engine = redis.call('GET', KEYS[3])
  if engine and engine ~= ARGV[2] then return {'engine', engine} end
  redis.call('SET', KEYS[3], ARGV[2], 'PX', ttl)
end
redis.call('ZADD', KEYS[2], now + ttl, ARGV[2])
local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', last)
redis.call('PEXPIREAT', KEYS[2], last)
return false
"""
"""KEYS: owner, holders, engine; ARGV: fingerprint, holder, expiry (ms), "1" for the engine.
Nothing when claimed (or refreshed), else ``[why, the holder in the way]``."""

_RELEASE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('DEL', KEYS[1], KEYS[2]) end
if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
return true
"""


def claim_keys(prefix: str) -> tuple[str, str, str]:
    """The Redis keys of the claim on the instance whose channel prefix is ``prefix``."""
    return f"{prefix}instance", f"{prefix}instance.holders", f"{prefix}engine"


@dataclass
class Claim:
    """One process's claim on its instance's name (and on its engine, with ``engine``)."""

    client: object  # redis.Redis
    name: str
    prefix: str
    fingerprint: str
    engine: bool
    expiry_s: float
    holder: str = ""

    def __post_init__(self):
        if not self.holder:
            self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._claim = self.client.register_script(_CLAIM)
        self._release = self.client.register_script(_RELEASE)

    def _try(self) -> tuple[str, str] | None:
        refused = self._claim(keys=claim_keys(self.prefix), args=[
            self.fingerprint, self.holder, max(1, round(self.expiry_s * 1000)),
            "1" if self.engine else "0"])
        if not refused:
            return None
        why, other = (part.decode() if isinstance(part, bytes) else str(part)
                      for part in refused)
        return why, other

    def take(self, *, takeover: bool = False) -> str | None:
        """Claim or refresh; ``None`` when held, else why not (one line).

        With ``takeover`` (a process starting, never its heartbeat), an engine claim held by
        a process of this host that is gone (``kill -9``: it never released) is taken over at
        once rather than after its expiry: a restart after a crash gets its engine back in
        seconds.
        """
        refused = self._try()
        if takeover and refused and refused[0] == "engine" and holder_dead_here(refused[1]):
            logger.warning("instance %r: taking over the engine claim of %s, a process of this "
                           "host that is gone", self.name, refused[1])
            self._release(keys=claim_keys(self.prefix), args=[refused[1]])
            refused = self._try()
        if not refused:
            return None
        why, other = refused
        if why == "engine":
            return (f"instance {self.name!r} already runs its live engine in process {other} "
                    f"(were it dead on another host, its claim would last {self.expiry_s:g} s): "
                    "stop it first, or give this deployment a CLUSTERTWIN_INSTANCE of its own")
        return (f"instance name {self.name!r} is taken on this Redis by another deployment "
                f"(process {other}: another database or SECRET_KEY): give each deployment a "
                "CLUSTERTWIN_INSTANCE of its own")

    def release(self) -> None:
        self._release(keys=claim_keys(self.prefix), args=[self.holder])


def holder_dead_here(holder: str) -> bool:
    """Whether ``holder`` (``host:pid:token``) names a process of this host that no longer
    runs. Another host's holder, a live (or reused) pid, or a name not of that form: False,
    and the claim lasts until it expires."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: alive
        return False
    return False


def owner_fingerprint(identity: str) -> str:
    """Whose name it is: the database and ``SECRET_KEY`` (an HMAC, so Redis learns neither)."""
    from django.utils.crypto import salted_hmac

    return salted_hmac(f"{__name__}.claim", identity, algorithm="sha256").hexdigest()


def claim_or_exit(*, engine: bool) -> Claim | None:
    """Claim this instance's name on Redis (and its engine, with ``engine``) for as long as the
    process runs; without ``REDIS_URL`` there is nothing to share and nothing is claimed.

    Raises ``CommandError`` (``manage.py`` prints one line and exits with 2) when another
    deployment holds the name, another process runs the engine, or Redis cannot be reached.
    """
    import redis
    from django.conf import settings
    from django.core.management.base import CommandError

    from twin import app_setting

    url = getattr(settings, "REDIS_URL", None)
    if not url:
        return None
    name = app_setting("INSTANCE")
    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    claim = Claim(client=client, name=name, prefix=app_setting("CHANNEL_PREFIX"),
                  fingerprint=owner_fingerprint(database_identity(settings.DATABASES["default"])),
                  engine=engine, expiry_s=app_setting("INSTANCE_CLAIM_S"))
    try:
        refused = claim.take(takeover=True)
    except redis.RedisError as exc:
        where = urlsplit(url)
        raise CommandError(f"cannot claim instance {name!r} on Redis at {where.hostname}:"
                           f"{where.port or 6379}: {' '.join(str(exc).split())}",
                           returncode=2) from None
    if refused:
        raise CommandError(refused, returncode=2)
    stop = threading.Event()
    threading.Thread(target=_heartbeat, args=(claim, stop), name="twin-instance-claim",
                     daemon=True).start()
    atexit.register(_release, claim, stop, os.getpid())
    return claim


def _heartbeat(claim: Claim, stop: threading.Event) -> None:
    """Refresh ``claim`` every third of its expiry until ``stop``; if another process took it
    meanwhile (this one stalled past the expiry), stop this process (SIGTERM: a clean exit)."""
    import redis

    failing = False
    while not stop.wait(claim.expiry_s / 3):
        try:
            lost = claim.take()
        except redis.RedisError as exc:
            if not failing:
                logger.warning("instance %r: cannot refresh its claim on Redis (%s); retrying",
                               claim.name, exc)
            failing = True
            continue
        if failing:
            logger.warning("instance %r: claim on Redis refreshed again", claim.name)
            failing = False
        if lost:
            logger.error("lost the claim on Redis: %s; stopping", lost)
            os.kill(os.getpid(), signal.SIGTERM)
            return


def _release(claim: Claim, stop: threading.Event, pid: int) -> None:
    if os.getpid() != pid:  # a forked child (snapshots) inherits atexit: the claim is not its
        return
    stop.set()
    import redis

    try:
        claim.release()
    except redis.RedisError as exc:
        logger.warning("instance %r: could not release its claim on Redis (%s); it expires in "
                       "%g s", claim.name, exc, claim.expiry_s)
