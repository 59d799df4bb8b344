"""The history charts of a node, rack, switch or job page (``_entity_charts.html``, drawn by
``static/js/entity-charts.js`` from ``/api/history?kind=&id=``): which figures each chart
plots, in which unit, on which axis.

Power, temperature and switch load come from the physics model: a twin without one (or before
its first refresh) shows a note instead of those charts, never a line at zero.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from scheduler.frame_schema import StoredFrame
from scheduler.physics.entity_figures import METRICS


@dataclass(frozen=True)
class Chart:
    """One chart: its ``key`` (the element's id), ``title``, the ``metrics`` it plots (first
    one drawn with its buckets' min-max band), its ``unit``, whether its axis starts at zero
    (``zero``) and whether it needs the physics model."""

    key: str
    title: str
    metrics: tuple[str, ...]
    unit: str
    zero: bool = True
    physics: bool = False


CHARTS: dict[str, tuple[Chart, ...]] = {
    "node": (Chart("util", "Utilisation", ("util_pct", "alloc_pct"), "%"),
             Chart("power", "Power", ("power_kw",), "kW", physics=True),
             Chart("temp", "Temperature", ("temp_c",), "°C", zero=False, physics=True)),
    "rack": (Chart("util", "Utilisation", ("util_pct", "alloc_pct"), "%"),
             Chart("power", "Power", ("power_kw",), "kW", physics=True),
             Chart("temp", "Outlet temperature", ("temp_c",), "°C", zero=False,
                   physics=True)),
    "switch": (Chart("load", "Link load", ("load_pct", "load_max_pct"), "%", physics=True),),
    "job": (Chart("gpus", "GPUs held", ("gpus",), "GPUs"),
            Chart("util", "Utilisation and MFU", ("util_pct", "mfu_pct"), "%")),
}
NO_PHYSICS = {
    "node": "No power model in this twin: its power and temperature are not recorded.",
    "rack": "No power model in this twin: its power and temperature are not recorded.",
    "switch": "No physics model in this twin: its links' load is not recorded.",
}


def physics_on(frame: StoredFrame | None) -> bool:
    """Whether the live engine's figures include the physics model's (power in the frame)."""
    return frame is not None and frame.get("power") is not None


def entity_charts(*, kind: str, entity_id, frame: StoredFrame | None) -> dict:
    """The charts card of one entity (``entity_id``: what ``/api/history`` takes as ``id``,
    the page's own id): ``charts`` with each chart's ``spec`` (JSON for the script) and the
    ``no_physics`` note when the physics model's charts are left out."""
    physics = physics_on(frame)
    charts = [c for c in CHARTS[kind] if physics or not c.physics]
    return {"kind": kind, "id": entity_id,
            "no_physics": "" if physics else NO_PHYSICS.get(kind, ""),
            "charts": [{"key": c.key, "title": c.title, "unit": c.unit, "spec": json.dumps({
                "unit": c.unit, "zero": c.zero,
                "metrics": [{"name": m, "label": METRICS[kind][m][0]} for m in c.metrics]})}
                for c in charts]}
