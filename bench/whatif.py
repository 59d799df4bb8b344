"""Benchmark a what-if (``scheduler.control.whatif.whatif``): a 24-hour fork of hyperscale-100k.

Target (issue 14): under 5 s for one seed, 24 simulated hours.
Run: .venv/bin/python -m bench.whatif [--days 3] [--hours 24] [--repeat 3]
The preset runs ``--days`` simulated days first (failures and physics on, as ``simulate``),
then each what-if forks it with one seed: with no action (the baseline and a second copy),
and with a spine drill on the spine under the widest running gang.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from scheduler.control.whatif import whatif
from scheduler.simulate import Scenario

PRESET = "hyperscale-100k"
TARGET_S = 5.0


def widest_gang_spine(engine) -> int:
    """The spine drill's unit id of a spine in a pod the widest running gang spans."""
    run = max(engine.running.values(), key=lambda r: (r.gpus, -r.idx))
    pods = np.unique(engine.state.domain["pod"][run.placement.nodes])
    f = engine.plan.fabric
    above = np.flatnonzero(f.switch_tier > 0)
    inside = np.flatnonzero(np.isin(f.switch_pod[above], pods))
    return int(inside[0]) if inside.size else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=3.0)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    engine, _ = Scenario(preset=PRESET, days=args.days + args.hours / 24.0 + 1.0,
                         seed=0).engine()
    engine.run_until(args.days * 86400)
    spine = widest_gang_spine(engine)
    print(f"{PRESET}: {engine.state.n_gpus:,} GPUs, {len(engine.runs):,} runs, "
          f"{len(engine.running):,} running after {args.days:g} days; "
          f"what-if of {args.hours:g} h, 1 seed, median of {args.repeat}")
    print(f"{'action':<28}{'wall s':>9}{'jobs hit':>10}{'GPU-h lost':>12}{'target s':>10}"
          "  verdict")
    for label, action in (("none", None),
                          (f"spine_switch {spine}", {"kind": "spine_switch", "target": spine})):
        times = []
        for i in range(args.repeat):
            t = time.perf_counter()
            report = whatif(engine, action, hours=args.hours, seeds=[100 + i])
            times.append(time.perf_counter() - t)
        wall = statistics.median(times)
        d = report["summary"]
        print(f"{label:<28}{wall:>9.2f}{d['jobs_hit']['delta']:>10g}"
              f"{d['gpu_hours_lost']['delta']:>12,.1f}{TARGET_S:>10g}  "
              f"{'meets' if wall < TARGET_S else 'MISSES'}")


if __name__ == "__main__":
    main()
