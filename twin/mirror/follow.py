"""What the mirror read (Slurm, Prometheus) in the engine's ids: the adapter's mirror half.

:class:`HostIndex` maps the inventory's hostnames to engine node ids (their position in id
order, as :func:`twin.inventory.adapter.cluster_plan_read` numbers them) and GPU ids.
:func:`observation` turns a :class:`~twin.mirror.slurm_source.SlurmView` and a
:class:`~twin.mirror.prom_source.PromView` into a core
:class:`~scheduler.control.mirror.Observation`, and lists what it could not map (hostnames the
inventory lacks, jobs on such nodes, jobs without GPUs): those are reported on the pages,
never dropped in silence.

Slurm's words, as the twin reads them:

* a node is *down* when its state has ``down``, ``fail``, ``not_responding``, ``unknown``,
  ``future``, ``inval`` or ``reboot_issued``; *drained* when it has ``drain``, ``drained``,
  ``draining``, ``failing`` (expected to fail, its jobs still run) or ``maint`` (in a
  maintenance reservation). A node ``powered_down`` (power saving) is up: Slurm starts it for
  the next job. ``mixed``, ``allocated``, ``completing``, ``reserved`` and ``idle`` are up;
* a job is *running* when Slurm says ``RUNNING``, ``COMPLETING``, ``CONFIGURING``,
  ``RESIZING``, ``SIGNALING``, ``STAGE_OUT``, ``SUSPENDED`` or ``STOPPED`` (it holds its
  GPUs; a suspended one is shown as such), *pending* when ``PENDING``, ``REQUEUED`` (and the
  requeue holds) or ``SPECIAL_EXIT``, else it has *ended* with that state (``PREEMPTED`` too:
  a preempted job Slurm requeues is listed again as pending);
* an array's tasks are jobs of their own (``123_4``); its pending remainder (``123_[5-9]``) is
  one pending job per task (up to :data:`ARRAY_TASKS_MAX`), so that each keeps its wait when it
  starts; a heterogeneous job's components are jobs of their own (``123+1``);
* a job holds what Slurm allocated: its GPUs, cores and memory per node where Slurm says
  (``gpus_by_node``, ``cpus_by_node``, ``mem_mb_by_node``; nodes where it holds no GPU are
  left out), else its per-node count, else an equal share (a job whose GPUs do not divide over
  its nodes is reported, not guessed); cores and memory unknown are booked as none (Slurm
  already decided that the job fits);
* a job on GPU slices (MIG profiles, shards) is reported, not followed: the twin models whole
  GPUs;
* a job may declare its model in its comment (``sbatch --comment twin:params_b=70,tp=8,pp=4``):
  the physics then prices its communication over the fabric; without one it is priced as
  compute only (the twin cannot see a real job's model).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from scheduler.control.mirror import Observation, ObservedJob
from twin.inventory.models import Cluster, Node

DOWN = frozenset({"down", "fail", "not_responding", "unknown", "future", "inval",
                  "invalid", "invalid_reg", "reboot_issued"})
DRAINED = frozenset({"drain", "drained", "draining", "failing", "maint"})
RUNNING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "RESIZING", "SIGNALING",
                     "STAGE_OUT", "SUSPENDED", "STOPPED"})
PENDING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
                     "SPECIAL_EXIT"})
ARRAY_TASKS_MAX = 1000
"""Pending tasks of one array's remainder followed one by one; more are counted, not shown."""
_ARRAY_REST = re.compile(r"^(\d+)_\[([^\]]*)\]$")
_SLICE = re.compile(r"^\d+g\.\d+gb$|shard", re.IGNORECASE)
"""A GRES type that is a slice of a GPU (a MIG profile such as ``1g.10gb``, or a shard)."""
TELEMETRY = {"DCGM_FI_DEV_GPU_UTIL": "util", "DCGM_FI_DEV_POWER_USAGE": "power_w",
             "DCGM_FI_DEV_GPU_TEMP": "temp_c", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active",
             "DCGM_FI_DEV_XID_ERRORS": "xid"}
"""DCGM exporter metric -> the mirror's telemetry column."""
SHOWN = 10  # names listed per problem (the count is always whole)


class HostIndex:
    """Hostnames of a cluster's nodes in engine order, with each node's first GPU id."""

    def __init__(self, hostnames: list[str], gpus: list[int]):
        self.hostnames = list(hostnames)
        self.node_of = {h: i for i, h in enumerate(self.hostnames)}
        counts = np.asarray(gpus, dtype=np.int64)
        self.node_gpus = counts
        self.first_gpu = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.n_gpus = int(counts.sum())

    @classmethod
    def of(cls, cluster: Cluster) -> HostIndex:
        rows = list(Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
                    .values_list("hostname", "accelerator_count"))
        return cls([h for h, _ in rows], [c for _, c in rows])


def _problem(problems: dict, kind: str, name: str) -> None:
    entry = problems.setdefault(kind, {"count": 0, "names": []})
    entry["count"] += 1
    if len(entry["names"]) < SHOWN:
        entry["names"].append(name)


