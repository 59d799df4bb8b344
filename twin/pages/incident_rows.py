"""Incidents as the pages and the API show them: the live frame's incidents
(:mod:`scheduler.reliability.incidents`) with names instead of engine ids, wall-clock times,
who acknowledged them, and an incident's timeline from the stored event log.

Where they are kept: the engine keeps its incidents (open ones and the last 200 resolved,
carried by its snapshots) and every frame carries the open ones (the worst 50) and the last 20
resolved ones, within 32 kB (worst first; the counts cover all); the frame is stored in
``LiveState``, so they survive a restart of either process.  No second copy is written: a
Django model filled by the driver would have to be kept in step with the engine's own books
(restores, re-plans), for nothing the frame lacks here.
Acknowledgements are the web side's own: an :class:`~twin.audit.models.AuditEntry`
(``incident_ack``) says who and when, keyed by the run, the incident's id and its start.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q

from twin.audit.models import AuditEntry
from twin.inventory.names import COMPONENT_KINDS, Named, Names, job_url
from twin.live.models import EngineEvent, LiveState
from twin.live.selectors import cluster_current, live_state_get
from twin.pages.clock import sim_clock

STATES = ("open", "resolved")
QUERY_MAX = 100
ACK_ACTION = "incident_ack"
ACK_DENIED = "acknowledging incidents is for staff"
TIMELINE_MAX = 200
"""Events an incident's page lists (its components' and its jobs', while it was open)."""


class IncidentFilterError(ValueError):
    """A filter the list cannot apply (the message says which and why)."""


def incident_filters(*, state: str = "", q: str = "") -> tuple[str, str]:
    """``state`` (``open``, ``resolved`` or empty: both) and ``q`` (a substring, at most
    :data:`QUERY_MAX` characters) checked; raises :class:`IncidentFilterError`."""
    state, q = (state or "").strip(), (q or "").strip()
    if state and state not in STATES:
        raise IncidentFilterError(f"state must be one of {', '.join(STATES)} (or empty for "
                                  f"both), not {state[:40]!r}")
    if len(q) > QUERY_MAX:
        raise IncidentFilterError(f"q is at most {QUERY_MAX} characters")
    return state, q


def _ack_key(live: LiveState, record: dict) -> str:
    return f"incident {live.inventory}:{record['id']}@{record['since']:.3f}"


def _component(names: Names, record: dict) -> Named:
    """The part that failed, by name (a storage slowdown names its tier)."""
    kind = COMPONENT_KINDS.get(record["component"])
    named = None if kind is None else names.of(kind, record["unit"])
    if named is not None:
        return named
    if record["component"] == "storage":
        return Named("storage", "central", "central storage", "/topology/")
    return Named(record["target_kind"], record["target_id"],
                 f"{record['target_kind']} {record['target_id']}")


def _when(clock, t_sim):
    if t_sim is None:
        return None
    wall = clock.wall(t_sim) if clock is not None else None
    return {"t_sim": t_sim, "wall": wall.isoformat(timespec="seconds") if wall else None}


def _shown(record: dict, state: str, *, names: Names, clock, acks: dict, live: LiveState) -> dict:
    ack = acks.get(_ack_key(live, record))
    nodes = [names.node(n) for n in record["nodes"]]
    return {
        "id": record["id"], "state": state, "url": f"/incidents/{record['id']}/",
        "component": _component(names, record).as_json(),
        "failure_component": record["component"], "unit": record["unit"],
        "cause": record["cause"],
        "drill": record["drill"], "drill_id": record["drill_id"], "source": record["source"],
        "since": _when(clock, record["since"]),
        "expected_repair": _when(clock, record["expected_repair"]),
        "resolved_at": _when(clock, record["resolved_at"]), "duration_s": record["duration_s"],
        "nodes": [n.as_json() for n in nodes if n is not None],
        "nodes_count": record["nodes_count"], "gpus_down": record["gpus_down"],
        "jobs": [{**j, "url": job_url(j["name"])} for j in record["jobs"]],
        "jobs_count": record["jobs_count"], "gpus_hit": record["gpus_hit"],
        "lost_work_gpu_h": record["lost_work_gpu_h"], "down_gpu_h": record["down_gpu_h"],
        "gpu_hours_lost": record["gpu_hours_lost"],
        "acknowledged_by": ack[0] if ack else None,
        "acknowledged_at": ack[1].isoformat(timespec="seconds") if ack else None,
    }


