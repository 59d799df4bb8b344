"""Engine state as small matrices for the dashboard's heatmaps (JSON-safe, downsampled).

Heatmaps are re-sent whole on every frame, so each is kept under ``max_cells`` cells by
merging blocks of rows (and columns): a 3,192-leaf by 32-uplink matrix becomes 64 rows.  A
merged cell holds the block's **maximum** (a single saturated link or hot rack stays visible at
100,000 GPUs) and names the ids it covers (``rows``: ``[first, last]`` per cell row), which the
web layer turns into switch and rack names.  Every heatmap carries a fixed colour ``scale``
(bounds and unit) taken from the model, never from the data.

The full-resolution values travel apart (:func:`heat_detail`, in the engine's placement, not in
the broadcast frame) and :func:`heat_zoom` cuts one pod, one block of switches or one hall out
of them, un-merged.
"""

from __future__ import annotations

import base64
import math
import warnings
import zlib

import numpy as np

from scheduler.fabric.topology import LINK_KINDS
from scheduler.frame_schema import Heatmap, Heatmaps, LinkHeatmap, RackHeatmap, Scale, StorageTier
from scheduler.hardware.power import DESIGN_DELTA_T_K, SUPPLY_AIR_C
from scheduler.placement_schema import HeatDetail, HeatZoom, LinkDetail, PackedArray

MAX_CELLS = 2048
ZOOM_MAX_CELLS = 16_384
"""Largest zoomed matrix served un-merged, cells (one pod of the 100k preset: 56 x 32)."""

LINK_SCALE: Scale = {"zmin": 0.0, "zmax": 1.0, "unit": "%", "title": "link utilisation, %"}
STATUS_SCALE: Scale = {"zmin": 0.0, "zmax": 1.0, "unit": "share", "title": "share of nodes out"}
POWER_SCALE: Scale = {"zmin": 0.0, "zmax": 1.0, "unit": "%",
                      "title": "power, % of the rack's budget"}
OUTLET_SCALE: Scale = {"zmin": SUPPLY_AIR_C, "zmax": SUPPLY_AIR_C + 2 * DESIGN_DELTA_T_K,
                       "design": SUPPLY_AIR_C + DESIGN_DELTA_T_K, "unit": "°C",
                       "title": "outlet, °C"}
"""Rack outlet temperature: from the supply air (an idle rack) to the model's ceiling (supply
plus two design rises: full recirculation, where the GPUs' own thermal protection takes over);
``design`` is the outlet of a rack at its provisioned power with its cooling intact."""

RACK_KEYS = ("status", "power_kw", "power_share", "outlet_c")
_RACK_QUANTUM = {"status": 1e-4, "power_kw": 0.1, "power_share": 1e-4, "outlet_c": 0.01}
_UTIL_QUANTUM = 1e-4
RACK_ZOOMS = {"status": STATUS_SCALE, "power_share": POWER_SCALE, "outlet_c": OUTLET_SCALE}
"""Rack heatmaps a zoom serves (``power_share`` with each rack's kW beside it)."""
_LINK_OUT = 65535
"""Code of a link that is out in the packed utilisation (:func:`heat_detail`)."""


