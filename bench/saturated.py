"""Benchmark the scheduler in the long-queue regime: hyperscale-100k with raised arrival rates.

Target (issues 11 and 25): at least 10,000 placement decisions per CPU-second of the scheduler
while 20,000-50,000 jobs wait.  Failures and physics are off, so the scheduler is what is
measured.  The load is at most 100 (``scheduler.limits``): ``--load 100 --days 1`` keeps
20,000-30,000 jobs waiting in the second half of the day.
Run: .venv/bin/python -m bench.saturated [--load 12] [--days 10] [--policy default] [--seed 0]
Prints the queue depth over time (sampled hourly), decisions, CPU seconds
(``time.process_time``: the run's and the scheduler passes' own) beside wall seconds, and
decisions per CPU-second.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from tqdm import tqdm

from bench.scheduler_cpu import scheduler_cpu
from scheduler.report import build_report
from scheduler.simulate import Scenario

TARGET_DPS = 10_000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--load", type=float, default=12.0, help="arrival-rate multiplier")
    ap.add_argument("--days", type=float, default=10.0)
    ap.add_argument("--policy", default="default")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    spent = scheduler_cpu()
    started, cpu_started = time.perf_counter(), time.process_time()
    engine, description = Scenario(preset="hyperscale-100k", days=args.days, seed=args.seed,
                                   policy=args.policy, failures=False, physics=False,
                                   load=args.load).engine()
    built = time.perf_counter() - started
    cpu_built = time.process_time() - cpu_started
    depth = []
    hours = int(args.days * 24)
    for h in tqdm(range(1, hours + 1), unit="h", file=sys.stderr, disable=None):
        engine.run_until(h * 3600.0)
        depth.append(len(engine.queue))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    r = build_report(engine, scenario=description, wall_seconds=wall)
    s = r["scheduler"]
    dps = s["placement_decisions"] / spent[0] if spent and spent[0] > 0 else None
    depth = np.array(depth)
    late = depth[len(depth) // 2:]
    rows = [
        ("scenario", f"hyperscale-100k x{args.load:g} arrivals, {args.days:g} days, "
                     f"policy {args.policy}, seed {args.seed}, failures and physics off"),
        ("jobs submitted / completed", f"{r['jobs']['submitted']:,} / {r['jobs']['completed']:,}"),
        ("queued jobs: max / mean of 2nd half", f"{depth.max():,} / {late.mean():,.0f}"),
        ("wall seconds (build + run)", f"{wall:.1f} (build {built:.1f})"),
        ("CPU seconds (build + run)", f"{cpu:.1f} (build {cpu_built:.1f})"),
        ("scheduling passes", f"{s['passes']:,}"),
        ("placement decisions", f"{s['placement_decisions']:,}"),
        ("backfill depth stops", f"{engine.counters['backfill_depth_stops']:,}"),
        ("passes skipped (head unchanged)", f"{engine.counters.get('passes_skipped', 0):,}"),
        ("answered from the no-fit memory", f"{engine.counters.get('known_not_to_fit', 0):,}"),
        ("preemption trial placements", f"{engine.counters.get('trial_placements', 0):,}"),
        ("preemptions", f"{engine.counters.get('preemptions', 0):,}"),
        ("MFU achieved", f"{r['mfu']['achieved'] * 100:.2f} %"),
        ("scheduler wall seconds", f"{s['wall_seconds']:.1f}"),
        ("scheduler CPU seconds", f"{spent[0]:.1f}" if spent else "n/a"),
        ("decisions per second (scheduler wall)", f"{s['decisions_per_second']:,}"),
        ("decisions per scheduler CPU-second", f"{dps:,.0f}" if dps is not None else "n/a"),
        ("decisions per CPU-second of the run",
         f"{s['placement_decisions'] / (cpu - cpu_built):,.0f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    if dps is None:  # a tree without Scheduler.run: its scheduler wall seconds
        dps = s["decisions_per_second"] or 0.0
    in_regime = 20_000 <= late.mean() <= 50_000
    print(f"target: >= {TARGET_DPS:,.0f} decisions per scheduler CPU-second with 20,000-50,000 "
          "jobs waiting: "
          f"{'meets' if dps >= TARGET_DPS else 'MISSES'} it"
          f"{'' if in_regime else ' (queue outside 20,000-50,000: raise or lower --load)'}")


if __name__ == "__main__":
    main()
