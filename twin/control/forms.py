"""Forms of the dashboard. They parse what a person typed; the services decide what is valid.

The drill form's numbers take their bounds from the one table the engine and the API check,
:data:`scheduler.limits.bounds.DRILL_PARAMS`: the fields carry them as ``min``, ``max`` and
``step`` attributes and in their help text (per kind: ``KIND_BOUNDS``, which the page's script
applies when the kind changes).  The browser's own checks are a hint (the form is sent with
``novalidate``); the services refuse a value out of bounds with a message naming the bound.
"""

from __future__ import annotations

from django import forms

from scheduler.control.drills import KINDS
from scheduler.limits.bounds import DRILL_DEFAULTS, DRILL_PARAMS, Bound, _shown

PARAM_FIELDS = ("factor", "fraction", "duration_s")
"""Drill parameters the form offers; each kind takes some of them (see ``KIND_PARAMS``)."""

KIND_PARAMS = {kind: tuple(params) for kind, params in DRILL_PARAMS.items()}
"""Which parameter fields to show for a kind (the page hides the others; services check)."""

_MEANING = {
    ("storage_slowdown", "factor"): "share of the central storage's bandwidth left",
    ("inference_surge", "factor"): "demand multiplier",
    ("power_cap", "fraction"): "share of the rack power budget",
}

TARGET_HELP = ("'random' (default); the name the pages show (a hostname, a GPU as host:index, "
               "a switch, rack or cooling loop name, a link as 'leaf – spine') or its engine id "
               "(0-based); an accelerator model (supply cut), a cloud pool such as "
               "aws/us-east-1 (region loss), 'all' (power cap, inference surge) or a service "
               "name.")


def bound_attrs(bound: Bound) -> dict[str, str]:
    """HTML ``min``, ``max`` and ``step`` of a bound (an open end is refused by the service).

    >>> bound_attrs(Bound(0.1, 1.0, low_open=False))
    {'min': '0.1', 'max': '1', 'step': 'any'}
    """
    def number(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else repr(float(x))
    return {"min": number(bound.low), "max": number(bound.high),
            "step": "1" if bound.integer else "any"}


def bound_help(kind: str, name: str) -> str:
    """``demand multiplier, (0, 100] (default 2).``: from the bounds table and the defaults."""
    bound = DRILL_PARAMS[kind][name]
    meaning = _MEANING.get((kind, name), "simulated seconds" if name == "duration_s" else name)
    default = DRILL_DEFAULTS.get(kind, {}).get(name)
    note = f", {bound.note}" if bound.note else ""
    return (f"{meaning}, {bound.interval()}{note}"
            + (f" (default {_shown(default)})." if default is not None else "."))

KIND_BOUNDS = {kind: {name: {**bound_attrs(bound), "help": bound_help(kind, name).capitalize()}
                      for name, bound in params.items()}
               for kind, params in DRILL_PARAMS.items()}
"""Per kind and parameter: the field's ``min``/``max``/``step`` and help text."""


def _number_field(kind: str, name: str, **kw) -> forms.FloatField:
    """A field whose attributes are the bound ``name`` has in ``kind`` (the first kind that
    takes it; the page switches them with the kind)."""
    attrs = bound_attrs(DRILL_PARAMS[kind][name])
    return forms.FloatField(required=False, widget=forms.NumberInput(attrs=attrs), **kw)


class DrillForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k, k.replace("_", " ")) for k in KINDS])
    target = forms.CharField(max_length=128, required=False, initial="random",
                             help_text=TARGET_HELP)
    factor = _number_field("inference_surge", "factor", help_text=(
        f"Storage slowdown: {bound_help('storage_slowdown', 'factor')} Inference surge: "
        f"{bound_help('inference_surge', 'factor')}"))
    fraction = _number_field("power_cap", "fraction",
                             help_text=f"Power cap: {bound_help('power_cap', 'fraction')}")
    duration_s = _number_field("inference_surge", "duration_s", label="Duration (simulated s)",
                               help_text=("Storage slowdown, inference surge: "
                                          f"{bound_help('inference_surge', 'duration_s')}"))

    def clean_target(self) -> str:
        return self.cleaned_data["target"].strip() or "random"

    def drill_arguments(self) -> dict:
        """Keyword arguments for ``services.drill_request``: only the parameters given."""
        data = self.cleaned_data
        return {"kind": data["kind"], "target": data["target"],
                "params": {name: data[name] for name in PARAM_FIELDS
                           if data.get(name) is not None}}
