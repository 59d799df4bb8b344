"""Commands the engine accepts while it runs (what-if changes and operator actions).

Each command validates its parameters before it changes anything and returns a JSON-safe
result; a bad parameter, or a number outside its documented bound
(:mod:`scheduler.limits.bounds`), raises ``ValueError`` with a message meant for the person
who sent it.
Commands act through the components' public methods: ``engine`` here is only the assembly that
names them (``jobs``, ``scheduler``, ``reliability``, ``fleet``, ``state``, ``kernel``).
"""

from __future__ import annotations

import inspect
from dataclasses import replace

import numpy as np

from scheduler.control.drills import end_drill as _end_drill
from scheduler.control.drills import run_drill
from scheduler.control.job_actions import JOB_ACTIONS
from scheduler.control.storage_status import storage_degraded, storage_down, storage_up
from scheduler.limits import checks
from scheduler.limits.bounds import DRILL_DURATION, SURGE_FACTOR, job_check
from scheduler.model.job_run import REJECTED
from scheduler.reliability.failures import FailureMode
from scheduler.scheduling.placement import STRATEGIES
from scheduler.scheduling.policies import REGISTRY
from scheduler.workload.jobs import TrainingJob

OPERATOR_FAILED = FailureMode("operator_marked_failed", "host", 0.0, 0.0, 0.0,
                              source="inventory edit")
LEAF_FAILED = FailureMode("operator_marked_leaf_failed", "leaf", 0.0, 0.0, 0.0,
                          source="inventory edit")
GPU_FAILED = FailureMode("operator_marked_gpu_failed", "gpu", 0.0, 0.0, 0.0,
                         source="inventory edit")
NIC_LINK_DOWN = FailureMode("operator_marked_nic_link_down", "endpoint_link", 0.0, 0.0, 0.0,
                            source="inventory edit")


def _node(engine, node) -> int:
    return checks.unit_id("node", node, engine.plan.n_nodes)


def _switch(engine, switch) -> int:
    return checks.unit_id("switch", switch, engine.plan.fabric.n_switches())


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
    jobs = [engine.runs[i].spec.name for i in hit]
    engine.kernel.log("inventory", f"node {n} marked failed: {len(hit)} job(s) interrupted",
                      component=f"node {n}", jobs=jobs, cause=OPERATOR_FAILED.cause)
    return {"node": n, "up": False, "jobs": jobs}


def node_up(engine, *, node) -> dict:
    """An operator marked the node repaired."""
    n = _node(engine, node)
    engine.reliability.node_back(n)
    engine.scheduler.wake()
    engine.kernel.log("inventory", f"node {n} marked repaired", component=f"node {n}")
    return {"node": n, "up": bool(engine.state.node_up[n])}


def _gpus(nodes: np.ndarray, engine) -> int:
    return int(engine.state.node_gpus[nodes].sum())


def switch_down(engine, *, switch) -> dict:
    """An operator marked a switch failed: a leaf takes its nodes down, a spine or core
    switch removes its links (ECMP reroutes, crossing jobs slow).  One event names the switch,
    the GPUs it took out and the jobs it hit."""
    sw = _switch(engine, switch)
    f = engine.plan.fabric
    tier = ("leaf", "spine", "core")[int(f.switch_tier[sw])]
    if f.switch_tier[sw] == 0:
        nodes = _leaf_nodes(engine, sw)
        engine.reliability.mark_switch(sw, +1)  # its uplinks are out too (the link heatmaps)
        hit = sorted({i for n in nodes.tolist()
                      for i in engine.reliability.node_out(n, LEAF_FAILED)})
        jobs = [engine.runs[i].spec.name for i in hit]
        engine.kernel.log("switch", f"{tier} switch {sw} marked failed: {nodes.size} nodes, "
                                    f"{_gpus(nodes, engine)} GPUs out; {len(jobs)} job(s) "
                                    f"interrupted{': ' + ', '.join(jobs[:8]) if jobs else ''}",
                          switch=sw, jobs=jobs)
        return {"switch": sw, "tier": tier, "nodes_down": int(nodes.size),
                "gpus_down": _gpus(nodes, engine), "jobs": jobs}
    engine.reliability.mark_switch(sw, +1)
    slowed = engine.jobs.rerate_all()
    jobs = [engine.runs[i].spec.name for i in slowed]
    engine.kernel.log("switch", f"{tier} switch {sw} marked failed: its links are out, "
                                f"{len(jobs)} job(s) re-rated", switch=sw, jobs=jobs)
    return {"switch": sw, "tier": tier, "nodes_down": 0, "gpus_down": 0, "jobs": jobs}


