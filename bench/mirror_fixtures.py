"""Write a 100k-GPU recording of Slurm and Prometheus for ``bench.mirror_poll``.

Run: .venv/bin/python -m bench.mirror_fixtures OUT [--nodes 13000] [--gpus-per-node 8]
     [--jobs 10000] [--hosts FILE | --pattern 'gpu-{:05d}'] [--full-labels] [--seed 0]

``OUT/sinfo.json`` and ``OUT/squeue.json`` are in Slurm 22.05's shapes (data_parser v0.0.38):
every node and job is a copy of one recorded from Debian's Slurm 22.05
(``tests/fixtures/slurm_json/``) with its names, states, node lists, GRES and times changed,
so field count and size match a real answer.  Nodes are named from ``--hosts`` (one a line, the
inventory's hostnames) or ``--pattern``.  Jobs: 30 % running on whole nodes (sizes 1 to 128
nodes, P ~ 1/size, up to 93 % of the nodes; the rest wait), 50 % pending (Resources, Priority,
QOSMaxGRESPerUser, ReqNodeNotAvail), 20 % finished within MinJobAge (COMPLETED, FAILED,
CANCELLED, TIMEOUT, NODE_FAIL); 1 % of the nodes are drained or down with a reason.

``OUT/prom_query.json`` is Prometheus's answer to :func:`twin.mirror.prom_source.dcgm_query`
for the five DCGM metrics of every GPU (labels ``Hostname``, ``UUID``, ``__name__``, ``gpu``;
with ``--full-labels`` also the exporter's ``DCGM_FI_DRIVER_VERSION``, ``device``,
``instance``, ``job``, ``modelName``, ``pci_bus_id``, as a query without ``max by`` returns
them); 0.5 % of the nodes are missing from it (an exporter down).
"""

from __future__ import annotations

import argparse
import copy
import uuid
from pathlib import Path

import numpy as np
import orjson

from twin.inventory.hostlist import hostlist

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "slurm_json"
METRICS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
           "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
NOW = 1_796_400_000
SIZES = 2 ** np.arange(8)                       # 1 .. 128 nodes
SIZE_P = 1.0 / SIZES / (1.0 / SIZES).sum()       # P(size) ~ 1/size: 4 nodes on average
PENDING = ("Resources", "Priority", "Priority", "QOSMaxGRESPerUser",
           "ReqNodeNotAvail, UnavailableNodes:")
ENDED = (("COMPLETED", "None", 0), ("FAILED", "NonZeroExitCode", 256),
         ("CANCELLED", "None", 15), ("TIMEOUT", "TimeLimit", 0), ("NODE_FAIL", "NodeDown", 9))


def templates() -> tuple[dict, dict[str, dict]]:
    """A recorded node and recorded jobs by state (RUNNING, PENDING, COMPLETED)."""
    nodes = orjson.loads((FIXTURES / "sinfo-22.05.json").read_bytes())
    jobs = orjson.loads((FIXTURES / "squeue-22.05.json").read_bytes())
    by_state = {}
    for job in jobs["jobs"]:
        if job["job_state"] in ("RUNNING", "PENDING", "COMPLETED") and \
                job["array_job_id"] == 0 and job["tres_per_node"]:
            by_state.setdefault(job["job_state"], job)
    by_state.setdefault("COMPLETED", next(j for j in jobs["jobs"]
                                          if j["job_state"] == "COMPLETED"))
    return nodes, by_state


def sinfo_doc(names: list[str], gpn: int, states: list[tuple[str, list[str], str]]) -> dict:
    recorded, _ = templates()
    node = recorded["nodes"][0]
    out = []
    for name, (state, flags, reason) in zip(names, states, strict=True):
        used = f"{gpn}(IDX:0-{gpn - 1})" if state == "allocated" else "0(IDX:N/A)"
        n = copy.copy(node)
        n.update(name=name, state=state, state_flags=flags, reason=reason,
                 gres=f"gpu:h100_sxm:{gpn}", gres_used=f"gpu:h100_sxm:{used}")
        out.append(n)
    return {"meta": recorded["meta"], "errors": [], "nodes": out}


