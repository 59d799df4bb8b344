"""The live frame's size at a preset's scale, by key (the broadcast budget at 100,000 GPUs).

Builds the preset's engine (failures and physics on), runs it ``--hours`` past its warm-up and
prints the compact JSON size of :func:`scheduler.live.live_frame`, of its largest keys and of
each rack heatmap and the hall summary, with CPU seconds beside wall time.
``python -m bench.frame_size [--preset hyperscale-100k] [--hours 3] [--seed 0]``
"""

from __future__ import annotations

import argparse
import json
import time

from scheduler.live import live_frame
from scheduler.presets import get_preset
from scheduler.simulate import Scenario


def size(obj) -> int:
    return len(json.dumps(obj, separators=(",", ":")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="hyperscale-100k")
    ap.add_argument("--hours", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    engine, _ = Scenario(preset=args.preset, days=30, seed=args.seed, failures=True,
                         physics=True).engine()
    engine.run_until(get_preset(args.preset).warmup_s + args.hours * 3600.0)
    c1, w1 = time.process_time(), time.perf_counter()
    frame = live_frame(engine)
    c2, w2 = time.process_time(), time.perf_counter()
    print(f"{args.preset} at {engine.now / 3600:.1f} h: frame {size(frame):,} bytes "
          f"(built in {c2 - c1:.3f} s CPU, {w2 - w1:.3f} s wall; engine {c1 - c0:.1f} s CPU, "
          f"{w1 - w0:.1f} s wall)")
    for key, value in sorted(frame.items(), key=lambda kv: -size(kv[1]))[:8]:
        print(f"  {key:<16}{size(value):>9,}")
    maps = frame["heatmaps"]
    for key, value in maps["racks"].items():
        print(f"  racks.{key:<10}{size(value):>9,}  {value['shape'][0]}x{value['shape'][1]} "
              f"floor, {value['rows_per_cell']}x{value['cols_per_cell']} a cell")
    print(f"  halls           {size(maps.get('halls', [])):>9,}  {len(maps.get('halls', []))} "
          "halls")


if __name__ == "__main__":
    main()
