"""The figures alert rules compare: paths into the live frame, figures derived from the frame,
and figures counted from the stored event log; their units and how a value is written.

A figure is either a dotted path into the frame (``util.down``, ``power.throttled_gpus``,
``mirror.telemetry.temp_max_c``; an integer segment indexes a list), one of :data:`DERIVED`,
computed from the frame (a tenant's used/quota ratio, the hottest link cell, the longest queue
wait ...), or one of :data:`LOG_FIGURES`, kept per node, switch, link or GPU from the event log
(:mod:`twin.alerts.log_windows`).  A derived or log figure may give one value per label set
(one per tenant, one per GPU): each fires and resolves on its own.

:data:`UNITS` gives every figure's unit; :func:`value_text` writes a value with it
("1.00 (ratio of quota)", "24.0 h", "97.0 %", "3 XID events").
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable

from scheduler.frame_schema import StoredFrame

COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
MAX_FOR_S = 30 * 86400.0
"""The longest duration a rule may wait (30 days, simulated or wall)."""
PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+){0,7}$")
FRAME_ROOTS = frozenset({
    "t", "util", "mfu", "goodput", "loss_pp", "ledger_gpu_hours", "jobs", "tenants",
    "inference", "interruptions", "failures", "power", "mirror", "ettr", "lag_ticks", "speed",
    "sources", "queue", "running_jobs", "heatmaps", "fleet", "overview"})
"""First segments a path may start with: the live frame's keys (``ettr``, ``fleet`` and
``overview`` are accepted for frames that carry them; an absent figure never fires)."""

Values = list[tuple[dict, float]]  # (labels, value) pairs


def _num(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def frame_path(frame: dict, path: str):
    """The value at a dotted ``path`` of ``frame`` (``None`` if any step is missing)."""
    node = frame
    for part in path.split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _tenant_quota_ratio(frame: StoredFrame) -> Values:
    return [({"tenant": str(t["tenant"])}, t["used_gpus"] / t["quota_gpus"])
            for t in frame["tenants"] if t["quota_gpus"]]


def _down_pct(frame: StoredFrame) -> Values:
    util = frame["util"]
    return [({}, 100.0 * util["down"] / util["gpus"])] if util["gpus"] else []


def _links_util_max(frame: StoredFrame) -> Values:
    cells = [v for hm in frame["heatmaps"].get("links", [])
             for row in hm["z"] for v in row if _num(v) is not None]
    return [({}, max(cells))] if cells else []


def _outlet_max(frame: StoredFrame) -> Values:
    hm = frame["heatmaps"]["racks"].get("outlet_c")  # only with the power model
    if hm is None:
        return []
    cells = [v for row in hm["z"] for v in row if _num(v) is not None and v != hm["empty"]]
    return [({}, max(cells))] if cells else []


def _queue_wait_max(frame: StoredFrame) -> Values:
    waits = [q["wait_h"] for q in frame["queue"] if _num(q["wait_h"]) is not None]
    return [({}, max(waits))] if waits else []


def _job_mfu(frame: StoredFrame) -> Values:
    return [({"job": str(j["name"])}, j["mfu"]) for j in frame["running_jobs"]
            if j["state"] == "running" and _num(j["mfu"]) is not None]


def _source_lag_max(frame: StoredFrame) -> Values:
    sources = frame["sources"]  # None: not a mirror
    if sources is None:
        return []
    ages = [s["age_s"] for s in sources.values() if _num(s["age_s"]) is not None]
    return [({}, max(ages))] if ages else []


def _xid_total(frame: StoredFrame) -> Values:
    mirror = frame["mirror"]  # None: not a mirror
    if mirror is None:
        return []
    return [({}, float(sum(v for v in mirror["xid"].values() if _num(v) is not None)))]


DERIVED: dict[str, tuple[str, Callable[[StoredFrame], Values]]] = {
    "util.down_pct": ("GPUs down, % of the fleet", _down_pct),
    "tenants.quota_ratio": ("a tenant's GPUs used / its quota (one per tenant)",
                            _tenant_quota_ratio),
    "links.util_max": ("the hottest cell of the link heatmaps (0-1; at 100k GPUs a cell "
                       "averages several switches)", _links_util_max),
    "racks.outlet_max_c": ("the hottest rack outlet cell, C", _outlet_max),
    "queue.wait_h_max": ("the longest wait in the queue's first rows, simulated h",
                         _queue_wait_max),
    "jobs.mfu": ("a running job's MFU (one per job, the frame's largest 50)", _job_mfu),
    "sources.lag_max_s": ("the oldest mirror source's age, wall s", _source_lag_max),
    "mirror.xid_per_h": ("XID errors reported per simulated hour (mirror)", _xid_total),
}
"""Figures computed from the frame: name -> (what it is, function)."""
RATES = frozenset({"mirror.xid_per_h"})  # the function gives a running total; alerts use its rate
WALL_FIGURES = frozenset({"sources.lag_max_s"})

LOG_FIGURES: dict[str, str] = {
    "gpu.xid_events": "XID events on one GPU within the rule's window (a mirror's telemetry)",
    "link.flaps": "down and up events of one link, NIC link or switch within the window",
    "node.failures": "hardware failures of one node within the window (drills included, "
                     "planned maintenance and software faults not)",
    "racks.throttled_s": "how long a rack row (its cooling loop lost) or a rack (power cap) "
                         "has been throttled, simulated s",
}
"""Figures kept from the stored event log (:mod:`twin.alerts.log_windows`): name -> what."""
COUNTED = frozenset({"gpu.xid_events", "link.flaps", "node.failures"})
"""Log figures that count events within ``window_s`` (the rest are states)."""


def _clear_side(comparison: str, threshold: float, resolve: float) -> bool:
    """Whether ``resolve`` lies at or inside the threshold, on the side the figure recovers to."""
    return resolve <= threshold if comparison in (">", ">=") else resolve >= threshold


def rule_errors(*, figure, threshold, for_s, comparison=">", window_s=None,
                resolve_threshold=None, resolve_for_s=None) -> dict[str, str]:
    """What is wrong with a rule's values (field -> one message); empty when it is valid."""
    errors = {}
    known = set(DERIVED) | set(LOG_FIGURES)
    if not isinstance(figure, str) or not PATH.match(figure or ""):
        errors["figure"] = (f"{figure!r} is not a figure: give a dotted path in the live frame "
                            "such as util.down, or one of " + ", ".join(sorted(known)))
    elif figure not in known and figure.split(".")[0] not in FRAME_ROOTS:
        errors["figure"] = (f"{figure!r} does not start with a key of the live frame ("
                            + ", ".join(sorted(FRAME_ROOTS)) + ") nor is it a derived figure ("
                            + ", ".join(sorted(known)) + ")")
    if _num(threshold) is None:
        errors["threshold"] = f"threshold must be a finite number, not {threshold!r}"
    if _num(for_s) is None or not 0 <= float(for_s) <= MAX_FOR_S:
        errors["for_s"] = f"for_s must be a number of seconds from 0 to {MAX_FOR_S:.0f}"
    if figure in COUNTED and (window_s is None or _num(window_s) is None
                              or not 0 < float(window_s) <= MAX_FOR_S):
        errors["window_s"] = (f"{figure} counts events within a window: give window_s, "
                              f"seconds from 1 to {MAX_FOR_S:.0f}")
    if resolve_for_s is not None and (_num(resolve_for_s) is None
                                      or not 0 <= float(resolve_for_s) <= MAX_FOR_S):
        errors["resolve_for_s"] = (f"resolve_for_s must be empty or seconds from 0 to "
                                   f"{MAX_FOR_S:.0f}")
    if resolve_threshold is not None:
        if _num(resolve_threshold) is None:
            errors["resolve_threshold"] = "resolve_threshold must be empty or a finite number"
        elif (_num(threshold) is not None and comparison in COMPARE
              and not _clear_side(comparison, float(threshold), float(resolve_threshold))):
            side = "at or below" if comparison in (">", ">=") else "at or above"
            errors["resolve_threshold"] = (f"resolve_threshold must be {side} the threshold "
                                           f"({threshold:g}): the figure must recover past it")
    return errors