def squeue_doc(names: list[str], gpn: int, n_jobs: int, rng) -> tuple[dict, set[int]]:
    """(the squeue answer, indices of the nodes running jobs)."""
    _, tpl = templates()
    alloc_node = tpl["RUNNING"]["job_resources"]["allocated_nodes"][0]
    jobs, busy, next_node = [], set(), 0
    n_running, n_pending = int(n_jobs * 0.3), int(n_jobs * 0.5)
    target = int(len(names) * 0.93)
    for i in range(n_jobs):
        job_id = 1000 + i
        if i < n_running and next_node < target:
            size = min(int(rng.choice(SIZES, p=SIZE_P)), target - next_node)
            hosts = names[next_node:next_node + size]
            busy.update(range(next_node, next_node + size))
            next_node += size
            job = copy.copy(tpl["RUNNING"])
            start = NOW - int(rng.integers(60, 86400))
            job.update(job_state="RUNNING", state_reason="None", nodes=hostlist(hosts),
                       start_time=start, end_time=start + 86400 * 2, time_limit=2880,
                       gres_detail=[f"gpu:h100_sxm:{gpn}(IDX:0-{gpn - 1})"] * size,
                       job_resources={"nodes": hostlist(hosts), "allocated_hosts": size,
                                      "allocated_nodes": [dict(alloc_node, nodename=h)
                                                          for h in hosts]})
        elif i < n_running + n_pending:
            size = int(rng.choice(SIZES, p=SIZE_P))
            job = copy.copy(tpl["PENDING"])
            job.update(job_state="PENDING", state_reason=str(rng.choice(PENDING)),
                       start_time=0, end_time=0, nodes="", gres_detail=[])
        else:
            size = int(rng.choice(SIZES, p=SIZE_P))
            at = int(rng.integers(0, len(names) - size))
            state, reason, status = ENDED[int(rng.integers(len(ENDED)))]
            job = copy.copy(tpl["COMPLETED"])
            end = NOW - int(rng.integers(1, 300))
            hosts = names[at:at + size]
            job.update(job_state=state, state_reason=reason, exit_code=status,
                       nodes=hostlist(hosts), start_time=end - 3600, end_time=end,
                       gres_detail=[],
                       job_resources={"nodes": hostlist(hosts), "allocated_hosts": size,
                                      "allocated_nodes": [dict(alloc_node, nodename=h)
                                                          for h in hosts]})
        job.update(job_id=job_id, name=f"job-{job_id}", user_name=f"user{i % 97}",
                   account=f"team{i % 13}", node_count=size, tasks=size * gpn,
                   submit_time=NOW - int(rng.integers(60, 86400 * 3)),
                   tres_per_node=f"gres:gpu:{gpn}",
                   tres_req_str=f"cpu={size},mem={2 * size}T,node={size},billing={size}",
                   tres_alloc_str="" if job["job_state"] == "PENDING" else
                   f"cpu={size},mem={2 * size}T,node={size},billing={size}")
        jobs.append(job)
    recorded = orjson.loads((FIXTURES / "squeue-22.05.json").read_bytes())
    return {"meta": recorded["meta"], "errors": [], "jobs": jobs}, busy


def prom_doc(names: list[str], gpn: int, silent: set[int], full_labels: bool, rng) -> dict:
    result = []
    n = len(names) * gpn
    values = {"DCGM_FI_DEV_GPU_UTIL": rng.integers(0, 101, n).astype(str),
              "DCGM_FI_DEV_POWER_USAGE": np.round(rng.uniform(80, 700, n), 3).astype(str),
              "DCGM_FI_DEV_GPU_TEMP": rng.integers(30, 85, n).astype(str),
              "DCGM_FI_DEV_XID_ERRORS": np.where(rng.random(n) < 0.001, "79", "0"),
              "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": np.round(rng.random(n), 6).astype(str)}
    stamp = NOW + 0.123
    for k, host in enumerate(names):
        if k in silent:
            continue
        for g in range(gpn):
            row = k * gpn + g
            labels = {"Hostname": host, "UUID": f"GPU-{uuid.UUID(int=row + 1)}", "gpu": str(g)}
            if full_labels:
                labels.update(DCGM_FI_DRIVER_VERSION="550.90.07", device=f"nvidia{g}",
                              instance=f"{host}:9400", job="dcgm-exporter",
                              modelName="NVIDIA H100 80GB HBM3",
                              pci_bus_id=f"00000000:{0x18 + g * 16:02X}:00.0")
            for metric in METRICS:
                result.append({"metric": {"__name__": metric, **labels},
                               "value": [stamp, values[metric][row]]})
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def write(out: Path, *, names: list[str], gpn: int = 8, n_jobs: int = 10_000,
          full_labels: bool = False, seed: int = 0) -> dict[str, int]:
    """Write the recording into ``out``; returns counts and sizes."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    squeue, busy = squeue_doc(names, gpn, n_jobs, rng)
    odd = set(rng.choice(len(names), max(1, len(names) // 100), replace=False).tolist())
    states = []
    for k in range(len(names)):
        base = "allocated" if k in busy else "idle"
        if k in odd and k % 2:
            states.append((base, ["DRAIN"], "xid 79: GPU fell off the bus"))
        elif k in odd:
            states.append(("down", ["NOT_RESPONDING"], "Not responding"))
        else:
            states.append((base, [], ""))
    silent = set(rng.choice(len(names), max(1, len(names) // 200), replace=False).tolist())
    files = {"sinfo.json": sinfo_doc(names, gpn, states), "squeue.json": squeue,
             "prom_query.json": prom_doc(names, gpn, silent, full_labels, rng)}
    sizes = {}
    for name, doc in files.items():
        (out / name).write_bytes(orjson.dumps(doc))
        sizes[name] = (out / name).stat().st_size
    return {"nodes": len(names), "gpus": len(names) * gpn, "jobs": n_jobs, **sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--nodes", type=int, default=13_000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--hosts", type=Path, help="hostnames, one a line (the inventory's)")
    parser.add_argument("--pattern", default="gpu-{:05d}")
    parser.add_argument("--full-labels", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    names = args.hosts.read_text().split()[:args.nodes] if args.hosts else \
        [args.pattern.format(i) for i in range(args.nodes)]
    counts = write(args.out, names=names, gpn=args.gpus_per_node, n_jobs=args.jobs,
                   full_labels=args.full_labels, seed=args.seed)
    print(", ".join(f"{k} {v:,}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
