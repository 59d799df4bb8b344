"""Replay saved Slurm runs through the twin and compare, job by job (issue 25).

``bench.slurm_agreement`` (or ``tests/slurm/test_slurm_agreement.py``) leaves each run of each
stream in a folder: ``trace.csv`` (the stream, with Slurm's own submit seconds), ``slurm.conf``
(and ``sacctmgr-qos.txt``) and ``slurm-log.csv`` (Slurm's real starts, from sacct).  This bench
replays every such folder on a cluster of the same four 8-GPU nodes with the twin's ``slurm``
policy (and, for comparison, its own ``backfill`` policy), in a second, with no Slurm needed.

Run: .venv/bin/python -m bench.slurm_replay [--runs bench/out/agreement]
Prints per folder and policy: median |Δstart| s, share within 5 s, Kendall tau, the signed
median (twin - Slurm), CPU and wall seconds.
"""

from __future__ import annotations

import argparse
import csv
import io
import time
from pathlib import Path

from scheduler.hardware.cluster import NodeGroup, NodeShape, plan_cluster
from scheduler.job_log import job_log_text
from scheduler.simulate import Scenario
from scheduler.study.agreement import compare, read_job_log


def replay(folder: Path, policy: str) -> dict[int, float]:
    plan = plan_cluster("agree", (NodeGroup("H100-SXM", 4,
                                            shape=NodeShape(cpu_cores=64, ram_gb=500)),),
                        fabric_kind="fat-tree", fabric_kw={"radix": 8})
    conf = str(folder / "slurm.conf") if policy == "slurm" else None
    scenario = Scenario(preset=None, days=0.02, seed=0, policy=policy,
                        trace=str(folder / "trace.csv"), slurm_conf=conf, failures=False,
                        physics=False)
    engine, _ = scenario.engine(plan=plan)
    engine.run_until(scenario.days * 86400.0)
    rows = csv.DictReader(io.StringIO(job_log_text(engine)))
    return {int(r["job_id"]): float(r["start_s"]) for r in rows if r["start_s"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="bench/out/agreement",
                    help="folder of saved runs (one sub-folder per stream and run)")
    args = ap.parse_args(argv)
    folders = sorted(p for p in Path(args.runs).iterdir() if (p / "slurm-log.csv").is_file())
    if not folders:
        raise SystemExit(f"no saved runs under {args.runs} (run bench.slurm_agreement first)")
    print(f"{'run':16s} {'policy':9s} {'median s':>8s} {'within 5 s':>10s} {'tau':>6s} "
          f"{'signed':>7s} {'CPU s':>6s} {'wall s':>6s}")
    for folder in folders:
        slurm = read_job_log(folder / "slurm-log.csv")
        for policy in ("slurm", "backfill"):
            c0, w0 = time.process_time(), time.perf_counter()
            twin = replay(folder, policy)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            got = compare(twin, slurm)
            diffs = sorted(twin[j] - slurm[j] for j in slurm if j in twin)
            signed = diffs[len(diffs) // 2] if diffs else float("nan")
            print(f"{folder.name:16s} {policy:9s} {got.median_abs_s:8.2f} "
                  f"{100 * got.within_share:9.1f}% {got.tau:6.3f} {signed:+7.1f} "
                  f"{cpu:6.2f} {wall:6.2f}")


if __name__ == "__main__":
    main()
