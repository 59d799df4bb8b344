"""What if, from now: fork an engine, apply one action to one copy, run both, compare.

For each seed, :func:`whatif` forks the engine twice with that seed (``Engine.fork``: the
original is never touched), applies the action to one copy through the engine's own commands
(``Engine.command``: drills, ``set_policy``, ``drain_node``, ``switch_down``), runs both copies
``hours`` forward and compares them over that window:

=====================  ============================================================
``jobs_hit``           runs the action hit: named in the command's result (interrupted,
                       slowed, throttled), or interrupted or preempted more often in the
                       action's copy than in the baseline's by the end of the window
``gpu_hours_lost``     productive GPU-hours the action cost (baseline minus action)
``queue_wait_*_h``     mean and p95 wait (submit to first start, h) of the runs that first
                       started inside the window
``mfu``                model FLOPs achieved over the window's training-eligible peak
                       (:meth:`~scheduler.model.ledger.Ledger.mfu` of the window's books)
``ettr``               GPU-weighted ETTR at the window's end of the runs that ran in it, as
                       :mod:`scheduler.report` computes it (since each run's first start)
=====================  ============================================================

The window's books are the horizon ledger at its end minus the horizon ledger at the fork
(open segments booked up to each instant).  Over several seeds every figure is given per
seed and as a band: the mean, and the minimum and maximum across the seeds (not a
confidence interval: a handful of seeds is a spread of futures, not a sample to infer a mean
from).  With one seed there is no band.  Same engine, action, hours and seeds give the same
report, in any process: nothing here reads a wall clock.

Actions (``ValueError``, one line, before anything runs, for a bad one):

* a drill, ``{"kind": <one of scheduler.control.drills.KINDS>, "target": id | "random" | name,
  <parameter>: <number>}`` (``power_cap`` is one: ``target`` a rack or ``"all"``,
  ``fraction``);
* ``{"kind": "policy", "name": <policy>, "placement": <strategy, optional>}``;
* ``{"kind": "drain", "unit": "rack" | "spine", "target": id}``: a maintenance drain.  A rack's
  nodes are drained (running gangs run on, nothing new is placed there); a spine (the
  ``target``-th switch above the leaves, as the spine drill counts them) is taken out of
  service for the whole window (its links are out, crossing gangs slow);
* ``None`` or ``{"kind": "none"}``: no action (the action's copy is a second baseline).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from scheduler.control.drills import KINDS as DRILL_KINDS
from scheduler.control.mirror import release_fork
from scheduler.limits import checks
from scheduler.limits.bounds import Bound, drill_params
from scheduler.model.ledger import CATEGORIES, Ledger
from scheduler.reliability.mirror_fit import ForkFailures, fork_failures
from scheduler.reliability.profiles import DEFAULT as DEFAULT_PROFILE
from scheduler.reliability.profiles import load_profile
from scheduler.scheduling.placement import STRATEGIES
from scheduler.scheduling.policies import REGISTRY

HOURS = Bound(0.0, 720.0, "h", note="30 days")
"""How far a what-if runs, hours of simulated time: a month is the longest maintenance plan
worth forecasting from one state (queues and failures have long forgotten it by then)."""
SEEDS = Bound(1, 32, "seeds", low_open=False, integer=True)
"""How many futures: 32 keeps a hyperscale what-if of a day within minutes."""
SEED = Bound(0, 2 ** 32 - 1, low_open=False, integer=True)
"""One seed: a ``numpy.random.SeedSequence`` entropy word."""

ACTION_KINDS = ("none",) + DRILL_KINDS + ("policy", "drain")
DRAIN_UNITS = ("rack", "spine")
BAND = "min-max across seeds"
METRICS = {
    "jobs_hit": "runs interrupted, preempted, slowed or throttled by the action",
    "gpu_hours_lost": "productive GPU-hours lost to the action (baseline minus action)",
    "productive_gpu_hours": "GPU-hours of kept training progress in the window",
    "queue_wait_mean_h": "mean wait of runs first started in the window, h",
    "queue_wait_p95_h": "95th percentile wait of runs first started in the window, h",
    "started": "runs first started in the window",
    "completed": "runs finished in the window",
    "queued_at_end": "runs waiting at the window's end",
    "interruptions": "interruptions in the window",
    "preemptions": "preemptions in the window",
    "mfu": "model FLOPs utilisation over the window, fraction",
    "ettr": "GPU-weighted ETTR of the runs that ran in the window, fraction",
}
"""The compared figures and what they mean (the report carries this table)."""
_ARMS = ("productive_gpu_hours", "queue_wait_mean_h", "queue_wait_p95_h", "started",
         "completed", "queued_at_end", "interruptions", "preemptions", "mfu", "ettr")


def _rounded(x, digits: int = 6):
    """A figure for the report, rounded (``None`` stays ``None``)."""
    return None if x is None else round(float(x), digits)


def _plain(value):
    """JSON-safe copy of a command's result (numpy scalars and arrays to Python)."""
    def default(o):
        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
        return str(o)
    return json.loads(json.dumps(value, default=default))


