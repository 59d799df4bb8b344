"""The dashboard's pages: overview, topology, jobs, failures, events, drills, and the error
pages."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect, render
from django.views import csrf, defaults
from django.views.decorators.http import require_GET, require_http_methods

from twin.api import events as event_log
from twin.api.bodies import json_error
from twin.api.events import EventFilters
from twin.api.views import PAGE_MAX
from twin.control import actions as services_actions
from twin.control import selectors as control_selectors
from twin.control import services
from twin.control.drills_api import DRILLS_LIMIT
from twin.control.forms import KIND_BOUNDS, KIND_PARAMS, DrillForm
from twin.control.permissions import DRILLS_DENIED, can_run_drills
from twin.inventory import floor
from twin.inventory import selectors as inventory_selectors
from twin.live import selectors as live_selectors
from twin.pages import event_rows
from twin.pages.clock import sim_clock


# ----------------------------------------------------------------- pages
@require_GET
def home(request):
    cluster = live_selectors.cluster_current()
    summary = inventory_selectors.inventory_summary(cluster=cluster) if cluster else None
    return render(request, "twin/home.html",
                  {"summary": summary, "can_steer": can_run_drills(request.user)})


@require_GET
def topology(request):
    cluster = live_selectors.cluster_current()
    rack_map = floor.rack_floor_map(cluster=cluster) if cluster else {"racks": []}
    names = inventory_selectors.heatmap_names(cluster=cluster)
    return render(request, "twin/topology.html", {"cluster": cluster, "rack_map": rack_map,
                                                  "names": names})


@require_GET
def jobs(request):
    return render(request, "twin/jobs.html")


@require_GET
def failures(request):
    return render(request, "twin/failures.html")


@require_GET
def events(request):
    """The stored event log of the engine now running, newest first, filtered and paged (the
    query of ``/api/events``; here routine scheduling is left out unless asked for).  A bad
    filter is a 400 with its message; a page past the last shows the last and says so."""
    live = live_selectors.live_state_get()
    if live is None:
        return render(request, "twin/events.html", {"data": None, "filters": EventFilters()})
    try:
        filters = event_log.event_filters_parse(request.GET, inventory=live.inventory,
                                                routine_default=False)
        page = event_log.page_parse(request.GET.get("page", ""))
    except event_log.BadFilter as exc:
        return render(request, "twin/events.html", {"data": None, "error": str(exc),
                                                     "filters": EventFilters()}, status=400)
    data = event_log.events_page(inventory=live.inventory, filters=filters,
                                 page=min(page, PAGE_MAX), per_page=100)
    if data["pages"] < page:
        data["page_asked"] = page
    times = [e["t"] for e in data["events"]]
    clock = sim_clock(live, t_from=min(times), t_to=max(times)) if times else None
    return render(request, "twin/events.html", {
        "data": data, "rows": event_rows.waves(data["events"]), "filters": filters,
        "query": filters.query(routine_default=False), "clock": clock,
        "kinds": event_rows.kind_choices(event_log.kind_counts(inventory=live.inventory),
                                         chosen=filters.kind),
        "severities": event_log.SEVERITIES,
    })


@require_http_methods(["GET", "POST"])
def drills(request):
    if not can_run_drills(request.user):
        raise PermissionDenied(DRILLS_DENIED)
    if request.method == "POST":
        form = DrillForm(request.POST)
        if form.is_valid():
            try:
                drill = services.drill_request(user=request.user, **form.drill_arguments())
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, f"Drill #{drill.pk}: {drill.kind} on {drill.target} "
                                          "sent to the live engine.")
                return redirect("drills")
    else:
        form = DrillForm(initial={k: v for k, v in request.GET.items()
                                  if k in ("kind", "target")})
    cluster = live_selectors.cluster_current()
    recent = control_selectors.drills_recent(DRILLS_LIMIT)
    return render(request, "twin/drills.html", {
        "form": form, "drills": recent,
        "kind_params": KIND_PARAMS, "targets": _drill_target_names(cluster),
        "kind_bounds": KIND_BOUNDS, "endable": services_actions.drills_endable(drills=recent),
    }, status=400 if form.is_bound else 200)


def _drill_target_names(cluster) -> list[str]:
    """Suggestions for the target field: random, all, accelerator models, cloud pools."""
    names = ["random", "all"]
    if cluster is not None:
        summary = inventory_selectors.inventory_summary(cluster=cluster)
        names += [row["accelerator_model__name"] for row in summary["by_model"]]
        names += [str(pool) for pool in summary["cloud_pools"]]
    return names


def not_found(request, exception=None):
    """``handler404``: JSON for the API (an id too large for the URL lands here too), Django's
    page elsewhere."""
    if request.path.startswith("/api/"):
        return json_error(f"{request.path} does not exist", 404)
    return defaults.page_not_found(request, exception)


def csrf_failure(request, reason=""):
    """JSON for the API, Django's page elsewhere (settings.CSRF_FAILURE_VIEW)."""
    if request.path.startswith("/api/"):
        return json_error(f"CSRF check failed ({reason}): send the csrftoken cookie's value in "
                      "an X-CSRFToken header", 403)
    return csrf.csrf_failure(request, reason=reason)
