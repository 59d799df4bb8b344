"""One grid run: a grid (a preset's or the inventory's), its workload, some days: a report.

:func:`simulate_grid` is what ``simulate --preset grid`` (and a study on a grid) calls; it
needs no Django.  The inventory hands its own :class:`GridSpec` and one plan per place read
from the database; a preset's plans come from :func:`scheduler.grid.places.plans_from_spec`.
"""

from __future__ import annotations

import dataclasses
import math
import time

from scheduler.grid.federation import Grid
from scheduler.grid.placement import weights_of
from scheduler.grid.places import plans_from_spec
from scheduler.grid.presets import GRID_PRESETS, grid_spec, grid_workload
from scheduler.grid.report import grid_report
from scheduler.hardware.grid_spec import CloudRegionSpec, GridSpec


def grid_preset(name: str = "grid") -> tuple[GridSpec, dict]:
    """A grid preset's spec and its plans."""
    if name not in GRID_PRESETS:
        raise ValueError(f"unknown grid preset {name!r}; choose one of: "
                         f"{', '.join(GRID_PRESETS)}")
    spec = GRID_PRESETS[name]()
    return spec, plans_from_spec(spec)


def grid_workload_for(spec: GridSpec, days: float, seed: int, *, load: float = 1.0) -> tuple:
    """The ``grid`` preset's seeded workload (:func:`grid_workload`) on ``spec``'s places.

    On a grid that has every place the preset's datasets live at (the preset itself, or the
    preset written into the inventory) it is that workload unchanged.  On another grid each
    dataset lives at the place of the same name, else at the place in the preset's position
    (the preset's k-th site on the grid's k-th site, its k-th cloud region on the grid's
    k-th, modulo their numbers; a grid without cloud regions takes them on its sites), and a
    dataset kept in a jurisdiction is kept in its new home's.
    """
    jobs = grid_workload(days, seed, load=load)
    places = spec.places()
    if all(not g.data_site or g.data_site in places for g in jobs):
        return jobs
    preset = grid_spec()
    home: dict[str, tuple[str, str]] = {}
    for k, s in enumerate(preset.sites):
        to = spec.sites[k % len(spec.sites)]
        home[s.name] = (to.name, to.jurisdiction)
    for k, c in enumerate(preset.clouds):
        pool = spec.clouds or spec.sites
        to = pool[k % len(pool)]
        home[c.place] = (_place_of(to), to.jurisdiction)
    for p in (*spec.sites, *spec.clouds):  # a place of the same name keeps its datasets
        home[_place_of(p)] = (_place_of(p), p.jurisdiction)
    out = []
    for g in jobs:
        if not g.data_site:
            out.append(g)
            continue
        site, jurisdiction = home[g.data_site]
        allowed = (jurisdiction,) if g.allowed else ()
        out.append(dataclasses.replace(g, data_site=site, allowed=allowed))
    return tuple(out)


def _place_of(p) -> str:
    """A site's or cloud region's place name."""
    return p.place if isinstance(p, CloudRegionSpec) else p.name


def run_grid(spec: GridSpec | None = None, plans: dict | None = None, workload=None, *,
             days: float, seed: int = 0, policy="cost", replication_s: float | None = 3600.0,
             load: float = 1.0, region_loss=(), wan_cuts=(), supply_cuts=(),
             engine_options: dict | None = None, spot: bool = False) -> tuple[Grid, dict]:
    """Run a grid for ``days``; the grid at the end and its report.

    Parameters
    ----------
    spec, plans : GridSpec and dict, optional
        The grid and one plan per place; without them, the ``grid`` preset's (without
        ``plans``, a spec's own are built with :func:`plans_from_spec`).
    workload : iterable of GridJob, optional
        Default: the ``grid`` preset's seeded workload on the grid's places
        (:func:`grid_workload_for`).
    days : float
        Simulated time, days (> 0).
    seed : int
        Seeds the workload and every place's engine: same seed, same report.
    policy : str, Weights or dict
        Placement weighting: ``cost``, ``start``, ``gravity``, ``balanced`` or weights.
    replication_s : float or None
        How often checkpoints go off-site, s (``None``: never).
    load : float
        Multiplies the preset workload's arrival rate.
    region_loss : iterable of (place, at_s, duration_s or None)
        Places that go dark.
    wan_cuts : iterable of (a, b, at_s, duration_s or None)
        WAN links that are cut.
    supply_cuts : iterable of (model, at_s, duration_s or None)
        Accelerator models whose supply is cut (:meth:`Grid.supply_cut`).
    engine_options : dict, optional
        Passed to every place's engine (e.g. ``{"failures": True}``).
    spot : bool
        Clouds that offer spot run on it (price and interruptions; see :class:`Grid`).
    """
    if not (isinstance(days, int | float) and days > 0 and math.isfinite(days)):
        raise ValueError(f"days must be a finite number > 0, not {days!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, not {seed!r}")
    weights = weights_of(policy)
    started = time.perf_counter()
    if spec is None:
        if plans is not None:
            raise ValueError("plans need the GridSpec they belong to")
        spec, plans = grid_preset("grid")
    elif plans is None:
        plans = plans_from_spec(spec)
    if workload is None:
        workload = grid_workload_for(spec, days, seed, load=load)
    grid = Grid(spec, plans, workload, seed=seed, policy=weights, replication_s=replication_s,
                engine_options=engine_options, spot=spot)
    for place, at_s, duration_s in region_loss:
        grid.region_loss(place, at_s, duration_s)
    for a, b, at_s, duration_s in wan_cuts:
        grid.wan_cut(a, b, at_s, duration_s)
    for model, at_s, duration_s in supply_cuts:
        grid.supply_cut(model, at_s, duration_s)
    grid.run_until(days * 86400.0)
    scenario = {"grid": spec.name, "days": days, "seed": seed,
                "policy": policy if isinstance(policy, str) else "weights",
                "weights": {"cost": weights.cost, "start": weights.start,
                            "gravity": weights.gravity},
                "replication_s": replication_s, "load": load, "spot": spot,
                "region_loss": [list(x) for x in region_loss],
                "wan_cuts": [list(x) for x in wan_cuts],
                "supply_cuts": [list(x) for x in supply_cuts],
                "places": list(spec.places())}
    report = grid_report(grid, scenario=scenario)
    report["wall_seconds"] = round(time.perf_counter() - started, 3)
    return grid, report


def simulate_grid(spec: GridSpec | None = None, plans: dict | None = None, workload=None, *,
                  days: float, seed: int = 0, policy="cost", **options) -> dict:
    """The report of :func:`run_grid` (its only wall-clock field: ``wall_seconds``)."""
    return run_grid(spec, plans, workload, days=days, seed=seed, policy=policy, **options)[1]
