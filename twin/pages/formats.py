"""The dashboard's one style for times and numbers (the template filters in
``twin/templatetags/twin_format.py`` and ``TwinPanels`` in ``static/js/twin-panels.js`` write
the same): durations as "2 h 14 min", fractions as "36.46 %", counts as "4,096", wall-clock
times first with simulated time second.

>>> duration(8040), duration(45), duration(3 * 86400 + 5 * 3600 + 60)
('2 h 14 min', '45 s', '3 d 5 h')
>>> percent(0.3646), thousands(101120), sim_time(3 * 86400 + 5.3 * 3600)
('36.46 %', '101,120', 'day 3, 05:18')

A study's or a what-if's figure is written by its unit (``scheduler/study/figures.py``):

>>> figure(0.3646, "fraction"), figure(2.2333, "h"), figure(12345.678, "GPU-h")
('36.46 %', '2 h 14 min', '12,346')
>>> figure_delta(-0.0123, "fraction"), figure_delta(0.5, "h"), figure_delta(1234.5, "count")
('-1.23 pp', '+30 min', '+1,234')
"""

from __future__ import annotations

import math
from datetime import datetime

from django.utils import timezone
from django.utils.html import format_html

NONE = "–"


def _missing(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and not math.isfinite(value))


def _round(x: float) -> int:
    """Halves up, as JavaScript's ``Math.round`` (Python's ``round`` goes to even)."""
    return math.floor(x + 0.5)


def duration(seconds) -> str:
    """A span of seconds: "45 s", "14 min", "2 h 14 min", "3 d 5 h"."""
    if _missing(seconds):
        return NONE
    s = _round(float(seconds))
    sign, s = ("-", -s) if s < 0 else ("", s)
    if s < 60:
        return f"{sign}{s} s"
    m = _round(s / 60)
    if m < 60:
        return f"{sign}{m} min"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{sign}{h} h" + (f" {m} min" if m else "")
    d, h = divmod(_round(s / 3600), 24)
    return f"{sign}{d} d" + (f" {h} h" if h else "")


def duration_h(hours) -> str:
    """A span given in hours, written as :func:`duration`."""
    return NONE if _missing(hours) else duration(float(hours) * 3600.0)


def percent(fraction, digits: int = 2) -> str:
    """A fraction (0.3646) as a percentage ("36.46 %")."""
    return NONE if _missing(fraction) else f"{100.0 * float(fraction):,.{int(digits)}f} %"


def thousands(value, digits: int = 0) -> str:
    """A number with thousands separators: 4096 -> "4,096"."""
    if _missing(value):
        return NONE
    try:
        return f"{float(value):,.{int(digits)}f}"
    except (TypeError, ValueError):
        return str(value)


def number(value) -> str:
    """A measured figure with separators and the digits it needs: "12,346", "12.35", "12",
    "0.0123"."""
    if _missing(value):
        return NONE
    v = float(value)
    if v == int(v) or abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:,.2f}" if abs(v) >= 1 else f"{v:.3g}"


def figure(value, unit: str = "") -> str:
    """A figure in its unit's style: a ``fraction`` as a percentage, ``h`` as a duration,
    anything else (GPU-h, counts, MWh, USD) as a :func:`number` (its unit is said beside)."""
    if unit == "fraction":
        return percent(value)
    if unit == "h":
        return duration_h(value)
    return number(value)


def figure_delta(value, unit: str = "") -> str:
    """A difference of two figures, signed: fractions in percentage points ("-1.23 pp"),
    hours as a duration ("+30 min"), others as a :func:`number` ("+1,234")."""
    if _missing(value):
        return NONE
    v = float(value)
    sign = "+" if v > 0 else "-" if v < 0 else ""
    if unit == "fraction":
        return f"{sign}{100.0 * abs(v):,.2f} pp"
    return sign + (duration_h(abs(v)) if unit == "h" else number(abs(v)))


def figure_unit(unit: str) -> str:
    """The unit to say beside a figure written by :func:`figure` or :func:`figure_delta`:
    nothing for a fraction or hours (the figure says "%", "pp" or "2 h 14 min" itself)."""
    return "" if unit in ("fraction", "h") else unit


def sim_time(seconds) -> str:
    """A simulated instant as the engine's clock: "day 3, 05:18"."""
    if _missing(seconds):
        return NONE
    s = max(0, int(float(seconds)))
    day, rest = divmod(s, 86400)
    return f"day {day}, {rest // 3600:02d}:{rest % 3600 // 60:02d}"


def wall_text(when: datetime) -> str:
    """A wall-clock instant in the site's time zone, "2025-06-01 14:03:12"."""
    return timezone.localtime(when).strftime("%Y-%m-%d %H:%M:%S")


def when_html(t_sim, clock=None):
    """A ``<time>`` element: the wall-clock time (``static/js/twin-panels.js`` rewrites it in
    the browser's zone), its ISO form and the simulated time on hover; the simulated time alone
    where no clock is known."""
    wall = clock.wall(t_sim) if clock is not None and not _missing(t_sim) else None
    if wall is None:
        return format_html('<span class="sim-time">{}</span>', sim_time(t_sim))
    iso = wall.isoformat(timespec="seconds")
    return format_html('<time class="wall" datetime="{}" title="{} · simulated {}">{}</time>',
                       iso, iso, sim_time(t_sim), wall_text(wall))
