"""Commands the engine accepts while it runs (what-if changes and operator actions).

Each command validates its parameters before it changes anything and returns a JSON-safe
result; a bad parameter raises ``ValueError`` with a message meant for the person who sent it.
Commands act through the components' public methods: ``engine`` here is only the assembly that
names them (``jobs``, ``scheduler``, ``reliability``, ``fleet``, ``state``, ``kernel``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scheduler.control.drills import run_drill
from scheduler.control.params import positive, unit_id
from scheduler.model.job_run import REJECTED
from scheduler.reliability.failures import FailureMode
from scheduler.workload.jobs import TrainingJob

OPERATOR_FAILED = FailureMode("operator_marked_failed", "host", 0.0, 0.0, 0.0,
                              source="inventory edit")


def _node(engine, node) -> int:
    return unit_id("node", node, engine.plan.n_nodes)


def _switch(engine, switch) -> int:
    return unit_id("switch", switch, engine.plan.fabric.n_switches())


def _leaf_nodes(engine, leaf: int) -> np.ndarray:
    """Nodes cabled to a leaf switch (a fabric may have more ports than GPUs)."""
    s = engine.state
    return np.unique(s.gpu_node[engine.plan.fabric.endpoint_leaf[:s.n_gpus] == leaf])


def drain_node(engine, *, node) -> dict:
    """Stop placing on a node; gangs on it run to completion."""
    n = _node(engine, node)
    engine.state.set_node_flags([n], drained=True)
    engine.kernel.log("drain", f"node {n} drained")
    return {"node": n, "drained": True}


def undrain_node(engine, *, node) -> dict:
    n = _node(engine, node)
    engine.state.set_node_flags([n], drained=False)
    engine.kernel.log("drain", f"node {n} back in service")
    return {"node": n, "drained": False}


def node_down(engine, *, node) -> dict:
    """An operator marked the node failed: its jobs are interrupted, it leaves the pool."""
    n = _node(engine, node)
    hit = engine.reliability.node_out(n, OPERATOR_FAILED)
    engine.kernel.log("inventory", f"node {n} marked failed: {len(hit)} job(s) interrupted")
    return {"node": n, "up": False, "jobs": [engine.runs[i].spec.name for i in hit]}


def node_up(engine, *, node) -> dict:
    """An operator marked the node repaired."""
    n = _node(engine, node)
    engine.reliability.node_back(n)
    engine.scheduler.wake()
    engine.kernel.log("inventory", f"node {n} marked repaired")
    return {"node": n, "up": bool(engine.state.node_up[n])}


def switch_down(engine, *, switch) -> dict:
    """An operator marked a switch failed: a leaf takes its nodes down, a spine or core
    switch removes its links (ECMP reroutes, crossing jobs slow)."""
    sw = _switch(engine, switch)
    f = engine.plan.fabric
    if f.switch_tier[sw] == 0:
        nodes = _leaf_nodes(engine, sw)
        jobs = [j for n in nodes.tolist() for j in node_down(engine, node=n)["jobs"]]
        return {"switch": sw, "nodes_down": nodes.size, "jobs": jobs}
    engine.reliability.mark_switch(sw, +1)
    engine.jobs.rerate_all()
    engine.kernel.log("inventory", f"switch {sw} marked failed")
    return {"switch": sw, "jobs": []}


def switch_up(engine, *, switch) -> dict:
    sw = _switch(engine, switch)
    f = engine.plan.fabric
    if f.switch_tier[sw] == 0:
        for n in _leaf_nodes(engine, sw).tolist():
            node_up(engine, node=n)
        return {"switch": sw}
    engine.reliability.mark_switch(sw, -1)
    engine.jobs.rerate_all()
    engine.kernel.log("inventory", f"switch {sw} back in service")
    return {"switch": sw}


def set_policy(engine, *, name, placement=None) -> dict:
    engine.scheduler.set_policy(name, placement)
    policy = engine.scheduler.policy
    engine.kernel.log("policy", f"policy set to {policy.name} ({policy.placement} placement)")
    return {"policy": policy.name, "placement": policy.placement}


def inference_surge(engine, *, factor, duration_s, service=None) -> dict:
    """Multiply inference demand by ``factor`` for ``duration_s`` seconds."""
    f = positive("factor", factor)
    d = positive("duration_s", duration_s)
    until = engine.now + d
    names = engine.fleet.surge(f, until, service)
    return {"services": names, "factor": f, "until": until}


def submit_job(engine, *, job) -> dict:
    """Submit a training job now (or at its own later submit time)."""
    if not isinstance(job, TrainingJob):
        raise ValueError("submit_job needs a TrainingJob")
    job = replace(job, job_id=len(engine.runs), submit_s=max(engine.now, job.submit_s))
    run = engine.jobs.submit(job)
    return {"job_id": job.job_id, "accepted": run.state != REJECTED}


def drill(engine, *, kind, target="random", **params) -> dict:
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
