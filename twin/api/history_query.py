"""``/api/history``'s query: the span (``range``, ``last`` or ``from``/``to``) and the bucket
width (``bucket``, or its older name ``step``), read from the request's parameters."""

from __future__ import annotations

import re

from scheduler.limits import checks
from twin.live import history

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
DURATION_MAX_S = 366 * 86400.0
RANGE_NAMES = (*history.RANGES, "all")


def duration(name: str, text: str) -> float:
    """Seconds from ``300``, ``300s``, ``5m``, ``1h`` or ``1d``; ``ValueError`` (one line)
    unless positive and at most a year."""
    match = DURATION.match(text)
    seconds = float(match[1]) * UNIT_S[match[2]] if match else 0.0
    if not 0 < seconds <= DURATION_MAX_S:
        raise ValueError(f"{name} must be a positive duration of at most 366d, such as 300, "
                         f"5m, 1h or 1d, not {text[:40]!r}")
    return seconds


def _seconds(name: str, text: str) -> float:
    return checks.number_from_text(name, text, at_least=-1e12, at_most=1e12,
                                   expect="a finite number of seconds within ±1e12",
                                   unparsable="a number of seconds")


def history_query(params, *, now: float) -> dict:
    """Keyword arguments of :func:`twin.live.history.series` from the query ``params``.

    ``range``: one of :data:`RANGE_NAMES` (``15m`` … ``30d`` back from ``now``, the engine's
    clock; ``all``: the whole run), or ``last=S`` seconds, or ``from=S`` (and ``to=S``), in
    simulated seconds; one of them at most.  ``bucket``: a duration (``step``: its older
    name).  ``ValueError`` with one line for anything else."""
    given = {k: params[k] for k in ("range", "last", "from", "to", "bucket", "step")
             if params.get(k, "") != ""}
    spans = [k for k in ("range", "last", "from") if k in given]
    if len(spans) > 1:
        raise ValueError(f"give one of 'range', 'last' or 'from', not both {spans[0]!r} and "
                         f"{spans[1]!r}")
    if "bucket" in given and "step" in given:
        raise ValueError("give 'bucket' or 'step' (its older name), not both")
    out: dict = {"t_from": None, "t_to": None, "bucket": None}
    if "range" in given:
        name = given["range"]
        if name not in RANGE_NAMES:
            raise ValueError(f"range must be one of {', '.join(RANGE_NAMES)}, not {name[:40]!r}")
        if name != "all":
            out["t_from"] = now - history.RANGES[name]
    elif "last" in given:
        out["t_from"] = now - duration("last", given["last"])
    elif "from" in given:
        out["t_from"] = _seconds("from", given["from"])
    if "to" in given:
        out["t_to"] = _seconds("to", given["to"])
    for name in ("bucket", "step"):
        if name in given:
            out["bucket"] = duration(name, given[name])
    return out
