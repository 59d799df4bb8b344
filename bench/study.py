"""A 4-arm x 8-seed study of llama3-16k over 54 days: serial vs Dask, and Dask's overhead per run.

Run: ``python -m bench.study [--seeds 8] [--days 54] [--workers 2]``.

Three passes over the same 32 runs, each into a fresh folder (nothing kept between them):

1. serial: one after the other in this process (``run_study(serial=True)``);
2. Dask, an embedded LocalCluster of ``--workers`` processes (the default path);
3. Dask, a LocalCluster of 1 worker: its wall time minus the serial one, per run, is what the
   Dask path adds to a run (cluster start, shipping the task and the report back, writing it).

Targets (issue 17): the speed-up of pass 2 over pass 1 approaches the worker count (2x on this
2-core machine); the overhead per run is under 5 % of a 30-s run (1.5 s).  The passes check
that they found the same study (results.json equal).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from scheduler.study.spec import check_spec
from twin.studies.report import results
from twin.studies.runner import run_study

TARGET_OVERHEAD_FRACTION = 0.05
REFERENCE_RUN_S = 30.0


def spec(seeds: int, days: float):
    return check_spec({
        "name": "llama3-checkpointing", "base": {"preset": "llama3-16k", "days": days},
        "seeds": seeds,
        "arms": [{"name": "disk", "set": {"recovery": "disk"}},
                 {"name": "async", "set": {"recovery": "async"}},
                 {"name": "memory", "set": {"recovery": "memory"}},
                 {"name": "hourly-disk", "set": {"checkpoint_interval": 3600}}],
        "figures": ["mfu", "goodput", "ettr", "lost_gpu_hours", "ledger.checkpoint_stall"]})


def timed(label: str, s, **kw) -> tuple[float, dict, list]:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        outcome = run_study(s, Path(tmp) / "out", **kw)
        wall = time.perf_counter() - t0
    if outcome.failed:
        raise SystemExit(f"{label}: {outcome.failed} run(s) failed")
    res = results(s, outcome)
    print(f"  {label:<28}{wall:>9.1f} s   ({outcome.where})", flush=True)
    return wall, res, [r.wall_s for r in outcome.records]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--days", type=float, default=54.0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    s = spec(args.seeds, args.days)
    n = len(s.runs())
    print(f"study: 4 arms x {args.seeds} seeds of llama3-16k over {args.days:g} days = {n} runs")
    serial, r_serial, run_walls = timed("serial (this process)", s, serial=True)
    dask_n, r_dask, _ = timed(f"Dask LocalCluster, {args.workers} workers", s,
                              workers=args.workers)
    dask_1, r_one, _ = timed("Dask LocalCluster, 1 worker", s, workers=1)
    same = r_serial == r_dask == r_one
    mean_run = sum(run_walls) / len(run_walls)
    overhead = (dask_1 - serial) / n
    print()
    print(f"mean run (serial)          {mean_run:8.2f} s")
    print(f"speed-up, {args.workers} workers         {serial / dask_n:8.2f} x   "
          f"(target: approaching {args.workers} x)")
    print(f"Dask overhead per run      {overhead:8.3f} s = {100 * overhead / REFERENCE_RUN_S:.2f} %"
          f" of a {REFERENCE_RUN_S:g}-s run (target < {100 * TARGET_OVERHEAD_FRACTION:g} %), "
          f"{100 * overhead / mean_run:.1f} % of this study's {mean_run:.1f}-s runs")
    print(f"same results in all three passes: {same}")
    verdicts = {(p["arm"], f): v["verdict"] for p in r_serial["summary"]["paired"]
                for f, v in p["figures"].items()}
    print(json.dumps({f"{a} {f}": v for (a, f), v in verdicts.items()}, indent=1))


if __name__ == "__main__":
    main()
