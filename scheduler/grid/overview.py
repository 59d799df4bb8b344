"""The grid's state at one instant, as the grid page shows it (issue 30): one document shape
for a simulated grid (a :class:`~scheduler.grid.federation.Grid` at its current time) and a
mirrored one (several real Slurm clusters, one per site).

The document (:class:`Overview`) is plain JSON: per place its GPUs, what is allocated, down and
queued, MFU and cost per hour where known, bytes moved over the WAN and the source's health;
per WAN link its load; the moves under way or done; optionally ``incidents`` (region losses,
WAN cuts, supply cuts, a mirrored site's Slurm down: since when, until when, what they hit),
checked only when present, so documents without it stay valid.  :func:`check_overview`
refuses a document that does not have this shape, with one clear message, so the page never
renders half a grid.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

SOURCES = ("simulated", "mirrored")
HEALTH = ("ok", "stale", "down")
INCIDENT_KINDS = ("region_loss", "wan_cut", "supply_cut", "source_down")


class PlaceRow(TypedDict):
    place: str                      # a site's (inventory cluster's) name, or provider/region
    kind: Literal["site", "cloud"]
    cluster: str                    # the inventory cluster that is this site ("" for a cloud)
    jurisdiction: str
    gpus: int
    allocated: int                  # GPUs held by jobs now
    down: int                       # GPUs down now
    queued_jobs: int
    queued_gpus: int
    mfu: float | None               # achieved MFU over the period shown, None where unknown
    cost_per_hour: float | None     # currency per hour at the current allocation
    wan_in_gb: float
    wan_out_gb: float
    health: Literal["ok", "stale", "down"]
    note: str                       # why a source is stale or down, else ""


class LinkRow(TypedDict):
    a: str
    b: str
    gbps: float
    load_gbps: float                # both directions' busier one
    up: bool


class MoveRow(TypedDict):
    job: str
    source: str                     # the place the bytes leave
    to: str
    gb: float
    started_s: float
    done_s: float | None            # None while under way
    why: str                        # "dataset", "checkpoint", "region loss" ...


class IncidentRow(TypedDict):
    kind: Literal["region_loss", "wan_cut", "supply_cut", "source_down"]
    target: str                     # a place, a link "a-b", or an accelerator model
    since_s: float                  # same clock as the document's t_s
    until_s: float | None           # None while open
    jobs_hit: int
    moved_gb: float                 # GB the hit jobs' moves started since then carried
    lost_gpu_hours: float | None    # work thrown away (H100 GPU-hours), None where unknown
    note: str


class Overview(TypedDict):
    grid: str
    source: Literal["simulated", "mirrored"]
    t_s: float                      # simulated seconds (simulated) or Unix seconds (mirrored)
    places: list[PlaceRow]
    links: list[LinkRow]
    moves: list[MoveRow]
    incidents: NotRequired[list[IncidentRow]]   # optional: documents without it stay valid


_FIELDS = {
    "place": (PlaceRow, {"place": str, "kind": str, "cluster": str, "jurisdiction": str,
                         "gpus": int, "allocated": int, "down": int, "queued_jobs": int,
                         "queued_gpus": int, "mfu": (float, type(None)),
                         "cost_per_hour": (float, type(None)), "wan_in_gb": float,
                         "wan_out_gb": float, "health": str, "note": str}),
    "link": (LinkRow, {"a": str, "b": str, "gbps": float, "load_gbps": float, "up": bool}),
    "move": (MoveRow, {"job": str, "source": str, "to": str, "gb": float, "started_s": float,
                       "done_s": (float, type(None)), "why": str}),
    "incident": (IncidentRow, {"kind": str, "target": str, "since_s": float,
                               "until_s": (float, type(None)), "jobs_hit": int,
                               "moved_gb": float, "lost_gpu_hours": (float, type(None)),
                               "note": str}),
}


def _typed(value, kind) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        return True
    return isinstance(value, kinds)


def _row(what: str, row, where: str) -> None:
    _, fields = _FIELDS[what]
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a {what} row must be an object")
    missing = sorted(set(fields) - set(row))
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    for key, kind in fields.items():
        if not _typed(row[key], kind):
            raise ValueError(f"{where}: {key} has the wrong type ({type(row[key]).__name__})")


def check_overview(doc) -> Overview:
    """``doc`` if it is a grid overview; else one ``ValueError`` naming the first problem."""
    if not isinstance(doc, dict):
        raise ValueError("grid overview: not an object")
    for key in ("grid", "source", "t_s", "places", "links", "moves"):
        if key not in doc:
            raise ValueError(f"grid overview: missing {key}")
    if doc["source"] not in SOURCES:
        raise ValueError(f"grid overview: source must be one of {', '.join(SOURCES)}")
    if not _typed(doc["t_s"], float) or not isinstance(doc["grid"], str):
        raise ValueError("grid overview: grid must be a name and t_s a number")
    places = doc["places"]
    if not isinstance(places, list) or not places:
        raise ValueError("grid overview: places must be a non-empty list")
    names = set()
    for i, row in enumerate(places):
        _row("place", row, f"grid overview: places[{i}]")
        if row["kind"] not in ("site", "cloud") or row["health"] not in HEALTH:
            raise ValueError(f"grid overview: places[{i}]: kind or health out of range")
        if not 0 <= row["down"] <= row["gpus"] or not 0 <= row["allocated"] <= row["gpus"]:
            raise ValueError(f"grid overview: places[{i}] ({row['place']}): allocated and down "
                             "must lie between 0 and its GPUs")
        names.add(row["place"])
    for what, key in (("link", "links"), ("move", "moves")):
        if not isinstance(doc[key], list):
            raise ValueError(f"grid overview: {key} must be a list")
        for i, row in enumerate(doc[key]):
            _row(what, row, f"grid overview: {key}[{i}]")
            ends = (row["a"], row["b"]) if what == "link" else (row["source"], row["to"])
            unknown = [e for e in ends if e not in names]
            if unknown:
                raise ValueError(f"grid overview: {key}[{i}] names {unknown[0]!r}, no place of "
                                 "the grid")
    if "incidents" in doc:
        _incidents(doc["incidents"])
    return doc


def _incidents(rows) -> None:
    """The optional ``incidents`` list: each row typed, its kind known, its times in order."""
    if not isinstance(rows, list):
        raise ValueError("grid overview: incidents must be a list")
    for i, row in enumerate(rows):
        where = f"grid overview: incidents[{i}]"
        _row("incident", row, where)
        if row["kind"] not in INCIDENT_KINDS:
            raise ValueError(f"{where}: kind must be one of {', '.join(INCIDENT_KINDS)}")
        if row["jobs_hit"] < 0 or row["moved_gb"] < 0 or (row["lost_gpu_hours"] or 0) < 0:
            raise ValueError(f"{where}: jobs_hit, moved_gb and lost_gpu_hours must be >= 0")
        if row["until_s"] is not None and row["until_s"] < row["since_s"]:
            raise ValueError(f"{where}: until_s comes before since_s")


def totals(doc: Overview) -> dict:
    """The grid's totals over its places (what the page's total row shows)."""
    rows = doc["places"]
    known = [r["cost_per_hour"] for r in rows if r["cost_per_hour"] is not None]
    return {
        "gpus": sum(r["gpus"] for r in rows),
        "allocated": sum(r["allocated"] for r in rows),
        "down": sum(r["down"] for r in rows),
        "queued_jobs": sum(r["queued_jobs"] for r in rows),
        "queued_gpus": sum(r["queued_gpus"] for r in rows),
        "cost_per_hour": round(sum(known), 2) if known else None,
        "wan_in_gb": round(sum(r["wan_in_gb"] for r in rows), 1),
        "wan_out_gb": round(sum(r["wan_out_gb"] for r in rows), 1),
    }
