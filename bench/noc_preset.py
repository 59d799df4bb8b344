"""The default live twin (``noc-4k``): allocation, queue and failures over its first hours.

Prints, for the simulated time of the first wall minutes at the default speed-up (after the
preset's warm-up), the share of GPUs allocated, the queue, the running jobs, the GPUs serving
inference and the failures so far, and the CPU seconds the build, the warm-up and the window
took.  ``python -m bench.noc_preset [--seed S] [--minutes M]``
"""

from __future__ import annotations

import argparse
import time

from scheduler.presets import LIVE_SPEEDUP, get_preset
from scheduler.report import utilisation
from scheduler.simulate import Scenario


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=5.0, help="wall minutes after warm-up")
    ap.add_argument("--days", type=float, default=366.0, help="the scenario's horizon")
    args = ap.parse_args()
    preset = get_preset("noc-4k")
    t0 = time.process_time()
    engine, _ = Scenario(preset="noc-4k", days=args.days, seed=args.seed, failures=True,
                         physics=True).engine()
    t1 = time.process_time()
    engine.run_until(preset.warmup_s)
    t2 = time.process_time()
    print(f"noc-4k seed {args.seed}: {engine.state.n_gpus} GPUs; build {t1 - t0:.2f} s CPU, "
          f"warm-up of {preset.warmup_s / 3600:.0f} h simulated {t2 - t1:.2f} s CPU")
    print(f"{'wall min':>8} {'sim h':>7} {'allocated':>9} {'queued':>7} {'running':>7} "
          f"{'serving':>7} {'failures':>8}")
    step_min = 0.5
    n = int(args.minutes / step_min)
    for k in range(n + 1):
        engine.run_until(preset.warmup_s + k * step_min * 60.0 * LIVE_SPEEDUP)
        u = utilisation(engine)
        print(f"{k * step_min:8.1f} {engine.now / 3600:7.2f} {u['allocated'] / u['gpus']:9.3f} "
              f"{len(engine.queue):7d} {len(engine.running):7d} "
              f"{int(engine.fleet.serving_by_model.sum()):7d} "
              f"{sum(engine.reliability.failures.values()):8d}")
    t3 = time.process_time()
    print(f"window: {args.minutes:g} wall min = {args.minutes * 60 * LIVE_SPEEDUP / 3600:g} h "
          f"simulated in {t3 - t2:.2f} s CPU")


if __name__ == "__main__":
    main()
