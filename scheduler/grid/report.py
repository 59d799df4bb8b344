"""The grid run's report: one ``sites`` entry per site and cloud region, and a grid summary.

Per place: GPUs, allocation (share of its GPU-time held by gangs), MFU (its own ledger), cost
(energy at an owned site; GPU-hours held and start-ups at a cloud; egress charged to the place
data left), bytes moved in and out over the WAN, the data-move wait of the jobs that came
to it, and its supply-cut books (:func:`scheduler.grid.supply.place_books`; grid-wide: the
jobs a cut delayed).  Grid-wide: jobs, their wait (from reaching the grid to computing; a job
that never started counts up to the end of the period), cost, moved bytes, and ``data_move``
hours: the time jobs spent waiting for their data to cross the WAN.  That time is booked
here, at grid level, not in a place's GPU-second ledger: a job waiting for its data holds no
GPU (it is submitted to its place once the data has landed), so no GPU-second of any place is
spent on it.
"""

from __future__ import annotations

import numpy as np

from scheduler.grid.supply import CUT_REASON, place_books
from scheduler.model.ledger import INDEX

_NOT_HELD = ("idle", "fragmented", "hot_spare", "down_for_repair")


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


def _stats(values) -> dict:
    if not values:
        return {"mean": None, "p95": None}
    return {"mean": _r(np.mean(values)), "p95": _r(np.percentile(values, 95))}


def place_entry(grid, name: str) -> dict:
    p = grid.places[name]
    led = p.engine.horizon_ledger()
    total = led.total_gpu_s()
    held = total - sum(float(led.gpu_s[INDEX[c]].sum()) for c in _NOT_HELD)
    came = [js for js in grid.jobs.values() if name in js.history]
    plan = p.engine.plan
    return {
        "place": name,
        "kind": "cloud" if p.is_cloud else "site",
        "jurisdiction": p.jurisdiction,
        "gpus": p.gpus(),
        "gpus_by_model": {m.name: int(plan.node_gpus[plan.node_model == i].sum())
                          for i, m in enumerate(plan.models)},
        "allocation": _r(held / total, 6) if total > 0 else 0.0,
        "mfu": led.mfu()["achieved"],
        "cost": _r(p.cost(), 2),
        "egress_cost": _r(grid.wan.egress_cost[name], 2),
        "wan_in_gb": _r(grid.wan.bytes_in[name], 1),
        "wan_out_gb": _r(grid.wan.bytes_out[name], 1),
        "jobs_submitted": sum(js.history.count(name) for js in came),
        "data_move_job_hours": _r(p.data_move_s / 3600.0),
        "spot_interruptions": p.spot_interruptions,
        "dark_hours": _r((p.dark_s + (grid.now - p.dark_since if p.dark else 0.0)) / 3600.0),
        "supply_cut": place_books(p, grid.now),
        "ledger_gpu_hours": {k: v for k, v in led.gpu_hours().items() if v},
    }


def grid_report(grid, *, scenario: dict) -> dict:
    """JSON-safe report of ``grid`` at its now."""
    jobs = [js for js in grid.jobs.values() if js.gjob.job.submit_s <= grid.now]
    waits = [((js.first_start_s if js.first_start_s is not None else grid.now)
              - js.gjob.job.submit_s) / 3600.0 for js in jobs if js.state != "refused"]
    states = [js.state for js in jobs]
    kinds = grid.wan.bytes_by_kind
    moved = kinds.get("dataset", 0.0) + kinds.get("checkpoint", 0.0)
    wan_total = sum(grid.wan.bytes_out.values())
    move_h = [js.move_wait_s / 3600.0 for js in jobs]
    sites = [place_entry(grid, n) for n in grid.places]
    cross = [js for js in jobs if js.gjob.cross_site]
    compute_cost = sum(s["cost"] for s in sites)
    egress = sum(s["egress_cost"] for s in sites)
    return {
        "scenario": scenario,
        "sites": sites,
        "summary": {
            "jobs": {"arrived": len(jobs), "completed": states.count("done"),
                     "refused": states.count("refused"), "held": states.count("held"),
                     "moving": states.count("moving"), "placed": states.count("placed"),
                     "started": sum(js.first_start_s is not None for js in jobs)},
            "wait_hours": _stats(waits),
            "cost": {"compute": _r(compute_cost, 2), "egress": _r(egress, 2),
                     "total": _r(compute_cost + egress, 2)},
            "moved_gb": {"jobs": _r(moved, 1), "datasets": _r(kinds.get("dataset", 0.0), 1),
                         "checkpoints": _r(kinds.get("checkpoint", 0.0), 1),
                         "replicas": _r(kinds.get("replica", 0.0), 1),
                         "total": _r(wan_total, 1)},
            "data_move": {"job_hours": _r(sum(move_h)),
                          "gpu_hours": _r(sum(js.gjob.job.gpus * js.move_wait_s
                                              for js in jobs) / 3600.0),
                          "booked": "grid level: a job waiting for its data holds no GPU"},
            "region_loss": {
                "jobs_hit": sum(bool(js.restarts) for js in jobs),
                "restarted": sum(bool(js.restarts) and len(js.history) > 1 for js in jobs),
                "from_checkpoint": sum(any(r["kept_flops"] > 0 for r in js.restarts)
                                       for js in jobs),
                "lost_h100_gpu_hours": _r(sum(js.lost_flops / _h100_rate(js) for js in jobs)
                                          / 3600.0)},
            "supply_cut": {
                "jobs_delayed": sum(js.gjob.name in grid.cut_delayed for js in jobs),
                "jobs_waiting": sum(js.state == "held" and CUT_REASON in js.reason
                                    for js in jobs)},
            "places_used": {n: sum(js.history.count(n) for js in jobs) for n in grid.places},
        },
        **({"cross_site": {
            "jobs": len(cross), "split": sum(bool(js.wan_gradient_gb > 0) for js in cross),
            "wan_exposed_job_hours": _r(sum(js.wan_exposed_s for js in cross) / 3600.0),
            "gradient_gb": _r(kinds.get("gradient", 0.0), 1),
            "booked": "gradient bytes are in the places' wan_in_gb/wan_out_gb, egress and "
                      "moved_gb.total"}} if cross else {}),
        "refused": {js.gjob.name: js.reason for js in jobs if js.state == "refused"},
        "jobs": [job_entry(grid, js) for js in jobs],
    }


def job_entry(grid, js) -> dict:
    """One grid job: where it ran, how long it waited and for its data, what it moved."""
    start = js.first_start_s
    entry = {"name": js.gjob.name, "state": js.state, "gpus": js.gjob.job.gpus,
            "places": list(js.history),
            "wait_hours": None if start is None else _r((start - js.gjob.job.submit_s) / 3600),
            "data_move_hours": _r(js.move_wait_s / 3600.0), "moved_gb": _r(js.moved_gb, 1),
            "lost_h100_gpu_hours": _r(js.lost_flops / _h100_rate(js) / 3600.0)}
    if js.gjob.cross_site:  # only cross-site jobs carry these: other reports stay as they were
        entry.update({"cross_site": True,
                      "parts": [[p.place, p.gpus] for p in js.split.parts] if js.split else [],
                      "wan_exposed_hours": _r(js.wan_exposed_s / 3600.0, 4),
                      "wan_gradient_gb": _r(js.wan_gradient_gb, 1)})
    return entry


def _h100_rate(js) -> float:
    """Per-GPU rate the job's lost FLOPs are counted at (its kernel efficiency on H100s)."""
    from scheduler.hardware.catalog import get
    return get("H100-SXM").bf16_tflops * 1e12 * js.gjob.job.efficiency
