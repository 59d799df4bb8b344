"""Heatmaps by name: the names behind the live frame's heatmap ids, and ``/api/heatmap``, one
pod, block of switches or hall at full resolution (``scheduler.frames.heat_zoom`` over the
``heat`` the engine writes with its placement).

Read-only, like every other API read: any logged-in user (the middleware refuses anonymous
requests with 401).
"""

from __future__ import annotations

import re

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from scheduler.frames import heat_zoom
from twin.inventory import selectors as inventory_selectors
from twin.inventory.models import Cluster
from twin.live import selectors as live_selectors

ZOOM_PARAMS = ("pod", "first", "last", "hall")
_INT = re.compile(r"[0-9]{1,9}")
NO_DETAIL = ("the live engine has published no full-resolution heatmaps yet (no physics "
             "refresh, or an engine older than this page)")


def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _switch_names(cluster: Cluster | None, ids: list[int]) -> list[str]:
    if cluster is None:
        return [f"switch {i}" for i in ids]
    return inventory_selectors.switch_names_of(cluster=cluster, indices=ids)


def _rack_names(cluster: Cluster | None, ids: list[list[int]]) -> list[list[str | None]]:
    names = [] if cluster is None else inventory_selectors.rack_names(cluster=cluster)
    return [[None if i < 0 else (names[i] if i < len(names) else f"rack {i}") for i in row]
            for row in ids]


def _zoom_args(query) -> dict:
    args: dict = {}
    for key in ZOOM_PARAMS:
        text = query.get(key, "")
        if text == "":
            continue
        if not _INT.fullmatch(text):
            raise ValueError(f"{key} must be a non-negative integer, not {text[:40]!r}")
        args[key] = int(text)
    return args


@require_GET
def api_heatmap(request):
    """``?tier=leaf-spine&pod=3`` (or ``&first=120&last=180``, switch ids) for one pod's or one
    block's links, ``?tier=outlet_c&hall=0`` (``status``, ``power_share``) for one hall's racks:
    every link or rack of the cut with its own value, named, on the fixed colour scale."""
    tier = request.GET.get("tier", "")[:40]
    if not tier:
        return _error("tier is required: a link tier (e.g. leaf-spine) or a rack heatmap "
                      "(status, power_share, outlet_c)", 400)
    try:
        args = _zoom_args(request.GET)
    except ValueError as exc:
        return _error(str(exc), 400)
    live = live_selectors.live_state_get()
    if live is None:
        return _error("the live engine has not published a frame yet", 503)
    detail = live.placement["heat"] if live.placement is not None else None
    if detail is None:  # no placement, or an older engine's that did not report it
        return _error(NO_DETAIL, 404)
    try:
        zoom = heat_zoom(detail, tier=tier, **args)
    except ValueError as exc:
        return _error(str(exc), 400)
    cluster = live_selectors.cluster_current()
    if "down" in zoom:  # links: one switch per row
        zoom["names"] = _switch_names(cluster, zoom["ids"])
    else:
        zoom["names"] = _rack_names(cluster, zoom["ids"])
        if cluster is not None and "hall" in args:
            halls = inventory_selectors.hall_names(cluster=cluster)
            zoom["hall"] = halls[args["hall"]] if args["hall"] < len(halls) else None
    return JsonResponse({"seq": live.seq, "t": live.t_sim, **zoom})
