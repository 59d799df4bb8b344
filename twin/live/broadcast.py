"""The one module that names the live twin's channel-layer groups, builds their messages and
publishes to them.

Frames go from the engine driver to every WebSocket consumer through the ``twin.frames``
group; commands (drills, speed, pause) go from services to the driver through ``twin.engine``.
A frame is JSON-encoded once here and the same text is sent to every client: consumers never
re-encode a frame (only a per-client drop count is spliced into its head, see
:func:`frame_with_dropped`).

Consumers join the frames group through :func:`frames_join`. With the in-memory layer (one
process, the embedded engine) the group is a dict of this process's listeners: channels'
in-memory layer scans every channel and group on every receive, which made a frame's fan-out
quadratic in the number of sockets (p50 latency 155 ms at 500 clients, 17 ms at 100). With
a real layer (Redis) the group is the layer's own.

Whatever crosses a real layer is signed (HMAC-SHA256, :func:`django.utils.crypto.salted_hmac`:
a key derived from ``SECRET_KEY``, salted with the purpose and the layer's channel prefix, so
one instance's messages do not verify on another that shares the key) and checked on receipt:
anyone who can reach Redis can publish to its channels. Commands also carry their issue time
and a nonce, so a captured one cannot be replayed. What does not verify is dropped, logged once
per kind and counted (:func:`refused_counts`). Redis pub/sub ignores database numbers: the
instance's prefix (:func:`channel_prefix`, from its name: :mod:`twin.config.instance`) is what
keeps two instances on one server apart.
"""

from __future__ import annotations

import collections
import inspect
import json
import logging
import math
import secrets
import time
import weakref
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.utils.crypto import constant_time_compare, salted_hmac

from twin import app_setting

logger = logging.getLogger(__name__)

FRAMES_GROUP = "twin.frames"
"""Every connected dashboard joins this group."""

ENGINE_GROUP = "twin.engine"
"""The engine driver (embedded or ``run_engine``) listens on this group for commands."""

FRAME_EVENT = "twin.frame"
"""Group message type of a frame (handled by ``TwinConsumer.twin_frame``)."""

COMMAND_EVENT = "engine.command"
"""Message type of a command to the engine."""

_SEPARATORS = (",", ":")


def frame_encode(frame: dict, *, seq: int, t: float, sent_at: float) -> str:
    """A frame's text: ``type``, ``seq``, ``t`` and ``sent_at`` first, then the rest.

    The head fields come first so a client (or the benchmark) can read them cheaply.
    """
    head = {"type": "frame", "seq": int(seq), "t": float(t), "sent_at": float(sent_at)}
    return _dumps({**head, **{k: v for k, v in frame.items() if k not in head}})


def _dumps(obj) -> str:
    """Strict JSON (browsers reject NaN): a non-finite number becomes null."""
    try:
        return json.dumps(obj, separators=_SEPARATORS, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(obj), separators=_SEPARATORS, allow_nan=False)


def _finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


_local_listeners: dict[str, Callable[[], Callable[[dict], None] | None]] = {}
"""This process's frame listeners by channel name (weak: a consumer that died without leaving
is dropped), when the layer is the in-memory one."""


def _in_process(layer) -> bool:
    return isinstance(layer, InMemoryChannelLayer)


async def frames_join(layer, channel_name: str, deliver: Callable[[dict], None]) -> None:
    """Subscribe a consumer to frames: ``deliver(message)`` in-process, else the layer group.

    ``deliver`` must not block: it is called from the publisher's coroutine.
    """
    if _in_process(layer):
        _local_listeners[channel_name] = (weakref.WeakMethod(deliver)
                                          if inspect.ismethod(deliver) else lambda: deliver)
    else:
        await layer.group_add(FRAMES_GROUP, channel_name)


async def frames_leave(layer, channel_name: str) -> None:
    if _local_listeners.pop(channel_name, None) is None:
        await layer.group_discard(FRAMES_GROUP, channel_name)


async def frame_publish(frame: dict, seq: int, t: float, *, layer=None) -> str:
    """Encode ``frame`` once and send it to every dashboard; returns the text sent.

    ``sent_at`` (epoch seconds, the publisher's wall clock) lets clients measure delivery
    latency.
    """
    text = frame_encode(frame, seq=seq, t=t, sent_at=time.time())
    message = {"type": FRAME_EVENT, "text": text, "seq": int(seq)}
    layer = layer or get_channel_layer()
    if _in_process(layer):
        for name, ref in list(_local_listeners.items()):
            deliver = ref()
            if deliver is None:
                _local_listeners.pop(name, None)
            else:
                deliver(message)
    else:
        message["sig"] = _signature("frame", layer, _frame_signed_part(message["seq"], text))
        await layer.group_send(FRAMES_GROUP, message)
    return text