# ----------------------------------------------------------------- actions
def action_check(action, engine=None) -> dict | None:
    """``action`` checked and normalised (``None`` for no action); ``ValueError`` otherwise.

    Without ``engine`` only its shape and numbers are checked (kind, parameter names, the
    bounds of :mod:`scheduler.limits.bounds`); with it, the action is also applied to a
    throw-away copy of ``engine``, so its target is checked by the engine's own commands.

    >>> action_check({"kind": "spine_switch", "target": "3"})
    {'kind': 'spine_switch', 'target': 3}
    >>> action_check({"kind": "power_cap", "fraction": 0.05})
    Traceback (most recent call last):
    ...
    ValueError: fraction must be at least 0.1, not 0.05
    >>> action_check({"kind": "drain", "unit": "row", "target": 1})
    Traceback (most recent call last):
    ...
    ValueError: drain unit must be one of rack, spine, not 'row'
    """
    if action is None:
        return None
    if not isinstance(action, dict) or not isinstance(action.get("kind"), str):
        raise ValueError('an action is a JSON object with a "kind", e.g. '
                         '{"kind": "spine_switch", "target": 0}')
    kind = action["kind"]
    rest = {k: v for k, v in action.items() if k != "kind"}
    if kind not in ACTION_KINDS:
        raise ValueError(f"unknown action kind {kind!r}; choose one of: "
                         f"{', '.join(ACTION_KINDS)}")
    if kind == "none":
        checks.keys(f"a {kind} action", rest, ())
        out = None
    elif kind == "policy":
        checks.keys(f"a {kind} action", rest, ("name", "placement"))
        name = checks.choice("policy", rest.get("name"), REGISTRY)
        placement = checks.optional(checks.choice, "placement", rest.get("placement"),
                                    STRATEGIES)
        out = {"kind": kind, "name": name, **({"placement": placement} if placement else {})}
    elif kind == "drain":
        checks.keys(f"a {kind} action", rest, ("unit", "target"))
        out = {"kind": kind, "unit": checks.one_of("drain unit", rest.get("unit"), DRAIN_UNITS),
               "target": checks.unit_id("target", rest.get("target"), from_text=True)}
    else:
        target = rest.pop("target", "random")
        if isinstance(target, str) and target.strip().isdecimal():
            target = int(target)
        elif not (isinstance(target, str) or checks.is_integer(target)):
            raise ValueError(f"target must be 'random', an integer id or a name, "
                             f"not {target!r}")
        out = {"kind": kind, "target": target if isinstance(target, str) else int(target),
               **drill_params(kind, rest)}
    if engine is not None and out is not None:
        apply_action(_fork(engine, None), out)
    return out


def apply_action(engine, action: dict | None) -> dict:
    """Apply a checked action (:func:`action_check`) to ``engine`` now; the commands' result.

    ``jobs`` in the result names the runs it hit at once.
    """
    if action is None:
        return {"jobs": []}
    kind = action["kind"]
    if kind == "policy":
        out = engine.command("set_policy", name=action["name"],
                             placement=action.get("placement"))
        return {**out, "jobs": []}
    if kind == "drain":
        return _drain(engine, action["unit"], action["target"])
    params = {k: v for k, v in action.items() if k not in ("kind", "target")}
    return engine.command("drill", kind=kind, target=action["target"], **params)


def _drain(engine, unit: str, target: int) -> dict:
    if unit == "rack":
        rack = checks.unit_id("rack", target, engine.plan.n_racks)
        nodes = np.flatnonzero(engine.plan.node_rack == rack).tolist()
        for n in nodes:
            engine.command("drain_node", node=n)
        return {"rack": rack, "nodes_drained": len(nodes), "jobs": []}
    above = np.flatnonzero(engine.plan.fabric.switch_tier > 0)
    spine = checks.unit_id("spine", target, int(above.size))
    out = engine.command("switch_down", switch=int(above[spine]))
    return {**out, "spine": spine}


# ----------------------------------------------------------------- figures
def _window_ledger(end: Ledger, start: Ledger) -> Ledger:
    out = Ledger(end.peak)
    out.gpu_s = end.gpu_s - start.gpu_s
    out.achieved_flops = end.achieved_flops - start.achieved_flops
    return out


