"""Compare the research policies (``sjf*``, ``las``) with ``backfill`` and ``default`` on one
preset workload: mean job completion time, jobs done, preemptions, and the scheduler's cost.

Failures and physics are off, so the policy is what differs.  Prints, per policy, CPU seconds
(``time.process_time``) beside wall seconds (this shared machine's wall time varies a lot).
Run: .venv/bin/python -m bench.research_policies [--preset dev-small] [--days 3] [--load 1]
     [--seed 1] [--policies backfill,sjf,sjf-history,las,default] [--trace PATH --gpus N]
(``--trace ../shared/data/philly/philly.csv --gpus 6504 --days 110`` replays the Philly trace,
as ``bench.philly`` does.)
"""

from __future__ import annotations

import argparse
import time

from scheduler.model.job_run import DONE
from scheduler.simulate import Scenario


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="dev-small")
    ap.add_argument("--days", type=float, default=3.0)
    ap.add_argument("--load", type=float, default=1.0, help="arrival-rate multiplier")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", default="backfill,sjf,sjf-limit,sjf-history,las,default")
    ap.add_argument("--trace", default=None, help="replay a trace instead of the preset's jobs")
    ap.add_argument("--gpus", type=int, default=None, help="scale the cluster to N GPUs")
    args = ap.parse_args()
    extra = {k: v for k, v in (("trace", args.trace), ("gpus", args.gpus)) if v is not None}
    print(f"{args.preset}, {args.days:g} days, load {args.load:g}, seed {args.seed}, {extra}")
    print(f"{'policy':12s} {'done':>6s} {'mean JCT h':>10s} {'queued':>6s} {'preempt':>7s} "
          f"{'CPU s':>7s} {'wall s':>7s}")
    for policy in args.policies.split(","):
        cpu, wall = time.process_time(), time.perf_counter()
        engine, _ = Scenario(preset=args.preset, days=args.days, seed=args.seed, policy=policy,
                             failures=False, physics=False, load=args.load, **extra).engine()
        engine.run_until(args.days * 86400.0)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        done = [r for r in engine.runs if r.state == DONE]
        jct = sum(r.end_s - r.spec.submit_s for r in done) / max(1, len(done)) / 3600.0
        print(f"{policy:12s} {len(done):6d} {jct:10.2f} {len(engine.queue):6d} "
              f"{engine.counters['preemptions']:7d} {cpu:7.2f} {wall:7.2f}")


if __name__ == "__main__":
    main()
