"""The grid pages (issue 30; docs/grid_page.md): the list of grids, one grid (per place a row,
the totals, WAN links, moves; each source it has), one place of a grid, the staff drill form
(a region loss or a WAN cut, applied by the grid's ``run_grid``), and ``GET /api/grids/<name>/``
that the pages poll.  The endpoint lives here, not in ``twin.api``, because its cells are
written with the page formats (:mod:`twin.pages.formats`) and ``twin.api`` sits below
``twin.pages`` (.importlinter); ``api_incidents`` is the precedent."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_POST

from twin.api.bodies import json_error
from twin.control.permissions import DRILLS_DENIED, can_run_drills
from twin.live.grid_drills import grid_drill_request, grid_drills_recent
from twin.live.grid_selectors import (
    grid_by_name,
    grid_links,
    grid_site_cluster,
    grid_states,
    grids_all,
)
from twin.live.grid_whatif import change_from_form, grid_whatif_request, grid_whatifs_recent
from twin.pages.grid_rows import (
    INCIDENT_COLUMNS,
    LINK_COLUMNS,
    MOVE_COLUMNS,
    PLACE_COLUMNS,
    grid_view,
)


def grid_get(name: str):
    grid = grid_by_name(name=name)
    if grid is None:
        raise Http404(f"no grid {name!r}")
    return grid


def _columns() -> dict:
    return {"place_columns": PLACE_COLUMNS, "link_columns": LINK_COLUMNS,
            "move_columns": MOVE_COLUMNS, "incident_columns": INCIDENT_COLUMNS}


@require_GET
def grids_page(request):
    grids = [{"name": g.name, "description": g.description, "places": g.places(),
              "sources": [s.source for s in grid_states(grid=g)]}
             for g in grids_all()]
    return render(request, "grid_list.html", {"grids": grids})


@require_GET
def grid_page(request, name: str):
    grid = grid_get(name)
    view = grid_view(grid=grid)
    steer = can_run_drills(request.user)
    return render(request, "grid.html", {
        "grid": grid, "view": view, **_columns(), "can_drill": steer,
        "places": grid.places(),
        "links": [(f"{a}|{b}", f"{a} – {b}") for a, b in grid_links(grid=grid)],
        "drills": grid_drills_recent(grid=grid) if steer else [],
        "whatifs": grid_whatifs_recent(grid=grid)})


@require_GET
def grid_site_page(request, name: str, place: str):
    grid = grid_get(name)
    if place not in grid.places():
        raise Http404(f"no place {place!r} in grid {name}")
    cluster = grid_site_cluster(grid=grid, place=place)
    admin_url = None
    if cluster is not None and request.user.is_staff:
        try:
            admin_url = reverse("admin:twin_cluster_change", args=[cluster.pk])
        except NoReverseMatch:
            admin_url = None
    return render(request, "grid_site.html", {
        "grid": grid, "place": place, "cluster": cluster, "admin_url": admin_url,
        "view": grid_view(grid=grid, place=place), **_columns()})


@require_POST
def grid_drill_form(request, name: str):
    """The grid page's drill form: one message, then back to the page."""
    grid = grid_get(name)
    if not can_run_drills(request.user):
        raise PermissionDenied(DRILLS_DENIED)
    post = request.POST
    a, _, b = post.get("link", "").partition("|")
    try:
        drill = grid_drill_request(user=request.user, grid=grid, kind=post.get("kind", ""),
                                   place=post.get("place", ""), a=a, b=b,
                                   model=post.get("model", ""),
                                   duration_s=post.get("duration_s") or None)
    except ValidationError as exc:
        messages.error(request, f"Drill refused: {'; '.join(exc.messages)}")
    else:
        messages.success(request, f"Drill #{drill.pk}: {drill.kind} on {drill.target} sent to "
                                  f"the running grid {grid.name}")
    return redirect("grid", name=grid.name)


@require_POST
def grid_whatif_form(request, name: str):
    """The grid page's what-if form (docs/grid_whatif.md): one message, then back."""
    grid = grid_get(name)
    if not can_run_drills(request.user):
        raise PermissionDenied(DRILLS_DENIED)
    post = request.POST
    try:
        row = grid_whatif_request(user=request.user, grid=grid,
                                  source=post.get("source", "simulated"),
                                  horizon_h=post.get("horizon_h"), seeds=post.get("seeds"),
                                  change=change_from_form(post))
    except ValidationError as exc:
        messages.error(request, f"What-if refused: {'; '.join(exc.messages)}")
    else:
        messages.success(request, f"What-if #{row.pk} queued for the {row.params['source']} "
                                  f"grid {grid.name}")
    return redirect("grid", name=grid.name)


@require_GET
def api_grid(request, name: str):
    """The grid's view as JSON (:func:`twin.pages.grid_rows.grid_view`): per source its age,
    the formatted cells of places, totals, links, moves and incidents, and its raw place rows
    and totals;
    ``?place=P`` restricts it to one place, as the site page."""
    grid = grid_by_name(name=name)
    if grid is None:
        return json_error(f"no grid {name!r}", 404)
    place = request.GET.get("place") or None
    if place is not None and place not in grid.places():
        return json_error(f"no place {place!r} in grid {name}", 404)
    return JsonResponse(grid_view(grid=grid, place=place))
