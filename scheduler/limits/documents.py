"""Bounded documents: JSON and YAML read with limits on size, nesting depth and aliases.

Every JSON or YAML text the twin accepts from outside (an API body, a study spec, a
``--action``, an inventory file) is read here, so a hostile document gets one ``ValueError``
(:class:`DocumentError`) instead of a ``RecursionError``, minutes of CPU or gigabytes of
memory:

==================  ===================  ================================================
limit               bound                why
==================  ===================  ================================================
size                1,000,000 bytes      the largest study spec or request body is a few
                    (:data:`MAX_BYTES`)  kB; an inventory file (many MB) passes its own
nesting depth       64 (:data:`MAX_      a spec nests 4 deep, an action 2; CPython's
                    DEPTH`)              parsers recurse, 1,000 levels is a RecursionError
YAML anchors and    none                 a 9-line "billion laughs" expands to 9^9 (387
aliases                                  million) strings; specs have no use for them
==================  ===================  ================================================

The JSON depth is measured on the raw bytes before any parser runs: escapes and strings are
cut out with two linear regular expressions and the brackets left are summed with numpy, so
the check costs a few milliseconds a megabyte whatever the input.  YAML is checked on libyaml's
event stream (the first anchor, alias or 65th level stops it) before a node is built; a
megabyte of YAML still takes a second or two of CPU to read, JSON a few hundredths.

>>> json_loads(b'{"kind": "node", "target": 3}')
{'kind': 'node', 'target': 3}
>>> json_loads(b"[" * 100)
Traceback (most recent call last):
...
scheduler.limits.documents.DocumentError: the JSON nests 100 levels deep; at most 64
"""

from __future__ import annotations

import json
import re

import numpy as np
import yaml

MAX_BYTES = 1_000_000
"""The largest document (bytes, UTF-8) read unless a caller passes its own bound."""
MAX_DEPTH = 64
"""The deepest nesting of lists and mappings (levels) in any document."""

_ESCAPE = re.compile(rb"\\.", re.S)
_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_OPEN = np.zeros(256, dtype=np.int64)
_OPEN[list(b"[{")] = 1
_OPEN[list(b"]}")] = -1


class DocumentError(ValueError):
    """A document refused before (or while) it is parsed: one line."""


class DocumentTooLarge(DocumentError):
    """A document over its size bound (an API answers 413, not 400)."""


def _size_check(raw: bytes | str, max_bytes: int | None, what: str) -> bytes:
    try:
        data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    except UnicodeEncodeError as exc:  # a lone surrogate: from a JSON "\ud800" or argv bytes
        raise DocumentError(f"{what} is not Unicode text ({exc.reason} at character "
                            f"{exc.start})") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise DocumentTooLarge(f"{what} is {len(data):,} bytes; at most {max_bytes:,}")
    return data


def text_read(path, *, what: str | None = None, max_bytes: int | None = MAX_BYTES) -> str:
    """The UTF-8 text of the file at ``path``, refused (:class:`DocumentTooLarge`) once more
    than ``max_bytes`` are read, so a huge file is never held whole.  ``OSError`` and
    ``UnicodeDecodeError`` pass through."""
    with open(path, "rb") as f:
        data = f.read(-1 if max_bytes is None else max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise DocumentTooLarge(f"{what or path} is more than {max_bytes:,} bytes")
    return data.decode("utf-8")


def json_depth(raw: bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` in ``raw`` (JSON bytes), brackets inside strings
    left out; linear in ``len(raw)``, and parses nothing.

    >>> json_depth(b'{"a": [1, {"b": "[[["}]}')
    3
    """
    outside = _STRING.sub(b"", _ESCAPE.sub(b"", raw))
    brackets = np.frombuffer(outside.translate(None, _NOT_BRACKET), dtype=np.uint8)
    if brackets.size == 0:
        return 0
    return int(np.cumsum(_OPEN[brackets]).max())


def depth_check(raw: bytes | str, *, what: str = "the JSON", max_depth: int = MAX_DEPTH) -> None:
    """:class:`DocumentError` when the JSON ``raw`` nests deeper than ``max_depth`` (for a
    reader that parses on its own, after this check)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    depth = json_depth(data)
    if depth > max_depth:
        raise DocumentError(f"{what} nests {depth:,} levels deep; at most {max_depth}")


def json_loads(raw: bytes | str, *, what: str = "the JSON", max_bytes: int | None = MAX_BYTES,
               max_depth: int = MAX_DEPTH):
    """``raw`` parsed as JSON after its size and depth are checked; :class:`DocumentTooLarge`
    or :class:`DocumentError` (too deep, not JSON) naming ``what`` else."""
    data = _size_check(raw, max_bytes, what)
    depth_check(data, what=what, max_depth=max_depth)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError; a 5,000-digit integer
        raise DocumentError(f"{what} is not valid JSON: {exc}") from None


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it: five times faster than PyYAML's own."""


def _events_check(text: str, max_depth: int) -> None:
    """Walk the parser's events (no nodes are built, nothing is followed): the first anchor or
    alias, or the first list or mapping deeper than ``max_depth``, is refused at its line."""
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise DocumentError(f"line {line}: anchors and aliases (&name, *name) are not "
                                "allowed; write the values out")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > max_depth:
                raise DocumentError(f"line {line}: nested more than {max_depth} levels deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def yaml_compose(text: str, *, what: str = "the YAML", max_bytes: int | None = MAX_BYTES,
                 max_depth: int = MAX_DEPTH) -> yaml.Node | None:
    """The node tree of ``text`` (one YAML or JSON document; None when empty) with its size,
    depth and aliases checked; :class:`DocumentError` else.  ``yaml.YAMLError`` (not YAML)
    passes through with its mark.

    >>> yaml_compose("a: &x [1]\\nb: *x\\n")
    Traceback (most recent call last):
    ...
    scheduler.limits.documents.DocumentError: line 1: anchors and aliases (&name, *name) are \
not allowed; write the values out
    """
    _size_check(text, max_bytes, what)
    _events_check(text, max_depth)
    return yaml.compose(text, Loader=_LOADER)


def yaml_value(node: yaml.Node):
    """A composed scalar (or any alias-free node) as plain Python, by the safe loader's rules;
    :class:`DocumentError` for a value Python refuses (an integer of 5,000 digits)."""
    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise DocumentError(f"line {node.start_mark.line + 1}: {problem}") from None
    except ValueError as exc:
        raise DocumentError(f"line {node.start_mark.line + 1}: {exc}") from None
