"""Reads for the grid pages (issue 30): grids, their member clusters and overview rows."""

from __future__ import annotations

from twin.inventory.models import Cluster, Grid
from twin.live.models import GridState

ORDER = ("simulated", "mirrored")


def grid_by_name(*, name: str) -> Grid | None:
    return Grid.objects.filter(name=name).first()


def grids_all() -> list[Grid]:
    return list(Grid.objects.order_by("name"))


def grid_site_cluster(*, grid: Grid, place: str) -> Cluster | None:
    """The inventory cluster that is ``place`` of ``grid`` (``None`` for a cloud region)."""
    return Cluster.objects.filter(name=place, grid=grid).first()


def grid_links(*, grid: Grid) -> list[tuple[str, str]]:
    return list(grid.wan_links.order_by("id").values_list("a", "b"))


def grid_states(*, grid: Grid) -> list[GridState]:
    """The grid's overview rows, simulated first."""
    rows = list(GridState.objects.filter(grid=grid))
    return sorted(rows, key=lambda r: ORDER.index(r.source) if r.source in ORDER else 9)
