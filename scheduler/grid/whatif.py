"""What if, from now, on a grid (issue 30): fork the federation, change one thing, run both.

:func:`fork` copies a :class:`~scheduler.grid.federation.Grid` at its instant (the original is
never touched: the copy shares only what never changes, the plans, the spec and the grid
jobs' frozen specs).  With a ``seed`` the copy's *future* is redrawn and nothing else:

* every place's engine redraws its random streams from the seed (failures, whatever else the
  engine draws) and draws each failure process's next failure again from now;
* spot reclaims draw from a fresh stream of the seed;
* the arrivals beyond now are redrawn as a bootstrap of the grid's own workload: a Poisson
  process of the workload's mean rate (its jobs over the span they arrive in) from now to its
  last arrival, each arrival a job shape drawn with replacement from the workload (gang, work,
  dataset, sovereignty, stacks), named ``<shape>~s<seed>#k``;
* running, moving, held and queued jobs stay as they are, with their checkpoints.

A seed equal to the grid's own seed means *the original's future*: the copy keeps its streams
and its arrivals, so its baseline is exactly the original run continued.

:func:`what_if` forks once per seed for the baseline and once more, identically, for the
change (so each seed pairs two runs that meet the same future), runs both ``horizon_s`` on
and compares them over that window.  Figures (:data:`METRICS`), each over the window:

``cost``          $ spent: places' compute (energy, cloud GPU-hours and start-ups) and egress
``mean_wait_h``   mean wait of the jobs waiting in the window (arrived by its end, not started
                  before it), from reaching the grid to first computing; one that never started
                  counts up to the window's end
``moved_gb``      GB the jobs moved over the WAN (datasets and checkpoints restarted from)
``data_move_h``   job-hours waiting for data to land, booked when it lands
``lost_work_h``   GPU-hours of compute thrown away: region losses (H100 GPU-hours, as the grid
                  report counts them) plus the places' ledgers' ``lost_work`` (failures, spot)
``mfu``           achieved MFU of all places' books in the window (peak-weighted)

Per metric the result gives the baseline's and the change's means with their Student-t 95 %
intervals and the paired difference (change minus baseline) with its interval
(:mod:`scheduler.stats`, as studies make them); ``verdict`` reads ``no difference`` where that
interval spans 0.  Same grid, change, horizon and seeds: the same result (nothing reads a wall
clock).
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
import math
from collections.abc import Sequence

import numpy as np

from scheduler.grid.federation import ARRIVE, REPLICATE, JobState
from scheduler.grid.placement import weights_of
from scheduler.model.ledger import INDEX, NOT_TRAINING
from scheduler.stats import mean_ci, paired

MAX_HORIZON_S = 30 * 86400.0
"""The longest what-if, s of simulated time (a month: queues have long forgotten "now")."""
SEEDS_MIN, SEEDS_MAX = 2, 16
"""Seeds per what-if: two for an interval at all, sixteen keep a week's what-if in minutes."""
CHANGE_KINDS = ("none", "policy", "replication", "region_loss", "wan_cut", "load")
LOAD_MAX = 10.0
"""The largest arrival-rate factor a ``load`` change takes."""
METRICS = {
    "cost": "$ spent in the window (compute and egress)",
    "mean_wait_h": "mean wait of the jobs waiting in the window, h",
    "moved_gb": "GB the jobs moved over the WAN in the window",
    "data_move_h": "job-hours spent waiting for data to land",
    "lost_work_h": "GPU-hours of compute thrown away (region loss, failures, spot)",
    "mfu": "achieved MFU of the window's books, fraction",
}


# ----------------------------------------------------------------- forking
def fork(grid, seed: int | None = None):
    """An independent copy of ``grid`` at its now; with ``seed`` (other than the grid's own)
    a redrawn future (module docstring).

    >>> from scheduler.grid.run import grid_preset, grid_workload_for
    >>> from scheduler.grid.federation import Grid
    >>> spec, plans = grid_preset()
    >>> g = Grid(spec, plans, grid_workload_for(spec, 0.5, 1), seed=1)
    >>> g.run_until(3600.0)
    >>> f = fork(g, 7)
    >>> f.run_until(7200.0)
    >>> g.now, f.now
    (3600.0, 7200.0)
    """
    memo = {id(grid.spec): grid.spec}
    for p in grid.places.values():
        memo[id(p.engine.plan)] = p.engine.plan
    for js in grid.jobs.values():
        memo[id(js.gjob)] = js.gjob
    twin = copy.deepcopy(grid, memo)
    if seed is not None:
        _check_seed(seed)
        if seed != grid.seed:
            _reseed(twin, seed)
    return twin


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0 \
            or seed >= 2 ** 32:
        raise ValueError(f"a seed is an integer in [0, 2**32 - 1], not {seed!r}")
    return int(seed)


