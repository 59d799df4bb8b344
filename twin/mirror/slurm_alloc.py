"""What Slurm allocated to a job on each of its nodes: CPUs, memory (MB) and GPUs.

``squeue --json`` / slurmrestd ``/jobs`` say it per node in ``job_resources``, in two shapes:

* data_parser ``v0.0.38`` to ``v0.0.40`` (22.05 to 23.11): ``allocated_nodes`` is a list of
  ``{"nodename", "memory_allocated", "sockets": {"0": {"cores": {"3": "allocated"}}}}``
  (no CPU count per node: the allocated cores are counted, times the threads per core that
  the job's ``cpus`` give over all of them);
* ``v0.0.41`` and later (24.05+): ``nodes.allocation`` is a list of ``{"name", "cpus":
  {"count"}, "memory": {"allocated"}, "sockets": [...]}``.

GPUs per node come from ``gres_detail`` (``gpu:h100:4(IDX:0-3)``, one string per node in the
order of the job's nodes).  Where no per-node figure is given (sacct's ``tres.allocated``,
squeue's ``tres_alloc_str``), the job's totals are split evenly over its nodes, the first
nodes taking the remainder.
"""

from __future__ import annotations

import re

from twin.mirror.slurm_json import _gpu_sum, _number, _Shape, _str, _type_name

GPU_GRES = re.compile(r"(?:^|,)gpu(?::([^:,()]+))?:(\d+)")
"""``gpu[:type]:count`` in a node's or a job's GRES string (``gres``, ``gres_detail``)."""

TRES_SPEC = re.compile(r"(?:^|,)gres[:/]gpu(?::([^:,=]+))?:(\d+)")
"""``gres/gpu[:type]:count`` in a request (``tres_per_node``, ``tres_per_job``...)."""

TRES_STR = re.compile(r"(?:^|,)gres/gpu(?::([^=,]+))?=(\d+)")
"""``gres/gpu[:type]=count`` in a TRES string (``tres_alloc_str``)."""

_TRES_ITEM = re.compile(r"(?:^|,)(cpu|mem)=(\d+(?:\.\d+)?)([KMGTP]?)")
_MB = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}

Allocation = tuple[tuple[int, ...] | None, tuple[int, ...] | None, tuple[int, ...] | None]
"""(CPUs, memory in MB, GPUs) on each node of a job, each None when unknown."""


def split(total: int | None, n: int) -> tuple[int, ...] | None:
    """``total`` spread over ``n`` nodes, the first ones taking the remainder.

    >>> split(10, 3)
    (4, 3, 3)
    """
    if total is None or n <= 0:
        return None
    share, rest = divmod(int(total), n)
    return tuple(share + (i < rest) for i in range(n))


def gpu_type(*texts: str) -> str:
    """The first GPU GRES type named in ``texts`` (any of the three forms), "" if untyped."""
    for text in texts:
        for pattern in (GPU_GRES, TRES_SPEC, TRES_STR):
            for kind, _ in pattern.findall(text):
                if kind:
                    return kind
    return ""


def tres_str_totals(text: str) -> tuple[int | None, int | None]:
    """(CPUs, memory in MB) of a TRES string such as ``cpu=32,mem=400G,node=2``."""
    found = {key: float(value) * _MB[unit] for key, value, unit in _TRES_ITEM.findall(text)}
    cpu, mem = found.get("cpu"), found.get("mem")
    return (None if cpu is None else int(cpu)), (None if mem is None else int(round(mem)))


def squeue_allocation(raw: dict, nodes: tuple[str, ...], path: str) -> Allocation:
    """Per-node CPUs, memory and GPUs of one ``squeue`` job (None each for a pending job)."""
    if not nodes:
        return None, None, None
    cpus, mem = _job_resources(raw.get("job_resources"), raw, nodes,
                               f"{path}.job_resources")
    total_cpu, total_mem = tres_str_totals(_str(raw, "tres_alloc_str", path))
    if cpus is None:
        cpus = split(total_cpu, len(nodes))
    if mem is None:
        mem = split(total_mem, len(nodes))
    return cpus, mem, _gpus_by_node(raw, nodes, path)


def _gpus_by_node(raw: dict, nodes: tuple[str, ...], path: str) -> tuple[int, ...]:
    detail = raw.get("gres_detail") or []
    if not isinstance(detail, list) or not all(isinstance(d, str) for d in detail):
        raise _Shape(f"{path}.gres_detail", "expected a list of strings")
    if len(detail) == len(nodes):
        return tuple(_gpu_sum(GPU_GRES, d) or 0 for d in detail)
    per_node = _gpu_sum(TRES_SPEC, _str(raw, "tres_per_node", path))
    if per_node is not None:
        return (per_node,) * len(nodes)
    return split(_gpu_sum(TRES_STR, _str(raw, "tres_alloc_str", path)) or 0, len(nodes))