def figure_values(figure: str, frame: StoredFrame) -> Values:
    """The figure's values in ``frame``: ``[(labels, value), ...]`` (empty when absent; a log
    figure's values come from :mod:`twin.alerts.log_windows`, not from the frame)."""
    if figure in LOG_FIGURES:
        return []
    if figure in DERIVED:
        return [(labels, float(v)) for labels, v in DERIVED[figure][1](frame)
                if _num(v) is not None]
    value = _num(frame_path(frame, figure))
    return [] if value is None else [({}, value)]


# ----------------------------------------------------------------- units
UNITS: dict[str, tuple[str, str]] = {
    # figure: (how the value is written, the unit's words)
    "util.down_pct": ("pct_raw", "% of the fleet down"),
    "tenants.quota_ratio": ("ratio", "ratio of quota"),
    "links.util_max": ("fraction", "% link utilisation"),
    "racks.outlet_max_c": ("number1", "°C"),
    "queue.wait_h_max": ("number1", "h"),
    "jobs.mfu": ("fraction", "% MFU"),
    "sources.lag_max_s": ("duration", "wall"),
    "mirror.xid_per_h": ("number1", "XID events/h"),
    "mirror.telemetry.temp_max_c": ("number1", "°C"),
    "mirror.telemetry.util_mean_pct": ("pct_raw", "%"),
    "mirror.telemetry.power_kw": ("number1", "kW"),
    "mirror.telemetry.tensor_active_mean": ("fraction", "%"),
    "power.throttled_gpus": ("count", "GPUs"),
    "power.it_mw": ("number2", "MW"),
    "power.facility_mw": ("number2", "MW"),
    "power.rack_peak_kw": ("number1", "kW"),
    "ettr": ("fraction", "% ETTR"),
    "mfu": ("fraction", "% MFU"),
    "goodput": ("fraction", "% goodput"),
    "gpu.xid_events": ("count", "XID events"),
    "link.flaps": ("count", "down/up events"),
    "node.failures": ("count", "failures"),
    "racks.throttled_s": ("duration", ""),
}
"""Each known figure's unit; other paths get one from their last segment (:func:`unit_of`)."""
SUFFIX_UNITS = (("_pct", ("pct_raw", "%")), ("_c", ("number1", "°C")), ("_h", ("number1", "h")),
                ("_s", ("duration", "")), ("_kw", ("number1", "kW")), ("_mw", ("number2", "MW")),
                ("_gpus", ("count", "GPUs")), ("_gb_s", ("number1", "GB/s")))


