"""Studies pages and API: staff launch a study (a form or a spec), everyone reads results.

The views only check, record and read; the runs go to Dask from ``twin.studies.store``.
Every view sits behind the login wall (``twin.config.middleware``); who may start is checked on each
request (:func:`twin.studies.store.can_start_study`).
"""

from __future__ import annotations

from pathlib import Path

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import FileResponse, Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from scheduler.presets import PRESETS
from scheduler.study.spec import SCENARIO_FIELDS
from twin.api.bodies import json_object
from twin.studies import selectors, store
from twin.studies.models import Study

LIST_LIMIT = 50
VARY = ("oversubscription", "spares", "policy", "placement", "checkpoint_interval", "recovery",
        "failure_profile", "power_cap", "fabric", "gpus", "load")
"""The fields the form can vary (a spec can vary any scenario field)."""
EXAMPLE = """name: oversubscription
base: {preset: dev-small, days: 2}
seeds: 4
arms:
  - name: one-to-one
    set: {oversubscription: 1}
  - name: one-to-three
    set: {oversubscription: 3}
figures: [mfu, goodput, ettr, wait_mean_h, ledger.exposed_communication]
"""


class StudyForm(forms.Form):
    """One field varied over a base scenario: the first value is the baseline."""

    name = forms.CharField(max_length=64, initial="new study")
    preset = forms.ChoiceField(choices=[(p, p) for p in PRESETS], initial="dev-small")
    days = forms.FloatField(initial=2.0, help_text="simulated days per run")
    seeds = forms.IntegerField(initial=4, help_text="seeds per arm (2 to 64)")
    vary = forms.ChoiceField(choices=[(f, f.replace("_", " ")) for f in VARY],
                             label="Field to vary")
    values = forms.CharField(max_length=400, help_text="comma-separated; the first is the "
                                                       "baseline, e.g. 1, 2, 4")

    def spec_data(self) -> dict:
        d = self.cleaned_data
        if not 2 <= d["seeds"] <= 64:
            raise ValidationError(f"seeds must be between 2 and 64, not {d['seeds']}")
        values = [v.strip() for v in d["values"].split(",") if v.strip()]
        if len(values) < 2:
            raise ValidationError("give at least two values (the first is the baseline)")
        return {"name": d["name"], "base": {"preset": d["preset"], "days": d["days"]},
                "seeds": d["seeds"],
                "arms": [{"name": f"{d['vary']}={v}"[:64], "set": {d["vary"]: _value(v)}}
                         for v in values]}


