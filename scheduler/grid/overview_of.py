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

Incidents (:func:`incident_rows`), read from the grid's log of drills: a region loss (from
``dark`` to ``light``), a WAN cut (``cut`` to ``mend``) and a supply cut of a model
(``supply_cut`` to ``supply_back``), open ones first, then the latest resolved, newest first.
``jobs_hit``: a region loss's jobs placed again (evicted, or their moves to or from it
stopped); a WAN cut's jobs with transfers or streams over the link when it was cut; a supply
cut's jobs held at the grid while it lasted.  ``moved_gb``: what the hit jobs' dataset and
checkpoint moves started during the incident delivered.  ``lost_gpu_hours``: a region loss's
work thrown away by the evictions (H100 GPU-hours, as the report books it); 0 for a supply
cut (gangs run to their end); a WAN cut's 0, or ``None`` where a hit job restarted during it
(a cross-site stop, whose loss is not split per incident).
"""

from __future__ import annotations

import numpy as np

from scheduler.grid.overview import Overview, check_overview
from scheduler.grid.supply import note as supply_note
from scheduler.hardware.catalog import get
from scheduler.hardware.power import gpu_power_w, host_power_w
from scheduler.model.job_run import PENDING, QUEUED

RECENT_INCIDENTS = 50
"""Incidents listed at most (open ones first)."""

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
           "links": link_rows(grid), "moves": move_rows(grid),
           "incidents": incident_rows(grid)}
    return check_overview(doc)


_OPENS = {"dark": "region_loss", "cut": "wan_cut", "supply_cut": "supply_cut"}
_CLOSES = {"light": "region_loss", "mend": "wan_cut", "supply_back": "supply_cut"}


def _targets(entry: dict) -> list[str]:
    if "link" in entry:
        return ["-".join(entry["link"])]
    if "models" in entry:
        return list(entry["models"])
    return [entry.get("place", "")]


def _moved_gb(grid, jobs: set[str], since: float, until: float) -> float:
    """GB the dataset and checkpoint moves of ``jobs`` started in [since, until] delivered."""
    gb = 0.0
    for t in (*grid.wan.done, *grid.wan.transfers.values()):
        why, _, job = t.tag.partition(" of ")
        if job in jobs and why in ("dataset", "checkpoint") and since <= t.started_s <= until:
            gb += t.gb - (t.remaining_gb if t.done_s is None else 0.0)
    return round(float(gb), 1)


def _h100_gpu_hours(js, flops: float) -> float:
    """``flops`` in GPU-hours at the job's kernel efficiency on H100s (as the report books)."""
    return flops / (get("H100-SXM").bf16_tflops * 1e12 * js.gjob.job.efficiency) / 3600.0


def _lost(grid, inc: dict, until: float) -> float | None:
    hit = [grid.jobs[j] for j in inc["jobs"] if j in grid.jobs]
    if inc["kind"] == "supply_cut":
        return 0.0
    if inc["kind"] == "wan_cut":
        restarted = any(inc["since"] <= r["t"] <= until for js in hit for r in js.restarts)
        return None if restarted else 0.0
    lost = sum(_h100_gpu_hours(js, r.get("lost_flops", 0.0)) for js in hit for r in js.restarts
               if r["t"] == inc["since"] and r["lost_at"] == inc["target"])
    return round(float(lost), 3)


def _note_of(inc: dict, n: int) -> str:
    if inc["kind"] == "region_loss":
        return f"region lost: {n} job(s) placed again"
    if inc["kind"] == "wan_cut":
        return f"WAN link cut: {n} job(s) had moves over it"
    where = ", ".join(inc["places"]) or "no place"
    return f"no {inc['target']} parts at {where}: {n} job(s) held at the grid for it"


def incident_rows(grid, recent: int = RECENT_INCIDENTS) -> list[dict]:
    """The grid's incidents from its log (module docstring): open first, newest first."""
    open_, done = {}, []
    for entry in grid.log:
        kind = _OPENS.get(entry["kind"]) or _CLOSES.get(entry["kind"])
        if kind is None:
            continue
        for target in _targets(entry):
            key = (kind, target)
            if entry["kind"] in _OPENS and key not in open_:
                open_[key] = {"kind": kind, "target": target, "since": entry["t"],
                              "until": None, "jobs": list(entry.get("jobs", ())),
                              "before": set(entry.get("delayed", ())),
                              "places": list(entry.get("places", ()))}
            elif entry["kind"] in _CLOSES and key in open_:
                inc = open_.pop(key)
                inc["until"] = entry["t"]
                if kind == "supply_cut":
                    inc["jobs"] = sorted(set(entry.get("delayed", ())) - inc["before"])
                done.append(inc)
    for inc in open_.values():
        if inc["kind"] == "supply_cut":
            inc["jobs"] = sorted(grid.cut_delayed - inc["before"])
    incidents = (sorted(open_.values(), key=lambda i: -i["since"])
                 + sorted(done, key=lambda i: -i["since"]))[:max(0, recent)]
    rows = []
    for inc in incidents:
        until = grid.now if inc["until"] is None else inc["until"]
        rows.append({"kind": inc["kind"], "target": inc["target"],
                     "since_s": float(inc["since"]),
                     "until_s": None if inc["until"] is None else float(inc["until"]),
                     "jobs_hit": len(inc["jobs"]),
                     "moved_gb": _moved_gb(grid, set(inc["jobs"]), inc["since"], until),
                     "lost_gpu_hours": _lost(grid, inc, until),
                     "note": _note_of(inc, len(inc["jobs"]))})
    return rows