def _reseed(g, seed: int) -> None:
    for i, p in enumerate(g.places.values()):
        p.engine.kernel.streams.reseed(seed * 1009 + i)
        p.engine.reliability.redraw()
    g._rng = np.random.default_rng([seed, 31, 1])
    future = [n for n, js in g.jobs.items()
              if js.state == "pending" and js.gjob.job.submit_s > g.now]
    end = max((js.gjob.job.submit_s for js in g.jobs.values()), default=g.now)
    shapes = _rate_and_pool(g)  # the whole workload's, before its future is dropped
    _drop_arrivals(g, set(future))
    _add_arrivals(g, shapes, np.random.default_rng([seed, 30, 2]), 1.0, end, f"~s{seed}#")


def _drop_arrivals(g, names: set) -> None:
    for n in names:
        del g.jobs[n]
    g._heap = [e for e in g._heap if not (e[2] == ARRIVE and e[3] in names)]
    heapq.heapify(g._heap)


def _rate_and_pool(g) -> tuple[float, list]:
    """The workload's mean arrival rate (jobs per s) and its job shapes, in name order."""
    pool = [g.jobs[n].gjob for n in sorted(g.jobs)]
    times = [x.job.submit_s for x in pool]
    span = max(times, default=0.0) - min(times, default=0.0)
    return (len(pool) - 1) / span if len(pool) > 1 and span > 0 else 0.0, pool


def _add_arrivals(g, shapes: tuple, rng, factor: float, end_s: float, tag: str) -> int:
    """Arrivals from now to ``end_s``: ``factor`` times the rate of ``shapes`` (a rate and
    a pool: :func:`_rate_and_pool`), shapes drawn from its pool; returns how many."""
    rate, pool = shapes
    if rate <= 0 or factor <= 0 or not pool:
        return 0
    t, k, next_id = g.now, 0, 1 + max(js.gjob.job.job_id for js in g.jobs.values())
    while True:
        t += float(rng.exponential(1.0 / (rate * factor)))
        if t > end_s:
            return k
        shape = pool[int(rng.integers(len(pool)))]
        job = dataclasses.replace(shape.job, job_id=next_id + k,
                                  name=f"{shape.job.name}{tag}{k}", submit_s=t)
        gj = dataclasses.replace(shape, job=job)
        g.jobs[gj.name] = JobState(gj, remaining_flops=float(job.work_flops))
        if gj.dataset:
            g._copies.setdefault(gj.dataset, set()).add(gj.data_site)
        g._push(t, ARRIVE, gj.name)
        k += 1


# ----------------------------------------------------------------- changes
def change_check(change, grid) -> dict:
    """``change`` checked against ``grid`` and normalised; ``ValueError`` (one line).

    Kinds: ``none``; ``policy`` (``policy``: a name or weights, as the grid takes it);
    ``replication`` (``interval_s``: seconds, or ``None``: never); ``region_loss``
    (``place``, ``duration_s`` or ``None``: for the whole window); ``wan_cut`` (``a``,
    ``b``, ``duration_s``); ``load`` (``factor``: the arrival rate from now, 0 to 10).

    >>> from scheduler.grid.run import grid_preset
    >>> from scheduler.grid.federation import Grid
    >>> g = Grid(*grid_preset(), ())
    >>> change_check({"kind": "region_loss", "place": "eu-west"}, g)
    {'kind': 'region_loss', 'duration_s': None, 'place': 'eu-west'}
    >>> change_check({"kind": "load", "factor": 20}, g)
    Traceback (most recent call last):
    ...
    ValueError: load factor must be a number in [0, 10], not 20
    """
    if change is None:
        return {"kind": "none"}
    if not isinstance(change, dict) or change.get("kind") not in CHANGE_KINDS:
        raise ValueError(f"a change is an object with a kind, one of {', '.join(CHANGE_KINDS)}"
                         f"; not {change!r}")
    kind = change["kind"]
    allowed = {"none": (), "policy": ("policy",), "replication": ("interval_s",),
               "region_loss": ("place", "duration_s"), "wan_cut": ("a", "b", "duration_s"),
               "load": ("factor",)}[kind]
    extra = sorted(set(change) - {"kind", *allowed})
    if extra:
        raise ValueError(f"a {kind} change takes {', '.join(allowed) or 'nothing'}; "
                         f"not {', '.join(extra)}")
    out = {"kind": kind}
    if kind == "policy":
        weights_of(change.get("policy"))  # refuses an unknown name or bad weights
        out["policy"] = change.get("policy")
    elif kind == "replication":
        out["interval_s"] = _seconds("replication interval", change.get("interval_s"))
    elif kind in ("region_loss", "wan_cut"):
        out["duration_s"] = _seconds("duration", change.get("duration_s"))
        if kind == "region_loss":
            if change.get("place") not in grid.places:
                raise ValueError(f"no place {change.get('place')!r} in grid {grid.spec.name}")
            out["place"] = change["place"]
        else:
            grid.wan._link(change.get("a"), change.get("b"))
            out["a"], out["b"] = change["a"], change["b"]
    elif kind == "load":
        f = change.get("factor")
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 <= f <= LOAD_MAX:
            raise ValueError(f"load factor must be a number in [0, {LOAD_MAX:g}], not {f!r}")
        out["factor"] = float(f)
    return out