def downsample(z: np.ndarray, max_cells: int = MAX_CELLS,
               how: str = "max") -> tuple[np.ndarray, int, int]:
    """Merge blocks of rows and columns until ``z`` has at most ``max_cells`` cells.

    Returns the matrix and the row and column block sizes.  ``how`` is ``"max"`` (a cell
    shows its hottest member: the dashboard's heatmaps) or ``"mean"`` (a share, e.g. of
    links out).

    >>> z, r, c = downsample(np.arange(16.0).reshape(8, 2), max_cells=8)
    >>> z.shape, r, c, z[:, 0].tolist()
    ((4, 2), 2, 1, [2.0, 6.0, 10.0, 14.0])
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
    merge = {"max": np.nanmax, "mean": np.nanmean}[how]
    with warnings.catch_warnings():  # an all-padding block warns; nan_to_num makes it 0
        warnings.simplefilter("ignore", RuntimeWarning)
        out = merge(blocks, axis=(1, 3))
    return np.nan_to_num(out), rb, cb


def _runs(ids: np.ndarray, block: int) -> list[list[int]]:
    """``[first, last]`` of ``ids`` in each block of ``block`` consecutive entries."""
    ids = np.asarray(ids)
    return [[int(ids[i]), int(ids[min(i + block, ids.size) - 1])]
            for i in range(0, ids.size, block)]


def _frame(title: str, z: np.ndarray, x: str, y: str, max_cells: int, *,
           row_ids: np.ndarray | None = None, scale: Scale | None = None) -> Heatmap:
    small, rb, cb = downsample(z, max_cells)
    ids = np.arange(z.shape[0]) if row_ids is None else row_ids
    return {"title": title, "x": x, "y": y, "rows_per_cell": rb, "cols_per_cell": cb,
            "shape": list(z.shape), "z": np.round(small, 4).tolist(),
            "rows": _runs(ids, rb), "scale": dict(scale or LINK_SCALE)}


def _tier_matrix(fabric, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower switches (row ids), and each link's row and uplink slot, of the links ``sel``."""
    a = fabric.link_a[sel]
    lower, inv = np.unique(a, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    slot = np.empty(sel.size, dtype=np.int64)
    starts = np.searchsorted(inv[order], np.arange(lower.size))
    slot[order] = np.arange(sel.size) - starts[inv[order]]
    return lower, inv, slot


def link_heatmaps(fabric, utilisation: np.ndarray, max_cells: int = MAX_CELLS,
                  down: np.ndarray | None = None) -> list[LinkHeatmap]:
    """One heatmap per link tier: lower switch (rows) by its uplink slot (columns).

    Leaf-spine: leaves by uplink; spine-core / island-uplink: spines by uplink; global
    (Dragonfly+): group by group, the mean utilisation of the links joining them.  ``rows``
    holds the switch ids (groups for global) of each cell row; merged cells hold their
    hottest link.  ``down`` (per switch link: out, itself or through a failed switch) adds
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
        u = util[sel]
        if name == "global":
            a, b = fabric.link_a[sel], fabric.link_b[sel]
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
        lower, inv, slot = _tier_matrix(fabric, sel)
        z = np.zeros((lower.size, int(slot.max()) + 1))
        z[inv, slot] = u
        frame = _frame(f"{name} links", z, "uplink", "switch", max_cells, row_ids=lower)
        frame["tier"] = name
        dead = np.zeros_like(z)
        dead[inv, slot] = out_mask[sel]
        _mark_down(frame, dead, int(out_mask[sel].sum()), max_cells)
        out.append(frame)
    return out


def _mark_down(frame: LinkHeatmap, dead: np.ndarray, n: int, max_cells: int) -> None:
    small, _, _ = downsample(dead, max_cells, how="mean")
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


def rack_floor(plan, values: np.ndarray, *, title: str, max_cells: int = MAX_CELLS,
               scale: Scale | None = None) -> RackHeatmap:
    """Per-rack values laid out as on the floor: halls stacked, rows by racks in a row.

    ``rows`` holds the floor rows (``hall * rows_per_hall + row``) of each cell row; a merged
    cell holds the largest of its racks' values.
    """
    vals = np.asarray(values, dtype=float)
    rows_per_hall = int(plan.rack_row.max()) + 1
    cols = int(plan.rack_col.max()) + 1
    z = np.full((plan.n_halls * rows_per_hall, cols), np.nan)
    z[plan.rack_hall * rows_per_hall + plan.rack_row, plan.rack_col] = vals
    frame = _frame(title, np.nan_to_num(z, nan=-1.0), "rack in row", "hall row", max_cells,
                   scale=scale or STATUS_SCALE)
    frame["rows_per_hall"] = rows_per_hall
    frame["empty"] = -1
    return frame


def rack_status(engine) -> np.ndarray:
    """Share of each rack's nodes that are down or drained (0 healthy .. 1 all out)."""
    s = engine.state
    bad = (~s.node_up | s.node_drained).astype(float)
    plan = engine.plan
    return (np.bincount(plan.node_rack, weights=bad, minlength=plan.n_racks)
            / np.maximum(1, np.bincount(plan.node_rack, minlength=plan.n_racks)))


def power_share(plan, rack_kw: np.ndarray) -> np.ndarray:
    """Each rack's draw over its provisioned budget (``plan.rack_power_kw``), 0-1 or more.

    >>> from scheduler.hardware.cluster import NodeGroup, plan_cluster
    >>> plan = plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
    ...                     fabric_kw={"radix": 8})
    >>> power_share(plan, plan.rack_power_kw / 2).tolist()
    [0.5]
    """
    budget = np.asarray(plan.rack_power_kw, dtype=float)
    return np.divide(rack_kw, budget, out=np.zeros(budget.size), where=budget > 0)


def storage_frame(result) -> list[StorageTier]:
    """Storage tiers: demand, supply and capacity (GB/s) for a bar chart."""
    if result is None:
        return []
    return [{"tier": t.name, "demand_gb_s": round(t.demand_gb_s, 3),
             "supply_gb_s": round(t.supply_gb_s, 3), "capacity_gb_s": round(t.capacity_gb_s, 3)}
            for t in result.tiers]


def _link_load(ph, down: np.ndarray) -> np.ndarray:
    """The last routed utilisation per switch link, zero before any load was routed."""
    return ph.last_load.utilisation if ph.last_load is not None else np.zeros(down.size)


def dashboard_frames(engine, max_cells: int = MAX_CELLS) -> Heatmaps:
    """Everything the topology page draws, from the engine's last physics refresh."""
    ph = engine.physics
    plan = engine.plan
    frames: Heatmaps = {"racks": {"status": rack_floor(plan, rack_status(engine),
                                             title="rack status (share of nodes out)",
                                             max_cells=max_cells, scale=STATUS_SCALE)}}
    if ph is None:
        return frames
    down = links_down(engine)
    if ph.last_load is not None or down.any():  # a link out shows before any load is routed
        frames["links"] = link_heatmaps(plan.fabric, _link_load(ph, down), max_cells, down=down)
    if ph.last_power is not None:
        kw = ph.last_power.rack_kw
        frames["racks"]["power_kw"] = rack_floor(
            plan, kw, title="rack power, kW", max_cells=max_cells,
            scale={"zmin": 0.0, "zmax": float(np.max(plan.rack_power_kw)), "unit": "kW",
                   "title": "power, kW"})
        frames["racks"]["power_share"] = rack_floor(
            plan, power_share(plan, kw), title="rack power, % of the rack's budget",
            max_cells=max_cells, scale=POWER_SCALE)
        frames["racks"]["outlet_c"] = rack_floor(plan, ph.last_power.outlet_c,
                                                 title="rack outlet temperature, °C",
                                                 max_cells=max_cells, scale=OUTLET_SCALE)
    frames["storage"] = storage_frame(ph.last_storage)
    return frames


# ----------------------------------------------------------------- full resolution, and zoom
def _pack(arr: np.ndarray) -> PackedArray:
    arr = np.ascontiguousarray(arr)
    return {"dtype": arr.dtype.name, "shape": list(arr.shape),
            "data": base64.b64encode(zlib.compress(arr.tobytes(), 1)).decode("ascii")}


def _unpack(packed: PackedArray) -> np.ndarray:
    dtype = np.dtype(packed["dtype"])
    if dtype.name not in ("uint16", "int32"):
        raise ValueError(f"unexpected packed dtype {dtype.name}")
    flat = np.frombuffer(zlib.decompress(base64.b64decode(packed["data"])), dtype=dtype)
    return flat.reshape(packed["shape"])


def link_detail(fabric, utilisation: np.ndarray,
                down: np.ndarray | None = None) -> dict[str, LinkDetail]:
    """Per switch-link tier (not global): the lower switches' ids and pods, and the
    utilisation matrix (switch by uplink slot) in units of 1e-4, :data:`_LINK_OUT` where
    ``down`` marks the link out; packed."""
    util = np.clip(np.asarray(utilisation, dtype=float), 0.0, 6.5)
    code = np.rint(util / _UTIL_QUANTUM).astype(np.uint16)
    if down is not None:
        code[np.asarray(down, dtype=bool)] = _LINK_OUT
    out = {}
    for k, name in enumerate(LINK_KINDS):
        sel = np.flatnonzero(fabric.link_kind == k)
        if sel.size == 0 or name == "global":
            continue
        lower, inv, slot = _tier_matrix(fabric, sel)
        z = np.zeros((lower.size, int(slot.max()) + 1), dtype=np.uint16)
        z[inv, slot] = code[sel]
        out[name] = {"ids": _pack(lower.astype(np.int32)),
                     "pods": _pack(fabric.switch_pod[lower].astype(np.int32)),
                     "util": _pack(z)}
    return out


def heat_detail(engine) -> HeatDetail:
    """The heatmaps' values at full resolution, packed (zlib, base64) for the placement.

    ``links``: :func:`link_detail` of the last routed load.  ``racks``: every rack's hall,
    row and position, and each rack value of :data:`RACK_KEYS` the engine has, quantised
    (uint16).  A few hundred kB at 100,000 GPUs
    under full load, much less when idle; empty without the physics model.
    """
    ph = engine.physics
    plan = engine.plan
    out: HeatDetail = {"links": {}, "racks": {}}
    if ph is None:
        return out
    down = links_down(engine)
    if ph.last_load is not None or down.any():
        out["links"] = link_detail(plan.fabric, _link_load(ph, down), down)
    values = {"status": rack_status(engine)}
    if ph.last_power is not None:
        values.update(power_kw=ph.last_power.rack_kw,
                      power_share=power_share(plan, ph.last_power.rack_kw),
                      outlet_c=ph.last_power.outlet_c)
    out["racks"] = {"hall": _pack(plan.rack_hall.astype(np.int32)),
                    "row": _pack(plan.rack_row.astype(np.int32)),
                    "col": _pack(plan.rack_col.astype(np.int32)),
                    **{key: _pack(np.rint(np.clip(v, 0.0, 6553.0) / _RACK_QUANTUM[key])
                                  .astype(np.uint16)) for key, v in values.items()}}
    return out


def _one_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
    return int(value)


def heat_zoom(detail: HeatDetail, *, tier: str, pod: int | None = None, first: int | None = None,
              last: int | None = None, hall: int | None = None) -> HeatZoom:
    """One part of a heatmap at full resolution, from :func:`heat_detail`'s ``detail``.

    Parameters
    ----------
    tier : str
        A switch-link tier (``"leaf-spine"``, ``"island-uplink"`` …): give ``pod`` (the lower
        switches of that pod) or ``first`` and ``last`` (switch ids, inclusive).  A rack
        value (one of :data:`RACK_KEYS`): give ``hall`` (its index).
    pod, first, last, hall : int, optional
        What to cut out (see ``tier``).

    Returns
    -------
    LinkZoom or RackZoom
        ``z`` (utilisation 0-1, or the rack value in its unit; ``None`` where no rack
        stands), ``ids`` (switch id of each row; for racks the rack id of each cell, -1 where
        none), ``down`` (links: 1 where the link is out), ``scale`` and titles.  A bad
        parameter, or a cut over :data:`ZOOM_MAX_CELLS` cells, is a ``ValueError``.
    """
    links, racks = detail.get("links") or {}, detail.get("racks") or {}
    if tier in links:
        if hall is not None:
            raise ValueError("hall zooms a rack heatmap; give pod, or first and last")
        ids = _unpack(links[tier]["ids"])
        pods = _unpack(links[tier]["pods"])
        if pod is not None:
            if first is not None or last is not None:
                raise ValueError("give pod, or first and last, not both")
            pick = np.flatnonzero(pods == _one_int("pod", pod))
            what = f"pod {pod}"
            if pick.size == 0:
                raise ValueError(f"pod {pod} has no {tier} switches (pods "
                                 f"{int(pods.min())}-{int(pods.max())})")
        elif first is not None and last is not None:
            lo, hi = _one_int("first", first), _one_int("last", last)
            if hi < lo:
                raise ValueError(f"last ({hi}) is before first ({lo})")
            pick = np.flatnonzero((ids >= lo) & (ids <= hi))
            what = f"switches {lo}-{hi}"
            if pick.size == 0:
                raise ValueError(f"no {tier} switch has an id in {lo}-{hi} "
                                 f"(they run {int(ids.min())}-{int(ids.max())})")
        else:
            raise ValueError(f"zooming {tier} links needs pod, or first and last")
        code = _unpack(links[tier]["util"])[pick]
        _cells_check(code.size)
        out = code == _LINK_OUT
        z = np.where(out, 0.0, code * _UTIL_QUANTUM)
        return {"tier": tier, "title": f"{tier} links, {what}", "x": "uplink", "y": "switch",
                "ids": ids[pick].tolist(), "z": np.round(z, 4).tolist(),
                "down": out.astype(int).tolist(), "links_down": int(out.sum()),
                "scale": dict(LINK_SCALE)}
    if tier in RACK_ZOOMS and tier in racks:
        if pod is not None or first is not None or last is not None:
            raise ValueError(f"{tier} zooms by hall only")
        if hall is None:
            raise ValueError(f"zooming rack {tier} needs hall")
        h = _one_int("hall", hall)
        halls = _unpack(racks["hall"])
        pick = np.flatnonzero(halls == h)
        if pick.size == 0:
            raise ValueError(f"hall {h} does not exist (halls 0-{int(halls.max())})")
        row, col = _unpack(racks["row"])[pick], _unpack(racks["col"])[pick]
        shape = (int(row.max()) + 1, int(col.max()) + 1)
        _cells_check(shape[0] * shape[1])
        cell_ids = np.full(shape, -1, dtype=np.int64)
        cell_ids[row, col] = pick
        out = {"tier": tier, "title": f"{RACK_ZOOMS[tier]['title']} by rack, hall {h}",
               "x": "rack in row", "y": "row", "ids": cell_ids.tolist(),
               "z": _rack_cells(racks, tier, pick, row, col, shape),
               "scale": dict(RACK_ZOOMS[tier])}
        if tier == "power_share" and "power_kw" in racks:
            out["kw"] = _rack_cells(racks, "power_kw", pick, row, col, shape)
        return out
    known = sorted(links) + [k for k in RACK_ZOOMS if k in racks]
    raise ValueError(f"unknown tier {tier!r}; this twin has {', '.join(known) or 'none yet'}")


def _rack_cells(racks: dict, key: str, pick, row, col, shape) -> list[list[float | None]]:
    z = np.full(shape, np.nan)
    z[row, col] = np.round(_unpack(racks[key])[pick] * _RACK_QUANTUM[key], 4)
    return [[None if np.isnan(v) else float(v) for v in r] for r in z]


def _cells_check(n: int) -> None:
    if n > ZOOM_MAX_CELLS:
        raise ValueError(f"that cut has {n} cells, over {ZOOM_MAX_CELLS}: zoom further")