def frame_verify(message, *, layer) -> bool:
    """True if ``message``, received from ``layer``, is a frame this instance signed.

    Anything else (another type, unsigned, badly signed) is refused: logged once, counted.
    Every consumer of a process receives the same frame: it is verified once.
    """
    if not isinstance(message, dict) or message.get("type") != FRAME_EVENT:
        kind = message.get("type") if isinstance(message, dict) else type(message).__name__
        return _refuse("layer message", f"a {kind!r} message where only frames are expected")
    text, seq, sig = message.get("text"), message.get("seq"), message.get("sig")
    if (not isinstance(text, str) or not isinstance(sig, str) or isinstance(seq, bool)
            or not isinstance(seq, int)):
        return _refuse("frame", "unsigned or malformed")
    prefix = _layer_prefix(layer)
    last = _frame_verified
    if (last["sig"] == sig and last["seq"] == seq and last["prefix"] == prefix
            and last["text"] == text):
        return True
    if not constant_time_compare(sig, _signature("frame", layer, _frame_signed_part(seq, text))):
        return _refuse("frame", "bad signature")
    last.update(sig=sig, seq=seq, prefix=prefix, text=text)
    return True


_frame_verified: dict = {"sig": None, "seq": None, "prefix": None, "text": None}


async def frame_receive(layer, channel: str) -> dict:
    """The next message on a consumer's ``channel`` that is a frame this instance signed; the
    others (whatever anyone reaching Redis published there) are dropped, logged once, counted."""
    while True:
        message = await _receive_decoded(layer, channel, "frame")
        if frame_verify(message, layer=layer):
            return message


def _frame_signed_part(seq: int, text: str) -> str:
    return f"{int(seq)}:{text}"


def frame_with_dropped(text: str, dropped: int) -> str:
    """``text`` with ``"dropped": n`` as its first field: the frames this client missed.

    A splice rather than a re-encode: the frame stays encoded once for all clients.
    """
    return f'{{"dropped":{int(dropped)},{text[1:]}'


def snapshot_encode(frame: dict, *, seq: int, **state) -> str:
    """The full state a client gets on connect or resync: the latest frame as a snapshot.

    ``state`` (health, speed, paused, ...) overrides the frame's own fields with the freshest
    values. With no frame yet: ``{"type": "snapshot", "seq": seq, "pending": true}``.
    """
    head = {"type": "snapshot", "seq": int(seq)}
    if not frame:
        return _dumps({**head, "pending": True, **state})
    body = {k: v for k, v in frame.items() if k not in head}
    return _dumps({**head, **body, **state})


def error_encode(message: str) -> str:
    return json.dumps({"type": "error", "message": message})


def ack_encode(of: str, **values) -> str:
    return json.dumps({"type": "ack", "of": of, **values})


def command_message(command: str, *, layer, **params) -> dict:
    """A command to the engine, signed for ``layer``, with its issue time and a nonce."""
    body = {"command": command, "params": params, "issued": time.time(),
            "nonce": secrets.token_hex(16)}
    return {"type": COMMAND_EVENT, **body,
            "sig": _signature("command", layer, _canonical(body))}


def command_send(command: str, **params) -> None:
    """Send a command to the engine driver (from synchronous code: services, views)."""
    async_to_sync(command_send_async)(command, **params)


async def command_send_async(command: str, *, layer=None, **params) -> None:
    layer = layer or get_channel_layer()
    await layer.group_send(ENGINE_GROUP, command_message(command, layer=layer, **params))


class ForgedMessage(ValueError):
    """A message from the channel layer that this instance did not sign (or a replay)."""


