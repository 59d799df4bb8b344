"""Engine state as small matrices for the dashboard's heatmaps (JSON-safe, downsampled).

Heatmaps are re-sent whole on every frame, so each is kept under ``max_cells`` cells by
averaging blocks of rows (and columns): a 3,192-leaf by 32-uplink matrix becomes 64 rows.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.physics.fabric.topology import LINK_KINDS

MAX_CELLS = 2048


def downsample(z: np.ndarray, max_cells: int = MAX_CELLS) -> tuple[np.ndarray, int, int]:
    """Average blocks of rows and columns until ``z`` has at most ``max_cells`` cells.

    Returns the matrix and the row and column block sizes.

    >>> z, r, c = downsample(np.arange(16.0).reshape(8, 2), max_cells=8)
    >>> z.shape, r, c
    ((4, 2), 2, 1)
    """
    rows, cols = z.shape
    if rows * cols <= max_cells:
        return z, 1, 1
    cb = max(1, math.ceil(cols / max(1, int(math.sqrt(max_cells)))) if cols > rows else 1)
    cols_out = math.ceil(cols / cb)
    rb = max(1, math.ceil(rows * cols_out / max_cells))
    pad_r, pad_c = (-rows) % rb, (-cols) % cb
    padded = np.pad(z.astype(float), ((0, pad_r), (0, pad_c)), constant_values=np.nan)
    blocks = padded.reshape(padded.shape[0] // rb, rb, padded.shape[1] // cb, cb)
    with np.errstate(invalid="ignore"):
        out = np.nanmean(blocks, axis=(1, 3))
    return np.nan_to_num(out), rb, cb


def _frame(title: str, z: np.ndarray, x: str, y: str, max_cells: int) -> dict:
    small, rb, cb = downsample(z, max_cells)
    return {"title": title, "x": x, "y": y, "rows_per_cell": rb, "cols_per_cell": cb,
            "shape": list(z.shape), "z": np.round(small, 4).tolist()}


def link_heatmaps(fabric, utilisation: np.ndarray, max_cells: int = MAX_CELLS,
                  down: np.ndarray | None = None) -> list[dict]:
    """One heatmap per link tier: lower switch (rows) by its uplink slot (columns).

    Leaf-spine: leaves by uplink; spine-core / island-uplink: spines by uplink; global
    (Dragonfly+): group by group, the mean utilisation of the links joining them.
    ``down`` (per switch link: out, itself or through a failed switch) adds to each heatmap
    ``down``, the share of each cell's links that are out (same cells as ``z``), and
    ``links_down``, their count.
    """
    util = np.asarray(utilisation, dtype=float)
    out_mask = (np.zeros(util.size, dtype=bool) if down is None
                else np.asarray(down, dtype=bool))
    out = []
    for code, name in enumerate(LINK_KINDS):
        sel = np.flatnonzero(fabric.link_kind == code)
        if sel.size == 0:
            continue
        a, b, u = fabric.link_a[sel], fabric.link_b[sel], util[sel]
        if name == "global":
            ga, gb = fabric.switch_pod[a], fabric.switch_pod[b]
            n = int(max(ga.max(), gb.max())) + 1
            total = np.zeros((n, n))
            count = np.zeros((n, n))
            np.add.at(total, (ga, gb), u)
            np.add.at(total, (gb, ga), u)
            np.add.at(count, (ga, gb), 1)
            np.add.at(count, (gb, ga), 1)
            z = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
            frame = _frame("global links: group x group", z, "group", "group", max_cells)
            dead = np.zeros((n, n))
            np.add.at(dead, (ga, gb), out_mask[sel])
            np.add.at(dead, (gb, ga), out_mask[sel])
            _mark_down(frame, np.divide(dead, count, out=np.zeros_like(dead), where=count > 0),
                       int(out_mask[sel].sum()), max_cells)
            out.append(frame)
            continue
        lower, inv = np.unique(a, return_inverse=True)
        order = np.argsort(inv, kind="stable")
        slot = np.empty(sel.size, dtype=np.int64)
        starts = np.searchsorted(inv[order], np.arange(lower.size))
        slot[order] = np.arange(sel.size) - starts[inv[order]]
        z = np.zeros((lower.size, int(slot.max()) + 1))
        z[inv, slot] = u
        frame = _frame(f"{name} links", z, "uplink", "switch", max_cells)
        dead = np.zeros_like(z)
        dead[inv, slot] = out_mask[sel]
        _mark_down(frame, dead, int(out_mask[sel].sum()), max_cells)
        out.append(frame)
    return out


def _mark_down(frame: dict, dead: np.ndarray, n: int, max_cells: int) -> None:
    small, _, _ = downsample(dead, max_cells)
    frame["down"] = np.round(small, 4).tolist()
    frame["links_down"] = n


def links_down(engine) -> np.ndarray:
    """Per switch link: out by itself or through a failed switch at either end."""
    f = engine.plan.fabric
    rel = engine.reliability
    down = np.zeros(f.link_a.size, dtype=bool)
    links = [k for k, n in rel.failed_links.items() if n > 0]
    down[links] = True
    failed = np.zeros(f.n_switches(), dtype=bool)
    failed[[k for k, n in rel.failed_switches.items() if n > 0]] = True
    return down | failed[f.link_a] | failed[f.link_b]


def rack_floor(plan, values: np.ndarray, *, title: str, max_cells: int = MAX_CELLS) -> dict:
    """Per-rack values laid out as on the floor: halls stacked, rows by racks in a row."""
    vals = np.asarray(values, dtype=float)
    rows_per_hall = int(plan.rack_row.max()) + 1
    cols = int(plan.rack_col.max()) + 1
    z = np.full((plan.n_halls * rows_per_hall, cols), np.nan)
    z[plan.rack_hall * rows_per_hall + plan.rack_row, plan.rack_col] = vals
    frame = _frame(title, np.nan_to_num(z, nan=-1.0), "rack in row", "hall row", max_cells)
    frame["empty"] = -1
    return frame


def rack_status(engine) -> np.ndarray:
    """Share of each rack's nodes that are down or drained (0 healthy .. 1 all out)."""
    s = engine.state
    bad = (~s.node_up | s.node_drained).astype(float)
    plan = engine.plan
    return (np.bincount(plan.node_rack, weights=bad, minlength=plan.n_racks)
            / np.maximum(1, np.bincount(plan.node_rack, minlength=plan.n_racks)))


