"""Drills: inject a failure now, on a named target or a random one, and report what it hit.

Staff rehearse failures from the dashboard through :func:`run_drill`; every kind maps onto the
failure engine's effects, so a drill shows up in the ledger and the event log exactly as a
real failure would.  A target that does not exist is refused before anything changes.
"""

from __future__ import annotations

import numpy as np

from scheduler.control.bounds import drill_params
from scheduler.control.params import unit_id
from scheduler.reliability.failures import FailureMode

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


def run_drill(engine, kind: str, target="random", **params) -> dict:
    """Inject a drill now; returns ``{"kind", "target", "jobs", "gpus", ...}``.

    Raises ``ValueError`` (nothing changed) for an unknown kind, target or parameter, or a
    parameter outside its bound (:data:`~scheduler.control.bounds.DRILL_PARAMS`).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown drill {kind!r}; choose one of: {', '.join(KINDS)}")
    params = drill_params(kind, params, defaults=True)
    rng = engine.kernel.rng("drills")
    rel = engine.reliability
    if kind in _DRILL_MODES:
        mode = _DRILL_MODES[kind]
        unit = _target(engine, kind, mode.component, target, rng)
        hit = rel.inject(mode, unit, rng=rng)
        result = {**hit, "kind": kind, "target": unit}
    elif kind == "storage_slowdown":
        factor, duration = params["factor"], params["duration_s"]
        rel.slow_storage(STORAGE_MODE, factor, duration)
        result = {"kind": kind, "target": "central", "factor": factor, "duration_s": duration,
                  "jobs": [], "gpus": 0}
    elif kind == "inference_surge":
        factor, until = params["factor"], engine.now + params["duration_s"]
        names = engine.fleet.surge(factor, until,
                                   None if target in (None, "random", "all") else target)
        result = {"kind": kind, "target": names, "jobs": [], "gpus": 0, "services": names,
                  "factor": factor, "until": until}
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
        engine.physics.refresh()
        hit = sorted(i for i, theta in engine.physics.throttle.items() if theta < 1.0)
        result = {"kind": kind, "target": target, "fraction": fraction,
                  "jobs": [engine.runs[i].spec.name for i in hit],
                  "gpus": sum(engine.runs[i].gpus for i in hit)}
    engine.kernel.log("drill", f"drill {kind} on {result['target']}: "
                               f"{len(result['jobs'])} job(s), {result['gpus']} GPUs hit",
                      drill=kind, component=f"{kind} {result['target']}",
                      jobs=list(result["jobs"]))
    engine.scheduler.wake()
    return result
