"""Drills: inject a failure now, on a named target or a random one, and report what it hit.

Staff rehearse failures from the dashboard through :func:`run_drill`; every kind maps onto the
failure engine's effects, so a drill shows up in the ledger and the event log exactly as a
real failure would.  A target that does not exist is refused before anything changes.
"""

from __future__ import annotations

import numpy as np

from scheduler.limits.bounds import drill_params
from scheduler.limits.checks import unit_id
from scheduler.reliability.failures import FailureMode
from scheduler.sim import Kind

# drills use the detection delays of the matching failure causes; repair times are the
# rehearsal's own (assumed, short enough to watch the recovery)
_DRILL_MODES = {
    "accelerator": FailureMode("drill_accelerator", "gpu", 0.0, 120, 4, source="drill"),
    "node": FailureMode("drill_node", "host", 0.0, 120, 4, source="drill"),
    "nic": FailureMode("drill_nic", "nic", 0.0, 120, 2, source="drill"),
    "optical_link": FailureMode("drill_optical_link", "fabric_link", 0.0, 60, 2, source="drill"),
    "leaf_switch": FailureMode("drill_leaf_switch", "leaf", 0.0, 120, 4, source="drill"),
    "spine_switch": FailureMode("drill_spine_switch", "spine", 0.0, 60, 4, source="drill"),
    "rack_power": FailureMode("drill_rack_power", "pdu", 0.0, 60, 4, source="drill"),
    "cooling": FailureMode("drill_cooling", "cooling", 0.0, 300, 2, source="drill"),
}
STORAGE_MODE = FailureMode("drill_storage_slowdown", "storage", 0.0, 0, 1, source="drill")
KINDS = tuple(_DRILL_MODES) + ("storage_slowdown", "inference_surge", "supply_cut",
                               "cloud_region_loss", "power_cap")


def _target(engine, kind: str, component: str, target, rng: np.random.Generator) -> int:
    n = engine.reliability.units[component]
    if n == 0:
        raise ValueError(f"this cluster has no {kind.replace('_', ' ')} to fail")
    if target in (None, "random"):
        return int(rng.integers(n))
    if isinstance(target, str):
        try:
            target = int(target)
        except ValueError:
            raise ValueError(f"target must be 'random' or an integer id, not {target!r}") from None
    elif isinstance(target, bool) or not isinstance(target, int | np.integer):
        raise ValueError(f"target must be 'random' or an id, not {target!r}")
    return unit_id(kind.replace("_", " "), target, n)


ENDLESS = ("supply_cut",)
"""Kinds with nothing to end: a supply cut freezes a model's spares for the rest of the run."""


def active_drills(engine) -> dict[int, dict]:
    """Drills that can still be ended, by the twin's drill id: what :func:`end_drill` undoes.

    Kept in the engine's own attributes so that snapshots and forks carry it.
    """
    return engine.active_drills


def _repairs(engine) -> set[int]:
    return {h.payload for h in engine.kernel.pending(Kind.REPAIR)}


def _drill_id(drill_id) -> int:
    if isinstance(drill_id, bool) or not isinstance(drill_id, int | np.integer) or drill_id < 0:
        raise ValueError(f"drill_id must be a non-negative integer, not {drill_id!r}")
    return int(drill_id)