def storage_frame(result) -> list[dict]:
    """Storage tiers: demand, supply and capacity (GB/s) for a bar chart."""
    if result is None:
        return []
    return [{"tier": t.name, "demand_gb_s": round(t.demand_gb_s, 3),
             "supply_gb_s": round(t.supply_gb_s, 3), "capacity_gb_s": round(t.capacity_gb_s, 3)}
            for t in result.tiers]


def dashboard_frames(engine, max_cells: int = MAX_CELLS) -> dict:
    """Everything the topology page draws, from the engine's last physics refresh."""
    ph = engine.physics
    frames = {"racks": {"status": rack_floor(engine.plan, rack_status(engine),
                                             title="rack status (share of nodes out)",
                                             max_cells=max_cells)}}
    if ph is None:
        return frames
    if ph.last_load is not None:
        frames["links"] = link_heatmaps(engine.plan.fabric, ph.last_load.utilisation, max_cells,
                                        down=links_down(engine))
    if ph.last_power is not None:
        frames["racks"]["power_kw"] = rack_floor(engine.plan, ph.last_power.rack_kw,
                                                 title="rack power, kW", max_cells=max_cells)
        frames["racks"]["outlet_c"] = rack_floor(engine.plan, ph.last_power.outlet_c,
                                                 title="rack outlet temperature, C",
                                                 max_cells=max_cells)
    frames["storage"] = storage_frame(ph.last_storage)
    return frames
