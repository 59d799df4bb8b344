"""Benchmark the ``grid`` preset (issue 30): each placement policy for some simulated days.

Run: .venv/bin/python -m bench.grid [--days 7] [--seed 1] [--spot] [--failures]
Needs no Django and writes nothing; prints wall-clock and CPU seconds
(``time.process_time``: this shared machine's wall time varies) and each policy's verdict on
cost, wait and moved bytes.
"""

import argparse
import time

from scheduler.grid.placement import POLICIES
from scheduler.grid.run import run_grid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--spot", action="store_true")
    parser.add_argument("--failures", action="store_true")
    args = parser.parse_args()
    for policy in POLICIES:
        wall, cpu = time.perf_counter(), time.process_time()
        _, rep = run_grid(days=args.days, seed=args.seed, policy=policy, spot=args.spot,
                          engine_options={"failures": args.failures})
        s = rep["summary"]
        print(f"{policy:9s} wall {time.perf_counter() - wall:6.2f} s  cpu "
              f"{time.process_time() - cpu:6.2f} s  jobs {s['jobs']['arrived']:4d} "
              f"done {s['jobs']['completed']:4d}  wait {s['wait_hours']['mean']:7.2f} h  "
              f"cost ${s['cost']['total']:10,.0f}  moved for jobs "
              f"{s['moved_gb']['jobs'] / 1000:6.1f} TB  "
              f"data-move {s['data_move']['job_hours']:6.2f} h")


if __name__ == "__main__":
    main()