def _nodes(view, hosts: HostIndex, problems: dict) -> tuple[dict, dict]:
    statuses, reasons = {}, {}
    for name, node in view.nodes.items():
        i = hosts.node_of.get(name)
        if i is None:
            _problem(problems, "unknown_nodes", name)
            continue
        state = {s.lower() for s in node.state}
        statuses[i] = {"up": not (state & DOWN), "drained": bool(state & DRAINED)}
        if node.reason:
            reasons[i] = node.reason
        elif "maint" in state:
            reasons[i] = "maintenance reservation"
    return statuses, reasons

DECLARED = {"params_b": float, "tp": int, "pp": int}
"""What a job may declare in its Slurm comment: ``twin:params_b=70,tp=8,pp=4``."""


def declared(comment: str) -> dict:
    """The model a job declared in its comment (``{}`` when none); ``ValueError`` for a bad
    declaration (an unknown key, a value that is not a positive number)."""
    text = next((part[5:] for part in comment.split() if part.startswith("twin:")), None)
    if text is None:
        return {}
    out = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if key not in DECLARED:
            raise ValueError(f"unknown key {key!r} (known: {', '.join(DECLARED)})")
        try:
            number = DECLARED[key](value)
        except ValueError:
            raise ValueError(f"{key}={value!r} is not a number") from None
        if not 0 < number < 1e6:
            raise ValueError(f"{key}={value} is out of range")
        out[key] = number
    return out


def _state(slurm_state: str) -> str:
    if slurm_state in RUNNING:
        return "running"
    return "pending" if slurm_state in PENDING else "ended"