def _value(text: str):
    """A form value as the spec would read it: a number when it is one, else the text."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


class SpecForm(forms.Form):
    spec = forms.CharField(widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
                           max_length=100_000, initial=EXAMPLE, label="Spec (YAML or JSON)")


@require_http_methods(["GET", "POST"])
def studies_page(request):
    """GET: the forms (staff) and the studies. POST: launch one (staff)."""
    store.study_reap()
    can_start = store.can_start_study(request.user)
    form, spec_form = StudyForm(), SpecForm()
    if request.method == "POST":
        if not can_start:
            raise PermissionDenied(store.STUDY_DENIED)
        is_spec = "spec" in request.POST
        bound = SpecForm(request.POST) if is_spec else StudyForm(request.POST)
        if is_spec:
            spec_form = bound
        else:
            form = bound
        if bound.is_valid():
            try:
                if is_spec:
                    spec = store.spec_check(text=bound.cleaned_data["spec"])
                else:
                    spec = store.spec_check(data=bound.spec_data())
                study = store.study_launch(user=request.user, spec=spec,
                                           origin=Study.Origin.SPEC if is_spec
                                           else Study.Origin.FORM)
            except ValidationError as exc:
                bound.add_error(None, exc)
            else:
                messages.success(request, f"Study #{study.pk} started: {study.total_runs} runs.")
                return redirect("study", pk=study.pk)
    return render(request, "twin/studies.html", {
        "form": form, "spec_form": spec_form, "can_start": can_start,
        "studies": selectors.studies_recent(limit=LIST_LIMIT),
        "fields": SCENARIO_FIELDS,
    }, status=400 if request.method == "POST" else 200)


def _study(pk: int) -> Study:
    study = selectors.study_get(pk=pk)
    if study is None:
        raise Http404(f"study {pk} does not exist")
    return study


def study_json(study: Study, *, runs: bool = True) -> dict:
    out = {"id": study.pk, "name": study.name, "status": study.status,
           "status_text": study.get_status_display(), "origin": study.origin,
           "total_runs": study.total_runs, "done_runs": study.done_runs,
           "failed_runs": study.failed_runs, "error": study.error, "where": study.where,
           "requested_at": study.requested_at.isoformat(),
           "finished_at": study.finished_at.isoformat() if study.finished_at else None,
           "summary": study.summary or None, "page": f"/studies/{study.pk}/"}
    if runs:
        out["runs"] = [{"arm": r.arm, "seed": r.seed, "status": r.status,
                        "figures": r.figures, "error": r.error, "wall_s": r.wall_s,
                        "worker": r.worker} for r in selectors.study_runs(study_id=study.pk)]
    return out


def _tables(summary: dict) -> tuple[list, list]:
    """Per-arm rows (one per figure, a cell per arm) and paired rows (one per arm x figure)."""
    if not summary:
        return [], []
    arms = [{**f, "cells": [a["figures"][f["name"]] for a in summary["arms"]]}
            for f in summary["figures"]]
    paired = [{"arm": p["arm"], "cells": [{**p["figures"][f["name"]], **f}
                                          for f in summary["figures"]]}
              for p in summary["paired"]]
    return arms, paired


@require_GET
def study_page(request, pk: int):
    store.study_reap()
    study = _study(pk)
    arms, paired = _tables(study.summary)
    files = Path(study.out_dir) if study.out_dir else None
    return render(request, "twin/study.html", {
        "study": study, "arm_rows": arms, "paired": paired,
        "arms": (study.summary or {}).get("arms", []),
        "runs": selectors.study_runs(study_id=study.pk),
        "can_start": store.can_start_study(request.user),
        "has_report": bool(files and (files / "report.html").is_file()),
        "status": {"id": study.pk, "status": study.status},
    })


@require_POST
def study_resume(request, pk: int):
    store.study_reap()
    study = _study(pk)
    try:
        store.study_resume(user=request.user, study=study)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        messages.success(request, f"Study #{study.pk} resumed.")
    return redirect("study", pk=study.pk)


@require_GET
def study_file(request, pk: int, name: str):
    """report.html, results.json and the CSVs of a study, to logged-in users."""
    if name not in ("report.html", "results.json", "arms.csv", "paired.csv", "runs.csv"):
        raise Http404("no such file")
    study = _study(pk)
    path = Path(study.out_dir) / name if study.out_dir else None
    if path is None or not path.is_file():
        raise Http404(f"study {pk} has no {name} (yet)")
    return FileResponse(open(path, "rb"), as_attachment=not name.endswith(".html"),
                        filename=name)


@require_POST
def whatif_save(request, pk: int):
    row = selectors.whatif_get(pk=pk)
    if row is None:
        raise Http404(f"what-if {pk} does not exist")
    try:
        study = store.whatif_save_as_study(user=request.user, whatif=row)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
        return redirect("whatif-result", pk=pk)
    messages.success(request, f"What-if #{pk} saved as study #{study.pk}.")
    return redirect("study", pk=study.pk)


# ----------------------------------------------------------------- API
def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@require_http_methods(["GET", "POST"])
def api_studies(request):
    """GET: recent studies (without runs). POST: launch one from a spec (staff; 202):
    ``{"spec": "<YAML or JSON text>"}`` or ``{"spec": {...}}``."""
    if request.method == "GET":
        store.study_reap()
        return JsonResponse({"studies": [study_json(s, runs=False) for s in
                                         selectors.studies_recent(limit=LIST_LIMIT)]})
    if not store.can_start_study(request.user):
        return _error(store.STUDY_DENIED, 403)
    shape = 'send {"spec": "<YAML or JSON text>"} or {"spec": {...}}'
    body = json_object(request, what="the study", shape=shape)
    if isinstance(body, JsonResponse):
        return body
    if set(body) != {"spec"}:
        return _error(shape, 400)
    try:
        spec = body["spec"]
        checked = store.spec_check(text=spec) if isinstance(spec, str) else \
            store.spec_check(data=spec) if isinstance(spec, dict) else None
        if checked is None:
            return _error("spec must be text or an object", 400)
        study = store.study_launch(user=request.user, spec=checked)
    except PermissionDenied as exc:
        return _error(str(exc) or "permission denied", 403)
    except ValidationError as exc:
        return _error("; ".join(exc.messages), 400)
    return JsonResponse({"id": study.pk, "status": study.status, "url": f"/api/studies/{study.pk}",
                         "page": f"/studies/{study.pk}/"}, status=202)


@require_GET
def api_study(request, pk: int):
    study = selectors.study_get(pk=pk)
    if study is None:
        return _error(f"study {pk} does not exist", 404)
    return JsonResponse(study_json(study))
