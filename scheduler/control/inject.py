"""State set from outside: a real cluster's node, GPU, switch and link status and its jobs.

:func:`inject` is how a mirror (Slurm, DCGM/Prometheus) writes what it observed into a running
engine.  Everything is checked first; a bad id, status or placement, or a job number outside
its bound (:mod:`scheduler.limits.bounds`), raises one ``ValueError`` naming it, and nothing
changes.  Statuses are *set*, not counted: injecting ``up: False`` for a
node that is already down does nothing more.

The twin's state is per node: a GPU marked down takes its node out of service (a gang needs its
nodes whole), and the node comes back when all its GPUs are up again.
"""

from __future__ import annotations

import numpy as np

from scheduler.limits.bounds import DONE_FRACTION, job_check
from scheduler.limits.checks import unit_id
from scheduler.model.job_run import REJECTED
from scheduler.model.state import Placement
from scheduler.reliability.failures import FailureMode
from scheduler.workload.jobs import TrainingJob

OBSERVED_DOWN = FailureMode("observed_down", "host", 0.0, 0.0, 0.0, source="mirror")
STATUS_KEYS = {"nodes": ("up", "drained"), "gpus": ("up",), "switches": ("up",),
               "links": ("up",)}
JOB_STATES = ("running", "queued")


def _statuses(kind: str, given, count: int) -> dict[int, dict]:
    """``{id: {"up": bool, ...}}`` from a mapping or a list of dicts with ``id``."""
    if given is None:
        return {}
    if isinstance(given, dict):
        items = list(given.items())
    elif isinstance(given, list | tuple):
        items = []
        for row in given:
            if not isinstance(row, dict) or "id" not in row:
                raise ValueError(f"each of {kind} must be a mapping with an 'id', not {row!r}")
            items.append((row["id"], {k: v for k, v in row.items() if k != "id"}))
    else:
        raise ValueError(f"{kind} must be a mapping of id to status or a list, not {given!r}")
    out: dict[int, dict] = {}
    what = kind[:-1] if kind != "switches" else "switch"
    for key, status in items:
        i = unit_id(what, key, count)
        if not isinstance(status, dict) or not status:
            raise ValueError(f"{what} {i}: status must be a non-empty mapping, not {status!r}")
        for k, v in status.items():
            if k not in STATUS_KEYS[kind]:
                raise ValueError(f"{what} {i}: unknown status {k!r}; known: "
                                 f"{', '.join(STATUS_KEYS[kind])}")
            if not isinstance(v, bool):
                raise ValueError(f"{what} {i}: {k} must be true or false, not {v!r}")
        out[i] = status
    return out


