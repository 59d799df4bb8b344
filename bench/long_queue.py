"""Benchmark how scheduling time grows with the number of jobs (issue 25, part 6).

Replays the first N jobs (in submit order) of the Philly trace on a 512-GPU cluster, for N from
5,000 to all 82,247, each for its own span of submit times plus one day, failures and physics
off, with each policy; prints jobs, the longest queue, placement decisions, CPU seconds
(``time.process_time``: the run's, and the scheduler passes' own) beside wall seconds,
decisions per CPU-second, and the exponent ``k`` of CPU time ~ jobs^k (least squares on
log-log).  Target: ``k`` close to 1 (time linear in jobs); >= 10,000 decisions per scheduler
CPU-second with 20,000-50,000 jobs waiting is ``bench.saturated``'s.

Data: ../shared/data/philly/philly.csv (Jeon et al., USENIX ATC 2019, CC-BY-4.0, as reduced by
the Pollux authors).
Run: .venv/bin/python -m bench.long_queue [--policies fifo,backfill,default]
     [--sizes 5000,10000,20000,41000,82247] [--gpus 512] [--slurm-conf PATH]
The ``slurm`` policy joins the list when ``--slurm-conf`` is given (and the policy exists);
``bench/slurm_defaults.conf`` is Slurm's defaults over one partition.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from bench.scheduler_cpu import scheduler_cpu
from scheduler import simulate

TRACE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "philly" / "philly.csv"
SIZES = (5_000, 10_000, 20_000, 41_000, 82_247)


def subsets(trace: Path, sizes, folder: Path) -> list[tuple[int, Path, float]]:
    """The first ``n`` rows of ``trace`` by submit time (ties in file order) for each size,
    written as Philly CSVs: ``(n, path, span of their submit times in days)``."""
    with trace.open(newline="", encoding="utf-8-sig") as f:
        rows = [r for r in csv.reader(f) if r]
    header, body = rows[0], rows[1:]
    body.sort(key=lambda r: r[0])  # ISO stamps sort as times; stable
    out = []
    for n in sizes:
        n = min(n, len(body))
        path = folder / f"philly_first_{n}.csv"
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(body[:n])
        first, last = (datetime.fromisoformat(body[i][0].strip()) for i in (0, n - 1))
        out.append((n, path, (last - first).total_seconds() / 86400.0))
    return out


def replay(path: Path, days: float, gpus: int, policy: str, slurm_conf, spent) -> dict:
    kw = dict(preset="dev-small", gpus=gpus, days=days, seed=0, policy=policy,
              failures=False, physics=False, trace=str(path))
    if slurm_conf:
        kw["slurm_conf"] = slurm_conf
    engine, _ = simulate.Scenario(**kw).engine()
    before = spent[0] if spent else 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    longest = 0
    for h in range(1, math.ceil(days * 24) + 1):
        engine.run_until(min(h * 3600.0, days * 86400.0))
        longest = max(longest, len(engine.queue))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"decisions": engine.counters["placement_decisions"], "cpu": cpu, "wall": wall,
            "sched_cpu": (spent[0] - before) if spent else None, "longest": longest}


def exponent(jobs, seconds) -> float:
    """``k`` of ``seconds ~ jobs^k``: least squares on log-log."""
    return float(np.polyfit(np.log(jobs), np.log(seconds), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default="fifo,backfill,default")
    ap.add_argument("--sizes", default=",".join(str(n) for n in SIZES))
    ap.add_argument("--gpus", type=int, default=512)
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--slurm-conf", default=None, help="also run --policy slurm with this conf")
    args = ap.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    if args.slurm_conf:
        from scheduler.scheduling.policies import REGISTRY
        if "slurm" in REGISTRY:
            policies.append("slurm")
        else:
            print("note: this tree has no slurm policy: skipped")
    else:
        print("note: slurm skipped (give --slurm-conf PATH to run it)")
    spent = scheduler_cpu()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory() as tmp:
        cases = subsets(Path(args.trace), sizes, Path(tmp))
        print(f"Philly, first N jobs by submit time, on {args.gpus} GPUs, each for its span + 1 "
              "day, failures and physics off, seed 0")
        head = (f"{'policy':<9}{'jobs':>8}{'max queue':>11}{'decisions':>11}{'CPU s':>9}"
                f"{'sched CPU s':>13}{'wall s':>9}{'dec/CPU-s':>11}{'dec/sched CPU-s':>17}")
        print(head)
        for policy in policies:
            jobs, cpus, scheds = [], [], []
            for n, path, span in cases:
                slurm = args.slurm_conf if policy == "slurm" else None
                r = replay(path, span + 1.0, args.gpus, policy, slurm, spent)
                s = r["sched_cpu"]
                sched = f"{s:.2f}" if s is not None else "n/a"
                per_sched = f"{r['decisions'] / s:,.0f}" if s else "n/a"
                print(f"{policy:<9}{n:>8,}{r['longest']:>11,}{r['decisions']:>11,}"
                      f"{r['cpu']:>9.2f}{sched:>13}{r['wall']:>9.2f}"
                      f"{r['decisions'] / r['cpu']:>11,.0f}{per_sched:>17}", flush=True)
                jobs.append(n)
                cpus.append(r["cpu"])
                scheds.append(s)
            if len(jobs) >= 2:
                line = f"{policy}: CPU time ~ jobs^{exponent(jobs, cpus):.2f}"
                if all(scheds):
                    line += f"; scheduler CPU ~ jobs^{exponent(jobs, scheds):.2f}"
                print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