def switch_up(engine, *, switch) -> dict:
    sw = _switch(engine, switch)
    f = engine.plan.fabric
    tier = ("leaf", "spine", "core")[int(f.switch_tier[sw])]
    if f.switch_tier[sw] == 0:
        nodes = _leaf_nodes(engine, sw)
        engine.reliability.mark_switch(sw, -1)
        for n in nodes.tolist():
            engine.reliability.node_back(n)
        engine.scheduler.wake()
        engine.kernel.log("switch", f"{tier} switch {sw} back in service: {nodes.size} nodes")
        return {"switch": sw, "tier": tier}
    engine.reliability.mark_switch(sw, -1)
    engine.jobs.rerate_all()
    engine.kernel.log("switch", f"{tier} switch {sw} back in service")
    return {"switch": sw, "tier": tier}


def link_down(engine, *, link) -> dict:
    """An operator marked a switch-to-switch link down: routes avoid it, crossing jobs slow."""
    k = checks.unit_id("link", link, int(engine.plan.fabric.link_a.size))
    engine.reliability.set_link(k, False)
    slowed = [engine.runs[i].spec.name for i in engine.jobs.rerate_all()]
    engine.kernel.log("link", f"link {k} marked down: {len(slowed)} job(s) re-rated", link=k,
                      jobs=slowed)
    return {"link": k, "up": False, "jobs": slowed}


def link_up(engine, *, link) -> dict:
    k = checks.unit_id("link", link, int(engine.plan.fabric.link_a.size))
    engine.reliability.set_link(k, True)
    engine.jobs.rerate_all()
    engine.kernel.log("link", f"link {k} back up")
    return {"link": k, "up": True}


def gpu_down(engine, *, gpu, nic: bool = False) -> dict:
    """An operator marked an accelerator failed (or, ``nic``, its NIC link down): its node
    leaves the pool and the gangs on it are interrupted."""
    g = checks.unit_id("gpu", gpu, engine.state.n_gpus)
    nic = checks.flag("nic", nic)
    n = int(engine.state.gpu_node[g])
    engine.state.set_gpu_up([g], False)
    hit = engine.reliability.node_out(n, NIC_LINK_DOWN if nic else GPU_FAILED)
    jobs = [engine.runs[i].spec.name for i in hit]
    what = f"NIC link of GPU {g}" if nic else f"GPU {g}"
    engine.kernel.log("inventory", f"{what} (node {n}) marked {'down' if nic else 'failed'}: "
                                   f"{len(jobs)} job(s) interrupted", gpu=g, node=n, jobs=jobs)
    return {"gpu": g, "node": n, "jobs": jobs}


def gpu_up(engine, *, gpu, nic: bool = False) -> dict:
    g = checks.unit_id("gpu", gpu, engine.state.n_gpus)
    nic = checks.flag("nic", nic)
    n = int(engine.state.gpu_node[g])
    engine.state.set_gpu_up([g], True)
    engine.reliability.node_back(n)
    engine.scheduler.wake()
    engine.kernel.log("inventory", f"{'NIC link of ' if nic else ''}GPU {g} (node {n}) "
                                   "back in service")
    return {"gpu": g, "node": n, "up": bool(engine.state.node_up[n])}


PDU_FAILED = FailureMode("operator_marked_feed_failed", "pdu", 0.0, 0.0, 0.0,
                         source="inventory edit")


def feed_down(engine, *, rack) -> dict:
    """An operator marked a rack's power feed failed: its nodes go down, their gangs stop."""
    r = checks.unit_id("rack", rack, engine.plan.n_racks)
    nodes = np.flatnonzero(engine.plan.node_rack == r)
    hit = sorted({i for n in nodes.tolist() for i in engine.reliability.node_out(n, PDU_FAILED)})
    jobs = [engine.runs[i].spec.name for i in hit]
    engine.kernel.log("power", f"power feed of rack {r} marked failed: {nodes.size} nodes, "
                               f"{_gpus(nodes, engine)} GPUs out; {len(jobs)} job(s) interrupted",
                      component=f"rack {r}", jobs=jobs)
    return {"rack": r, "nodes_down": int(nodes.size), "jobs": jobs}


def feed_up(engine, *, rack) -> dict:
    r = checks.unit_id("rack", rack, engine.plan.n_racks)
    for n in np.flatnonzero(engine.plan.node_rack == r).tolist():
        engine.reliability.node_back(n)
    engine.scheduler.wake()
    engine.kernel.log("power", f"power feed of rack {r} back", component=f"rack {r}")
    return {"rack": r}


def _cooling_racks(engine, loop: int) -> np.ndarray:
    plan = engine.plan
    rows = plan.rack_hall * 1000 + plan.rack_row
    return np.flatnonzero(rows == np.unique(rows)[loop])


def _loop(engine, loop) -> int:
    plan = engine.plan
    return checks.unit_id("cooling loop", loop,
                          int(np.unique(plan.rack_hall * 1000 + plan.rack_row).size))


def cooling_down(engine, *, loop) -> dict:
    """An operator marked a cooling loop (one rack row) failed: its racks throttle."""
    k = _loop(engine, loop)
    racks = _cooling_racks(engine, k)
    engine.reliability.cool(k, racks.tolist(), +1)
    slowed = [engine.runs[i].spec.name for i in engine.jobs.rerate_all()]
    engine.kernel.log("cooling", f"cooling loop {k} marked failed: {racks.size} racks throttle, "
                                 f"{len(slowed)} job(s) re-rated", component=f"cooling {k}",
                      jobs=slowed)
    return {"loop": k, "racks": racks.tolist(), "jobs": slowed}


