"""Commands the live engine driver accepts from the ``twin.engine`` group, parsed strictly.

Messages come from services (which already validated them) but travel through a channel layer
that anything on the network may write to, so the driver checks them again: a malformed
command is logged and dropped, never applied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.control.storage_status import TIERS
from scheduler.limits.bounds import JOB_PRIORITY
from scheduler.limits.checks import fraction, integer

SPEED_MAX = 10_000.0
"""Fastest speed-up, simulated seconds per wall second (the same bound as the services')."""

ENGINE_COMMANDS = ("drain_node", "undrain_node", "node_down", "node_up")
SWITCH_COMMANDS = ("switch_down", "switch_up")
LINK_COMMANDS = ("link_down", "link_up")
FEED_COMMANDS = ("feed_down", "feed_up")
COOLING_COMMANDS = ("cooling_down", "cooling_up")
GPU_COMMANDS = ("gpu_down", "gpu_up")
STORAGE_COMMANDS = ("storage_down", "storage_degraded", "storage_up")
INVENTORY_COMMANDS = (ENGINE_COMMANDS + SWITCH_COMMANDS + LINK_COMMANDS + FEED_COMMANDS
                      + COOLING_COMMANDS + GPU_COMMANDS + STORAGE_COMMANDS)
"""Every command that carries an inventory edit to the engine (the driver forwards these)."""
JOB_COMMANDS = ("job_hold", "job_release", "job_cancel", "job_requeue", "job_priority")
"""Staff actions on one job (``scheduler.control.job_actions``)."""
ACTION_COMMANDS = JOB_COMMANDS + ("end_drill",)
LOGGED_COMMANDS = INVENTORY_COMMANDS + ACTION_COMMANDS
"""Commands passed to ``Engine.command`` as they are, through the durable command log."""
JOB_NAME_MAX = 200
BY_MAX = 150


class CommandError(ValueError):
    """A command message that cannot be applied; the message says why."""


@dataclass(frozen=True)
class Command:
    name: str
    params: dict = field(default_factory=dict)
    drill_id: int | None = None


def _int(name: str, value) -> int:
    try:
        return integer(name, value, at_least=0, expect="a non-negative integer")
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _speed(value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and 0 < value <= SPEED_MAX):
        raise CommandError(f"speed factor must be a number in (0, {SPEED_MAX:g}], "
                           f"not {value!r}")
    return float(value)


def _storage(name: str, params: dict) -> Command:
    tier = params.get("tier")
    if tier not in TIERS:
        raise CommandError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}")
    if name != "storage_degraded":
        if "factor" in params:
            raise CommandError(f"{name} takes no factor")
        return Command(name, {"tier": tier})
    try:
        return Command(name, {"tier": tier, "factor": fraction("factor", params.get("factor"))})
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _by(params: dict) -> str:
    by = params.get("by", "")
    if not isinstance(by, str) or len(by) > BY_MAX:
        raise CommandError(f"by must be a name of at most {BY_MAX} characters, not {by!r}")
    return by


def _job_action(name: str, params: dict) -> Command:
    job = params.get("job")
    if not isinstance(job, str) or not 0 < len(job) <= JOB_NAME_MAX:
        raise CommandError(f"job must be a job name of at most {JOB_NAME_MAX} characters, "
                           f"not {job!r}")
    out = {"job": job, "by": _by(params)}
    if name == "job_priority":
        try:
            out["priority"] = JOB_PRIORITY.check("priority", params.get("priority"))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    return Command(name, out)


def command_parse(message: dict) -> Command:
    """Turn a ``twin.engine`` group message into a :class:`Command`; raises CommandError."""
    if not isinstance(message, dict):
        raise CommandError(f"a command is a dict, not {type(message).__name__}")
    name = message.get("command")
    params = message.get("params") or {}
    if not isinstance(params, dict):
        raise CommandError("command parameters must be a dict")
    if name == "speed":
        return Command("speed", {"factor": _speed(params.get("factor"))})
    if name in ("pause", "resume"):
        return Command(name)
    if name in ENGINE_COMMANDS:
        return Command(name, {"node": _int("node", params.get("node"))})
    if name in SWITCH_COMMANDS:
        return Command(name, {"switch": _int("switch", params.get("switch"))})
    if name in LINK_COMMANDS:
        return Command(name, {"link": _int("link", params.get("link"))})
    if name in FEED_COMMANDS:
        return Command(name, {"rack": _int("rack", params.get("rack"))})
    if name in COOLING_COMMANDS:
        return Command(name, {"loop": _int("loop", params.get("loop"))})
    if name in STORAGE_COMMANDS:
        return _storage(name, params)
    if name in GPU_COMMANDS:
        nic = params.get("nic", False)
        if not isinstance(nic, bool):
            raise CommandError(f"nic must be true or false, not {nic!r}")
        return Command(name, {"gpu": _int("gpu", params.get("gpu")), "nic": nic})
    if name in JOB_COMMANDS:
        return _job_action(name, params)
    if name == "end_drill":
        return Command(name, {"drill_id": _int("drill_id", params.get("drill_id")),
                              "by": _by(params)})
    if name == "drill":
        drill_id = _int("drill_id", params.get("drill_id"))
        kind = params.get("kind")
        target = params.get("target", "random")
        extra = params.get("params") or {}
        if not isinstance(kind, str) or not isinstance(extra, dict):
            raise CommandError("a drill needs a kind (string) and params (dict)")
        if isinstance(target, str) and target.isdigit():
            target = int(target)
        if {"kind", "target", "drill_id"} & set(extra):
            raise CommandError("drill params cannot override kind, target or drill_id")
        # the engine keeps the id so that the drill can be ended early (end_drill)
        return Command("drill", {"kind": kind, "target": target, "drill_id": drill_id,
                                 **extra}, drill_id=drill_id)
    raise CommandError(f"unknown engine command {name!r}")


def json_safe(value):
    """An engine result as plain JSON values (numpy scalars and arrays, tuples, sets)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # numpy scalar or array
        return json_safe(value.tolist())
    return str(value)
