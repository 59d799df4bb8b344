"""Supply cuts at grid level (issue 30, item 4): no more parts of an accelerator model.

While a cut lasts, at every place that has the model its engine's own ``supply_cut`` drill
freezes its spares (no spare of the model is swapped in for a failed node; a repaired node
waits, parked, for parts): :func:`scheduler.control.drills.run_drill`, through the engine's
command API.  A cloud region offering the model also stops granting new capacity: its
effective quota is frozen at what gangs hold at the cut.  Every node of the model with a free
GPU is drained (the gangs on it run to their end, and what they free stays withheld), and the
grid places no new job there; jobs already queued in the region, or already on their way to it,
wait there for the GPUs still in service.  A job whose requirement accepts another model goes
to a place that has one; a job that needs the cut model and has nowhere else to go waits at
the grid with the reason (:data:`CUT_REASON`) and is placed again when the cut ends.  At its
end the drained nodes return (``undrain_node``) and the parked ones come back
(``supply_back``).  A second cut of a model already cut at a place adds nothing there; the
first cut's end ends it.

Books, per place: hours under cut (summed over cut models) and ``capacity_refused_gpu_hours``:
the GPU-hours the cut withheld (a cloud: its pool less the allocation frozen at the cut; a
site: its spare GPUs of the model, frozen).  Grid: jobs delayed (held at the grid while a cut
ruled a place out for them).
"""

from __future__ import annotations

import math

import numpy as np

CUT_REASON = "supply cut"
"""How a place ruled out by a supply cut words the reason (its start)."""

FREE = -1  # scheduler.model.state: a GPU no gang holds


def cut_models(grid, model, vendor=None) -> tuple[str, ...]:
    """The accelerator models a cut of ``model`` (with ``vendor``: every model of that
    vendor in the grid, or ``model`` checked to be one) covers; one ``ValueError`` line for
    a name no place of the grid has, or a vendor none of its models come from."""
    present = {m.name: m for p in grid.places.values() for m in p.engine.plan.models}
    listing = ", ".join(sorted(present))
    if model is None and vendor is None:
        raise ValueError("a supply cut names an accelerator model (or a vendor)")
    if vendor is not None and (not isinstance(vendor, str) or not vendor.strip()):
        raise ValueError(f"a supply cut's vendor is a name, not {vendor!r}")
    if model is not None:
        if not isinstance(model, str):
            raise ValueError(f"a supply cut names an accelerator model, not {model!r}")
        found = [n for n in present if n.lower() == model.strip().lower()]
        if not found:
            raise ValueError(f"no place of grid {grid.spec.name} has accelerator model "
                             f"{model!r} (models here: {listing})")
        acc = present[found[0]]
        if vendor is not None and acc.vendor.lower() != vendor.strip().lower():
            raise ValueError(f"{acc.name} is a {acc.vendor} accelerator, not {vendor}'s")
        return (acc.name,)
    hits = tuple(sorted(n for n, a in present.items()
                        if a.vendor.lower() == vendor.strip().lower()))
    if not hits:
        vendors = ", ".join(sorted({a.vendor for a in present.values()}))
        raise ValueError(f"no place of grid {grid.spec.name} has a {vendor} accelerator "
                         f"(vendors here: {vendors})")
    return hits


def check_window(at_s, duration_s) -> None:
    """A cut starts at a finite time >= 0 s and lasts a finite time > 0 s (or ``None``)."""
    if isinstance(at_s, bool) or not isinstance(at_s, int | float) \
            or not (math.isfinite(at_s) and at_s >= 0):
        raise ValueError(f"a supply cut starts at a finite time >= 0 s, not {at_s!r}")
    if duration_s is not None and (isinstance(duration_s, bool)
                                   or not isinstance(duration_s, int | float)
                                   or not (math.isfinite(duration_s) and duration_s > 0)):
        raise ValueError(f"a supply cut lasts a finite time > 0 s (or None: for good), "
                         f"not {duration_s!r}")


def apply_cut(grid, models: tuple[str, ...]) -> list[str]:
    """Cut ``models`` at every place that has them, now; the places hit."""
    hit = []
    for name, place in grid.places.items():
        engine = place.engine
        names = [m.name for m in engine.plan.models]
        for model in models:
            if model not in names or model in place.supply:
                continue
            m = names.index(model)
            out = engine.command("drill", kind="supply_cut", target=model)
            entry = {"since": grid.now, "drained": [], "frozen_gpus": None,
                     "spares_frozen": int(out["spares_frozen"])}
            st = engine.state
            if place.is_cloud:
                nodes = np.flatnonzero((st.node_model == m) & (st.node_free > 0)
                                       & ~st.node_drained)
                for n in nodes.tolist():
                    engine.command("drain_node", node=n)
                held = int(((st.gpu_owner != FREE) & (st.gpu_model == m)).sum())
                entry.update(drained=nodes.tolist(), frozen_gpus=held,
                             withheld_gpus=max(0, place.capacity_of(m) - held))
            else:
                plan = engine.plan
                entry["withheld_gpus"] = int(plan.node_gpus[(plan.node_model == m)
                                                            & plan.node_spare].sum())
            place.supply[model] = entry
            hit.append(name)
    return sorted(set(hit))


def mend(grid, models: tuple[str, ...]) -> list[str]:
    """End the cut of ``models`` everywhere, now; the places where one ended."""
    back = []
    for name, place in grid.places.items():
        for model in models:
            entry = place.supply.pop(model, None)
            if entry is None:
                continue
            for n in entry["drained"]:
                place.engine.command("undrain_node", node=n)
            place.engine.command("supply_back", model=model)
            span = grid.now - entry["since"]
            place.supply_cut_s += span
            place.refused_gpu_s += entry["withheld_gpus"] * span
            back.append(name)
    return sorted(set(back))


def refusal(place, model: int) -> str:
    """Why a cut rules ``place`` out for a new gang of ``model`` (its index), or ``""``: a
    cloud region grants no new capacity of a cut model (an owned site still runs its pool)."""
    acc = place.engine.plan.models[model]
    entry = place.supply.get(acc.name)
    if entry is None or not place.is_cloud:
        return ""
    return (f"{CUT_REASON}: no new {acc.name} capacity (quota frozen at the "
            f"{entry['frozen_gpus']} GPUs allocated)")


def held_by_cut(reasons: dict) -> bool:
    """Whether a verdict's reasons include a supply cut."""
    return any(r.startswith(CUT_REASON) for r in reasons.values())


def place_books(place, now: float) -> dict:
    """A place's supply-cut books at ``now`` (running cuts counted up to now)."""
    cut_s, refused = place.supply_cut_s, place.refused_gpu_s
    for entry in place.supply.values():
        cut_s += now - entry["since"]
        refused += entry["withheld_gpus"] * (now - entry["since"])
    return {"hours": round(cut_s / 3600.0, 3),
            "capacity_refused_gpu_hours": round(refused / 3600.0, 3),
            "cut_now": sorted(place.supply)}


def note(place) -> str:
    """The overview's note of a place whose supply is cut, else ``""``."""
    if not place.supply:
        return ""
    since = min(e["since"] for e in place.supply.values())
    return f"supply of {', '.join(sorted(place.supply))} cut since t={since:.0f} s"