def _seconds(what: str, v) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{what} must be positive seconds or None, not {v!r}")
    return float(v)


def apply_change(g, change: dict, seed: int) -> None:
    """Apply a checked change to the fork ``g`` at its now."""
    kind = change["kind"]
    if kind == "policy":
        g.weights = weights_of(change["policy"])
    elif kind == "replication":
        g.replication_s = change["interval_s"]
        g._heap = [e for e in g._heap if e[2] != REPLICATE]
        heapq.heapify(g._heap)
        if g.replication_s is not None:
            g._push(g.now + g.replication_s, REPLICATE, None)
    elif kind == "region_loss":
        g.region_loss(change["place"], g.now, change["duration_s"])
    elif kind == "wan_cut":
        g.wan_cut(change["a"], change["b"], g.now, change["duration_s"])
    elif kind == "load":
        f = change["factor"]
        future = sorted(n for n, js in g.jobs.items()
                        if js.state == "pending" and js.gjob.job.submit_s > g.now)
        end = max((js.gjob.job.submit_s for js in g.jobs.values()), default=g.now)
        rng = np.random.default_rng([seed, 30, 3])
        shapes = _rate_and_pool(g)
        if f < 1.0:  # thin the future arrivals
            _drop_arrivals(g, {n for n in future if rng.random() >= f})
        elif f > 1.0:
            _add_arrivals(g, shapes, rng, f - 1.0, end, f"~load{seed}#")


# ----------------------------------------------------------------- figures
def _h100_rate(js) -> float:
    from scheduler.hardware.catalog import get
    return get("H100-SXM").bf16_tflops * 1e12 * js.gjob.job.efficiency


def _books(g) -> dict:
    """Running totals of ``g`` at its now, which the window's figures are differences of."""
    cost, ledgers = 0.0, {}
    for name, p in g.places.items():
        cost += p.cost()
        ledgers[name] = p.engine.horizon_ledger().copy()
    kinds = g.wan.bytes_by_kind
    return {"t": g.now, "cost": cost + sum(g.wan.egress_cost.values()), "ledgers": ledgers,
            "moved_gb": kinds.get("dataset", 0.0) + kinds.get("checkpoint", 0.0),
            "move_s": sum(js.move_wait_s for js in g.jobs.values()),
            "lost_flops_h": sum(js.lost_flops / _h100_rate(js) for js in g.jobs.values()),
            "started": {n for n, js in g.jobs.items() if js.first_start_s is not None}}


def figures(g, start: dict) -> dict:
    """The window's figures of ``g`` (run on from the books ``start``: :func:`_books`)."""
    end = _books(g)
    lost_s, achieved, basis = end["lost_flops_h"] - start["lost_flops_h"], 0.0, 0.0
    for name, led in end["ledgers"].items():
        w = led.minus(start["ledgers"][name])
        lost_s += float(w.gpu_s[INDEX["lost_work"]].sum())
        peak_s = w.gpu_s * w.peak[None, :]
        b = float(peak_s.sum() - sum(peak_s[INDEX[c]].sum() for c in NOT_TRAINING))
        if b > 0:
            achieved += float(w.achieved_flops)
            basis += b
    waits = []
    for n, js in g.jobs.items():
        if n in start["started"] or js.gjob.job.submit_s > g.now or js.state == "refused":
            continue
        began = js.first_start_s if js.first_start_s is not None else g.now
        waits.append((began - js.gjob.job.submit_s) / 3600.0)
    return {"cost": round(end["cost"] - start["cost"], 4),
            "mean_wait_h": round(float(np.mean(waits)), 6) if waits else None,
            "moved_gb": round(end["moved_gb"] - start["moved_gb"], 3),
            "data_move_h": round((end["move_s"] - start["move_s"]) / 3600.0, 6),
            "lost_work_h": round(lost_s / 3600.0, 6),
            "mfu": round(float(achieved / basis), 6) if basis > 0 else None}


