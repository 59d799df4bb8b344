"""What the grid pages show (issue 30), built once for the page and its JSON endpoint.

Each source's :class:`~scheduler.grid.overview.Overview` (a ``GridState`` row) becomes tables
of already formatted cells (:mod:`twin.pages.formats`): the template renders them, and
``static/js/grid.js`` puts the endpoint's cells in place, so the browser writes no number of
its own.  A site-scoped view is the same tables restricted to one place: its row, the links
that end there and the moves that leave or reach it; every place has one, so the places'
pages sum to the grid's totals (:func:`scheduler.grid.overview.totals`).

A document's optional ``incidents`` (region losses, WAN cuts, supply cuts, a mirrored site's
Slurm down) become the Incidents table: open ones first, each with since when, what it hurts
(jobs hit, GB their moves carried, work lost) and when it was resolved.  A site's view keeps
the incidents that name it or one of its links; a document without incidents shows none.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.urls import reverse
from django.utils import timezone

from scheduler.grid.overview import check_overview, totals
from twin.live.grid_selectors import grid_states
from twin.live.models import GridState
from twin.pages import formats

STALE_AFTER_S = 60.0
"""A source whose document is older than this, wall seconds, is shown stale."""

PLACE_COLUMNS = ("place", "kind", "GPUs", "allocated", "down", "queued jobs", "queued GPUs",
                 "MFU", "cost per hour ($)", "WAN in (GB)", "WAN out (GB)", "health")
LINK_COLUMNS = ("link", "capacity (Gb/s)", "load (Gb/s)", "load share", "state")
MOVE_COLUMNS = ("job", "from", "to", "GB", "why", "started", "landed")
INCIDENT_COLUMNS = ("incident", "on", "since", "resolved", "jobs hit", "moved (GB)",
                    "work lost (H100 GPU-h)", "note")
INCIDENT_KINDS = {"region_loss": "region loss", "wan_cut": "WAN cut",
                  "supply_cut": "supply cut", "source_down": "source down"}


def site_url(grid: str, place: str) -> str:
    return reverse("grid-site", kwargs={"name": grid, "place": place})


def _when(t, source: str) -> str:
    if t is None:
        return formats.NONE
    if source == "mirrored":
        return formats.wall_text(datetime.fromtimestamp(float(t), tz=UTC))
    return formats.sim_time(t)


def _cell(text, **more) -> dict:
    return {"text": str(text), **more}


def place_cells(row: dict, grid: str) -> list[dict]:
    return [_cell(row["place"], href=site_url(grid, row["place"]), key="place"),
            _cell(row["kind"]), _cell(formats.thousands(row["gpus"]), key="gpus"),
            _cell(formats.thousands(row["allocated"]), key="allocated"),
            _cell(formats.thousands(row["down"]), key="down"),
            _cell(formats.thousands(row["queued_jobs"]), key="queued_jobs"),
            _cell(formats.thousands(row["queued_gpus"]), key="queued_gpus"),
            _cell(formats.percent(row["mfu"]), key="mfu"),
            _cell(formats.thousands(row["cost_per_hour"], 2), key="cost_per_hour"),
            _cell(formats.thousands(row["wan_in_gb"], 1), key="wan_in_gb"),
            _cell(formats.thousands(row["wan_out_gb"], 1), key="wan_out_gb"),
            _cell(row["health"], key="health", health=row["health"], title=row["note"])]


def total_cells(t: dict) -> list[dict]:
    return [_cell("total", key="place"), _cell(""), _cell(formats.thousands(t["gpus"]), key="gpus"),
            _cell(formats.thousands(t["allocated"]), key="allocated"),
            _cell(formats.thousands(t["down"]), key="down"),
            _cell(formats.thousands(t["queued_jobs"]), key="queued_jobs"),
            _cell(formats.thousands(t["queued_gpus"]), key="queued_gpus"),
            _cell(formats.NONE, key="mfu"),
            _cell(formats.thousands(t["cost_per_hour"], 2), key="cost_per_hour"),
            _cell(formats.thousands(t["wan_in_gb"], 1), key="wan_in_gb"),
            _cell(formats.thousands(t["wan_out_gb"], 1), key="wan_out_gb"), _cell("")]


def link_cells(link: dict) -> list[dict]:
    share = link["load_gbps"] / link["gbps"] if link["gbps"] > 0 else None
    state = "up" if link["up"] else "cut"
    return [_cell(f"{link['a']} – {link['b']}"), _cell(formats.number(link["gbps"])),
            _cell(formats.number(link["load_gbps"])), _cell(formats.percent(share, 1)),
            _cell(state, health="ok" if link["up"] else "down")]


def move_cells(move: dict, source: str) -> list[dict]:
    return [_cell(move["job"]), _cell(move["source"]), _cell(move["to"]),
            _cell(formats.thousands(move["gb"], 1)), _cell(move["why"]),
            _cell(_when(move["started_s"], source)),
            _cell("under way" if move["done_s"] is None else _when(move["done_s"], source))]


def incident_view(inc: dict, source: str) -> dict:
    """One incident: its row's attributes and formatted cells (open: ``state`` "open")."""
    open_ = inc["until_s"] is None
    state = "open" if open_ else "resolved"
    return {"kind": inc["kind"], "target": inc["target"], "state": state,
            "cells": [_cell(INCIDENT_KINDS.get(inc["kind"], inc["kind"]), key="kind"),
                      _cell(inc["target"], key="target"),
                      _cell(_when(inc["since_s"], source), key="since"),
                      _cell("open" if open_ else f"resolved {_when(inc['until_s'], source)}",
                            key="resolved", health="down" if open_ else "ok"),
                      _cell(formats.thousands(inc["jobs_hit"]), key="jobs_hit"),
                      _cell(formats.thousands(inc["moved_gb"], 1), key="moved_gb"),
                      _cell(formats.thousands(inc["lost_gpu_hours"], 1), key="lost_gpu_hours"),
                      _cell(inc["note"], key="note")]}


