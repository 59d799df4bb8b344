"""What an entity page's status line says (``_entity_state.html``): the status and its colour
class, the cause and since, the expected repair, and the state changes the event log holds.

A node, switch or rack is ``up``, ``down``, ``drained``, ``degraded`` ...: when it is not up,
the cause and since are the open incident's, else the latest state change logged.  A job's and
a tenant's status is their own word (``running``, ``queued``, ``over quota`` ...) coloured as
the nearest of those (``css``), with a ``note`` saying why.
"""

from __future__ import annotations

from scheduler.frame_schema import StoredFrame
from twin.api import events as event_log
from twin.api.events import EventFilters
from twin.inventory.names import Named, Names
from twin.live import selectors as live_selectors
from twin.pages import event_rows

HISTORY_SHOWN = 20
"""State changes listed on a node, switch or rack page."""
JOB_CSS = {"running": "up", "draining": "drained", "queued": "drained", "held": "drained",
           "detecting": "down", "cloud": "up", "done": "unknown"}
"""A job state's colour: running green, waiting amber, hung after a failure red."""


def incident_of(frame: StoredFrame | None, *, node: int | None = None,
                target: tuple[str, int] | None = None) -> dict | None:
    """The open incident (the frame's, worst first) that is about ``target`` (its
    ``target_kind`` and engine ``target_id``) or took ``node`` down; ``None`` when none."""
    incidents = ((frame or {}).get("incidents") or {}).get("open") or []
    for i in incidents:
        if target is not None and (i["target_kind"], i["target_id"]) == target:
            return i
    for i in incidents:
        if node is not None and node in i["nodes"]:
            return i
    return None


def state_history(named: Named | None, names: Names) -> dict:
    """The stored log's latest events about ``named`` under every name the core logs it by
    (``host 5``, ``node 5`` ...), newest first, by name and linked."""
    live = live_selectors.live_state_get()
    if live is None or named is None:
        return {"rows": [], "total": 0, "query": ""}
    filters = EventFilters(component=named.name, components=tuple(names.aliases(named)))
    page = event_log.events_page(inventory=live.inventory, filters=filters, page=1,
                                 per_page=HISTORY_SHOWN)
    return {"rows": event_rows.named(page["events"], names=names), "total": page["total"],
            "query": filters.query(routine_default=True)}


def state_line(live_status: str, incident: dict | None, history: dict) -> dict:
    """The status line of a node, switch or rack: the status (its CSS class
    ``status-<status>``), the cause and since (the open incident's, else the latest state
    change logged) and the expected repair (simulated s; ``None``: not known)."""
    latest = history["rows"][0] if history["rows"] and live_status != "up" else None
    if incident is not None:
        return {"status": live_status, "cause": incident["cause"].replace("_", " "),
                "since": incident["since"], "expected_repair": incident["expected_repair"],
                "incident": incident, "drill": incident["drill"]}
    return {"status": live_status, "cause": latest["text"] if latest else "",
            "since": latest["t"] if latest else None, "expected_repair": None,
            "incident": None, "drill": False}


def job_state(job: dict, frame: StoredFrame | None, name: str) -> dict:
    """A job's status line: its state coloured by :data:`JOB_CSS`; a hung gang (detecting a
    failure) with the open incident that hit it, a waiting one with its reason."""
    state = job["state"]
    out = {"status": state, "css": JOB_CSS.get(state, "unknown"), "explain": False,
           "note": "", "incident": None}
    if state == "detecting":
        hit = next((i for i in ((frame or {}).get("incidents") or {}).get("open") or []
                    if any(j["name"] == name for j in i["jobs"])), None)
        out["note"] = "hung in a collective until the failure is detected"
        if hit is not None:
            return {**out, **state_line("down", hit, {"rows": []}), "status": state,
                    "css": "down", "explain": True}
    elif job.get("queued"):
        out["note"] = f"waiting: {job['queued']['reason'] or 'reason not reported'}"
    elif job.get("held"):
        out["note"] = f"held: {job['held']['reason']}"
    return out


def tenant_state(tenant: dict, open_incidents: int) -> dict:
    """A tenant's status line: within quota (green), at or over it (amber), with the open
    incidents that hit its jobs (red when any)."""
    row = tenant["row"]
    if row is None:
        return {"status": "not in the live frame", "css": "unknown", "explain": False,
                "note": ""}
    used, quota = row["used_gpus"], row["quota_gpus"]
    over = quota > 0 and used >= quota
    status = ("over quota" if quota and used > quota else "at quota" if over
              else "within quota")
    note = f"{used:,} of {quota:,} GPUs" if quota else f"{used:,} GPUs, no quota"
    if open_incidents:
        note += f"; {open_incidents} open incident(s) hit its jobs"
    css = "down" if open_incidents else "drained" if over else "up"
    return {"status": status, "css": css, "explain": False, "note": note}
