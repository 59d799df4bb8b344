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
from twin.inventory.names import Names
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


FAILURES_SHOWN = 20
"""Recent failures, repairs and drills listed on the Failures page."""


@require_GET
def failures(request):
    """Counters and charts from the frame; the latest failures, repairs and drills from the
    stored log, by name and linked."""
    live = live_selectors.live_state_get()
    recent = None
    if live is not None:
        filters = EventFilters(severity="warning", routine=False)
        recent = event_log.events_page(inventory=live.inventory, filters=filters, page=1,
                                       per_page=FAILURES_SHOWN)
        recent["rows"] = event_rows.named(recent["events"],
                                          names=Names(live_selectors.cluster_current()))
    return render(request, "twin/failures.html", {"recent": recent})


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
        "data": data, "filters": filters,
        "rows": event_rows.named(event_rows.waves(data["events"]),
                                 names=Names(live_selectors.cluster_current())),
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
                on = services.drill_target_named(Names(live_selectors.cluster_current()),
                                                 drill.kind, drill.target)
                messages.success(request, f"Drill #{drill.pk}: {drill.kind} on "
                                          f"{on.name if on else drill.target} sent to the "
                                          "live engine.")
                return redirect("drills")
    else:
        form = DrillForm(initial={k: v for k, v in request.GET.items()
                                  if k in ("kind", "target")})
    cluster = live_selectors.cluster_current()
    recent = control_selectors.drills_recent(DRILLS_LIMIT)
    names = Names(cluster)
    for drill in recent:  # shown by name; the engine takes (and the row keeps) the unit id
        drill.target_named = services.drill_target_named(names, drill.kind, drill.target)
        chosen = (drill.outcome or {}).get("target")
        drill.chosen_named = (services.drill_target_named(names, drill.kind, chosen)
                              if chosen is not None and str(chosen) != drill.target else None)
    targets = _drill_targets(cluster, names)
    return render(request, "twin/drills.html", {
        "form": form, "drills": recent,
        "kind_params": KIND_PARAMS, "targets": targets["any"], "kind_targets": targets,
        "kind_bounds": KIND_BOUNDS, "endable": services_actions.drills_endable(drills=recent),
    }, status=400 if form.is_bound else 200)


TARGETS_MAX = 2000
"""Suggestions per drill kind in the target field (any name or id of the kind is taken)."""


def _drill_targets(cluster, names: Names) -> dict[str, list[str]]:
    """Suggestions for the target field per drill kind (``any``: before a kind is chosen):
    random, all where it applies, and the names of what the kind can hit (hostnames, GPUs
    as ``host:index``, switches of the kind's tier, racks, cooling loops, accelerator models,
    cloud pools), at most :data:`TARGETS_MAX` each."""
    models: list[str] = []
    pools: list[str] = []
    if cluster is not None:
        summary = inventory_selectors.inventory_summary(cluster=cluster)
        models = [row["accelerator_model__name"] for row in summary["by_model"]]
        pools = [str(pool) for pool in summary["cloud_pools"]]
    units = {kind: names.all_of(unit, limit=TARGETS_MAX)
             for kind, unit in services.DRILL_UNITS.items()}
    out = {kind: ["random"] + [x.name for x in found] for kind, found in units.items()}
    out["power_cap"].insert(1, "all")
    out["supply_cut"] = ["random"] + models
    out["cloud_region_loss"] = ["random"] + pools
    out["inference_surge"] = ["random", "all"]
    out["any"] = ["random", "all"] + models + pools
    return out


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
