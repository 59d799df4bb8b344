"""Grids of the inventory for studies: what :func:`scheduler.study.spec.check_spec` calls (as
``grids=``) for a grid study naming a grid that is no preset (:mod:`scheduler.study.grid`)."""

from __future__ import annotations

from scheduler.grid.presets import GRID_PRESETS
from twin.inventory.grid import grid_settings_read, grid_spec_read
from twin.inventory.models import Grid

GRIDS_LISTED = 20


def inventory_grid(name: str) -> tuple:
    """``(GridSpec, plans, {"policy": stored weights, "replication_s": s or None})`` of the
    inventory's grid ``name``; one-line ``ValueError`` when there is none or it cannot run."""
    grid = Grid.objects.filter(name=name).first()
    if grid is None:
        names = list(Grid.objects.order_by("name").values_list("name", flat=True)
                     [:GRIDS_LISTED + 1])
        known = ", ".join(names[:GRIDS_LISTED]) + (", ..." if len(names) > GRIDS_LISTED
                                                   else "") if names else "none"
        raise ValueError(f"grid {name!r} is neither a grid preset ({', '.join(GRID_PRESETS)}) "
                         f"nor a grid of the inventory (grids: {known})")
    try:
        spec, plans = grid_spec_read(grid=grid)
    except ValueError as exc:
        raise ValueError(f"grid {name!r}: its inventory cannot run: {exc}") from None
    stored = grid_settings_read(grid=grid)
    return spec, plans, {"policy": {"cost": stored["weight_cost"],
                                    "start": stored["weight_start"],
                                    "gravity": stored["weight_gravity"]},
                         "replication_s": float(stored["checkpoint_replication_s"]) or None}
