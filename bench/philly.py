"""Benchmark a trace replay: the Microsoft Philly trace (82,247 jobs) on a 6,504-GPU cluster.

Target (issue 11): all 82,247 jobs, FIFO and the default policy, failures and physics off,
under 60 s.  Data: ../shared/data/philly/philly.csv (Jeon et al., USENIX ATC 2019, CC-BY-4.0,
as reduced by the Pollux authors).
Run: .venv/bin/python -m bench.philly [--policy fifo] [--gpus 6504] [--days 110]
Prints CPU seconds (``time.process_time``: the run's and the scheduler passes' own) beside wall
seconds, and decisions per CPU-second.
Works on older commits too (``bench.side_by_side`` runs it there).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.scheduler_cpu import scheduler_cpu
from scheduler import simulate

TRACE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "philly" / "philly.csv"
TARGET_S = 60.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--gpus", type=int, default=6504)
    ap.add_argument("--days", type=float, default=110.0, help="110 days replay every job")
    ap.add_argument("--trace", default=str(TRACE))
    args = ap.parse_args()
    kw = dict(preset="dev-small", gpus=args.gpus, days=args.days, seed=0, policy=args.policy,
              failures=False, physics=False, trace=args.trace)
    spent = scheduler_cpu()
    started, cpu_started = time.perf_counter(), time.process_time()
    if hasattr(simulate, "Scenario"):
        _, r = simulate.run_scenario(simulate.Scenario(**kw))
    else:  # commits before the Scenario dataclass
        _, r = simulate.run_scenario(**kw)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    s, j = r["scheduler"], r["jobs"]
    sched_cpu = spent[0] if spent else None
    rows = [
        ("replay", f"{r['scenario']['trace']} on {r['scenario']['gpus']:,} GPUs, "
                   f"{args.days:g} days, policy {args.policy}, failures and physics off"),
        ("jobs submitted / completed", f"{j['submitted']:,} / {j['completed']:,}"),
        ("wait mean / p95 h", f"{j['wait_hours']['mean']} / {j['wait_hours']['p95']}"),
        ("wall seconds", f"{wall:.1f}"),
        ("CPU seconds", f"{cpu:.1f}"),
        ("scheduling passes", f"{s['passes']:,}"),
        ("placement decisions", f"{s['placement_decisions']:,}"),
        ("scheduler wall seconds", f"{s['wall_seconds']:.1f}"),
        ("scheduler CPU seconds", f"{sched_cpu:.1f}" if sched_cpu is not None else "n/a"),
        ("decisions per second (scheduler wall)", f"{s['decisions_per_second']:,}"),
        ("decisions per scheduler CPU-second",
         f"{s['placement_decisions'] / sched_cpu:,.0f}" if sched_cpu else "n/a"),
        ("decisions per CPU-second of the run", f"{s['placement_decisions'] / cpu:,.0f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    if args.days >= 110 and args.gpus == 6504:
        print(f"target: < {TARGET_S:g} s: {'meets' if wall < TARGET_S else 'MISSES'} it")


if __name__ == "__main__":
    main()
