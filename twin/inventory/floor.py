"""Reads of the data-hall floor: where each rack sits, and what one rack holds.

Racks carry the core's numbering (the order they were written in, i.e. primary-key order
within the cluster): the ids a ``rack_power`` or ``power_cap`` drill targets and the cells of
the live frame's rack heatmaps (``scheduler.frames.rack_floor``: halls stacked, one heatmap row
per rack row, one column per rack in the row).

The live engine runs this inventory (``twin.inventory.adapter.cluster_plan_read``), so its rack
heatmaps describe this floor.
"""

from __future__ import annotations

from scheduler.frame_schema import StoredFrame
from twin.inventory.models import Cluster, DataHall, Rack

RACK_HEATMAPS = ("status", "power_kw", "outlet_c")


def _racks(cluster: Cluster):
    return Rack.objects.filter(hall__site__cluster=cluster).order_by("pk")


def _floor_geometry(cluster: Cluster) -> tuple[dict[int, int], int]:
    """Hall index by hall pk, and rows per hall (the deepest row in the cluster, plus one)."""
    halls = DataHall.objects.filter(site__cluster=cluster).order_by("pk")
    hall_index = {pk: i for i, pk in enumerate(halls.values_list("pk", flat=True))}
    deepest = _racks(cluster).order_by("-row").values_list("row", flat=True).first()
    return hall_index, 0 if deepest is None else deepest + 1


def rack_floor_map(*, cluster: Cluster) -> dict:
    """``{"racks": [[y, x], ...]}``: each rack's heatmap cell, listed by rack id."""
    hall_index, rows_per_hall = _floor_geometry(cluster)
    cells = [[hall_index[hall] * rows_per_hall + row, column]
             for hall, row, column in _racks(cluster).values_list("hall_id", "row", "column")]
    return {"rows_per_hall": rows_per_hall, "racks": cells}


def rack_detail(*, cluster: Cluster, index: int) -> dict | None:
    """Rack ``index`` (the core's id) and its nodes, or None if there is no such rack."""
    rack = next(iter(_racks(cluster).select_related("hall", "cooling_loop", "power_feed")
                     [index:index + 1]), None)
    if rack is None:
        return None
    hall_index, rows_per_hall = _floor_geometry(cluster)
    nodes = list(rack.nodes.order_by("slot").values(
        "pk", "hostname", "slot", "accelerator_model__name", "accelerator_count", "status",
        "status_reason", "is_spare"))
    return {
        "id": index, "name": rack.name, "hall": rack.hall.name, "row": rack.row,
        "column": rack.column, "power_capacity_kw": rack.power_capacity_kw,
        "cooling_loop": rack.cooling_loop.name if rack.cooling_loop else None,
        "power_feed": rack.power_feed.name if rack.power_feed else None,
        "cell": [hall_index[rack.hall_id] * rows_per_hall + rack.row, rack.column],
        "nodes": [{"pk": n["pk"], "hostname": n["hostname"], "slot": n["slot"],
                   "model": n["accelerator_model__name"], "gpus": n["accelerator_count"],
                   "status": n["status"], "reason": n["status_reason"],
                   "spare": n["is_spare"]} for n in nodes],
    }


def rack_live_values(frame: StoredFrame | None, cell: list[int]) -> dict:
    """The live frame's value at a rack's cell in each rack heatmap (None where absent: no
    frame, or no power model for the power and outlet maps).

    Heatmaps of large floors are block-merged (``rows_per_cell`` by ``cols_per_cell``);
    the value is then the block's, not the rack's own.
    """
    racks: dict = frame["heatmaps"]["racks"] if frame is not None else {}
    y, x = cell
    out = {}
    for key in RACK_HEATMAPS:
        heatmap = racks.get(key)  # power_kw, power_share, outlet_c: NotRequired
        value = None
        if heatmap is not None:
            row = y // heatmap["rows_per_cell"]
            col = x // heatmap["cols_per_cell"]
            z = heatmap["z"]
            if row < len(z) and col < len(z[row]) and z[row][col] != heatmap["empty"]:
                value = z[row][col]
        out[key] = value
    return out
