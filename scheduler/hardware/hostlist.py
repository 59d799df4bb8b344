"""Slurm hostlist expressions: ``node[0001-0016,0020],login`` for a list of names.

Slurm's configuration files (``slurm.conf``, ``topology.conf``, ``gres.conf``) parse node and
switch lists with its hostlist parser, so a long list of numbered names compresses to ranges.
A name's numeric suffix keeps its width (``node0009`` and ``node0010`` share
``node[0009-0010]``); names whose suffixes differ in width, or that have no numeric suffix,
are listed apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SUFFIX = re.compile(r"^(.*?)(\d+)$")
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def hostlist(names: Iterable[str]) -> str:
    """Compress names into one Slurm hostlist expression (sorted, duplicates dropped).

    Raises ``ValueError`` for a name that Slurm's parser would split or misread (one holding
    brackets, commas, spaces or other punctuation).

    >>> hostlist(["n0003", "n0001", "n0002", "n0007", "login"])
    'login,n[0001-0003,0007]'
    >>> hostlist(["s9", "s10", "s11", "core"])
    'core,s9,s[10-11]'
    """
    plain: set[str] = set()
    numbered: dict[tuple[str, int], set[int]] = {}
    for name in names:
        if not _SAFE.match(name):
            raise ValueError(f"{name!r} is not a name Slurm can list (letters, digits, "
                             "'.', '_' and '-' only)")
        match = _SUFFIX.match(name)
        if match is None:
            plain.add(name)
            continue
        prefix, digits = match.groups()
        numbered.setdefault((prefix, len(digits)), set()).add(int(digits))
    parts = sorted(plain)
    for (prefix, width), numbers in sorted(numbered.items()):
        ranges = _ranges(sorted(numbers))
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            parts.append(f"{prefix}{ranges[0][0]:0{width}d}")
            continue
        inner = ",".join(f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}"
                         for lo, hi in ranges)
        parts.append(f"{prefix}[{inner}]")
    return ",".join(parts)


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in numbers:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def expand(expr: str) -> list[str]:
    """Names of a Slurm hostlist expression (the inverse of :func:`hostlist`).

    >>> expand("n[01-03,07],login")
    ['n01', 'n02', 'n03', 'n07', 'login']
    """
    items, depth, start = [], 0, 0
    for i, ch in enumerate(expr + ","):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(expr[start:i])
            start = i + 1
    names = []
    for item in filter(None, items):
        match = re.fullmatch(r"(.*?)\[(.*)\](.*)", item)
        if match is None:
            names.append(item)
            continue
        prefix, inner, suffix = match.groups()
        for part in inner.split(","):
            lo, _, hi = part.partition("-")
            names += [f"{prefix}{n:0{len(lo)}d}{suffix}" for n in range(int(lo), int(hi or lo) + 1)]
    return names
