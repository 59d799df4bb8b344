"""Who is on each open dashboard WebSocket, checked again and again.

A socket is authenticated by its session cookie, and nothing of that is kept for the socket's
life: every command re-reads the session and the user (:func:`steer`), and every
``CLUSTERTWIN["WS_RECHECK_S"]`` one trip to the database checks the sessions of all open sockets
of the process (:meth:`SocketSessions.recheck`). Checks requested together (a thousand
dashboards reconnecting) run in one trip, and a result serves the sockets of the same session
for ``WS_RECHECK_S``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass
from importlib import import_module
from typing import Protocol

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib import auth
from django.core.exceptions import ValidationError
from django.utils.crypto import constant_time_compare

from twin import app_setting
from twin.control import services

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rights:
    """What a session may do on a socket, as its user is now."""

    user_id: int
    steer: bool
    """Staff with ``twin.run_drill``: may set the engine's speed and pause it."""


class SessionEnded(Exception):
    """Nobody is logged in to the session any more (or someone else is)."""


class RightLost(Exception):
    """The session's user lost a right the socket had."""


def session_user(session_key: str | None):
    """The active user logged in to the session ``session_key``, else ``None``.

    Django's own check (the session's backend and password hash, fallback keys included), but
    read-only: the HTTP side cycles or flushes sessions, a socket only looks.
    """
    if not session_key:
        return None
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    try:
        user_id = auth.get_user_model()._meta.pk.to_python(session[auth.SESSION_KEY])
        backend_path = session[auth.BACKEND_SESSION_KEY]
    except (KeyError, ValidationError):
        return None
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    user = auth.load_backend(backend_path).get_user(user_id)  # None when inactive
    session_hash = session.get(auth.HASH_SESSION_KEY)
    if user is None or not session_hash:
        return None
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    if not any(constant_time_compare(session_hash, h) for h in hashes):
        return None
    return user


def _rights_of(user) -> Rights:
    return Rights(user_id=user.pk, steer=user.is_staff and user.has_perm("twin.run_drill"))


def sessions_rights(session_keys) -> dict[str, Rights | None]:
    """The rights of each session now (``None``: nobody is logged in to it)."""
    found = {}
    for key in set(session_keys):
        user = session_user(key)
        found[key] = None if user is None else _rights_of(user)
    return found


def steer(*, session_key: str, rights: Rights, kind: str, value) -> dict:
    """Set the speed (``kind="speed"``) or pause the engine as the session's user is now;
    returns the values to acknowledge.

    Raises :class:`SessionEnded` or :class:`RightLost` (checked against the socket's
    ``rights``) before anything is sent, and the services' ``PermissionDenied`` or
    ``ValidationError``.
    """
    user = session_user(session_key)
    if user is None or user.pk != rights.user_id:
        raise SessionEnded("your session ended: log in again")
    if rights.steer and not _rights_of(user).steer:
        raise RightLost("you may no longer steer the live engine")
    if kind == "speed":
        return {"factor": services.engine_speed_set(user=user, factor=value)}
    return {"paused": services.engine_pause(user=user, paused=value)}


class Socket(Protocol):
    session_key: str | None

    def rights_check(self, rights: Rights | None) -> None:
        """Act on the periodic re-check's verdict (``None``: nobody is logged in now)."""


class SocketSessions:
    """The open sockets of one event loop and the checks of their sessions."""

    def __init__(self):
        self.open: set[Socket] = set()
        self.checked: dict[str, tuple[float, Rights | None]] = {}
        self.waiting: dict[str, list[asyncio.Future]] = {}
        self.batch: asyncio.Task | None = None
        self.ticker: asyncio.Task | None = None

    def add(self, socket: Socket) -> None:
        self.open.add(socket)
        if self.ticker is None:
            self.ticker = asyncio.create_task(self._tick(), name="twin-socket-recheck")

    def discard(self, socket: Socket) -> None:
        self.open.discard(socket)

    async def rights(self, key: str, *, max_age: float) -> Rights | None:
        """The rights of session ``key``, checked at most ``max_age`` seconds ago."""
        hit = self.checked.get(key)
        if hit is not None and time.monotonic() - hit[0] <= max_age:
            return hit[1]
        future = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(key, []).append(future)
        if self.batch is None or self.batch.done():
            self.batch = asyncio.create_task(self._check_waiting())
        return await future

    async def _check_waiting(self) -> None:
        await asyncio.sleep(0)  # sockets connecting in this turn of the loop join the batch
        while self.waiting:
            waiting, self.waiting = self.waiting, {}
            try:
                found = await database_sync_to_async(sessions_rights)(list(waiting))
            except Exception as exc:
                for futures in waiting.values():
                    for future in futures:
                        if not future.done():
                            future.set_exception(exc)
                continue
            self._remember(found)
            for key, futures in waiting.items():
                for future in futures:
                    if not future.done():
                        future.set_result(found[key])

    def _remember(self, found: dict) -> None:
        now = time.monotonic()
        horizon = now - app_setting("WS_RECHECK_S")
        self.checked = {k: v for k, v in self.checked.items() if v[0] >= horizon}
        self.checked.update((key, (now, rights)) for key, rights in found.items())

    async def recheck(self) -> None:
        """Check every open socket's session now and tell each socket."""
        sockets = list(self.open)
        if not sockets:
            return
        found = await database_sync_to_async(sessions_rights)({s.session_key for s in sockets})
        self._remember(found)
        for socket in sockets:
            socket.rights_check(found.get(socket.session_key))

    async def _tick(self) -> None:
        while self.open:
            await asyncio.sleep(app_setting("WS_RECHECK_S"))
            try:
                await self.recheck()
            except Exception:
                logger.exception("re-checking the dashboards' sessions failed; retrying")
        self.ticker = None  # no await since the loop's test: a socket added now starts a new one


_by_loop: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def socket_sessions() -> SocketSessions:
    """The registry of the running event loop (a server has one loop; tests one each)."""
    loop = asyncio.get_running_loop()
    if loop not in _by_loop:
        _by_loop[loop] = SocketSessions()
    return _by_loop[loop]


async def sockets_recheck() -> None:
    """Re-check every open socket of this event loop now (what the periodic task does)."""
    await socket_sessions().recheck()
