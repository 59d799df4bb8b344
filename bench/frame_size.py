"""The live frame's size at a preset's scale, by key (the broadcast budget at 100,000 GPUs).

Builds the preset's engine (failures and physics on), runs it ``--hours`` past its warm-up,
optionally opens ``--incidents`` more incidents with drills (a storm: nodes, GPUs, NICs, leaf
switches, rack feeds and links in turn, on random targets), and prints the frame's size as the
broadcast sends it (compact JSON, encoded once for every client: bytes, and deflated as a
WebSocket's permessage-deflate would send it), with CPU seconds beside wall time of building
it (:func:`scheduler.live.live_frame`) and of encoding it; then the largest keys, each rack
heatmap and the hall summary, and the incidents (records listed of those open, and their
bound, :data:`scheduler.reliability.incidents.FRAME_BYTES_MAX`).
``python -m bench.frame_size [--preset hyperscale-100k] [--hours 3] [--seed 0]
[--incidents 0]``
"""

from __future__ import annotations

import argparse
import json
import time
import zlib

from scheduler.control.drills import run_drill
from scheduler.live import live_frame
from scheduler.presets import get_preset
from scheduler.reliability.incidents import FRAME_BYTES_MAX
from scheduler.simulate import Scenario

STORM_KINDS = ("node", "accelerator", "nic", "leaf_switch", "rack_power", "optical_link")
REPEAT = 5
"""Builds and encodings timed (the best is printed: the machine is shared)."""


def size(obj) -> int:
    return len(json.dumps(obj, separators=(",", ":")))


def _timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


def _best(fn):
    runs = [_timed(fn) for _ in range(REPEAT)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="hyperscale-100k")
    ap.add_argument("--hours", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--incidents", type=int, default=0,
                    help="drills to run before the frame (each opens an incident)")
    args = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    engine, _ = Scenario(preset=args.preset, days=30, seed=args.seed, failures=True,
                         physics=True).engine()
    engine.run_until(get_preset(args.preset).warmup_s + args.hours * 3600.0)
    for k in range(args.incidents):
        run_drill(engine, STORM_KINDS[k % len(STORM_KINDS)], drill_id=k)
    engine.kernel.end_instant()
    c1, w1 = time.process_time(), time.perf_counter()
    build_cpu, build_wall, frame = _best(lambda: live_frame(engine))
    enc_cpu, enc_wall, text = _best(lambda: json.dumps(frame, separators=(",", ":"),
                                                       allow_nan=False))
    deflated = zlib.compress(text.encode(), 6)
    incidents = frame["incidents"]
    print(f"{args.preset} at {engine.now / 3600:.1f} h, {incidents['counts']['open']:,} "
          f"incidents open: frame {len(text):,} bytes, {len(deflated):,} deflated; "
          f"built in {build_cpu:.3f} s CPU ({build_wall:.3f} s wall), encoded in "
          f"{enc_cpu:.3f} s CPU ({enc_wall:.3f} s wall), best of {REPEAT}; engine "
          f"{c1 - c0:.1f} s CPU ({w1 - w0:.1f} s wall)")
    for key, value in sorted(frame.items(), key=lambda kv: -size(kv[1]))[:8]:
        print(f"  {key:<16}{size(value):>9,}")
    maps = frame["heatmaps"]
    for key, value in maps["racks"].items():
        print(f"  racks.{key:<10}{size(value):>9,}  {value['shape'][0]}x{value['shape'][1]} "
              f"floor, {value['rows_per_cell']}x{value['cols_per_cell']} a cell")
    print(f"  halls           {size(maps.get('halls', [])):>9,}  {len(maps.get('halls', []))} "
          "halls")
    print(f"  incidents       {size(incidents):>9,}  {len(incidents['open'])} of "
          f"{incidents['counts']['open']:,} open and {len(incidents['resolved'])} resolved "
          f"listed (bound {FRAME_BYTES_MAX:,} bytes)")


if __name__ == "__main__":
    main()
