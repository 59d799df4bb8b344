"""What the mirror read (Slurm, Prometheus) in the engine's ids: the adapter's mirror half.

:class:`HostIndex` maps the inventory's hostnames to engine node ids (their position in id
order, as :func:`twin.inventory.adapter.cluster_plan_read` numbers them) and GPU ids.
:func:`observation` turns a :class:`~twin.mirror.slurm_source.SlurmView` and a
:class:`~twin.mirror.prom_source.PromView` into a core
:class:`~scheduler.control.mirror.Observation`, and lists what it could not map (hostnames the
inventory lacks, jobs on such nodes, jobs without GPUs): those are reported on the pages,
never dropped in silence.

Slurm's words, as the twin reads them:

* a node is *down* when its state has ``down``, ``fail``, ``not_responding``, ``power_down``,
  ``powered_down`` or ``unknown``; *drained* when it has ``drain``, ``drained``, ``draining``
  or ``maint`` (a draining node's jobs keep running, as in Slurm);
* a job is *running* when Slurm says ``RUNNING``, ``COMPLETING``, ``CONFIGURING``,
  ``SUSPENDED`` or ``STOPPED`` (it holds its GPUs), *pending* when ``PENDING`` or
  ``REQUEUED``, else it has *ended* with that state;
* a job's GPUs are Slurm's count; each node gets its per-node count when Slurm gives one, else
  an equal share (a job whose GPUs do not divide over its nodes is reported, not guessed);
* a job may declare its model in its comment (``sbatch --comment twin:params_b=70,tp=8,pp=4``):
  the physics then prices its communication over the fabric; without one it is priced as
  compute only (the twin cannot see a real job's model).
"""

from __future__ import annotations

import numpy as np

from scheduler.control.mirror import Observation, ObservedJob
from twin.inventory.models import Cluster, Node

DOWN = frozenset({"down", "fail", "failing", "not_responding", "power_down", "powered_down",
                  "unknown"})
DRAINED = frozenset({"drain", "drained", "draining", "maint"})
RUNNING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED"})
PENDING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
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


def _job(job, hosts: HostIndex, read_at: float, problems: dict) -> ObservedJob | None:
    key = str(job.job_id)
    if job.state in RUNNING:
        state = "running"
    elif job.state in PENDING:
        state = "pending"
    else:
        state = "ended"
    if job.gpus <= 0:
        _problem(problems, "jobs_without_gpus", key)
        return None
    nodes: tuple[int, ...] = ()
    per_node = None
    if state == "running":
        ids = [hosts.node_of.get(h) for h in job.nodes]
        if not ids or any(i is None for i in ids):
            _problem(problems, "jobs_on_unknown_nodes", key)
            return None
        nodes = tuple(ids)
        if job.gpus_per_node:
            per_node = (int(job.gpus_per_node),) * len(nodes)
        elif job.gpus % len(nodes) == 0:
            per_node = (job.gpus // len(nodes),) * len(nodes)
        else:
            _problem(problems, "jobs_with_uneven_gpus", key)
            return None
        if sum(per_node) != job.gpus:
            _problem(problems, "jobs_with_uneven_gpus", key)
            return None
    try:
        model = declared(getattr(job, "comment", "") or "")
    except ValueError:
        _problem(problems, "jobs_with_a_bad_model_declaration", key)
        model = {}
    elapsed = max(0.0, read_at - job.start_time) if job.start_time else 0.0
    reason = job.reason if state == "pending" else (job.state if state == "ended" else "")
    return ObservedJob(key=key, state=state, gpus=int(job.gpus), name=job.name,
                       tenant=job.account or job.user or "mirror", nodes=nodes,
                       gpus_per_node=per_node, reason=reason, elapsed_s=elapsed,
                       time_limit_s=job.time_limit_s, partition=job.partition, **model)


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


def observation(slurm, prom, hosts: HostIndex) -> tuple[Observation, dict]:
    """The core's observation of what ``slurm`` and ``prom`` (either may be ``None``) read,
    and the problems met per source: ``{source: {kind: {"count": n, "names": [first few]}}}``."""
    problems: dict = {"slurm": {}, "prometheus": {}}
    obs = Observation(complete=slurm is not None)
    if slurm is not None:
        obs.nodes, obs.reasons = _nodes(slurm, hosts, problems["slurm"])
        jobs = [_job(j, hosts, slurm.read_at, problems["slurm"]) for j in slurm.jobs]
        seen = set()
        for j in jobs:
            if j is not None and j.key not in seen:
                seen.add(j.key)
                obs.jobs.append(j)
    if prom is not None:
        obs.telemetry = _telemetry(prom, hosts, problems["prometheus"])
    return obs, problems
