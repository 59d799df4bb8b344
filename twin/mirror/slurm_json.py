"""Reading Slurm's JSON without trusting it: field getters that check each value's type and
name its path (``nodes[3].gres``) in the one error a malformed answer gets."""

from __future__ import annotations

import re

from twin.mirror.errors import SourceError

_NO_VALUE = {0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF}

SOURCE = "slurm"
_NODE_ALIASES = {"maintenance": "maint", "res": "reserved"}
_BUSY = frozenset({"allocated", "mixed", "completing"})


class _Shape(Exception):
    """An unexpected shape at a JSON path (turned into a SourceError by the callers)."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")


def _type_name(value) -> str:
    return "null" if value is None else type(value).__name__


def _str(obj: dict, key: str, path: str, default: str | None = "") -> str:
    value = obj.get(key)
    if value is None:
        if default is None:
            raise _Shape(f"{path}.{key}", "missing")
        return default
    if not isinstance(value, str):
        raise _Shape(f"{path}.{key}", f"expected a string, got {_type_name(value)}")
    return value


def _number(obj: dict, key: str, path: str) -> float | None:
    """A number, unwrapping ``{"set", "infinite", "number"}``; None when unset or infinite."""
    value = obj.get(key)
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, (int, float)):
        raise _Shape(f"{path}.{key}", f"expected a number, got {_type_name(value)}")
    return None if value in _NO_VALUE else value


def _epoch(obj: dict, key: str, path: str) -> float | None:
    value = _number(obj, key, path)
    return float(value) if value else None


def _names(obj: dict, key: str, path: str) -> list[str]:
    """A list of upper- or lower-case names: a list of strings, or one string."""
    value = obj.get(key)
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    if value is None:
        return []
    raise _Shape(f"{path}.{key}", f"expected a string or a list of strings, got "
                                  f"{_type_name(value)}")


def _csv(value, path: str) -> tuple[str, ...]:
    if isinstance(value, dict):                     # sinfo 23.11+: {"total", "active"}
        value = value.get("total", "")
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v for v in value.split(",") if v)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _Shape(path, f"expected a comma-separated string or a list, got {_type_name(value)}")


def _gpu_sum(pattern: re.Pattern, text: str) -> int | None:
    """GPUs in a GRES / TRES string: the untyped count when given, else the typed ones."""
    untyped, typed, seen = 0, 0, False
    for kind, count in pattern.findall(text):
        seen = True
        if kind:
            typed += int(count)
        else:
            untyped += int(count)
    return (untyped or typed) if seen else None


def _node_states(names: list[str]) -> frozenset[str]:
    flags = {_NODE_ALIASES.get(n.lower(), n.lower()) for n in names}
    if flags & {"draining", "drained"}:             # sinfo's words, should a source use them
        flags.add("drain")
    if "drain" in flags:
        flags.add("draining" if flags & _BUSY else "drained")
    return frozenset(flags)


def _fail(origin: str, exc: _Shape) -> SourceError:
    return SourceError(SOURCE, f"{origin}: unexpected JSON at {exc}")


def _top(doc, key: str, origin: str) -> list:
    if not isinstance(doc, dict):
        raise SourceError(SOURCE, f"{origin}: expected a JSON object, got {_type_name(doc)}")
    if (why := _refused(doc, origin)):
        raise SourceError(SOURCE, why)
    items = doc.get(key)
    if not isinstance(items, list):
        raise SourceError(SOURCE, f"{origin}: unexpected JSON at {key}: expected a list, got "
                                  f"{_type_name(items)}")
    return items


def _refused(doc, what: str) -> str:
    """Why an answer is a refusal (its ``errors``), or "" when it is not one."""
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if not (isinstance(errors, list) and errors):
        return ""
    err = errors[0]
    why = (err.get("description") or err.get("error") or err) if isinstance(err, dict) else err
    return f"{what} reported an error: {why}"