def cooling_up(engine, *, loop) -> dict:
    k = _loop(engine, loop)
    engine.reliability.cool(k, _cooling_racks(engine, k).tolist(), -1)
    engine.jobs.rerate_all()
    engine.kernel.log("cooling", f"cooling loop {k} back", component=f"cooling {k}")
    return {"loop": k}


def set_policy(engine, *, name, placement=None) -> dict:
    checks.choice("policy", name, REGISTRY)
    checks.optional(checks.choice, "placement", placement, STRATEGIES)
    engine.scheduler.set_policy(name, placement)
    policy = engine.scheduler.policy
    engine.kernel.log("policy", f"policy set to {policy.name} ({policy.placement} placement)")
    return {"policy": policy.name, "placement": policy.placement}


def inference_surge(engine, *, factor, duration_s, service=None) -> dict:
    """Multiply inference demand by ``factor`` (0 < factor <= 100) for ``duration_s`` seconds
    (at most 30 days), the bounds of :mod:`scheduler.limits.bounds`."""
    f = SURGE_FACTOR.check("factor", factor)
    d = DRILL_DURATION.check("duration_s", duration_s)
    until = engine.now + d
    names = engine.fleet.surge(f, until, service)
    return {"services": names, "factor": f, "until": until}


def submit_job(engine, *, job) -> dict:
    """Submit a training job now (or at its own later submit time)."""
    if not isinstance(job, TrainingJob):
        raise ValueError("submit_job needs a TrainingJob")
    job_check(job)
    job = replace(job, job_id=len(engine.runs), submit_s=max(engine.now, job.submit_s))
    run = engine.jobs.submit(job)
    return {"job_id": job.job_id, "accepted": run.state != REJECTED}


def drill(engine, *, kind, target="random", **params) -> dict:
    return run_drill(engine, kind, target, **params)


def end_drill(engine, *, drill_id, by: str = "") -> dict:
    """End a running drill now, as if its duration had run out (see
    :func:`scheduler.control.drills.end_drill`)."""
    return _end_drill(engine, drill_id, by)


def supply_back(engine, *, model) -> dict:
    """Parts for ``model`` come again after a supply cut (the ``supply_cut`` drill): its
    spares swap in again and its repaired nodes parked for want of parts come back."""
    names = [m.name for m in engine.plan.models]
    if model not in names:
        raise ValueError(f"accelerator model {model!r} is not in this cluster "
                         f"({', '.join(names)})")
    parked = engine.spares.mend(names.index(model))
    for n in parked.tolist():  # the repair that parked it is done: one cause fewer
        engine.reliability.node_back(n)
    back = parked[engine.state.node_up[parked]] if parked.size else parked
    engine.spares.refill(back)
    engine.scheduler.wake()
    engine.kernel.log("drill", f"supply of {model} back: {back.size} parked node(s) in service",
                      drill="supply_cut", component=f"supply_cut {model}")
    return {"model": model, "nodes_back": [int(n) for n in back.tolist()]}


COMMANDS = {f.__name__: f for f in (drain_node, undrain_node, node_down, node_up,
                                     switch_down, switch_up, link_down, link_up, gpu_down,
                                     gpu_up, feed_down, feed_up, cooling_down, cooling_up,
                                     storage_down, storage_degraded, storage_up, set_policy,
                                     inference_surge, submit_job, drill, end_drill,
                                     supply_back)}
COMMANDS.update(JOB_ACTIONS)  # hold, release, cancel, requeue, priority: job_actions.py


def _parameters(handler) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """A command's keyword parameters, from its signature: (required, allowed, takes more)."""
    after_engine = list(inspect.signature(handler).parameters.values())[1:]
    named = [p for p in after_engine if p.kind is not p.VAR_KEYWORD]
    return (tuple(p.name for p in named if p.default is p.empty),
            tuple(p.name for p in named),
            any(p.kind is p.VAR_KEYWORD for p in after_engine))


PARAMETERS = {name: _parameters(handler) for name, handler in COMMANDS.items()}
"""Command -> (required, allowed, takes more): the names :func:`apply_command` checks before a
command runs (``drill`` takes more: its kind's, which
:func:`~scheduler.limits.bounds.drill_params` checks)."""


def apply_command(engine, command: str, /, **params) -> dict:
    """Run ``command`` with ``params`` on ``engine``; its JSON-safe result.

    An unknown command, a parameter it does not take and one it needs but lacks are refused
    with one ``ValueError`` line before anything changes; each command then checks its
    values (:mod:`scheduler.limits.checks`).  Any other exception is a bug, and propagates.
    """
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}; known: {', '.join(COMMANDS)}")
    required, allowed, more = PARAMETERS[command]
    checks.keys(command, params, allowed, required=required, more=more)
    return COMMANDS[command](engine, **params)