def unit_of(figure: str) -> tuple[str, str]:
    """How ``figure``'s values are written: ``(style, unit words)``."""
    if figure in UNITS:
        return UNITS[figure]
    root, _, last = figure.partition(".")
    if root in ("util", "jobs") and last:
        return ("count", "GPUs" if root == "util" else "jobs")
    for suffix, unit in SUFFIX_UNITS:
        if figure.endswith(suffix):
            return unit
    return ("number3", "")


def duration_text(seconds: float) -> str:
    """"45 s", "14 min", "2 h 14 min", "3 d 5 h" (as ``twin.pages.formats.duration``)."""
    s = math.floor(seconds + 0.5)
    sign, s = ("-", -s) if s < 0 else ("", s)
    if s < 60:
        return f"{sign}{s} s"
    m = math.floor(s / 60 + 0.5)
    if m < 60:
        return f"{sign}{m} min"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{sign}{h} h" + (f" {m} min" if m else "")
    d, h = divmod(math.floor(s / 3600 + 0.5), 24)
    return f"{sign}{d} d" + (f" {h} h" if h else "")


def value_text(figure: str, value) -> str:
    """``value`` of ``figure`` with its unit: "1.00 (ratio of quota)", "24.0 h", "97.0 %",
    "3 XID events", "2 h 14 min"; "–" for none."""
    x = _num(value)
    if x is None:
        return "–"
    style, unit = unit_of(figure)
    if style == "ratio":
        return f"{x:,.2f} ({unit})"
    if style in ("fraction", "pct_raw"):
        pct = 100.0 * x if style == "fraction" else x
        words = unit.removeprefix("%").strip()
        return f"{pct:,.1f} %" + (f" {words}" if words else "")
    if style == "duration":
        return duration_text(x) + (f" ({unit})" if unit else "")
    digits = {"count": 0, "number1": 1, "number2": 2}.get(style)
    text = f"{x:,.{digits}f}" if digits is not None else f"{x:,.4g}"
    return f"{text} {unit}".strip()
