"""A Slurm hostlist reader for tests, written apart from ``twin.inventory.hostlist`` so that what
the
product compresses is checked by a parser that is not its own."""

from __future__ import annotations

import re


def expand(expr: str) -> list[str]:
    """Names of a Slurm hostlist expression such as ``a[01-03,07],b``."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(expr + ","):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(expr[start:i])
            start = i + 1
    names = []
    for item in filter(None, items):
        match = re.fullmatch(r"(.*)\[(.*)\]", item)
        if match is None:
            names.append(item)
            continue
        prefix, inner = match.groups()
        for part in inner.split(","):
            lo, _, hi = part.partition("-")
            names += [f"{prefix}{n:0{len(lo)}d}" for n in range(int(lo), int(hi or lo) + 1)]
    return names