def _arm_figures(engine, start: Ledger, t0: float, counts0: dict) -> dict:
    """One copy's figures over the window ``[t0, engine.now]``."""
    t1 = engine.now
    led = _window_ledger(engine.horizon_ledger(), start)
    hours = led.gpu_hours()
    runs = list(engine.jobs.training_runs())
    waits = [(r.first_start - r.spec.submit_s) / 3600.0 for r in runs
             if r.first_start is not None and t0 < r.first_start <= t1]
    weights, ettrs = [], []
    for r in runs:
        if r.first_start is None or (r.end_s is not None and r.end_s < t0):
            continue
        e = engine.ettr(r)
        if e is not None:
            weights.append(r.gpus)
            ettrs.append(e)
    return {
        "productive_gpu_hours": _rounded(hours["productive"]),
        "gpu_hours": {c: _rounded(hours[c]) for c in CATEGORIES},
        "queue_wait_mean_h": _rounded(np.mean(waits)) if waits else None,
        "queue_wait_p95_h": _rounded(np.percentile(waits, 95)) if waits else None,
        "started": len(waits),
        "completed": sum(1 for r in runs if r.end_s is not None and t0 < r.end_s <= t1),
        "queued_at_end": sum(1 for r in runs if r.state == "queued"),
        "interruptions": sum(r.interruptions for r in runs) - counts0["interruptions"],
        "preemptions": sum(r.preemptions for r in runs) - counts0["preemptions"],
        "mfu": _rounded(led.mfu()["achieved"]),
        "ettr": _rounded(np.average(ettrs, weights=weights)) if ettrs else None,
    }


def _counts(engine) -> dict:
    runs = list(engine.jobs.training_runs())
    return {"interruptions": sum(r.interruptions for r in runs),
            "preemptions": sum(r.preemptions for r in runs)}


def _knocked(base, act) -> list[str]:
    """Runs interrupted or preempted more often in ``act`` than in ``base``."""
    out = []
    for rb, ra in zip(base.runs, act.runs, strict=False):
        if ra.interruptions + ra.preemptions > rb.interruptions + rb.preemptions:
            out.append(ra.spec.name)
    return out


def _delta(a, b):
    return None if a is None or b is None else _rounded(a - b)


def mirror_failures(engine) -> ForkFailures | None:
    """What forks of a mirror draw (:func:`~scheduler.reliability.mirror_fit.fork_failures`:
    the cluster's measured node failures once there are enough, else its chosen profile);
    ``None`` for an engine that simulates (its forks draw what it draws)."""
    book = engine.mirror
    if book is None:
        return None
    chosen = load_profile(getattr(book, "profile", None) or DEFAULT_PROFILE)
    return fork_failures(chosen, nodes_down=int(getattr(book, "nodes_down", 0)),
                         node_hours=float(getattr(book, "node_hours", 0.0)))


def _fork(engine, seed: int | None, failures: ForkFailures | None = None):
    """A copy of ``engine`` under ``seed``; a mirror's copy runs by itself (its scheduler and
    failure processes released: :func:`scheduler.control.mirror.release_fork`), drawing
    ``failures``."""
    fork = engine.fork(seed)
    if fork.mirror is not None:
        if failures is not None:
            fork.reliability.set_modes(failures.modes)
        release_fork(fork)
    return fork


def one_seed(engine, action: dict | None, *, hours: float, seed: int,
             failures: ForkFailures | None = None) -> dict:
    """The baseline and the action's copy of ``engine`` under ``seed``, ``hours`` on (a
    mirror's copies draw ``failures``: :func:`mirror_failures`)."""
    act = _fork(engine, seed, failures)
    applied = _plain(apply_action(act, action))
    base = _fork(engine, seed, failures)
    t0 = engine.now
    start = base.horizon_ledger()
    act.horizon_ledger()  # both copies' capacity books flushed at the same instant
    counts0 = _counts(base)
    t_end = t0 + hours * 3600.0
    base.run_until(t_end)
    act.run_until(t_end)
    b = _arm_figures(base, start, t0, counts0)
    a = _arm_figures(act, start, t0, counts0)
    hit = sorted(set(applied.get("jobs", [])) | set(_knocked(base, act)))
    delta = {k: _delta(a[k], b[k]) for k in _ARMS}
    delta["gpu_hours"] = {c: _delta(a["gpu_hours"][c], b["gpu_hours"][c]) for c in CATEGORIES}
    delta["jobs_hit"] = len(hit)
    delta["gpu_hours_lost"] = _rounded(b["productive_gpu_hours"] - a["productive_gpu_hours"])
    return {"seed": seed, "applied": applied, "jobs_hit": hit, "baseline": b, "action": a,
            "delta": delta}