def command_verify(message, *, layer) -> dict:
    """The command a signed engine message carries, as ``command_parse`` reads it:
    ``{"type": "engine.command", "command": ..., "params": ...}``.

    Raises :class:`ForgedMessage` when the message is unsigned or badly signed, was issued more
    than ``CLUSTERTWIN["COMMAND_MAX_AGE_S"]`` ago (or as far ahead: clocks of the web and engine
    hosts must agree that well), or was seen before (a replay).
    """
    if not isinstance(message, dict) or message.get("type") != COMMAND_EVENT:
        raise ForgedMessage("not an engine command")
    body = {k: message.get(k) for k in ("command", "params", "issued", "nonce")}
    sig = message.get("sig")
    if (not isinstance(sig, str) or not isinstance(body["nonce"], str)
            or isinstance(body["issued"], bool) or not isinstance(body["issued"], int | float)):
        raise ForgedMessage("unsigned command")
    try:
        expected = _signature("command", layer, _canonical(body))
    except (TypeError, ValueError):
        raise ForgedMessage("a command that is not plain JSON") from None
    if not constant_time_compare(sig, expected):
        raise ForgedMessage("bad signature")
    max_age = app_setting("COMMAND_MAX_AGE_S")
    now = time.time()
    if not math.isfinite(body["issued"]) or abs(now - body["issued"]) > max_age:
        raise ForgedMessage(f"issued {now - body['issued']:.0f} s ago (stale or replayed)")
    while _nonces and next(iter(_nonces.values())) < now - max_age:
        _nonces.popitem(last=False)
    if body["nonce"] in _nonces:
        raise ForgedMessage("replayed")
    _nonces[body["nonce"]] = body["issued"]
    return {"type": COMMAND_EVENT, "command": body["command"], "params": body["params"]}


_nonces: collections.OrderedDict[str, float] = collections.OrderedDict()
"""Nonces of the commands verified in the last ``COMMAND_MAX_AGE_S``, oldest first."""


async def command_receive(layer, channel: str) -> dict:
    """The next command on the engine's ``channel`` that verifies (see :func:`command_verify`);
    the others are dropped, logged once and counted."""
    while True:
        message = await _receive_decoded(layer, channel, "command")
        try:
            return command_verify(message, layer=layer)
        except ForgedMessage as exc:
            _refuse("command", str(exc))


async def _receive_decoded(layer, channel: str, kind: str):
    """The next message on ``channel`` that the layer can decode (forged bytes may not be
    msgpack: channels-redis raises while decoding, which would end the receiver)."""
    while True:
        try:
            return await layer.receive(channel)
        except (ValueError, TypeError) as exc:
            _refuse(kind, f"undecodable ({type(exc).__name__})")


# ----------------------------------------------------------------- signatures and prefixes
def _signature(purpose: str, layer, payload: str) -> str:
    return salted_hmac(f"{__name__}.{purpose}:{_layer_prefix(layer)}", payload,
                       algorithm="sha256").hexdigest()


def _canonical(body: dict) -> str:
    return json.dumps(body, sort_keys=True, separators=_SEPARATORS)


def _layer_prefix(layer) -> str:
    """The layer's channel-name prefix (``""`` for one without, e.g. the in-memory layer)."""
    return str(getattr(layer, "prefix", "") or "")


_refused: collections.Counter = collections.Counter()


def _refuse(kind: str, why: str) -> bool:
    """Drop a message from the layer: logged the first time per kind, counted always."""
    if not _refused[kind]:
        logger.warning("dropped a %s from the channel layer: %s (further ones are only counted)",
                       kind, why)
    _refused[kind] += 1
    return False


def refused_counts() -> dict[str, int]:
    """Messages from the channel layer dropped by this process, by kind (for /metrics)."""
    return dict(_refused)


def channel_prefix(instance: str, redis_url: str | None) -> str:
    """The prefix of every channel, group and key of ``instance`` on Redis: ``ct.<name>.<n>.``.

    ``n`` is the Redis database number of ``redis_url`` (path or ``?db=``): Redis pub/sub
    ignores database numbers, so one name on two databases still needs two prefixes.

    >>> a = channel_prefix("twin-prod", "redis://redis:6379/0")
    >>> a, a == channel_prefix("twin-prod", "redis://:secret@redis:6379/0")
    ('ct.twin-prod.0.', True)
    >>> channel_prefix("twin-prod", "redis://redis:6379/1"), channel_prefix("twin-prod", None)
    ('ct.twin-prod.1.', 'ct.twin-prod.0.')
    """
    number = 0
    if redis_url:
        url = urlsplit(redis_url)
        given = parse_qs(url.query).get("db", [url.path.strip("/")])[0]
        number = int(given) if given.isdigit() else 0
    return f"ct.{instance}.{number}."