# ----------------------------------------------------------------- the what-if
def seeds_check(seeds) -> list[int]:
    """``seeds`` as a list of 2 to 16 distinct seeds."""
    if isinstance(seeds, str | bytes) or not isinstance(seeds, Sequence):
        raise ValueError(f"seeds must be a list of integers, not {seeds!r}")
    out = [_check_seed(s) for s in seeds]
    if not SEEDS_MIN <= len(out) <= SEEDS_MAX:
        raise ValueError(f"a grid what-if takes {SEEDS_MIN} to {SEEDS_MAX} seeds, not "
                         f"{len(out)}")
    if len(set(out)) != len(out):
        raise ValueError(f"seeds must be distinct, not {list(seeds)!r}")
    return out


def horizon_check(horizon_s) -> float:
    if isinstance(horizon_s, bool) or not isinstance(horizon_s, int | float) \
            or not 0 < horizon_s <= MAX_HORIZON_S:
        raise ValueError(f"horizon must be seconds in (0, {MAX_HORIZON_S:g}], not "
                         f"{horizon_s!r}")
    return float(horizon_s)


def one_seed(grid, change: dict, *, horizon_s: float, seed: int) -> dict:
    """Baseline and changed forks of ``grid`` under ``seed``, run ``horizon_s`` on."""
    base, alt = fork(grid, seed), fork(grid, seed)
    start = _books(base)
    apply_change(alt, change, seed)
    t_end = grid.now + horizon_s
    base.run_until(t_end)
    alt.run_until(t_end)
    return {"seed": seed, "baseline": figures(base, start), "change": figures(alt, start)}


def _r(x):
    return None if x is None else round(x, 6)


def _interval(iv) -> dict:
    r = _r
    return {"mean": r(iv.mean), "low": r(iv.low), "high": r(iv.high), "n": iv.n}


def summary(per_seed: list[dict]) -> dict:
    """Per metric: baseline and change intervals, the paired difference and its verdict."""
    out = {}
    for m in METRICS:
        b = {s["seed"]: s["baseline"][m] for s in per_seed}
        c = {s["seed"]: s["change"][m] for s in per_seed}
        d = paired(c, b)
        if d.low is None:
            verdict = "too few seeds"
        elif d.low <= 0.0 <= d.high:
            verdict = "no difference"
        else:
            verdict = "higher" if d.low > 0 else "lower"
        out[m] = {"baseline": _interval(mean_ci(b.values())),
                  "change": _interval(mean_ci(c.values())), "difference": _interval(d),
                  "verdict": verdict}
    return out


def what_if(grid, *, horizon_s: float, seeds: Sequence[int], change=None,
            progress=None) -> dict:
    """Compare ``change`` against the baseline, from ``grid``'s now, over ``seeds``.

    Parameters
    ----------
    grid : Grid
        The state to start from: only forked, never advanced or changed.
    horizon_s : float
        How far each fork runs, s of simulated time (0 < horizon_s <= 30 days).
    seeds : sequence of int
        One future per seed (2 to 16 distinct); the grid's own seed is its own future.
    change : dict or None
        What to change at now (:func:`change_check`); ``None``: nothing.
    progress : callable, optional
        ``progress(done, total)`` after each seed.

    Returns
    -------
    dict
        JSON-safe: ``from_s``, ``horizon_s``, ``seeds``, ``change``, ``metrics``,
        ``per_seed`` (each seed's ``baseline`` and ``change`` figures) and ``summary``
        (:func:`summary`).

    Raises
    ------
    ValueError
        A bad horizon, seeds or change, before anything runs (one line).
    """
    horizon_s = horizon_check(horizon_s)
    seeds = seeds_check(seeds)
    change = change_check(change, grid)
    per_seed = []
    for i, s in enumerate(seeds):
        per_seed.append(one_seed(grid, change, horizon_s=horizon_s, seed=s))
        if progress is not None:
            progress(i + 1, len(seeds))
    return {"grid": grid.spec.name, "from_s": grid.now, "horizon_s": horizon_s,
            "seeds": seeds, "change": change, "metrics": METRICS, "per_seed": per_seed,
            "summary": summary(per_seed)}
