"""Strict parsing of settings from the environment.

A typo in an environment variable is a setup mistake: it fails loudly at start-up rather than
silently falling back to a default.
"""

from __future__ import annotations

import os

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class EnvError(ValueError):
    """An environment variable holds a value that cannot be parsed."""


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise EnvError(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_str(name: str, default: str | None = None) -> str | None:
    raw = os.environ.get(name)
    return default if raw is None or raw == "" else raw


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    """A number from the environment; anything unparsable (or below ``minimum``) is an error."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not a number") from None
    if minimum is not None and value < minimum:
        raise EnvError(f"{name}={raw!r} must be >= {minimum}")
    return value