def _allocation(job, hosts: HostIndex, key: str, problems: dict):
    """(node ids, GPUs per node, cores per GPU, GB per GPU) a running job holds; None (and
    the problem noted) when it cannot be mapped."""
    names = list(job.nodes)
    by_node = getattr(job, "gpus_by_node", None)
    cpus = getattr(job, "cpus_by_node", None)
    mem = getattr(job, "mem_mb_by_node", None)
    if by_node is not None and len(by_node) == len(names):
        keep = [k for k, g in enumerate(by_node) if g and g > 0]  # no GPU there: not ours
        names = [names[k] for k in keep]
        per_node = tuple(int(by_node[k]) for k in keep)
        cpus = [cpus[k] for k in keep] if cpus is not None and len(cpus) == len(by_node) else None
        mem = [mem[k] for k in keep] if mem is not None and len(mem) == len(by_node) else None
    else:
        per_node = None
        cpus = cpus if cpus is not None and len(cpus) == len(names) else None
        mem = mem if mem is not None and len(mem) == len(names) else None
    ids = [hosts.node_of.get(h) for h in names]
    if not ids or any(i is None for i in ids):
        _problem(problems, "jobs_on_unknown_nodes", key)
        return None
    if per_node is None:
        if job.gpus_per_node:
            per_node = (int(job.gpus_per_node),) * len(ids)
        elif job.gpus % len(ids) == 0:
            per_node = (job.gpus // len(ids),) * len(ids)
        if per_node is None or sum(per_node) != job.gpus:
            _problem(problems, "jobs_with_uneven_gpus", key)
            return None
    cores = max((c / g for c, g in zip(cpus, per_node, strict=True)), default=None) \
        if cpus is not None else None
    ram = max((m / 1024.0 / g for m, g in zip(mem, per_node, strict=True)), default=None) \
        if mem is not None else None
    return tuple(ids), per_node, cores, ram


def _on_slices(job, view) -> bool:
    """Whether ``job`` asked for, or runs on, slices of GPUs (MIG, shards)."""
    if _SLICE.search(getattr(job, "gres_type", "") or ""):
        return True
    nodes = getattr(view, "nodes", None) or {}
    return any(getattr(nodes.get(h), "mig", False) for h in job.nodes)


def _job(job, hosts: HostIndex, read_at: float, problems: dict,
         view=None) -> ObservedJob | None:
    key = str(job.job_id)
    state = _state(job.state)
    if _on_slices(job, view):
        _problem(problems, "jobs_on_gpu_slices", key)
        return None
    nodes: tuple[int, ...] = ()
    per_node = cores = ram = None
    gpus = int(job.gpus)
    if state == "running":
        got = _allocation(job, hosts, key, problems)
        if got is None:
            return None
        nodes, per_node, cores, ram = got
        gpus = sum(per_node)
    if gpus <= 0:
        _problem(problems, "jobs_without_gpus", key)
        return None
    try:
        model = declared(getattr(job, "comment", "") or "")
    except ValueError:
        _problem(problems, "jobs_with_a_bad_model_declaration", key)
        model = {}
    elapsed = max(0.0, read_at - job.start_time) if job.start_time else 0.0
    reason = job.reason if state == "pending" else (job.state if state == "ended" else "")
    user, account = getattr(job, "user", "") or "", getattr(job, "account", "") or ""
    return ObservedJob(key=key, state=state, gpus=gpus, name=job.name,
                       tenant=account or user or "mirror", nodes=nodes,
                       gpus_per_node=per_node, reason=reason, elapsed_s=elapsed,
                       time_limit_s=job.time_limit_s, partition=job.partition,
                       cpus_per_gpu=cores, ram_gb_per_gpu=ram, user=user, account=account,
                       slurm_state=job.state, **model)


def _array_tasks(text: str) -> list[int] | None:
    """Task ids of an array expression (``5-9``, ``1,3,7-9``, ``0-99:2``, ``%4`` throttle
    ignored); None when it is not one."""
    out: list[int] = []
    for part in filter(None, text.split("%")[0].split(",")):
        span, _, step = part.partition(":")
        lo, _, hi = span.partition("-")
        try:
            a, b, k = int(lo), int(hi or lo), int(step or 1)
        except ValueError:
            return None
        if k <= 0 or b < a:
            return None
        out.extend(range(a, b + 1, k))
        if len(out) > ARRAY_TASKS_MAX:
            break
    return out


def _jobs(view, hosts: HostIndex, problems: dict) -> list[ObservedJob]:
    """Every job ``view`` lists that maps (each key once); an array's pending remainder as
    one pending job per task."""
    out: list[ObservedJob] = []
    seen: set[str] = set()
    for raw in view.jobs:
        one = _job(raw, hosts, view.read_at, problems, view)
        if one is None:
            continue
        rest = _ARRAY_REST.match(one.key) if one.state == "pending" else None
        tasks = _array_tasks(rest.group(2)) if rest else None
        if tasks:
            if len(tasks) > ARRAY_TASKS_MAX:
                _problem(problems, "array_tasks_not_followed", one.key)
                tasks = tasks[:ARRAY_TASKS_MAX]
            many = [replace(one, key=f"{rest.group(1)}_{t}") for t in tasks]
        else:
            many = [one]
        for j in many:
            if j.key not in seen:
                seen.add(j.key)
                out.append(j)
    return out


def _telemetry(prom, hosts: HostIndex, problems: dict) -> dict[str, np.ndarray]:
    """Per-GPU columns (NaN where no sample) from a columnar Prometheus view."""
    host_ids = np.array([hosts.node_of.get(h, -1) for h in prom.hosts], dtype=np.int64)
    for h, i in zip(prom.hosts, host_ids.tolist(), strict=True):
        if i < 0:
            _problem(problems, "unknown_hosts_in_telemetry", h)
    node = host_ids[prom.host_index] if len(prom.host_index) else np.zeros(0, np.int64)
    gpu = np.asarray(prom.gpu, dtype=np.int64)
    ok = node >= 0
    ok[ok] &= (gpu[ok] >= 0) & (gpu[ok] < hosts.node_gpus[node[ok]])
    bad_index = int((host_ids[prom.host_index] >= 0).sum() - ok.sum()) if node.size else 0
    if bad_index:
        problems["gpu_index_out_of_range"] = {"count": bad_index, "names": []}
    gid = hosts.first_gpu[node[ok]] + gpu[ok]
    out = {}
    for metric, column in TELEMETRY.items():
        values = prom.values.get(metric)
        if values is None:
            continue
        col = np.full(hosts.n_gpus, np.nan)
        col[gid] = np.asarray(values, dtype=float)[ok]
        out[column] = col
    return out


def _reservations(view, hosts: HostIndex, problems: dict) -> list[dict] | None:
    """The scheduler's reservations in engine node ids (``None`` when the view has none to
    give: an older reader); hosts the inventory lacks are counted, the rest kept."""
    found = getattr(view, "reservations", None)
    if found is None:
        return None
    out = []
    for r in found:
        ids = [hosts.node_of.get(h) for h in r.nodes]
        if any(i is None for i in ids):
            _problem(problems, "reservations_on_unknown_nodes", r.name)
        out.append({"name": r.name, "nodes": [i for i in ids if i is not None],
                    "start": r.start, "end": r.end, "flags": list(r.flags),
                    "maintenance": bool(r.maintenance)})
    return out


def observation(slurm, prom, hosts: HostIndex) -> tuple[Observation, dict]:
    """The core's observation of what ``slurm`` and ``prom`` (either may be ``None``) read,
    and the problems met per source: ``{source: {kind: {"count": n, "names": [first few]}}}``."""
    problems: dict = {"slurm": {}, "prometheus": {}}
    obs = Observation(complete=slurm is not None)
    if slurm is not None:
        obs.nodes, obs.reasons = _nodes(slurm, hosts, problems["slurm"])
        obs.jobs = _jobs(slurm, hosts, problems["slurm"])
        # listed but not followable (unknown nodes, GPU slices...): still there, not ended
        obs.unmapped = {str(j.job_id) for j in slurm.jobs} - {j.key for j in obs.jobs}
        obs.reservations = _reservations(slurm, hosts, problems["slurm"])
    if prom is not None:
        obs.telemetry = _telemetry(prom, hosts, problems["prometheus"])
    return obs, problems
