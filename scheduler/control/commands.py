"""Commands the engine accepts while it runs (what-if changes and operator actions).

Each command validates its parameters before it changes anything and returns a JSON-safe
result; a bad parameter raises ``ValueError`` with a message meant for the person who sent it.
The failure engine adds drills to this table.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scheduler.engine import ARRIVE
from scheduler.reliability.failures import FailureMode
from scheduler.scheduling.placement import Placer
from scheduler.scheduling.policies import get_policy
from scheduler.workload.jobs import TrainingJob


def _node(engine, node) -> int:
    if isinstance(node, bool) or not isinstance(node, (int, np.integer)):
        raise ValueError(f"node must be an integer id, not {node!r}")
    if not 0 <= node < engine.state.plan.n_nodes:
        raise ValueError(f"node {node} does not exist (0 .. {engine.state.plan.n_nodes - 1})")
    return int(node)


def _factor(value, name="factor") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    return float(value)


def drain_node(engine, *, node) -> dict:
    """Stop placing on a node; gangs on it run to completion."""
    n = _node(engine, node)
    engine.state.set_node_flags([n], drained=True)
    engine.changed()
    engine.log("drain", f"node {n} drained")
    return {"node": n, "drained": True}


def undrain_node(engine, *, node) -> dict:
    n = _node(engine, node)
    engine.state.set_node_flags([n], drained=False)
    engine.changed()
    engine.log("drain", f"node {n} back in service")
    return {"node": n, "drained": False}


OPERATOR_FAILED = FailureMode("operator_marked_failed", "host", 0.0, 0.0, 0.0,
                              source="inventory edit")


def node_down(engine, *, node) -> dict:
    """An operator marked the node failed: its jobs are interrupted, it leaves the pool."""
    n = _node(engine, node)
    rel = engine.reliability
    nodes = np.array([n])
    hit = rel._interrupt_nodes(nodes, OPERATOR_FAILED)
    rel.down_count[n] += 1
    engine.state.set_node_flags(nodes, up=False)
    engine.changed()
    engine.log("inventory", f"node {n} marked failed: {len(hit)} job(s) interrupted")
    return {"node": n, "up": False, "jobs": [engine.runs[i].spec.name for i in hit]}


def node_up(engine, *, node) -> dict:
    """An operator marked the node repaired."""
    n = _node(engine, node)
    rel = engine.reliability
    rel.down_count[n] = max(0, rel.down_count[n] - 1)
    if rel.down_count[n] == 0:
        engine.state.set_node_flags([n], up=True)
    engine.changed()
    engine.log("inventory", f"node {n} marked repaired")
    return {"node": n, "up": bool(engine.state.node_up[n])}


def _switch(engine, switch) -> int:
    n = engine.plan.fabric.n_switches()
    if isinstance(switch, bool) or not isinstance(switch, (int, np.integer)) \
            or not 0 <= switch < n:
        raise ValueError(f"switch {switch!r} does not exist (ids 0 .. {n - 1})")
    return int(switch)


def switch_down(engine, *, switch) -> dict:
    """An operator marked a switch failed: a leaf takes its nodes down, a spine or core
    switch removes its links (ECMP reroutes, crossing jobs slow)."""
    sw = _switch(engine, switch)
    f = engine.plan.fabric
    if f.switch_tier[sw] == 0:
        nodes = np.unique(engine.state.gpu_node[f.endpoint_leaf == sw])
        jobs = [j for n in nodes.tolist() for j in node_down(engine, node=n)["jobs"]]
        return {"switch": sw, "nodes_down": nodes.size, "jobs": jobs}
    engine.reliability.failed_switches[sw] += 1
    engine.reliability._rerate_all()
    engine.log("inventory", f"switch {sw} marked failed")
    return {"switch": sw, "jobs": []}


def switch_up(engine, *, switch) -> dict:
    sw = _switch(engine, switch)
    f = engine.plan.fabric
    if f.switch_tier[sw] == 0:
        for n in np.unique(engine.state.gpu_node[f.endpoint_leaf == sw]).tolist():
            node_up(engine, node=n)
        return {"switch": sw}
    rel = engine.reliability
    rel.failed_switches[sw] = max(0, rel.failed_switches[sw] - 1)
    rel._rerate_all()
    engine.log("inventory", f"switch {sw} back in service")
    return {"switch": sw}


def set_policy(engine, *, name, placement=None) -> dict:
    policy = get_policy(name, placement=placement)
    engine.policy = policy
    engine.placer = Placer(engine.state, policy.placement, engine.rng_placement)
    engine.changed()
    engine.log("policy", f"policy set to {policy.name} ({policy.placement} placement)")
    return {"policy": policy.name, "placement": policy.placement}


def inference_surge(engine, *, factor, duration_s, service=None) -> dict:
    """Multiply inference demand by ``factor`` for ``duration_s`` seconds."""
    f = _factor(factor)
    d = _factor(duration_s, "duration_s")
    fleet = engine.fleet
    if service is None:
        targets = fleet.services
    else:
        named = [s for s in fleet.services if s.spec.name == service]
        if not named:
            raise ValueError(f"no inference service named {service!r}")
        targets = named
    for s in targets:
        s.surge, s.surge_until = f, engine.now + d
    engine.log("surge", f"inference demand x{f:g} for {d / 3600:.1f} h on "
                        f"{len(targets)} service(s)")
    return {"services": [s.spec.name for s in targets], "factor": f, "until": engine.now + d}


def submit_job(engine, *, job) -> dict:
    if not isinstance(job, TrainingJob):
        raise ValueError("submit_job needs a TrainingJob")
    job = replace(job, job_id=len(engine.runs), submit_s=max(engine.now, job.submit_s))
    run = engine._admit(len(engine.runs), job)
    engine.runs.append(run)
    engine._push(job.submit_s, ARRIVE, run.idx)
    return {"job_id": job.job_id, "accepted": run.state != "rejected"}


def drill(engine, *, kind, target="random", **params) -> dict:
    from scheduler.control.drills import run_drill
    return run_drill(engine, kind, target, **params)


COMMANDS = {f.__name__: f for f in (drain_node, undrain_node, node_down, node_up,
                                     switch_down, switch_up, set_policy, inference_surge,
                                     submit_job, drill)}


def apply_command(engine, command: str, /, **params) -> dict:
    try:
        handler = COMMANDS[command]
    except KeyError:
        raise ValueError(f"unknown command {command!r}; known: {', '.join(COMMANDS)}") from None
    try:
        return handler(engine, **params)
    except TypeError as exc:
        raise ValueError(f"bad parameters for {command}: {exc}") from None