def placement_check(engine, row: dict, free: np.ndarray,
                    host: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> Placement:
    """The placement of a running ``row`` after checking it against ``free`` GPUs per node
    and, given ``host`` (free cores, GB and Gb/s of NIC per node), the job's host resources
    (both taken from); one ``ValueError`` naming what is wrong."""
    job = row["job"]
    nodes = row.get("nodes")
    if not isinstance(nodes, list | tuple) or not nodes:
        raise ValueError(f"running job {job.name!r} needs a non-empty list of nodes")
    plan, s = engine.plan, engine.state
    ids = np.array([unit_id("node", n, plan.n_nodes) for n in nodes], dtype=np.int64)
    if np.unique(ids).size != ids.size:
        raise ValueError(f"running job {job.name!r} lists a node twice")
    counts = row.get("gpus_per_node")
    if counts is None:
        counts = s.node_gpus[ids].copy()
    else:
        if (not isinstance(counts, list | tuple) or len(counts) != ids.size
                or any(isinstance(c, bool) or not isinstance(c, int) or c <= 0 for c in counts)):
            raise ValueError(f"running job {job.name!r}: gpus_per_node must be one positive "
                             "integer per node")
        counts = np.array(counts, dtype=np.int64)
    if int(counts.sum()) != job.gpus:
        raise ValueError(f"running job {job.name!r} has {job.gpus} GPUs but its nodes hold "
                         f"{int(counts.sum())}")
    models = np.unique(s.node_model[ids])
    if models.size != 1:
        raise ValueError(f"running job {job.name!r} spans accelerator models")
    model = int(models[0])
    if not job.requirement.accepts(plan.models[model]):
        raise ValueError(f"running job {job.name!r} cannot run on {plan.models[model].name}")
    short = ids[free[ids] < counts]
    if short.size:
        raise ValueError(f"running job {job.name!r}: node {int(short[0])} has "
                         f"{int(free[short[0]])} free GPU(s)")
    if host is not None:
        needs = [(what, have, need) for what, have, need in zip(
            ("cores", "GB of RAM", "Gb/s of NIC"), host,
            (job.cpu_per_gpu, job.ram_gb_per_gpu, job.nic_gbps_per_gpu), strict=True) if need]
        for what, have, need in needs:
            lack = ids[have[ids] + 1e-9 < counts * need]
            if lack.size:
                raise ValueError(f"running job {job.name!r}: node {int(lack[0])} has "
                                 f"{float(have[lack[0]]):g} free {what}, the job needs "
                                 f"{need:g} per GPU")
        for _, have, need in needs:
            have[ids] -= counts * need
    free[ids] -= counts
    return Placement(ids, counts, model)


def _jobs(engine, given) -> list[tuple[dict, Placement | None]]:
    if given is None:
        return []
    if not isinstance(given, list | tuple):
        raise ValueError(f"jobs must be a list, not {given!r}")
    s = engine.state
    free = s.node_free.copy()
    host = (s.node_free_cpu.copy(), s.node_free_ram.copy(), s.node_free_nic.copy())
    names = {r.spec.name for r in engine.runs}
    out = []
    for row in given:
        if not isinstance(row, dict) or not isinstance(row.get("job"), TrainingJob):
            raise ValueError(f"each job must be a mapping with a TrainingJob under 'job', "
                             f"not {row!r}")
        job = row["job"]
        job_check(job)
        if job.name in names:
            raise ValueError(f"job {job.name!r} is already in the twin")
        names.add(job.name)
        state = row.get("state", "queued")
        if state not in JOB_STATES:
            raise ValueError(f"job {job.name!r}: state must be one of {JOB_STATES}, "
                             f"not {state!r}")
        try:
            done = DONE_FRACTION.check("done_fraction", row.get("done_fraction", 0.0))
        except ValueError as exc:
            raise ValueError(f"job {job.name!r}: {exc}") from None
        if state == "queued" and engine.jobs.admission.admit(-1, job).state == REJECTED:
            raise ValueError(f"job {job.name!r}: no accelerator of this cluster can hold "
                             f"{job.gpus} GPUs of {job.requirement.describe()}")
        out.append(({**row, "done_fraction": done},
                    placement_check(engine, row, free, host) if state == "running" else None))
    return out


def inject(engine, *, nodes=None, gpus=None, switches=None, links=None, jobs=None) -> dict:
    """Set statuses and add jobs observed outside the twin; all or nothing.

    Parameters
    ----------
    nodes : mapping or list, optional
        ``{node_id: {"up": bool, "drained": bool}}`` (or ``[{"id": ..., ...}]``).
    gpus : mapping or list, optional
        ``{gpu_id: {"up": bool}}``.
    switches, links : mapping or list, optional
        ``{id: {"up": bool}}`` over the fabric's switches and switch-to-switch links.
    jobs : list, optional
        ``{"job": TrainingJob, "state": "running" | "queued", "nodes": [ids],
        "gpus_per_node": [counts] (default: every GPU of each node),
        "done_fraction": float}``.

    Returns
    -------
    dict
        What changed: node, switch and link ids per status, and the jobs added.
    """
    plan, s, rel = engine.plan, engine.state, engine.reliability
    f = plan.fabric
    node_st = _statuses("nodes", nodes, plan.n_nodes)
    gpu_st = _statuses("gpus", gpus, s.n_gpus)
    sw_st = _statuses("switches", switches, f.n_switches())
    link_st = _statuses("links", links, int(f.link_a.size))
    job_rows = _jobs(engine, jobs)

    changed: dict = {"nodes_down": [], "nodes_up": [], "drained": [], "undrained": [],
                     "switches": {}, "links": {}, "jobs": []}
    for gid, st in gpu_st.items():
        s.set_gpu_up([gid], st["up"])
    want_up = {n: st["up"] for n, st in node_st.items() if "up" in st}
    touched = np.unique(s.gpu_node[list(gpu_st)]).tolist() if gpu_st else []
    for n in touched:
        first = int(s.node_first_gpu[n])
        healthy = bool(s.gpu_up[first:first + int(s.node_gpus[n])].all())
        want_up[n] = want_up.get(n, healthy) and healthy
    for sw, st in sw_st.items():
        if f.switch_tier[sw] == 0:
            for n in np.unique(s.gpu_node[f.endpoint_leaf[:s.n_gpus] == sw]).tolist():
                want_up[n] = want_up.get(n, True) and st["up"]
        else:
            rel.set_switch(sw, st["up"])
        changed["switches"][sw] = st["up"]
    for link, st in link_st.items():
        rel.set_link(link, st["up"])
        changed["links"][link] = st["up"]
    for n, up in sorted(want_up.items()):
        if up and not s.node_up[n]:
            rel.node_back(n, all_causes=True)
            changed["nodes_up"].append(n)
        elif not up and s.node_up[n]:
            rel.node_out(n, OBSERVED_DOWN)
            changed["nodes_down"].append(n)
    for n, st in node_st.items():
        if "drained" in st and bool(s.node_drained[n]) != st["drained"]:
            s.set_node_flags([n], drained=st["drained"])
            changed["drained" if st["drained"] else "undrained"].append(n)
    if sw_st or link_st:
        engine.jobs.rerate_all()
    for row, placement in job_rows:
        job = row["job"]
        if placement is None:
            run = engine.jobs.enqueue_now(job)
        else:
            run = engine.jobs.adopt(job, placement, done_fraction=row["done_fraction"])
        changed["jobs"].append({"name": job.name, "idx": run.idx, "state": run.state})
    if any(changed[k] for k in changed):
        engine.kernel.log("inject", "observed: " + ", ".join(
            f"{len(v)} {k.replace('_', ' ')}" for k, v in changed.items() if v))
    return changed
