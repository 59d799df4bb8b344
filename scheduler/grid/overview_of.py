"""A running federation's :class:`~scheduler.grid.overview.Overview`: what the grid page shows
of a simulated grid at its current time (issue 30).

Per place, read from its own engine and the grid's books at ``grid.now``:

* ``gpus``: the engine's GPUs; ``allocated``: GPUs a gang holds (``gpu_owner`` set);
  ``down``: GPUs that are down or on a node that is down (a dark place: all of them);
* ``queued_jobs`` / ``queued_gpus``: gangs waiting in the place's engine (queued, or in a
  cloud's start-up) plus grid jobs on their way to it (their data still crossing the WAN);
* ``mfu``: the place's achieved MFU over its ledger so far (``None`` before any training
  GPU-time); ``cost_per_hour``: what the current allocation costs per hour, $: a cloud bills
  its allocated GPUs at its price; a site pays energy (busy GPUs at full power, idle up GPUs
  at idle power, host share included) x PUE x $/kWh, down GPUs draw nothing;
* ``wan_in_gb`` / ``wan_out_gb``: GB the WAN has delivered to / from it (booked when a
  transfer lands, or for its moved part when cancelled);
* ``health``: ``down`` while the place is dark (a region loss), else ``ok``; ``note`` says
  why (or that the place's supply of a model is cut, :mod:`scheduler.grid.supply`).

Per WAN link its capacity, current load (the busier direction's summed transfer rates) and
whether it is up; moves: every transfer under way, then the most recent landed ones.
"""

from __future__ import annotations

import numpy as np

from scheduler.grid.overview import Overview, check_overview
from scheduler.grid.supply import note as supply_note
from scheduler.hardware.power import gpu_power_w, host_power_w
from scheduler.model.job_run import PENDING, QUEUED

RECENT_MOVES = 20
"""Landed transfers listed after the ones under way (newest first)."""

FREE = -1  # scheduler.model.state: a GPU no gang holds


def _cost_per_hour(place, allocated: np.ndarray, up: np.ndarray) -> float:
    """$ per hour the place spends at its current allocation (see the module's note)."""
    state = place.engine.state
    if place.is_cloud:
        return round(int(allocated.sum()) * place.cloud_price, 2)
    kw = 0.0
    for m, acc in enumerate(place.engine.plan.models):
        of_model = state.gpu_model == m
        busy = int((allocated & of_model).sum())
        idle = int((~allocated & up & of_model).sum())
        kw += (busy * (gpu_power_w(acc, 1.0) + host_power_w(1.0))
               + idle * (gpu_power_w(acc, 0.0) + host_power_w(0.0))) / 1000.0
    return round(kw * place.spec.pue * place.spec.power_price_per_kwh, 2)


def place_row(grid, name: str) -> dict:
    """One place's row of the overview (a :class:`~scheduler.grid.overview.PlaceRow`)."""
    place = grid.places[name]
    engine = place.engine
    state = engine.state
    up = state.gpu_up & state.node_up[state.gpu_node]
    allocated = state.gpu_owner != FREE
    queued = [r for r in engine.runs if r.state in (QUEUED, PENDING)]
    inbound = [js for js in grid.jobs.values() if js.state == "moving" and js.place == name]
    mfu = engine.horizon_ledger().mfu()
    has_training = not mfu["basis"].startswith("no training")
    return {
        "place": name,
        "kind": "cloud" if place.is_cloud else "site",
        "cluster": "" if place.is_cloud else (place.spec.cluster or name),
        "jurisdiction": place.jurisdiction,
        "gpus": int(state.n_gpus),
        "allocated": int(allocated.sum()),
        "down": int((~up).sum()),
        "queued_jobs": len(queued) + len(inbound),
        "queued_gpus": int(sum(r.gpus for r in queued) + sum(js.gjob.job.gpus for js in inbound)),
        "mfu": float(mfu["achieved"]) if has_training else None,
        "cost_per_hour": _cost_per_hour(place, allocated, up),
        "wan_in_gb": round(float(grid.wan.bytes_in[name]), 1),
        "wan_out_gb": round(float(grid.wan.bytes_out[name]), 1),
        "health": "down" if place.dark else "ok",
        "note": (f"region lost at t={place.dark_since:.0f} s" if place.dark
                 else supply_note(place)),
    }


def link_rows(grid) -> list[dict]:
    """Each WAN link: capacity, load now (the busier direction, Gb/s) and whether it is up."""
    wan = grid.wan
    load = np.zeros(2 * len(wan.links))
    for t in wan.transfers.values():
        if t.units is not None and t.lands_s is None:
            for u in t.units:
                load[u] += t.rate_gbps
    return [{"a": lk.a, "b": lk.b, "gbps": float(lk.gbps),
             "load_gbps": round(float(max(load[2 * i], load[2 * i + 1])), 3),
             "up": bool(wan.up[i])}
            for i, lk in enumerate(wan.links)]


def _move(t) -> dict:
    why, _, job = t.tag.partition(" of ")
    return {"job": job, "source": t.src, "to": t.dst, "gb": round(float(t.gb), 1),
            "started_s": float(t.started_s),
            "done_s": None if t.done_s is None else float(t.done_s), "why": why}


def move_rows(grid, recent: int = RECENT_MOVES) -> list[dict]:
    """Transfers under way (in start order), then the ``recent`` last landed (newest first)."""
    under_way = [_move(t) for t in sorted(grid.wan.transfers.values(), key=lambda t: t.tid)]
    landed = [_move(t) for t in reversed(grid.wan.done[-recent:])] if recent > 0 else []
    return under_way + landed


def overview_of(grid, name: str) -> Overview:
    """The overview of ``grid`` (a :class:`~scheduler.grid.federation.Grid`) at ``grid.now``,
    checked by :func:`~scheduler.grid.overview.check_overview`.

    Parameters
    ----------
    grid : Grid
        A running federation.
    name : str
        The grid's name as the page knows it (the inventory's grid name).
    """
    doc = {"grid": str(name), "source": "simulated", "t_s": float(grid.now),
           "places": [place_row(grid, p) for p in grid.places],
           "links": link_rows(grid), "moves": move_rows(grid)}
    return check_overview(doc)