def names_place(inc: dict, doc: dict, place: str) -> bool:
    """Whether an incident names ``place`` or one of its WAN links ("a-b")."""
    if inc["kind"] == "wan_cut":
        return any(f"{lk['a']}-{lk['b']}" == inc["target"] and place in (lk["a"], lk["b"])
                   for lk in doc["links"])
    return inc["target"] == place


def source_view(state: GridState, *, place: str | None = None, now=None) -> dict:
    """One source's tables (restricted to ``place`` when given), its age and its totals.

    A document that fails :func:`check_overview` is shown as its one error, not half a grid.
    """
    now = now or timezone.now()
    age = max(0.0, (now - state.updated_at).total_seconds()) if state.updated_at else None
    head = {"source": state.source, "age_s": age, "age": formats.duration(age),
            "updated_at": state.updated_at.isoformat() if state.updated_at else None,
            "stale": age is None or age > STALE_AFTER_S}
    try:
        doc = check_overview(state.doc)
    except ValueError as exc:
        return {**head, "error": str(exc)}
    grid, source = doc["grid"], doc["source"]
    places = [r for r in doc["places"] if place is None or r["place"] == place]
    links = [lk for lk in doc["links"] if place is None or place in (lk["a"], lk["b"])]
    moves = [m for m in doc["moves"] if place is None or place in (m["source"], m["to"])]
    sums = totals({**doc, "places": places}) if places else None
    incidents = [i for i in doc.get("incidents", [])
                 if place is None or names_place(i, doc, place)]
    incidents.sort(key=lambda i: i["until_s"] is not None)  # open first, order kept
    return {**head, "error": "", "t_s": doc["t_s"], "when": _when(doc["t_s"], source),
            "places": [place_cells(r, grid) for r in places],
            "totals": sums, "total_cells": total_cells(sums) if sums else None,
            "grid_totals": totals(doc),
            "links": [link_cells(lk) for lk in links],
            "moves": [move_cells(m, source) for m in moves],
            "incidents": [incident_view(i, source) for i in incidents],
            "incident_rows": incidents,
            "place_rows": places}


def grid_view(*, grid, place: str | None = None) -> dict:
    """Every source's view of ``grid`` (an inventory ``Grid``), as the page and API give it."""
    now = timezone.now()
    return {"grid": grid.name, "place": place,
            "columns": {"place": PLACE_COLUMNS, "link": LINK_COLUMNS, "move": MOVE_COLUMNS,
                        "incident": INCIDENT_COLUMNS},
            "sources": [source_view(s, place=place, now=now) for s in grid_states(grid=grid)]}
