"""Benchmark ``Engine.fork``: a what-if copy of a running engine, with and without a new seed.

Targets (issue 10): well under a second for dev-small, under 10 s for hyperscale-100k.
Run: .venv/bin/python -m bench.fork [--days 7] [--repeat 3]
Each preset runs ``--days`` simulated days (failures and physics on) before it is forked.
"""

from __future__ import annotations

import argparse
import statistics
import time

from scheduler.simulate import Scenario

TARGETS_S = {"dev-small": 1.0, "hyperscale-100k": 10.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'preset':<18}{'runs':>7}{'fork s':>9}{'fork+seed s':>13}{'target s':>10}  verdict")
    for preset, target in TARGETS_S.items():
        engine, _ = Scenario(preset=preset, days=args.days, seed=0).engine()
        engine.run_until(args.days * 86400)
        plain, seeded = [], []
        for i in range(args.repeat):
            t = time.perf_counter()
            engine.fork()
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            engine.fork(seed=100 + i)
            seeded.append(time.perf_counter() - t)
        worst = max(statistics.median(plain), statistics.median(seeded))
        print(f"{preset:<18}{len(engine.runs):>7,}{statistics.median(plain):>9.3f}"
              f"{statistics.median(seeded):>13.3f}{target:>10g}  "
              f"{'meets' if worst < target else 'MISSES'}")


if __name__ == "__main__":
    main()