def _matches(row: dict, q: str) -> bool:
    q = q.lower()
    texts = [row["component"]["name"], row["cause"], row["source"], row["failure_component"],
             "drill" if row["drill"] else "real", str(row["id"])]
    texts += [n["name"] for n in row["nodes"]] + [j["name"] for j in row["jobs"]]
    return any(q in t.lower() for t in texts)


def _acks(keys: list[str]) -> dict[str, tuple[str, object]]:
    return {e.target: (e.username, e.created_at)
            for e in AuditEntry.objects.filter(action=ACK_ACTION, target__in=keys)
            .order_by("id")}


def incidents_get(*, state: str = "", q: str = "") -> dict:
    """Incidents of the live frame, open ones worst first then resolved ones newest first,
    filtered (:func:`incident_filters`); ``live`` false before the engine's first frame."""
    state, q = incident_filters(state=state, q=q)
    live = live_state_get()
    frame = live.frame if live is not None else None
    shown = (frame or {}).get("incidents")
    if shown is None:
        return {"live": False, "t": None, "counts": None, "incidents": []}
    names = Names(cluster_current())
    records = [(r, "open") for r in shown["open"]] + [(r, "resolved") for r in shown["resolved"]]
    times = [r["since"] for r, _ in records]
    clock = sim_clock(live, t_from=min(times), t_to=live.t_sim) if times else None
    acks = _acks([_ack_key(live, r) for r, _ in records])
    rows = [_shown(r, s, names=names, clock=clock, acks=acks, live=live) for r, s in records
            if not state or s == state]
    if q:
        rows = [row for row in rows if _matches(row, q)]
    return {"live": True, "t": frame["t"], "counts": shown["counts"], "incidents": rows}


def incident_get(*, incident_id: int) -> dict | None:
    """One incident the frame still lists (open, or among the last resolved), with its
    ``timeline``; ``None`` when the frame lists none of that id."""
    found = next((r for r in incidents_get()["incidents"] if r["id"] == incident_id), None)
    if found is None:
        return None
    return {**found, "timeline": _timeline(found)}


def _timeline(incident: dict) -> list[dict]:
    """The stored events of the incident's component, nodes and jobs from its start until it
    resolved (or now), oldest first."""
    live = live_state_get()
    names = Names(cluster_current())
    texts: set[str] = set()
    parts = [incident["component"]] + incident["nodes"]
    for part in parts:
        kind = part["kind"]
        if kind in ("node", "gpu", "nic", "switch", "link", "rack", "cooling"):
            texts.update(names.aliases(Named(kind, part["id"], part["name"])))
    texts.add(f"{incident['failure_component']} {incident['unit']}")  # failures, repairs
    jobs = Q()
    for j in incident["jobs"]:
        jobs |= Q(jobs__contains=f",{j['name']},")
    start = incident["since"]["t_sim"] - 1.0
    end = (incident["resolved_at"] or {"t_sim": live.t_sim})["t_sim"] + 1.0
    rows = (EngineEvent.objects.filter(inventory=live.inventory, t_sim__gte=start,
                                       t_sim__lte=end)
            .filter(Q(component__in=sorted(texts)) | jobs).order_by("seq")[:TIMELINE_MAX])
    clock = sim_clock(live, t_from=start, t_to=end)
    return [{"t": _when(clock, e.t_sim), "kind": e.kind, "component": e.component,
             "text": e.text, "jobs": [j for j in e.jobs.split(",") if j]} for e in rows]


def incident_acknowledge(*, incident_id: int, user) -> dict:
    """Staff acknowledge an incident the frame lists: who and when, in the audit trail.
    Raises ``PermissionDenied`` (not staff), ``LookupError`` (no such incident) or
    ``ValueError`` (acknowledged already)."""
    if user is None or not getattr(user, "is_staff", False):
        raise PermissionDenied(ACK_DENIED)
    live = live_state_get()
    shown = ((live.frame or {}).get("incidents") if live is not None else None) or {}
    record = next((r for r in shown.get("open", []) + shown.get("resolved", [])
                   if r["id"] == incident_id), None)
    if record is None:
        raise LookupError(f"incident {incident_id} is not in the live twin")
    key = _ack_key(live, record)
    with transaction.atomic():
        before = AuditEntry.objects.select_for_update().filter(action=ACK_ACTION,
                                                               target=key).first()
        if before is not None:
            raise ValueError(f"incident {incident_id} was acknowledged by "
                             f"{before.username or 'a deleted account'} already")
        AuditEntry.objects.create(user=user, username=user.get_username(), action=ACK_ACTION,
                                  target=key, detail={"cause": record["cause"],
                                                      "component": record["component"],
                                                      "unit": record["unit"]})
    return next(r for r in incidents_get()["incidents"] if r["id"] == incident_id)
