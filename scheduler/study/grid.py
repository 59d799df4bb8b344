"""A study on a grid (issue 30): arms that change the grid's placement weights, checkpoint
replication, region-loss rate and load, run over seeds and compared as any study is.

A spec names its grid with ``grid:`` (a grid preset, or, where the caller hands a way to read
them, a grid of the inventory by name; ``inventory:NAME`` for one named as a preset) and its
``base`` and arms ``set`` grid fields (:data:`GRID_FIELDS`) instead of scenario fields::

    name: grid-placement
    grid: grid
    base: {days: 2}
    seeds: 5
    arms:
      - {name: cost, set: {policy: cost}}
      - {name: start, set: {policy: start}}
      - {name: gravity, set: {policy: gravity}}
    figures: [grid.cost_usd, grid.wait_mean_h, grid.moved_gb, grid.data_move_h]

Each arm's options are plain values (what :func:`scheduler.study.run.run_one` takes on a Dask
worker); an inventory grid travels beside them, read once when the spec is checked, with a
digest of it in the options so that a stored run is reused only for the same grid.  Region
losses are drawn per seed (:func:`scheduler.grid.continuity.random_region_losses`), so every
arm of a seed meets the same losses, as it meets the same jobs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import namedtuple
from collections.abc import Callable

import numpy as np

from scheduler.grid.continuity import random_region_losses
from scheduler.grid.placement import POLICIES, weights_of
from scheduler.grid.presets import GRID_PRESETS
from scheduler.grid.run import grid_preset, run_grid
from scheduler.hardware.catalog import get
from scheduler.limits import checks
from scheduler.simulate import MAX_DAYS
from scheduler.study.figures import GRID_FIGURES, read_figures
from scheduler.study.spec_checks import ARM_FIELDS, MAX_RUNS, NAME, SpecChecker

GRID_TOP_FIELDS = ("name", "description", "grid", "base", "seeds", "first_seed", "baseline",
                   "arms", "figures")
GRID_FIELDS = ("days", "policy", "replication_s", "region_loss_rate", "region_loss_h", "load",
               "spot", "supply_cut")
"""What a grid study's ``base`` and an arm's ``set`` may name:

``days`` (simulated, > 0 and <= 366); ``policy``: ``cost``, ``start``, ``gravity``,
``balanced`` or weights ``{cost: W, start: W, gravity: W}`` (a weight left out is 0);
``replication_s``: how often checkpoints go off-site, seconds, or ``never``;
``region_loss_rate``: region losses per place per day (random, seeded; 0: none);
``region_loss_h``: how long each lasts, hours; ``load``: the workload's arrival-rate factor;
``spot``: clouds with a spot offer run on it; ``supply_cut``: ``MODEL@HOURS[+DURATION_H]``, no
more parts of an accelerator model of the grid from HOURS into the run, for DURATION_H hours
(left out: to the end; :mod:`scheduler.grid.supply`), or ``none``."""
PRESET_DEFAULTS = {"policy": "balanced", "replication_s": 3600.0}
"""A preset grid's placement and replication when the spec sets neither (an inventory grid's
are its stored weights and interval)."""
FIELD_DEFAULTS = {"region_loss_rate": 0.0, "region_loss_h": 6.0, "load": 1.0, "spot": False}
MAX_LOSS_RATE = 24.0
"""Region losses per place per day at most (one an hour)."""

INVENTORY = "inventory:"
"""``grid: inventory:NAME`` names the inventory's grid even where a preset has that name
(``build_cluster --preset grid`` writes the preset as the inventory's grid ``grid``)."""
GridArm = namedtuple("GridArm", "name changes options")
GridResolver = Callable[[str], tuple]
"""``resolver(name) -> (GridSpec, plans, {"policy": weights, "replication_s": s or None})``
for a grid of the inventory; a ``ValueError`` (one line) when there is none or it cannot
run."""


def grid_value(name: str, value):
    """A grid field's value checked and made plain (``ValueError`` with one line else).

    >>> grid_value("policy", {"start": 2})
    {'cost': 0.0, 'start': 2.0, 'gravity': 0.0}
    >>> grid_value("replication_s", "never") is None
    True
    """
    if name == "days":
        return checks.number("days", value, above=0, at_most=MAX_DAYS)
    if name == "policy":
        if isinstance(value, str):
            return checks.choice("grid policy", value, tuple(POLICIES))
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in ("cost", "start", "gravity"):
                    raise ValueError(f"policy weights name cost, start and gravity, not {k!r}")
                checks.number(f"policy weight {k}", v, at_least=0)
            w = weights_of({"cost": 0.0, "start": 0.0, "gravity": 0.0,
                            **{k: float(v) for k, v in value.items()}})
            return {"cost": w.cost, "start": w.start, "gravity": w.gravity}
        raise ValueError(f"policy must be one of {', '.join(POLICIES)} or weights "
                         f"{{cost: W, start: W, gravity: W}}, not {value!r}")
    if name == "replication_s":
        if value in ("never", None):
            return None
        return checks.number("replication_s", value, above=0, at_most=MAX_DAYS * 86400.0,
                             expect="seconds > 0 (at most 366 days) or never")
    if name == "region_loss_rate":
        return checks.number("region_loss_rate", value, at_least=0, at_most=MAX_LOSS_RATE,
                             expect=f"losses per place per day in [0, {MAX_LOSS_RATE:g}]")
    if name == "region_loss_h":
        return checks.number("region_loss_h", value, above=0, at_most=MAX_DAYS * 24.0)
    if name == "load":
        return checks.number("load", value, above=0, at_most=100)
    if name == "spot":
        return checks.flag("spot", value)
    if name == "supply_cut":
        return _supply_cut(value)
    raise ValueError(f"unknown grid field {name!r}")


def _supply_cut(value) -> list | None:
    """``MODEL@HOURS[+DURATION_H]`` as ``[model, at_s, duration_s or None]`` (``none``: None).

    >>> _supply_cut("h100-sxm@6+12")
    ['H100-SXM', 21600.0, 43200.0]
    """
    if value in (None, "none"):
        return None
    form = f"supply_cut must be MODEL@HOURS[+DURATION_H] or none, not {value!r}"
    if not isinstance(value, str):
        raise ValueError(form)
    model, at, when = value.rpartition("@")
    hours, plus, duration = when.partition("+")
    if not at or not model:
        raise ValueError(form)
    try:
        name = get(model.strip()).name
    except KeyError as exc:
        raise ValueError(f"supply_cut: {exc.args[0]}") from None
    at_h = checks.number("supply_cut hours", _float(hours, form), at_least=0,
                         at_most=MAX_DAYS * 24.0)
    dur_h = checks.number("supply_cut duration", _float(duration, form), above=0,
                          at_most=MAX_DAYS * 24.0) if plus else None
    return [name, at_h * 3600.0, None if dur_h is None else dur_h * 3600.0]


def _float(text: str, form: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(form) from None


def _cut_fits(c: SpecChecker, path: tuple, options: dict, name: str, inventory) -> None:
    """An arm's supply cut names a model of its grid and starts within its days."""
    cut = options.get("supply_cut")
    if not cut:
        return
    grid = options["grid"]
    plans = grid_preset(grid)[1] if options["source"] == "preset" else inventory[1]
    if cut[0] not in {m.name for p in plans.values() for m in p.models}:
        c.note(path, f"arm {name!r}: supply_cut: no place of grid {grid} has {cut[0]}")
    if cut[1] >= options["days"] * 86400.0:
        c.note(path, f"arm {name!r}: supply_cut starts after the run ends "
                     f"({options['days']:g} days)")


def grid_digest(spec, plans: dict) -> str:
    """A short digest of a grid and its plans: a stored run of an inventory grid is reused
    only while the grid is the same."""
    h = hashlib.sha256(repr(spec).encode())

    def walk(obj):
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            h.update(f.name.encode())
            if isinstance(v, np.ndarray):
                h.update(str((v.dtype, v.shape)).encode())
                h.update(np.ascontiguousarray(v).tobytes())
            elif dataclasses.is_dataclass(v) and not isinstance(v, type):
                walk(v)
            else:
                h.update(repr(v).encode())
    for place in sorted(plans):
        h.update(place.encode())
        walk(plans[place])
    return h.hexdigest()[:16]


def _source(c: SpecChecker, name, grids: GridResolver | None):
    """``(options common to every arm, defaults, the inventory grid or None)``."""
    if not isinstance(name, str) or not name:
        c.fail(("grid",), f"grid must name a grid preset ({', '.join(GRID_PRESETS)}) or a grid "
                          f"of the inventory, not {name!r}")
    if name in GRID_PRESETS:
        return {"grid": name, "source": "preset"}, dict(PRESET_DEFAULTS), None
    name = name.removeprefix(INVENTORY)
    if grids is None:
        c.fail(("grid",), f"grid {name!r} is no grid preset ({', '.join(GRID_PRESETS)}); a grid "
                          "of the inventory is run by manage.py study or the Studies page")
    try:
        spec, plans, stored = grids(name)
    except ValueError as exc:
        c.fail(("grid",), str(exc))
    return ({"grid": name, "source": "inventory", "grid_digest": grid_digest(spec, plans)},
            {"policy": stored["policy"], "replication_s": stored["replication_s"]},
            (spec, plans))


def _fields(c: SpecChecker, path: tuple, value, what: str) -> tuple[dict, dict, bool]:
    """A base's or arm's grid fields: as written, checked values, and whether all were
    right (each wrong one noted at its line)."""
    if value is None:
        return {}, {}, True
    given = c.fields(path, value, GRID_FIELDS, what)
    good, ok = {}, len(given) == len(value)
    for key, raw in given.items():
        try:
            good[key] = grid_value(key, raw)
        except ValueError as exc:
            c.note(path + (key,), f"{what}: {exc}")
            ok = False
    return given, good, ok


def check_grid(c: SpecChecker, data: dict, grids: GridResolver | None) -> dict:
    """A grid study's spec checked: ``{name, description, seeds, arms: [GridArm] (the
    baseline first), figures, grid}`` (``grid``: the inventory grid's ``(spec, plans)`` or
    None); every mistake is noted in ``c`` (the caller raises them)."""
    c.fields((), data, GRID_TOP_FIELDS, "a grid study")
    name, description, seeds = c.identity(data)
    common, defaults, model = None, {}, None
    with c.part():
        common, defaults, model = _source(c, data.get("grid"), grids)
    base, base_ok = {}, False
    with c.part():
        if "base" not in data:
            c.fail((), "base is missing: the grid fields every arm starts from (days …)")
        _, base, base_ok = _fields(c, ("base",), data["base"], "base")
    arms_in, resolved, names = data.get("arms"), [], []
    if not isinstance(arms_in, list) or len(arms_in) < 2:
        c.note(("arms",), "arms must be a list of at least 2 arms, each with a name and the "
                          "grid fields it sets")
        arms_in = arms_in if isinstance(arms_in, list) else []
    elif seeds and len(arms_in) * len(seeds) > MAX_RUNS:
        c.note(("arms",), f"{len(arms_in)} arms x {len(seeds)} seeds is more than "
                          f"{MAX_RUNS:,} runs")
    for i, raw in enumerate(arms_in):
        with c.part():
            arm = _arm(c, i, raw, names)
            if arm is None or not base_ok or common is None:
                continue
            arm_name, changes, good = arm
            options = {**common, **FIELD_DEFAULTS, **defaults, **base, **good}
            if "days" not in options:
                c.fail(("arms", i), f"arm {arm_name!r}: days missing (set in base or in every "
                                    "arm)")
            _cut_fits(c, ("arms", i), options, arm_name, model)
            resolved.append((i, GridArm(arm_name, changes, options)))
    baseline = data.get("baseline", names[0] if names else None)
    if "baseline" in data and baseline not in names:
        c.note(("baseline",), f"baseline {baseline!r} is not an arm ({', '.join(names)})")
    first = next((k for k, (_, a) in enumerate(resolved) if a.name == baseline), None)
    if first is not None:
        resolved.insert(0, resolved.pop(first))
    c.same_scenarios(resolved, baseline=first is not None)
    return {"name": name, "description": description, "seeds": seeds,
            "arms": [a for _, a in resolved], "figures": _figures(c, data), "grid": model}


def _arm(c: SpecChecker, i: int, raw, names: list) -> tuple | None:
    path = ("arms", i)
    fields = c.fields(path, raw, ARM_FIELDS, f"arm {i + 1}")
    name, what = fields.get("name"), f"arm {i + 1}"
    named = isinstance(name, str) and bool(NAME.match(name))
    if not named:
        c.note(path + ("name",), f"arm {i + 1}: name must be 1-64 letters, digits, spaces or "
                                 f"._:+=-, not {name!r}")
    elif name in names:
        c.note(path + ("name",), f"arm name {name!r} is used twice")
        named = False
    else:
        what = f"arm {name!r}"
        names.append(name)
    given, good, ok = _fields(c, path + ("set",), fields.get("set"), what)
    return (name, given, good) if named and ok else None


def _figures(c: SpecChecker, data: dict) -> list:
    figures = data.get("figures")
    if figures is None:
        return list(GRID_FIGURES)
    if not isinstance(figures, list) or not figures:
        c.note(("figures",), "figures must be a list of grid figure names (docs/grid_runs.md)")
        return []
    for i, f in enumerate(figures):
        if f not in GRID_FIGURES:
            c.note(("figures", i), f"unknown grid figure {f!r}; choose among: "
                                   f"{', '.join(GRID_FIGURES)}")
    return figures


# ------------------------------------------------------------------ one run
def run_grid_arm(options: dict, seed: int, figures, *, grid=None) -> dict:
    """One run of a grid arm: ``{"figures", "report"}`` (the report: the grid report without
    its per-job rows, with ``jobs`` its job counts and ``mfu.achieved`` the grid's MFU)."""
    if options["source"] == "preset":
        spec, plans = grid_preset(options["grid"])
    elif grid is None:
        raise ValueError(f"grid {options['grid']!r} is a grid of the inventory: its runs need "
                         "the grid read when the spec was checked")
    else:
        spec, plans = grid
        if grid_digest(spec, plans) != options["grid_digest"]:
            raise ValueError(f"grid {options['grid']!r} is not the grid the spec was checked "
                             "with")
    losses = []
    if options["region_loss_rate"] > 0:
        losses = random_region_losses(spec, days=options["days"],
                                      rate_per_day=options["region_loss_rate"],
                                      duration_s=options["region_loss_h"] * 3600.0, seed=seed)
    _, full = run_grid(spec, plans, days=options["days"], seed=int(seed),
                       policy=options["policy"], replication_s=options["replication_s"],
                       load=options["load"], region_loss=losses, spot=options["spot"],
                       supply_cuts=[options["supply_cut"]] if options.get("supply_cut") else ())
    report = {k: v for k, v in full.items() if k != "jobs"}
    report["scenario"]["region_loss_rate"] = options["region_loss_rate"]
    report["jobs"] = dict(full["summary"]["jobs"])
    report["mfu"] = {"achieved": grid_mfu(full["sites"]),
                     "basis": "peak BF16 FLOPs of every place's GPUs over the run"}
    return {"figures": read_figures(report, figures), "report": report}


def grid_mfu(sites: list[dict]) -> float:
    """The grid's MFU: each place's, weighted by its GPUs' peak BF16 FLOP/s (every place is
    booked over the same period, and a grid serves no inference, so this is the grid's
    achieved FLOPs over its peak)."""
    peak = [sum(n * get(m).bf16_tflops for m, n in s["gpus_by_model"].items()) for s in sites]
    total = sum(peak)
    if total <= 0:
        return 0.0
    return round(sum(p * s["mfu"] for p, s in zip(peak, sites, strict=True)) / total, 6)

