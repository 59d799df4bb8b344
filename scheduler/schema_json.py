"""The JSON Schema (draft 2020-12) of the live frame's and the placement's types, generated
from the TypedDicts of :mod:`scheduler.frame_schema` and :mod:`scheduler.placement_schema`.

``python -m scheduler.schema_json > docs/frame.schema.json`` writes it; a test compares the
checked-in file with :func:`schema_text` and validates real frames against it.

>>> json_schema()["$defs"]["Scale"]["required"]
['zmin', 'zmax', 'unit', 'title']
"""

import json
import sys
import types
import typing
from typing import Any, Literal

from scheduler import frame_schema
from scheduler.frame_schema import (
    LiveFrame,
    LostFrame,
    PendingSnapshot,
    PublishedFrame,
    PublishedLostFrame,
    Snapshot,
    StoredFrame,
)
from scheduler.placement_schema import HeatZoom, LivePlacement

MESSAGES = {"LiveFrame": LiveFrame, "StoredFrame": StoredFrame,
            "PublishedFrame": PublishedFrame, "Snapshot": Snapshot,
            "PendingSnapshot": PendingSnapshot, "LostFrame": LostFrame,
            "PublishedLostFrame": PublishedLostFrame, "LivePlacement": LivePlacement,
            "HeatZoom": HeatZoom}
"""The messages the schema describes, by name (each a ``$defs`` entry; ``LiveFrame`` is the
document's root)."""


_SCALARS = {int: "integer", float: "number", str: "string", bool: "boolean",
            type(None): "null"}


def _is_typeddict(tp) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _schema(tp, defs: dict) -> dict:
    """The JSON Schema of ``tp``, adding every TypedDict it reaches to ``defs``."""
    if tp is Any:
        return {}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if _is_typeddict(tp):
        if tp.__name__ not in defs:
            defs[tp.__name__] = {}  # a placeholder: recursion stops here
            defs[tp.__name__] = _object(tp, defs)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        parts = [_schema(a, defs) for a in args]
        if all(set(p) == {"type"} for p in parts):
            return {"type": [p["type"] for p in parts]}
        return {"anyOf": parts}
    if origin is Literal:
        return {"enum": list(args)}
    if origin is list:
        return {"type": "array", "items": _schema(args[0], defs)}
    if origin is tuple:
        return {"type": "array", "prefixItems": [_schema(a, defs) for a in args],
                "items": False, "minItems": len(args), "maxItems": len(args)}
    if origin is dict:
        if args[0] is not str:
            raise TypeError(f"JSON object keys are strings, not {args[0]!r}")
        return {"type": "object", "additionalProperties": _schema(args[1], defs)}
    raise TypeError(f"no JSON Schema for {tp!r}")


def _object(td, defs: dict) -> dict:
    hints = typing.get_type_hints(td)
    out: dict = {"type": "object"}
    if td.__doc__:
        out["description"] = " ".join(td.__doc__.split())
    out["properties"] = {k: _schema(v, defs) for k, v in hints.items()}
    out["required"] = [k for k in hints if k in td.__required_keys__]
    out["additionalProperties"] = False
    return out


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of :data:`MESSAGES`: one ``$defs`` entry per type, the
    root a :class:`LiveFrame`."""
    defs: dict = {}
    for name, tp in MESSAGES.items():
        ref = _schema(tp, defs)
        if name not in defs:
            defs[name] = ref
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://clustertwin.invalid/frame.schema.json",
            "title": "ClusterTwin live frame",
            "description": " ".join((frame_schema.__doc__ or "").split("\n\n")[0].split()),
            "$ref": "#/$defs/LiveFrame",
            "$defs": dict(sorted(defs.items()))}


def schema_text() -> str:
    """:func:`json_schema` as the checked-in ``docs/frame.schema.json`` holds it."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def keys_of(tp) -> set[str]:
    """Every key of ``tp`` and of the TypedDicts it reaches (the names a reader may use)."""
    seen: set = set()
    out: set[str] = set()

    def walk(t):
        if _is_typeddict(t):
            if t in seen:
                return
            seen.add(t)
            for k, v in typing.get_type_hints(t).items():
                out.add(k)
                walk(v)
        for a in typing.get_args(t):
            walk(a)

    walk(tp)
    return out


if __name__ == "__main__":
    sys.stdout.write(schema_text())
