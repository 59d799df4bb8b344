"""Failure profiles: one published fleet's failure rates, as a data file per profile.

A profile is a TOML file in this folder (``<name>.toml``) or anywhere else (a path)::

    name = "llama3"
    fleet = "Meta, Llama 3 405B pre-training: 16,384 H100 (2,048 nodes), 54 days"
    source = "The Llama 3 Herd of Models (Meta 2024), sec. 3.3.4, Table 5"

    [[mode]]
    cause = "faulty_gpu"        # a name for the report's by_cause
    component = "gpu"           # one of failures.COMPONENTS: decides the blast radius
    unit = "gpu"                # what the rate is counted per: failures.UNITS[component]
    count = 148                 # the rate: count / (units * hours), or per_hour, or per_day
    units = 16384
    hours = 1296.0
    detect_s = 120              # failure -> job stopped and evicted, s
    repair_h = 72               # mean repair, h (log-normal, shape 0.5)
    source = "Llama 3 Table 5"  # where this rate comes from ("assumed" where nowhere)

``planned = true`` marks planned stops (checkpoint first, nothing lost).  A fitted profile
(:mod:`scheduler.reliability.fit`) adds ``ci_low`` and ``ci_high`` (per unit-hour) and a
top-level ``confidence``.  Every rate needs its ``source``: the loader refuses a mode without
one.  Bad files raise one ``ValueError`` line naming the file and the field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.limits.checks import is_finite
from scheduler.reliability.failures import COMPONENTS, UNITS, FailureMode

HERE = Path(__file__).parent
PROFILES = tuple(sorted(p.stem for p in HERE.glob("*.toml")))
"""The shipped profiles' names (``llama3`` is the engine's default)."""
DEFAULT = "llama3"

_TOP = {"name", "fleet", "source", "mode", "confidence", "notes"}
_MODE = {"cause", "component", "unit", "per_hour", "per_day", "count", "units", "hours",
         "detect_s", "repair_h", "planned", "source", "ci_low", "ci_high", "note"}


@dataclass(frozen=True)
class Profile:
    """One fleet's failure modes.

    Attributes
    ----------
    name, fleet, source : str
        The profile's name, the fleet it describes, and the publication it comes from.
    modes : tuple of FailureMode
        What the engine draws (``Engine(failure_modes=profile.modes)``).
    intervals : dict
        cause -> (low, high) confidence interval of the rate, per unit-hour (fitted profiles).
    confidence : float, optional
        The intervals' coverage (fitted profiles).
    """

    name: str
    fleet: str
    source: str
    modes: tuple[FailureMode, ...]
    intervals: dict = field(default_factory=dict, compare=False)
    confidence: float | None = None


def _rate(where: str, m: dict) -> float:
    forms = [k for k in ("per_hour", "per_day", "count") if k in m]
    if len(forms) != 1:
        raise ValueError(f"{where}: give the rate as exactly one of per_hour, per_day or "
                         "count/units/hours")
    if forms[0] == "count":
        for k in ("count", "units", "hours"):
            if not is_finite(m.get(k)) or m[k] < 0 or (k != "count" and m[k] <= 0):
                raise ValueError(f"{where}: field '{k}' must be a number "
                                 f"{'>= 0' if k == 'count' else '> 0'}, not {m.get(k)!r}")
        return m["count"] / (m["units"] * m["hours"])
    value = m[forms[0]]
    if not is_finite(value) or value < 0:
        raise ValueError(f"{where}: field '{forms[0]}' must be a number >= 0, not {value!r}")
    return value if forms[0] == "per_hour" else value / 24.0


def _mode(where: str, m) -> tuple[FailureMode, tuple | None]:
    if not isinstance(m, dict):
        raise ValueError(f"{where}: must be a table")
    unknown = sorted(set(m) - _MODE)
    if unknown:
        raise ValueError(f"{where}: unknown field '{unknown[0]}'")
    for k in ("cause", "component", "unit", "source"):
        if not isinstance(m.get(k), str) or not m[k].strip():
            raise ValueError(f"{where}: field '{k}' must be a non-empty string")
    comp = m["component"]
    if comp not in COMPONENTS:
        raise ValueError(f"{where}: field 'component' must be one of {', '.join(COMPONENTS)}, "
                         f"not {comp!r}")
    if m["unit"] != UNITS[comp]:
        raise ValueError(f"{where}: field 'unit' of a {comp} mode is {UNITS[comp]!r}, "
                         f"not {m['unit']!r}")
    rate = _rate(where, m)
    if not is_finite(m.get("detect_s")) or m["detect_s"] < 0:
        raise ValueError(f"{where}: field 'detect_s' must be a number >= 0 (s)")
    if not is_finite(m.get("repair_h")) or m["repair_h"] <= 0:
        raise ValueError(f"{where}: field 'repair_h' must be a number > 0 (h)")
    if not isinstance(m.get("planned", False), bool):
        raise ValueError(f"{where}: field 'planned' must be true or false")
    ci = None
    if "ci_low" in m or "ci_high" in m:
        lo, hi = m.get("ci_low"), m.get("ci_high")
        if not (is_finite(lo) and is_finite(hi) and 0 <= lo <= hi):
            raise ValueError(f"{where}: fields 'ci_low' and 'ci_high' must be numbers with "
                             "0 <= ci_low <= ci_high")
        ci = (float(lo), float(hi))
    mode = FailureMode(m["cause"], comp, rate, m["detect_s"], m["repair_h"],
                       planned=m.get("planned", False), source=m["source"])
    return mode, ci


def parse_profile(data: dict, *, origin: str) -> Profile:
    """A :class:`Profile` from a parsed TOML document; ``origin`` names it in errors."""
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise ValueError(f"{origin}: unknown field '{unknown[0]}'")
    for k in ("name", "fleet", "source"):
        if not isinstance(data.get(k), str) or not data[k].strip():
            raise ValueError(f"{origin}: field '{k}' must be a non-empty string")
    raw = data.get("mode")
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{origin}: field 'mode' must list at least one [[mode]]")
    modes, intervals = [], {}
    for i, m in enumerate(raw, 1):
        cause = m.get("cause") if isinstance(m, dict) else None
        mode, ci = _mode(f"{origin}: mode {i}" + (f" ({cause})" if cause else ""), m)
        if any(x.cause == mode.cause for x in modes):
            raise ValueError(f"{origin}: mode {i}: field 'cause' {mode.cause!r} is repeated")
        modes.append(mode)
        if ci is not None:
            intervals[mode.cause] = ci
    conf = data.get("confidence")
    if conf is not None and not (is_finite(conf) and 0 < conf < 1):
        raise ValueError(f"{origin}: field 'confidence' must be a number in (0, 1)")
    return Profile(data["name"], data["fleet"], data["source"], tuple(modes), intervals, conf)


def load_profile(name_or_path) -> Profile:
    """The profile ``name_or_path``: a shipped name (:data:`PROFILES`) or a TOML file's path.

    >>> p = load_profile("llama3")
    >>> p.name, len(p.modes), p.modes[0].cause
    ('llama3', 25, 'faulty_gpu')
    """
    text = str(name_or_path)
    path = HERE / f"{text}.toml" if text in PROFILES else Path(text)
    if not path.is_file():
        raise ValueError(f"unknown failure profile {text!r}: choose one of "
                         f"{', '.join(PROFILES)} or give a .toml file's path")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path.name}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path.name}: not valid TOML ({exc})") from None
    return parse_profile(data, origin=path.name)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(float(v)) if isinstance(v, float) else str(v)


def profile_toml(profile: Profile, *, notes: str | None = None) -> str:
    """The profile as TOML text that :func:`load_profile` reads back to an equal profile."""
    lines = [f"name = {_toml_value(profile.name)}", f"fleet = {_toml_value(profile.fleet)}",
             f"source = {_toml_value(profile.source)}"]
    if profile.confidence is not None:
        lines.append(f"confidence = {_toml_value(profile.confidence)}")
    if notes:
        lines.append(f"notes = {_toml_value(notes)}")
    for m in profile.modes:
        lines += ["", "[[mode]]", f"cause = {_toml_value(m.cause)}",
                  f"component = {_toml_value(m.component)}",
                  f"unit = {_toml_value(UNITS[m.component])}",
                  f"per_hour = {_toml_value(float(m.per_hour))}"]
        if m.cause in profile.intervals:
            lo, hi = profile.intervals[m.cause]
            lines += [f"ci_low = {_toml_value(lo)}", f"ci_high = {_toml_value(hi)}"]
        lines += [f"detect_s = {_toml_value(m.detect_s)}", f"repair_h = {_toml_value(m.repair_h)}"]
        if m.planned:
            lines.append("planned = true")
        lines.append(f"source = {_toml_value(m.source)}")
    return "\n".join(lines) + "\n"
