"""Slurm's nodes, partitions and jobs, read from ``sinfo/squeue/sacct --json`` or slurmrestd.

Two generations of JSON are read (see ``tests/fixtures/slurm_json/README.md``):

* Slurm 22.05 (data_parser ``v0.0.38``, Debian bookworm): ``sinfo --json`` prints
  ``{"nodes": [...]}``, one entry per node, the state a lower-case string (``"mixed"``) with
  upper-case ``state_flags`` (``["DRAIN"]``); ``squeue --json`` prints ``job_state`` as a string,
  times as plain epoch seconds (0 = unset), ``exit_code`` as a raw wait status.
* Slurm 23.02 and later (``v0.0.39``+): states are lists (``["IDLE", "DRAIN"]``), numbers are
  ``{"set", "infinite", "number"}`` objects, ``exit_code`` is ``{"status", "return_code",
  "signal"}``; from 23.11 ``sinfo --json`` prints ``{"sinfo": [...]}``, entries that group
  nodes (``nodes.nodes``) by partition and state.
* From 23.02 (``v0.0.39``) an ``exit_code`` may also be a no-val raw wait status; 24.05+
  (``v0.0.41``+) moves ``job_resources.allocated_nodes`` to ``job_resources.nodes.allocation``
  (what each node holds: :mod:`twin.mirror.slurm_alloc`).

slurmrestd (``rest_url``) answers ``/slurm/<version>/nodes``, ``/jobs`` and ``/reservations``
in the shapes above and ``/slurmdb/<version>/jobs`` in ``sacct``'s; the version is the newest
of ``v0.0.38`` to ``v0.0.42`` that it offers (:mod:`twin.mirror.slurm_rest`).  Every answer is
capped (``max_bytes``); reservations (:mod:`twin.mirror.slurm_resv`) that cannot be read are
noted, not an error.  Without slurmdbd (Debian's test Slurm), sacct exits 1 with "Slurm
accounting storage is disabled": the view then says ``accounting=False`` and why, and finished
jobs are those squeue still lists (``MinJobAge``, 300 s by default).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from twin.inventory.hostlist import expand
from twin.mirror.errors import MAX_BYTES, SourceError, TooLarge, gc_paused, json_load
from twin.mirror.slurm_alloc import (
    GPU_GRES,
    TRES_SPEC,
    TRES_STR,
    gpu_type,
    sacct_allocation,
    squeue_allocation,
    tres_gpu_type,
    tres_gpus,
)
from twin.mirror.slurm_json import (
    _NO_VALUE,
    SOURCE,
    _csv,
    _epoch,
    _fail,
    _gpu_sum,
    _names,
    _node_states,
    _number,
    _refused,
    _Shape,
    _str,
    _top,
    _type_name,
)
from twin.mirror.slurm_rest import Asks, cli_asks, rest_asks
from twin.mirror.slurm_resv import SlurmReservation, read_reservations

ACCOUNTING_WINDOW_S = 3600.0

# a MIG profile as a GRES type (``1g.10gb``, or NVML's ``nvidia_a100_3g.20gb``), or shards
_MIG_TYPE = re.compile(r"\d+g\.\d+gb$", re.IGNORECASE)
_SHARD = re.compile(r"(?:^|,)shard[:(]")

# job_state_string(): a flag, when set, is shown instead of the base state
_JOB_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED",
              "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD",
              "SIGNALING")


_NOT_ENDED = frozenset({"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "RESIZING",
                        "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "STAGE_OUT", "SIGNALING",
                        "STOPPED"})


@dataclass(slots=True)
class SlurmNode:
    """One node as Slurm reports it.

    ``state``: lower-case base state and flags together (``idle``, ``allocated``, ``mixed``,
    ``down``, ``drain``, ``fail``, ``not_responding``, ``reserved``, ``maint``, ``completing``
    ...), plus ``draining`` (drain flag on a node still running jobs) or ``drained`` (drain
    flag on an idle or down node), as ``sinfo`` shows them.  ``reason``: why it is down or
    drained ("" when none).  ``gres``: the configured GRES string (``gpu:h100:8``); ``gpus``:
    the GPUs in it (MIG slices counted as Slurm counts them).  ``features``: configured
    features; ``partitions``: partitions it is in.  ``cpus``, ``real_memory_mb``: the node's
    configured CPUs and memory (MB), None when not said.  ``gres_types``: GPU GRES type ->
    count (``""`` for untyped ``gpu:8``); ``mig``: whether it has MIG-profile GPUs
    (``gpu:1g.10gb:7``) or shards.
    """

    name: str
    state: frozenset[str]
    reason: str
    gres: str
    gpus: int
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    cpus: int | None = None
    real_memory_mb: int | None = None
    gres_types: dict[str, int] = field(default_factory=dict)
    mig: bool = False


@dataclass(slots=True)
class SlurmJob:
    """One job (or array task) from ``squeue`` or accounting.

    ``job_id``: ``"123"``, ``"123_4"`` for an array task, ``"123_[5-9]"`` for an array's
    pending remainder, ``"123+1"`` for a heterogeneous component.  ``state``: the state Slurm
    shows (upper case: ``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ``NODE_FAIL``,
    ``CANCELLED``, ``TIMEOUT``, ``PREEMPTED``, ``OUT_OF_MEMORY``...; a set flag such as
    ``COMPLETING``, ``CONFIGURING`` or ``REQUEUED`` is shown instead of the base state, as
    ``squeue`` does).  ``reason``: Slurm's ``state_reason`` (``Resources``, ``Priority``,
    ``QOSMaxGRESPerUser``, ``ReqNodeNotAvail, ...``), "" for ``None``.  ``nodes``: expanded
    node names ("()" while pending).  ``gpus``: GPUs of the whole job, from, in order,
    ``tres_alloc_str`` (``gres/gpu=N``), ``gres_detail`` (per node), ``tres_per_node`` x nodes,
    ``tres_per_job``, ``tres_per_task`` x tasks, ``tres_req_str``; accounting: ``tres``.
    ``gpus_per_node``: when the request or allocation gives it per node, else None.  Times are
    epoch seconds, None when unset (0): for a running job ``end_time`` is the end Slurm
    expects (start + time limit; a year on when there is none), for a pending one
    ``start_time`` is its expected start when Slurm has one.  ``time_limit_s``: None when
    unlimited.  ``exit_code``: for an ended job the process's exit status, 128 + signal when
    killed by one; None while it has not ended.  ``cpus_by_node``, ``mem_mb_by_node``,
    ``gpus_by_node``: what Slurm allocated on each of ``nodes`` (same order; CPUs, MB, GPUs;
    see :mod:`twin.mirror.slurm_alloc`), None when not known (pending, or not said).
    ``gres_type``: the GPU GRES type asked or given ("" when untyped); ``array_job_id``,
    ``het_job_id``: the array's or heterogeneous job's id ("" when not one).
    """

    job_id: str
    name: str
    user: str
    account: str
    partition: str
    state: str
    reason: str
    nodes: tuple[str, ...]
    gpus: int
    gpus_per_node: int | None
    submit_time: float | None
    start_time: float | None
    end_time: float | None
    time_limit_s: float | None
    exit_code: int | None
    comment: str = ""  # the job's ``--comment`` (a job may declare its model to the twin)
    cpus_by_node: tuple[int, ...] | None = None
    mem_mb_by_node: tuple[int, ...] | None = None
    gpus_by_node: tuple[int, ...] | None = None
    gres_type: str = ""
    array_job_id: str = ""
    het_job_id: str = ""


@dataclass(slots=True)
class SlurmView:
    """What one poll of Slurm said.

    ``nodes``: by name; ``partitions``: in the order first seen on the nodes; ``jobs``:
    squeue's (running, pending, and finished within ``MinJobAge``), then accounting's finished
    jobs that squeue no longer lists.  ``accounting``: whether sacct / slurmdbd answered;
    ``accounting_note``: why not ("" when it did).  ``read_at``: ``clock()`` once every answer
    was in.  ``source``: ``"cli"`` or ``"rest"``.  ``reservations``: Slurm's reservations
    ([] when none or not read); ``reservations_note``: why they could not be read ("" when
    they were).  ``rest_version``: the slurmrestd data parser read (``v0.0.42``), "" for
    the CLI.
    """

    nodes: dict[str, SlurmNode]
    partitions: tuple[str, ...]
    jobs: list[SlurmJob]
    accounting: bool
    read_at: float
    source: str
    accounting_note: str = ""
    reservations: list[SlurmReservation] = field(default_factory=list)
    reservations_note: str = ""
    rest_version: str = ""


@gc_paused
def parse_sinfo(doc: dict, *, origin: str = "`sinfo --json`"
                ) -> tuple[dict[str, SlurmNode], tuple[str, ...]]:
    """Nodes by name and partitions, from ``sinfo --json`` or slurmrestd ``/nodes``.

    Reads 22.05's ``{"nodes": [...]}`` (one entry per node) and 23.11+'s ``{"sinfo": [...]}``
    (entries grouping ``nodes.nodes`` by partition; a node's partitions are merged).
    """
    key = "sinfo" if isinstance(doc, dict) and "sinfo" in doc else "nodes"
    nodes: dict[str, SlurmNode] = {}
    partitions: dict[str, None] = {}
    for i, raw in enumerate(_top(doc, key, origin)):
        try:
            names, node = _node_entry(raw, f"{key}[{i}]", grouped=key == "sinfo")
        except _Shape as exc:
            raise _fail(origin, exc) from None
        partitions.update(dict.fromkeys(node.partitions))
        for name in names:
            seen = nodes.get(name)
            if seen is None and len(names) == 1:
                nodes[name] = node
                continue
            parts = tuple(dict.fromkeys((seen.partitions if seen else ()) + node.partitions))
            # a group of unlike nodes gives no per-node size: keep one another entry gave
            cpus = node.cpus if node.cpus is not None or seen is None else seen.cpus
            memory = node.real_memory_mb if node.real_memory_mb is not None or seen is None \
                else seen.real_memory_mb
            nodes[name] = replace(node, name=name, partitions=parts, cpus=cpus,
                                  real_memory_mb=memory)
    return nodes, tuple(partitions)


def _node_entry(raw, path: str, *, grouped: bool) -> tuple[list[str], SlurmNode]:
    """(node names, the node of the first) of one ``nodes[]`` or ``sinfo[]`` entry."""
    if not isinstance(raw, dict):
        raise _Shape(path, f"expected an object, got {_type_name(raw)}")
    if grouped:
        names = _names(raw.get("nodes") or {}, "nodes", f"{path}.nodes")
        states = _names(raw.get("node") or {}, "state", f"{path}.node")
        part = _str(raw.get("partition") or {}, "name", f"{path}.partition")
        parts: tuple[str, ...] = (part,) if part else ()
        gres = raw.get("gres")
        gres = gres.get("total") if isinstance(gres, dict) else gres
        cpus = _same(raw.get("cpus"), f"{path}.cpus")
        memory = _same(raw.get("memory"), f"{path}.memory")
    else:
        names = [_str(raw, "name", path, None)]
        states = _names(raw, "state", path) + _names(raw, "state_flags", path)
        parts, gres = _csv(raw.get("partitions"), f"{path}.partitions"), raw.get("gres")
        cpus, memory = _number(raw, "cpus", path), _number(raw, "real_memory", path)
    if not names:
        raise _Shape(f"{path}.nodes.nodes", "no node names")
    if not states:
        raise _Shape(f"{path}.{'node.' if grouped else ''}state", "empty")
    reason = raw.get("reason")
    if isinstance(reason, dict):                    # 23.11+: {"description", "time", "user"}
        reason = reason.get("description")
    gres = _str({"gres": gres}, "gres", path)
    types: dict[str, int] = {}
    for kind, count in GPU_GRES.findall(gres):
        types[kind] = types.get(kind, 0) + int(count)
    return names, SlurmNode(name=names[0], state=_node_states(states),
                            reason=_str({"reason": reason}, "reason", path), gres=gres,
                            gpus=_gpu_sum(GPU_GRES, gres) or 0,
                            features=_csv(raw.get("features"), f"{path}.features"),
                            partitions=parts,
                            cpus=None if cpus is None else int(cpus),
                            real_memory_mb=None if memory is None else int(memory),
                            gres_types=types,
                            mig=bool(_SHARD.search(gres)) or any(
                                _MIG_TYPE.search(kind) for kind in types))


def _same(group, path: str) -> float | None:
    """A group's per-node figure (sinfo 23.11+ ``{"minimum", "maximum"}``), None when its
    nodes differ or it is not given."""
    if not isinstance(group, dict):
        return None
    low, high = _number(group, "minimum", path), _number(group, "maximum", path)
    return high if low == high else None


def _job_state(names: list[str], path: str) -> str:
    if not names:
        raise _Shape(f"{path}.job_state", "empty")
    if len(names) == 1:
        return names[0].upper()
    upper = [n.upper() for n in names]
    return next((flag for flag in _JOB_FLAGS if flag in upper), upper[0])


def _exit_code(value, path: str) -> int | None:
    """An exit status: 22.05 squeue's raw wait status, or ``{"return_code", "signal"}``."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value in _NO_VALUE:
            return None
        return 128 + (value & 0x7F) if value & 0x7F else (value >> 8) & 0xFF
    if isinstance(value, dict) and "number" in value:   # v0.0.39: a no-val raw wait status
        status = _number({"exit_code": value}, "exit_code", path)
        return None if status is None else _exit_code(int(status), path)
    if isinstance(value, dict):
        signal = value.get("signal") or {}
        sig = _number(signal, "id", f"{path}.signal") if "id" in signal else \
            _number(signal, "signal_id", f"{path}.signal")
        if sig:
            return 128 + int(sig)
        code = _number(value, "return_code", path)
        return None if code is None else int(code)
    raise _Shape(path, f"expected a number or an object, got {_type_name(value)}")


def _job_gpus(raw: dict, n_nodes: int, path: str) -> tuple[int, int | None]:
    """(GPUs of the job, GPUs per node or None) from squeue's GRES and TRES fields."""
    per_node_spec = _gpu_sum(TRES_SPEC, _str(raw, "tres_per_node", path))
    detail = raw.get("gres_detail") or []
    if not isinstance(detail, list) or not all(isinstance(d, str) for d in detail):
        raise _Shape(f"{path}.gres_detail", "expected a list of strings")
    per_node_used = [_gpu_sum(GPU_GRES, d) or 0 for d in detail]
    per_node = per_node_spec
    if per_node is None and per_node_used and len(set(per_node_used)) == 1:
        per_node = per_node_used[0]
    total = _gpu_sum(TRES_STR, _str(raw, "tres_alloc_str", path))
    if total is None and per_node_used:
        total = sum(per_node_used)
    if total is None and per_node_spec is not None:
        total = per_node_spec * max(n_nodes, 1)
    if total is None:
        total = _gpu_sum(TRES_SPEC, _str(raw, "tres_per_job", path))
    if total is None:
        per_task = _gpu_sum(TRES_SPEC, _str(raw, "tres_per_task", path))
        tasks = _number(raw, "tasks", path) or _number(raw, "num_tasks", path) or 1
        total = None if per_task is None else per_task * int(tasks)
    if total is None:
        total = _gpu_sum(TRES_STR, _str(raw, "tres_req_str", path))
    return total or 0, per_node


def _squeue_job(raw, path: str) -> SlurmJob:
    if not isinstance(raw, dict):
        raise _Shape(path, f"expected an object, got {_type_name(raw)}")
    job_id = _number(raw, "job_id", path)
    if job_id is None:
        raise _Shape(f"{path}.job_id", "missing")
    array_id = _number(raw, "array_job_id", path)
    task = _number(raw, "array_task_id", path)
    het_id = _number(raw, "het_job_id", path)
    if array_id:
        tasks = _str(raw, "array_task_string", path)
        name = f"{int(array_id)}_{int(task)}" if task is not None else \
            f"{int(array_id)}_[{tasks}]" if tasks else str(int(job_id))
    elif het_id:
        name = f"{int(het_id)}+{int(_number(raw, 'het_job_offset', path) or 0)}"
    else:
        name = str(int(job_id))
    state = _job_state(_names(raw, "job_state", path), path)
    reason = _str(raw, "state_reason", path)
    nodes = tuple(expand(_str(raw, "nodes", path)))
    n_nodes = len(nodes) or int(_number(raw, "node_count", path) or 0)
    gpus, per_node = _job_gpus(raw, n_nodes, path)
    cpus_by_node, mem_by_node, gpus_by_node = squeue_allocation(raw, nodes, path)
    limit = _number(raw, "time_limit", path)
    requests = [_str(raw, key, path) for key in (
        "tres_per_node", "tres_per_job", "tres_per_task", "tres_alloc_str", "tres_req_str")]
    return SlurmJob(
        job_id=name, name=_str(raw, "name", path), user=_str(raw, "user_name", path),
        account=_str(raw, "account", path), partition=_str(raw, "partition", path),
        state=state, reason="" if reason == "None" else reason, nodes=nodes, gpus=gpus,
        gpus_per_node=per_node, submit_time=_epoch(raw, "submit_time", path),
        start_time=_epoch(raw, "start_time", path), end_time=_epoch(raw, "end_time", path),
        time_limit_s=None if limit is None else limit * 60.0,
        exit_code=None if state in _NOT_ENDED else _exit_code(raw.get("exit_code"),
                                                               f"{path}.exit_code"),
        comment=_comment(raw.get("comment")), cpus_by_node=cpus_by_node,
        mem_mb_by_node=mem_by_node, gpus_by_node=gpus_by_node,
        gres_type=gpu_type(*(raw.get("gres_detail") or ()), *requests),
        array_job_id=str(int(array_id)) if array_id else "",
        het_job_id=str(int(het_id)) if het_id else "")


def _comment(value) -> str:
    """A job's comment: a string (squeue), or ``{"job": ...}`` (sacct 23.02+)."""
    if isinstance(value, dict):
        value = value.get("job")
    return value if isinstance(value, str) else ""


@gc_paused
def parse_squeue(doc: dict, *, origin: str = "`squeue --json`") -> list[SlurmJob]:
    """Jobs from ``squeue --json`` or slurmrestd ``/jobs`` (22.05 and 23.02+ shapes)."""
    return _jobs(doc, origin, _squeue_job)


def _jobs(doc, origin: str, one: Callable[[object, str], SlurmJob]) -> list[SlurmJob]:
    try:
        return [one(raw, f"jobs[{i}]") for i, raw in enumerate(_top(doc, "jobs", origin))]
    except _Shape as exc:
        raise _fail(origin, exc) from None


def _sacct_job(raw, path: str) -> SlurmJob:
    if not isinstance(raw, dict):
        raise _Shape(path, f"expected an object, got {_type_name(raw)}")
    job_id = _number(raw, "job_id", path)
    if job_id is None:
        raise _Shape(f"{path}.job_id", "missing")
    array = raw.get("array") or {}
    array_id, task = _number(array, "job_id", f"{path}.array"), \
        _number(array, "task_id", f"{path}.array")
    name = f"{int(array_id)}_{int(task)}" if array_id and task is not None else str(int(job_id))
    state_obj = raw.get("state") or {}
    state = _job_state(_names(state_obj, "current", f"{path}.state"), f"{path}.state")
    reason = _str(state_obj, "reason", f"{path}.state")
    hosts = _str(raw, "nodes", path)
    nodes = () if hosts in ("", "None assigned") else tuple(expand(hosts))
    times = raw.get("time") or {}
    limit = _number(times, "limit", f"{path}.time")
    tres = raw.get("tres") or {}
    alloc, req = tres.get("allocated") or [], tres.get("requested") or []
    gpus = tres_gpus(alloc, f"{path}.tres.allocated") or \
        tres_gpus(req, f"{path}.tres.requested")
    cpus_by_node, mem_by_node, gpus_by_node = sacct_allocation(
        alloc, nodes, f"{path}.tres.allocated")
    het = raw.get("het") or {}
    het_id = _number(het, "job_id", f"{path}.het")
    return SlurmJob(
        job_id=name, name=_str(raw, "name", path), user=_str(raw, "user", path),
        account=_str(raw, "account", path), partition=_str(raw, "partition", path),
        state=state, reason="" if reason == "None" else reason, nodes=nodes, gpus=gpus,
        gpus_per_node=gpus // len(nodes) if nodes and gpus % len(nodes) == 0 else None,
        submit_time=_epoch(times, "submission", f"{path}.time"),
        start_time=_epoch(times, "start", f"{path}.time"),
        end_time=_epoch(times, "end", f"{path}.time"),
        time_limit_s=None if limit is None else limit * 60.0,
        exit_code=None if state in _NOT_ENDED else _exit_code(raw.get("exit_code"),
                                                               f"{path}.exit_code"),
        comment=_comment(raw.get("comment")), cpus_by_node=cpus_by_node,
        mem_mb_by_node=mem_by_node, gpus_by_node=gpus_by_node,
        gres_type=tres_gpu_type(alloc) or tres_gpu_type(req),
        array_job_id=str(int(array_id)) if array_id else "",
        het_job_id=str(int(het_id)) if het_id else "")


@gc_paused
def parse_sacct(doc: dict, *, origin: str = "`sacct --json`") -> list[SlurmJob]:
    """Jobs from ``sacct --json`` or slurmrestd ``/slurmdb/.../jobs`` (v0.0.38 and later)."""
    return _jobs(doc, origin, _sacct_job)


def slurm_view(*, conf: Path | None = None, rest_url: str | None = None,
               token: str | None = None, user: str | None = None, timeout: float = 10.0,
               clock: Callable[[], float] = time.time, rest_version: str | None = None,
               accounting_window_s: float = ACCOUNTING_WINDOW_S,
               max_bytes: int = MAX_BYTES) -> SlurmView:
    """One poll of Slurm: nodes, partitions, jobs and reservations.

    With ``rest_url`` (``http://host:6820``) the view comes from slurmrestd's
    ``/slurm/<v>/nodes``, ``/jobs`` and ``/reservations`` and ``/slurmdb/<v>/jobs``, at data
    parser ``rest_version`` or, when None, the newest both sides know
    (:mod:`twin.mirror.slurm_rest`), authenticated by ``X-SLURM-USER-NAME: user`` and
    ``X-SLURM-USER-TOKEN: token`` (JWT); otherwise from ``sinfo --json``, ``squeue --json
    --all``, ``sacct --json --allusers`` and ``scontrol show reservation`` (``SLURM_CONF=conf``
    when given).  Each answer gets ``timeout`` seconds and at most ``max_bytes``.  Accounting
    covers the last ``accounting_window_s`` seconds; when it or the reservations cannot be
    read the view says so (``accounting_note``, ``reservations_note``) instead of failing.
    Everything else that cannot be read raises :class:`SourceError`, and nothing is returned.
    """
    source = f"slurmrestd {rest_url.rstrip('/')}" if rest_url else SOURCE
    try:
        if rest_url:
            asks = rest_asks(rest_url, token=token, user=user, timeout=timeout,
                             max_bytes=max_bytes, version=rest_version,
                             accounting_start=clock() - accounting_window_s)
        else:
            asks = cli_asks(conf=conf, timeout=timeout, max_bytes=max_bytes,
                            accounting_window_s=accounting_window_s)
        return _poll(asks, clock=clock)
    except SourceError as exc:                      # the parsers say "slurm": name the source
        raise type(exc)(source, exc.problem) from None


def _load(asks: Asks, ask: str):
    return json_load(asks.fetch(ask), source=asks.source, what=ask)


def _poll(asks: Asks, *, clock) -> SlurmView:
    nodes, partitions = parse_sinfo(_load(asks, asks.nodes), origin=asks.nodes)
    jobs = parse_squeue(_load(asks, asks.jobs), origin=asks.jobs)
    reservations, resv_note = read_reservations(asks)
    view = SlurmView(nodes, partitions, jobs, False, 0.0, asks.kind, asks.accounting_note,
                     reservations, resv_note, asks.version)
    if asks.accounting is None:
        view.read_at = clock()
        return view
    try:
        raw = asks.fetch(asks.accounting)
    except TooLarge:
        raise
    except SourceError as exc:                      # no slurmdbd: no accounting, said so
        view.accounting_note, view.read_at = exc.problem, clock()
        return view
    doc = json_load(raw, source=asks.source, what=asks.accounting)
    if (why := _refused(doc, asks.accounting)):
        view.accounting_note, view.read_at = why, clock()
        return view
    known = {job.job_id for job in jobs}             # squeue's record is the newer one
    view.jobs += [job for job in parse_sacct(doc, origin=asks.accounting)
                  if job.job_id not in known]
    view.accounting, view.read_at = True, clock()
    return view
