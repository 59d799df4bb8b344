"""What-if pages and API: staff fork the live twin's "now" and compare an action with the
baseline (``twin/whatif.py`` runs it in a worker; these views never wait for it).

Every view sits behind the login wall (``twin.config.middleware``); who may start one is checked on
each request (:func:`twin.studies.whatif.can_start_whatif`), everyone logged in may read.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from scheduler.control.whatif import ACTION_KINDS, DRAIN_UNITS, METRICS
from scheduler.limits.bounds import DRILL_PARAMS
from scheduler.model.ledger import CATEGORIES
from scheduler.scheduling.placement import STRATEGIES
from scheduler.scheduling.policies import REGISTRY
from scheduler.study.figures import whatif_figures
from twin.api.bodies import json_body
from twin.studies import whatif as service

LIST_LIMIT = 30
NUMBER_PARAMS = ("fraction", "factor", "duration_s")


def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


class WhatIfForm(forms.Form):
    """The page's form; :meth:`params` is the API's body for :func:`service.whatif_start`."""

    kind = forms.ChoiceField(choices=[(k, k.replace("_", " ")) for k in ACTION_KINDS],
                             initial="spine_switch", label="Action")
    target = forms.CharField(max_length=64, required=False, initial="random",
                             help_text="an id, 'random', or for a power cap 'all'")
    unit = forms.ChoiceField(choices=[(u, u) for u in DRAIN_UNITS], required=False,
                             label="Drain unit")
    policy = forms.ChoiceField(choices=[(p, p) for p in REGISTRY], required=False)
    placement = forms.ChoiceField(choices=[("", "the policy's")] + [(s, s) for s in STRATEGIES],
                                  required=False)
    fraction = forms.FloatField(required=False, help_text="power cap: share of rack power")
    factor = forms.FloatField(required=False, help_text="storage slowdown or surge factor")
    duration_s = forms.FloatField(required=False, label="Duration (s)")
    hours = forms.FloatField(initial=24.0, help_text="simulated hours to run forward")
    seeds = forms.IntegerField(initial=3, help_text="futures to compare (1 to 32)")

    def params(self) -> dict:
        d = self.cleaned_data
        kind, target = d["kind"], (d.get("target") or "random").strip()
        if kind == "none":
            action = None
        elif kind == "policy":
            action = {"kind": kind, "name": d.get("policy") or "default",
                      **({"placement": d["placement"]} if d.get("placement") else {})}
        elif kind == "drain":
            action = {"kind": kind, "unit": d.get("unit") or "rack", "target": target}
        else:
            action = {"kind": kind, "target": target,
                      **{k: d[k] for k in DRILL_PARAMS.get(kind, {}) if d.get(k) is not None}}
        return {"action": action, "hours": d["hours"], "seeds": d["seeds"]}


@require_http_methods(["GET", "POST"])
def whatif_page(request):
    """GET: the form (for staff) and the recent what-ifs. POST: start one (staff)."""
    can_start = service.can_start_whatif(request.user)
    form = WhatIfForm()
    if request.method == "POST":
        if not can_start:
            raise PermissionDenied(service.WHATIF_DENIED)
        form = WhatIfForm(request.POST)
        if form.is_valid():
            try:
                row = service.whatif_start(user=request.user, params=form.params())
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, f"What-if #{row.pk} started.")
                return redirect("whatif-result", pk=row.pk)
    return render(request, "twin/whatif.html", {
        "form": form, "can_start": can_start, "whatifs": service.whatif_recent(LIST_LIMIT),
        "kind_params": {k: list(v) for k, v in DRILL_PARAMS.items()},
    }, status=400 if form.is_bound else 200)


def _units() -> dict[str, str]:
    """Each metric's unit, as a study of the what-if names it (``fraction``, ``h``, ``GPU-h``,
    ``count``); the pages write a figure by its unit (``twin/pages/formats.py``)."""
    units = {f.name: f.unit for f in whatif_figures(METRICS)}
    return {name: units.get(name, "GPU-h" if "gpu_hours" in name else "count")
            for name in METRICS}


def _rows(result: dict) -> list[dict]:
    """The result table: one row per metric (means, and the delta's band)."""
    out = []
    units = _units()
    for name, meaning in METRICS.items():
        row = result.get("summary", {}).get(name, {})
        band = row.get("delta_band")
        out.append({"name": name, "meaning": meaning, "unit": units[name],
                    "baseline": row.get("baseline"), "action": row.get("action"),
                    "delta": row.get("delta"), "band": band})
    return out


def _chart(result: dict) -> dict:
    """Per ledger category: the action's GPU-hours minus the baseline's, per seed."""
    seeds = result.get("per_seed", [])
    return {"categories": list(CATEGORIES),
            "seeds": [{"seed": s["seed"],
                       "delta": [s["delta"]["gpu_hours"].get(c) for c in CATEGORIES]}
                      for s in seeds]}


@require_GET
def whatif_result(request, pk: int):
    row = service.whatif_get(pk)
    if row is None:
        raise Http404(f"what-if {pk} does not exist")
    result = row.result or {}
    return render(request, "twin/whatif_result.html", {
        "row": row, "rows": _rows(result) if result else [], "result": result,
        "chart": _chart(result) if result else None,
        "status": {"id": row.pk, "status": row.status},
    })


# ----------------------------------------------------------------- API
@require_http_methods(["GET", "POST"])
def api_whatif(request):
    """GET: recent what-ifs (without results). POST: start one (staff, JSON; 202)."""
    if request.method == "GET":
        return JsonResponse({"whatifs": [service.whatif_json(r, viewer=request.user,
                                                             result=False)
                                         for r in service.whatif_recent(LIST_LIMIT)]})
    if not service.can_start_whatif(request.user):
        return _error(service.WHATIF_DENIED, 403)
    if request.content_type != "application/json":
        return _error(f"send the what-if as application/json, not "
                      f"{request.content_type or 'no Content-Type'}", 415)
    body = json_body(request)
    if isinstance(body, JsonResponse):
        return body
    try:
        row = service.whatif_start(user=request.user, params=body)
    except PermissionDenied as exc:
        return _error(str(exc) or "permission denied", 403)
    except ValidationError as exc:
        status = 409 if getattr(exc, "code", None) == "no_snapshot" else 400
        return _error("; ".join(exc.messages), status)
    return JsonResponse({"id": row.pk, "status": row.status, "url": f"/api/whatif/{row.pk}",
                         "page": f"/whatif/{row.pk}/"}, status=202)


@require_GET
def api_whatif_detail(request, pk: int):
    row = service.whatif_get(pk)
    if row is None:
        return _error(f"what-if {pk} does not exist", 404)
    return JsonResponse(service.whatif_json(row, viewer=request.user))