def _job_resources(res, raw: dict, nodes: tuple[str, ...], path: str
                   ) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(CPUs, memory MB) by node from ``job_resources``; (None, None) when it says nothing."""
    if not res:
        return None, None
    if not isinstance(res, dict):
        raise _Shape(path, f"expected an object, got {_type_name(res)}")
    grouped = res.get("nodes")
    if isinstance(grouped, dict):                   # v0.0.41+
        entries, key, at = grouped.get("allocation"), "name", f"{path}.nodes.allocation"
    else:
        entries, key, at = res.get("allocated_nodes"), "nodename", f"{path}.allocated_nodes"
    if entries is not None and not isinstance(entries, list):
        raise _Shape(at, f"expected a list, got {_type_name(entries)}")
    if not entries:
        return None, None
    by_name: dict[str, tuple[int | None, int | None, int | None]] = {}
    for k, entry in enumerate(entries):
        here = f"{at}[{k}]"
        if not isinstance(entry, dict):
            raise _Shape(here, f"expected an object, got {_type_name(entry)}")
        by_name[_str(entry, key, here, None)] = _node_resources(entry, here)
    missing = [n for n in nodes if n not in by_name]
    if missing:
        raise _Shape(at, f"no entry for the job's node {missing[0]}")
    cpus, cores, mem = zip(*(by_name[n] for n in nodes), strict=True)
    if None in cpus:
        cpus = None if None in cores else _cores_to_cpus(cores, raw, path)
    return cpus, (None if None in mem else mem)


def _node_resources(entry: dict, path: str) -> tuple[int | None, int | None, int | None]:
    """(CPUs, cores, memory MB) allocated in one node's entry, None where not said."""
    cpus = entry.get("cpus")
    if isinstance(cpus, dict):                      # v0.0.41+: {"count", "used"}
        count = _number(cpus, "count", f"{path}.cpus")
    else:                                           # v0.0.38-40 say "cpus_used" only
        count = _number(entry, "cpus", path)
    memory = entry.get("memory")
    if isinstance(memory, dict):                    # v0.0.41+: {"used", "allocated"}
        mem = _number(memory, "allocated", f"{path}.memory")
    elif "memory_allocated" in entry:
        mem = _number(entry, "memory_allocated", path)
    else:
        mem = _number(entry, "memory", path)
    cores = _allocated_cores(entry.get("sockets"), f"{path}.sockets")
    return (None if count is None else int(count)), cores, (None if mem is None else int(mem))


def _allocated_cores(sockets, path: str) -> int | None:
    """Cores marked allocated: ``{"0": {"cores": {"3": "allocated"}}}`` (v0.0.38-40) or
    ``[{"cores": [{"status": ["ALLOCATED"]}]}]`` (v0.0.41+)."""
    if sockets is None:
        return None
    if isinstance(sockets, dict):
        sockets = list(sockets.values())
    if not isinstance(sockets, list):
        raise _Shape(path, f"expected an object or a list, got {_type_name(sockets)}")
    count = 0
    for i, socket in enumerate(sockets):
        cores = socket.get("cores") if isinstance(socket, dict) else None
        if isinstance(cores, dict):
            cores = list(cores.values())
        if not isinstance(cores, list):
            raise _Shape(f"{path}[{i}].cores", f"expected an object or a list, got "
                                               f"{_type_name(cores)}")
        for core in cores:
            status = core.get("status") if isinstance(core, dict) else core
            names = [status] if isinstance(status, str) else status
            if not isinstance(names, list):
                raise _Shape(f"{path}[{i}].cores", f"a core status of {_type_name(status)}")
            count += any(str(s).lower().startswith("allocated") for s in names)
    return count


def _cores_to_cpus(cores: tuple[int, ...], raw: dict, path: str) -> tuple[int, ...]:
    """CPUs by node from allocated cores, times the threads per core the job's ``cpus``
    give over all of them (1 when they do not divide)."""
    total, allocated = _number(raw, "cpus", path), sum(cores)
    threads = int(total) // allocated if total and allocated and \
        int(total) % allocated == 0 else 1
    return tuple(c * threads for c in cores)


def sacct_allocation(alloc: list, nodes: tuple[str, ...], path: str) -> Allocation:
    """Per-node CPUs, memory and GPUs of an accounting record: its ``tres.allocated`` totals
    split evenly over its nodes (accounting keeps no per-node figure)."""
    if not nodes:
        return None, None, None
    totals: dict[str, int] = {}
    for k, item in enumerate(alloc):
        if not isinstance(item, dict):
            raise _Shape(f"{path}[{k}]", f"expected an object, got {_type_name(item)}")
        kind = item.get("type")
        if kind in ("cpu", "mem"):
            totals[kind] = int(_number(item, "count", f"{path}[{k}]") or 0)
    gpus = tres_gpus(alloc, path)
    return split(totals.get("cpu"), len(nodes)), split(totals.get("mem"), len(nodes)), \
        split(gpus, len(nodes))


def tres_gpus(tres: list, path: str) -> int:
    """GPUs in a TRES list ``[{"type": "gres", "name": "gpu:h100", "count": 8}, ...]``."""
    untyped, typed = 0, 0
    for k, item in enumerate(tres):
        if not isinstance(item, dict):
            raise _Shape(f"{path}[{k}]", f"expected an object, got {_type_name(item)}")
        if item.get("type") == "gres" and str(item.get("name", "")).split(":")[0] == "gpu":
            count = int(_number(item, "count", f"{path}[{k}]") or 0)
            if item["name"] == "gpu":
                untyped += count
            else:
                typed += count
    return untyped or typed


def tres_gpu_type(tres: list) -> str:
    """The GPU type named in a TRES list (``gpu:h100``), "" when only untyped."""
    for item in tres:
        name = str(item.get("name", "")) if isinstance(item, dict) else ""
        if item.get("type") == "gres" and name.startswith("gpu:"):
            return name.split(":", 1)[1]
    return ""
