"""The stored event log as the Events page and ``/api/events`` read it: each kind's severity, which
kinds are routine scheduling, the filters (checked, with one message for a bad one) and a page
of events with the counts per kind.

The table :data:`KINDS` is the one place that says how serious a kind is; a kind the engine logs
that is not in it counts as ``info`` and not routine (it is shown, never hidden).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from twin.inventory.names import Names
from twin.live import event_log
from twin.live import selectors as live_selectors

SEVERITIES = ("info", "warning", "critical")
"""From least to most serious; a severity filter keeps that severity and the ones above it."""


@dataclass(frozen=True)
class KindInfo:
    severity: str
    routine: bool = False
    """Routine scheduling: hidden unless asked for (``routine=1``) or chosen by kind."""


KINDS: dict[str, KindInfo] = {
    # something broke
    "failure": KindInfo("critical"),
    "node_down": KindInfo("critical"),
    "switch": KindInfo("critical"),
    "link": KindInfo("critical"),
    "power": KindInfo("critical"),
    "cooling": KindInfo("critical"),
    "xid": KindInfo("critical"),
    "lemon": KindInfo("critical"),
    # drills, operator marks, degraded service, jobs hit
    "drill": KindInfo("warning"),
    "inventory": KindInfo("warning"),
    "interrupt": KindInfo("warning"),
    "storage": KindInfo("warning"),
    "drain": KindInfo("warning"),
    "reject": KindInfo("warning"),
    "source": KindInfo("warning"),
    "config": KindInfo("warning"),
    # repairs, recoveries, node states back, operator actions
    "repair": KindInfo("info"),
    "recover": KindInfo("info"),
    "node_up": KindInfo("info"),
    "undrain": KindInfo("info"),
    "replan": KindInfo("info"),
    "policy": KindInfo("info"),
    "hold": KindInfo("info"),
    "cancel": KindInfo("info"),
    "priority": KindInfo("info"),
    "observed": KindInfo("info"),
    "inject": KindInfo("info"),
    # routine scheduling
    "preempt": KindInfo("info", routine=True),
    "lend": KindInfo("info", routine=True),
    "burst": KindInfo("info", routine=True),
    "surge": KindInfo("info", routine=True),
    "job_end": KindInfo("info", routine=True),
    "slurm": KindInfo("info", routine=True),
}

_UNLISTED = KindInfo("info")


def kind_info(kind: str) -> KindInfo:
    return KINDS.get(kind, _UNLISTED)


def severity_table() -> dict[str, dict]:
    """``{kind: {"severity": ..., "routine": bool}}`` for the browser (the overview's log)."""
    return {k: {"severity": v.severity, "routine": v.routine} for k, v in KINDS.items()}


class BadFilter(ValueError):
    """A filter the log cannot answer; its message says what is allowed."""


@dataclass(frozen=True)
class EventFilters:
    kind: str = ""
    component: str = ""
    job: str = ""
    severity: str = ""
    routine: bool = True
    components: tuple[str, ...] = ()
    """What ``component`` names in the log's words (``host 100``, ``node 100`` ...), when it
    is a name or an id the inventory knows; else ``component`` is matched as written."""

    def query(self, *, routine_default: bool) -> str:
        """The filters as a query string (without the page)."""
        parts = [(k, getattr(self, k)) for k in ("kind", "component", "job", "severity")
                 if getattr(self, k)]
        if self.routine != routine_default:
            parts.append(("routine", int(self.routine)))
        return urlencode(parts)


def _flag(value: str, name: str, default: bool) -> bool:
    if value == "":
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise BadFilter(f"{name} must be 1 or 0, not {value[:40]!r}")


def event_filters_parse(params, *, inventory: str, routine_default: bool) -> EventFilters:
    """The filters of a query (``kind``, ``component``, ``job``, ``severity``, ``routine``);
    :class:`BadFilter` for an unknown kind or severity."""
    raw = {k: params.get(k, "").strip()[:200] for k in
           ("kind", "component", "job", "severity", "routine")}
    kind, severity = raw["kind"], raw["severity"]
    if severity and severity not in SEVERITIES:
        raise BadFilter(f"unknown severity {severity[:40]!r}: one of {', '.join(SEVERITIES)}")
    if kind and kind not in KINDS and not event_log.kind_logged(inventory=inventory, kind=kind):
        known = sorted(set(KINDS) | set(kind_counts(inventory=inventory)))
        raise BadFilter(f"unknown event kind {kind[:40]!r}: one of {', '.join(known)}")
    return EventFilters(kind=kind, component=raw["component"], job=raw["job"],
                        severity=severity, components=_aliases(raw["component"]),
                        routine=_flag(raw["routine"], "routine", routine_default))


def _aliases(component: str) -> tuple[str, ...]:
    """Every component text of the log that names what ``component`` names (a name, an id
    or a component text: ``leaf-00010``, ``n000100``, ``host 100``)."""
    if not component:
        return ()
    names = Names(live_selectors.cluster_current())
    found = names.resolve(component)
    if component.isdigit():  # a bare id names a different thing in each kind: not a filter
        found = []
    return tuple(dict.fromkeys(a for x in found for a in names.aliases(x)))


def page_parse(value: str) -> int:
    """A page number from 1 ("" is 1); :class:`BadFilter` otherwise."""
    value = value.strip()
    if not value:
        return 1
    try:
        page = int(value)
    except ValueError:
        raise BadFilter(f"page must be a whole number from 1, not {value[:40]!r}") from None
    if page < 1:
        raise BadFilter(f"page must be a whole number from 1, not {page}")
    return page


def kind_counts(*, inventory: str) -> dict[str, int]:
    """How many events of each kind the log holds."""
    return event_log.kind_counts(inventory=inventory)


def _at_least(severity: str) -> list[str]:
    """The severities from ``severity`` up."""
    return list(SEVERITIES[SEVERITIES.index(severity):])


def _rows(inventory: str, f: EventFilters):
    rows = event_log.events_of(inventory=inventory)
    if f.kind:  # a kind chosen by name is shown, routine or not
        rows = rows.filter(kind=f.kind)
    elif not f.routine:
        rows = rows.exclude(kind__in=[k for k, v in KINDS.items() if v.routine])
    if f.severity and f.severity != SEVERITIES[0]:  # unlisted kinds are info: never kept here
        keep = _at_least(f.severity)
        rows = rows.filter(kind__in=[k for k, v in KINDS.items() if v.severity in keep])
    if f.component:
        rows = rows.filter(component__in=f.components or (f.component,))
    if f.job:
        rows = rows.filter(jobs__contains=f",{f.job},")
    return rows


def events_page(*, inventory: str, filters: EventFilters, page: int, per_page: int) -> dict:
    """A page of the events that pass ``filters``, newest first, each with its severity; a page
    past the last answers the last (``page_asked`` says which was asked)."""
    rows = _rows(inventory, filters)
    total = rows.count()
    pages = max(1, -(-total // per_page))
    shown = min(page, pages)
    start = (shown - 1) * per_page
    events = [{"seq": e.seq, "t": e.t_sim, "kind": e.kind, "severity": kind_info(e.kind).severity,
               "component": e.component, "jobs": [j for j in e.jobs.split(",") if j],
               "text": e.text}
              for e in rows.order_by("-seq")[start:start + per_page]]
    out = {"events": events, "page": shown, "pages": pages, "per_page": per_page, "total": total}
    if shown != page:
        out["page_asked"] = page
    return out