def run_drill(engine, kind: str, target="random", drill_id=None, **params) -> dict:
    """Inject a drill now; returns ``{"kind", "target", "jobs", "gpus", ...}``.

    ``drill_id`` (the twin's) makes the drill endable early with :func:`end_drill`.
    Raises ``ValueError`` (nothing changed) for an unknown kind, target or parameter, or a
    parameter outside its bound (:data:`~scheduler.limits.bounds.DRILL_PARAMS`).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown drill {kind!r}; choose one of: {', '.join(KINDS)}")
    params = drill_params(kind, params, defaults=True)
    if drill_id is not None:
        drill_id = _drill_id(drill_id)
        if drill_id in active_drills(engine):
            raise ValueError(f"drill {drill_id} is already running")
    rng = engine.kernel.rng("drills")
    rel = engine.reliability
    undo: dict = {}
    if kind in _DRILL_MODES or kind == "storage_slowdown":
        before = _repairs(engine)  # the repair the drill schedules is its end
    if kind in _DRILL_MODES:
        mode = _DRILL_MODES[kind]
        unit = _target(engine, kind, mode.component, target, rng)
        hit = rel.inject(mode, unit, rng=rng)
        result = {**hit, "kind": kind, "target": unit}
        undo["repairs"] = sorted(_repairs(engine) - before)
    elif kind == "storage_slowdown":
        factor, duration = params["factor"], params["duration_s"]
        rel.slow_storage(STORAGE_MODE, factor, duration)
        result = {"kind": kind, "target": "central", "factor": factor, "duration_s": duration,
                  "jobs": [], "gpus": 0}
        undo["repairs"] = sorted(_repairs(engine) - before)
    elif kind == "inference_surge":
        factor, until = params["factor"], engine.now + params["duration_s"]
        names = engine.fleet.surge(factor, until,
                                   None if target in (None, "random", "all") else target)
        result = {"kind": kind, "target": names, "jobs": [], "gpus": 0, "services": names,
                  "factor": factor, "until": until}
        undo.update(services=names, until=until)
    elif kind == "supply_cut":
        names = [m.name for m in engine.plan.models]
        if target in (None, "random"):
            target = names[int(rng.integers(len(names)))]
        if target not in names:
            raise ValueError(f"accelerator model {target!r} is not in this cluster "
                             f"({', '.join(names)})")
        m = names.index(target)
        engine.spares.cut(m)
        result = {"kind": kind, "target": target, "jobs": [], "gpus": 0,
                  "spares_frozen": int(np.count_nonzero(engine.state.node_spare
                                                        & engine.state.model_mask[m]))}
    elif kind == "cloud_region_loss":
        pools = [engine.cloud.name(i) for i in range(len(engine.cloud.pools))]
        if not pools:
            raise ValueError("this cluster has no cloud pool")
        if target in (None, "random"):
            target = pools[int(rng.integers(len(pools)))]
        if target not in pools:
            raise ValueError(f"cloud pool {target!r} does not exist ({', '.join(pools)})")
        jobs = engine.burst.region_loss(pools.index(target))
        undo["pool"] = pools.index(target)
        result = {"kind": kind, "target": target, "jobs": jobs,
                  "gpus": sum(engine.runs[i].gpus for i in jobs)}
    else:  # power_cap, the last of KINDS
        if engine.physics is None:
            raise ValueError("a power-cap drill needs the power model (simulate --physics on)")
        fraction = params["fraction"]
        power = engine.physics.power
        if target in (None, "random", "all"):
            power.cap_all(fraction)
            target = "all"
        else:
            rack = _target(engine, "rack", "pdu", target, rng)
            power.cap_rack(rack, float(power.base_caps_kw[rack]) * fraction)
            target = rack
        undo["rack"] = target
        engine.physics.refresh()
        hit = sorted(i for i, theta in engine.physics.throttle.items() if theta < 1.0)
        result = {"kind": kind, "target": target, "fraction": fraction,
                  "jobs": [engine.runs[i].spec.name for i in hit],
                  "gpus": sum(engine.runs[i].gpus for i in hit)}
    engine.kernel.log("drill", f"drill {kind} on {result['target']}: "
                               f"{len(result['jobs'])} job(s), {result['gpus']} GPUs hit",
                      drill=kind, component=f"{kind} {result['target']}",
                      jobs=list(result["jobs"]))
    if drill_id is not None and kind not in ENDLESS:
        active_drills(engine)[drill_id] = {"kind": kind, "target": result["target"], **undo}
        rel.incidents.label_drill(undo.get("repairs", ()), drill_id)
    engine.scheduler.wake()
    return result


def _target_text(target) -> str:
    return ", ".join(map(str, target)) if isinstance(target, list) else str(target)


def end_drill(engine, drill_id, by: str = "") -> dict:
    """End drill ``drill_id`` now, as if its duration had run out: a failure's repair (node,
    switch, link, cooling ... and the storage slowdown) is handled now by the failure engine,
    a surge reverts at its services' next demand step, a power cap is lifted, a lost cloud
    region serves again.  The event log names who ended it (``by``).

    Raises ``ValueError`` (nothing changed) for a drill that is not running: never applied,
    already over (ran out or ended), or a kind that has no end (:data:`ENDLESS`).
    """
    drill_id = _drill_id(drill_id)
    entry = active_drills(engine).get(drill_id)
    if entry is None:
        raise ValueError(f"drill {drill_id} is not running in the live engine (it ended, "
                         "was never applied, or is a supply cut, which lasts the run)")
    kind, now = entry["kind"], engine.now
    over = f"drill {drill_id} ({kind.replace('_', ' ')}) is already over"
    if "repairs" in entry:
        handles = [h for h in engine.kernel.pending(Kind.REPAIR) if h.payload in entry["repairs"]]
        if not handles:
            raise ValueError(over)
        for h in handles:  # the same repair event, due now instead of later
            h.cancel()
            engine.kernel.schedule(now, Kind.REPAIR, h.payload)
    elif "services" in entry:
        if not engine.fleet.surge_end(entry["services"], entry["until"]):
            raise ValueError(over)
    elif "pool" in entry:
        if not engine.burst.region_back(entry["pool"]):
            raise ValueError(over)
    else:  # a power cap
        power = engine.physics.power
        if entry["rack"] == "all":
            power.cap_all(1.0)
        else:
            power.cap_rack(entry["rack"], float(power.base_caps_kw[entry["rack"]]))
        engine.physics.refresh()
    del active_drills(engine)[drill_id]
    who = by or "an operator"
    target = _target_text(entry["target"])
    engine.kernel.log("drill", f"drill {kind.replace('_', ' ')} on {target} ended early by "
                               f"{who}", drill=kind, component=f"{kind} {target}"[:64])
    engine.scheduler.wake()
    return {"drill_id": drill_id, "kind": kind, "target": entry["target"], "ended_by": who,
            "t": now}
