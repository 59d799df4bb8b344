"""Forms of the dashboard. They parse what a person typed; the services decide what is valid."""

from __future__ import annotations

from django import forms

from scheduler.control.bounds import DRILL_DURATION, POWER_CAP, STORAGE_SLOWDOWN, SURGE_FACTOR
from scheduler.control.drills import KINDS

PARAM_FIELDS = ("factor", "fraction", "duration_s")
"""Drill parameters the form offers; each kind takes some of them (see ``KIND_PARAMS``)."""

KIND_PARAMS = {
    "storage_slowdown": ("factor", "duration_s"),
    "inference_surge": ("factor", "duration_s"),
    "power_cap": ("fraction",),
}
"""Which parameter fields to show for a kind (the page hides the others; services check)."""

TARGET_HELP = ("'random' (default), a unit id (node, NIC, link, switch, rack, cooling loop: "
               "0-based), an accelerator model (supply cut), a cloud pool such as aws/us-east-1 "
               "(region loss), 'all' (power cap, inference surge) or a service name.")


class DrillForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k, k.replace("_", " ")) for k in KINDS])
    target = forms.CharField(max_length=128, required=False, initial="random",
                             help_text=TARGET_HELP)
    factor = forms.FloatField(required=False, help_text=(
        f"Storage slowdown: share of bandwidth left, {STORAGE_SLOWDOWN.interval()} "
        f"(default 0.5). Inference surge: demand multiplier, {SURGE_FACTOR.interval()} "
        "(default 2)."))
    fraction = forms.FloatField(required=False, help_text=(
        f"Power cap: share of the rack power budget, {POWER_CAP.interval()} (default 0.8)."))
    duration_s = forms.FloatField(label="Duration (simulated s)", required=False, help_text=(
        f"Storage slowdown, inference surge: {DRILL_DURATION.interval()}, 30 days "
        "(default 3600)."))

    def clean_target(self) -> str:
        return self.cleaned_data["target"].strip() or "random"

    def drill_arguments(self) -> dict:
        """Keyword arguments for ``services.drill_request``: only the parameters given."""
        data = self.cleaned_data
        return {"kind": data["kind"], "target": data["target"],
                "params": {name: data[name] for name in PARAM_FIELDS
                           if data.get(name) is not None}}