def _policy_said(engine) -> str:
    """The policy the copies schedule with, and where a ``slurm`` policy's rules come from."""
    sched = engine.scheduler
    name = sched.policy.name
    conf = getattr(sched, "slurm_conf", None)
    return f"{name} (the cluster's {conf.source})" if name == "slurm" and conf else name


def _band(values: list) -> dict | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "min": None, "max": None}
    return {"mean": _rounded(sum(vals) / len(vals)), "min": _rounded(min(vals)),
            "max": _rounded(max(vals))}


def _summary(per_seed: list[dict]) -> dict:
    out = {}
    for k in METRICS:
        row = {}
        for arm in ("baseline", "action", "delta"):
            vals = [s[arm].get(k) for s in per_seed]
            if all(v is None for v in vals) and k not in per_seed[0][arm]:
                continue
            band = _band(vals)
            row[arm] = band["mean"]
            if len(per_seed) > 1:
                row[f"{arm}_band"] = [band["min"], band["max"]]
        out[k] = row
    return out


def _hours(hours) -> float:
    return HOURS.check("hours", hours)


def seeds_check(seeds) -> list[int]:
    """``seeds`` as a list of distinct integer seeds (1 to 32 of them).

    >>> seeds_check([3, 1])
    [3, 1]
    >>> seeds_check([1, 1])
    Traceback (most recent call last):
    ...
    ValueError: seeds must be distinct, not [1, 1]
    """
    if isinstance(seeds, str | bytes) or not isinstance(seeds, Sequence):
        raise ValueError(f"seeds must be a list of integers, not {seeds!r}")
    SEEDS.check("number of seeds", len(seeds))
    out = [SEED.check("seed", s) for s in seeds]
    if len(set(out)) != len(out):
        raise ValueError(f"seeds must be distinct, not {list(seeds)!r}")
    return out


def whatif(engine, action: dict | None, *, hours: float, seeds: Sequence[int],
           progress=None) -> dict:
    """Compare ``action`` against the baseline, from ``engine``'s now, over several seeds.

    Parameters
    ----------
    engine : Engine
        The state to start from; it is only forked, never changed.
    action : dict or None
        What to do at the fork (module docstring); ``None``: nothing.
    hours : float
        How long to run each copy, hours of simulated time (0 < hours <= 720).
    seeds : sequence of int
        One future per seed (1 to 32 distinct seeds, each in [0, 2**32 - 1]).
    progress : callable, optional
        ``progress(done, total)`` after each seed (``done`` seeds of ``total``).

    Returns
    -------
    dict
        JSON-safe: ``from`` (the engine's time, seed and size), ``action`` (normalised),
        ``hours``, ``seeds``, ``band`` (how the band is made), ``metrics`` (names and
        meanings), ``per_seed`` (each seed's ``applied`` result, ``jobs_hit`` names,
        ``baseline``, ``action`` and ``delta`` figures) and ``summary`` (per metric: means
        of ``baseline``, ``action`` and ``delta``, and with several seeds their
        ``*_band`` ``[min, max]``).

    Raises
    ------
    ValueError
        A bad action, hours or seeds, before anything runs (one line).

    Examples
    --------
    >>> from scheduler.simulate import Scenario
    >>> engine, _ = Scenario(preset="dev-small", days=1, seed=0).engine()
    >>> engine.run_until(3600.0)
    >>> r = whatif(engine, {"kind": "policy", "name": "fifo"}, hours=1, seeds=[1])
    >>> r["summary"]["gpu_hours_lost"]["delta"] is not None, engine.now
    (True, 3600.0)
    """
    hours = _hours(hours)
    seeds = seeds_check(seeds)
    action = action_check(action, engine)
    failures = mirror_failures(engine)
    per_seed = []
    for i, seed in enumerate(seeds):
        per_seed.append(one_seed(engine, action, hours=hours, seed=seed, failures=failures))
        if progress is not None:
            progress(i + 1, len(seeds))
    s = engine.state
    return {
        "from": {"t_sim": _rounded(engine.now, 3), "seed": engine.seed, "gpus": int(s.n_gpus),
                 "nodes": int(engine.plan.n_nodes), "preset": engine.plan.preset or None,
                 "cluster": engine.plan.name, "mirror": engine.mirror is not None,
                 "policy": _policy_said(engine),
                 "failures": None if failures is None else failures.report()},
        "action": action, "hours": hours, "seeds": seeds,
        "band": BAND if len(seeds) > 1 else "none (one seed)",
        "metrics": METRICS,
        "per_seed": per_seed,
        "summary": _summary(per_seed),
    }

