"""The default policy's preemption on every shipped preset's own workload (issue 25, part 5).

For each row the same scenario runs twice, with the default policy's topology-aware placement
and with ``--placement random``, and the table gives: preemptions, the GPU-hours booked as
preempted (work thrown away since the victims' last checkpoints) and their share of all
GPU-hours, fleet MFU of both arms, and exposed communication GPU-hours of both.  The claims
checked on every row: preempted share <= 3 %, topology MFU >= random's, and less exposed
communication with topology placement (GPU-hours; also shown per productive GPU-hour, which
does not grow with the work a faster schedule gets done).  CPU seconds
(``time.process_time``) are printed beside wall seconds, for both arms of the row together.

Presets whose workload has no jobs (``superpod-h100-8su``, ``meta-24k``, ``dragonfly-16k``:
clusters for fabric studies) have nothing to preempt and are listed below the table.

Run: nice .venv/bin/python -m bench.preemption_table [--days 7] [--seed 2] [--rows NAME ...]
     [--markdown]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from scheduler.presets import PRESETS
from scheduler.simulate import Scenario, run_scenario
from scheduler.workload.scenarios import scaled_preset, scenario_workload

MAX_PREEMPTED_SHARE = 3.0
"""Percent of all GPU-hours a row may book as preempted."""


@dataclass(frozen=True)
class Row:
    """One scenario of the table: a preset with its own workload, maybe refabricked or scaled."""

    name: str
    preset: str
    options: dict = field(default_factory=dict)


ROWS = (
    Row("dev-small", "dev-small"),
    Row("noc-4k", "noc-4k"),
    Row("superpod-h100", "superpod-h100"),
    Row("superpod-h100 fat-tree 1:1", "superpod-h100", {"fabric": "fat-tree"}),
    Row("superpod-h100 fat-tree 4:1", "superpod-h100",
        {"fabric": "fat-tree", "oversubscription": 4.0}),
    Row("llama3-16k", "llama3-16k"),
    Row("hyperscale-100k", "hyperscale-100k"),
    Row("mixed-vendor", "mixed-vendor"),
)
"""Every shipped preset with jobs of its own, and the issue's fat-tree cases."""


def measure(row: Row, *, days: float, seed: int) -> dict:
    """Both arms of ``row``: the figures of the table, and CPU and wall seconds of the two."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    arms = {}
    for placement in ("topology", "random"):
        _, r = run_scenario(Scenario(preset=row.preset, days=days, seed=seed,
                                     placement=placement, **row.options))
        hours = r["ledger_gpu_hours"]
        total = sum(hours.values())
        arms[placement] = {
            "gpus": r["scenario"]["gpus"], "jobs": r["jobs"]["submitted"],
            "preemptions": r["jobs"]["preemptions"], "preempted_h": hours["preempted"],
            "share": 100.0 * hours["preempted"] / total if total else 0.0,
            "mfu": r["mfu"]["achieved"], "exposed_h": hours["exposed_communication"],
            "exposed_per_productive": hours["exposed_communication"] / hours["productive"]
            if hours["productive"] else 0.0}
    topo, rand = arms["topology"], arms["random"]
    return {"row": row.name, **topo, "mfu_random": rand["mfu"],
            "exposed_random_h": rand["exposed_h"], "share_random": rand["share"],
            "exposed_per_productive_random": rand["exposed_per_productive"],
            "ok_share": topo["share"] <= MAX_PREEMPTED_SHARE,
            "ok_mfu": topo["mfu"] >= rand["mfu"],
            "ok_exposed": topo["exposed_h"] < rand["exposed_h"],
            "cpu_s": time.process_time() - cpu0, "wall_s": time.perf_counter() - wall0}


HEADER = ("scenario", "GPUs", "jobs", "preemptions", "preempted GPU-h", "preempted %",
          "MFU topology", "MFU random", "exposed comm GPU-h topology", "exposed random",
          "exposed / productive topology", "random", "claims", "CPU s", "wall s")


def cells(m: dict) -> tuple[str, ...]:
    verdict = "ok" if m["ok_share"] and m["ok_mfu"] and m["ok_exposed"] else "FAILS: " + ", ".join(
        what for what, ok in (("share", m["ok_share"]), ("MFU", m["ok_mfu"]),
                              ("exposed", m["ok_exposed"])) if not ok)
    return (m["row"], f"{m['gpus']:,}", f"{m['jobs']:,}", f"{m['preemptions']:,}",
            f"{m['preempted_h']:,.0f}", f"{m['share']:.2f}", f"{m['mfu']:.4f}",
            f"{m['mfu_random']:.4f}", f"{m['exposed_h']:,.0f}", f"{m['exposed_random_h']:,.0f}",
            f"{m['exposed_per_productive']:.3f}", f"{m['exposed_per_productive_random']:.3f}",
            verdict, f"{m['cpu_s']:.1f}", f"{m['wall_s']:.1f}")


def without_jobs(days: float, seed: int) -> list[str]:
    """Presets whose own workload has no training job (nothing to preempt)."""
    from scheduler.sim import Streams
    empty = []
    for name in PRESETS:
        if any(row.preset == name for row in ROWS):
            continue
        spec, scale = scaled_preset(name, None)
        wl = scenario_workload(name, spec.plan(), days=days, rng=Streams(seed).rng("workload"),
                               scale=scale)
        if not wl.jobs:
            empty.append(name)
    return empty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--rows", nargs="*", default=None,
                        help="row names to run (default: all): " + ", ".join(r.name for r in ROWS))
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    rows = [r for r in ROWS if args.rows is None or r.name in args.rows]
    if args.markdown:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "|".join("---" for _ in HEADER) + "|")
    else:
        print("  ".join(HEADER))
    failed = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for row in rows:
        m = measure(row, days=args.days, seed=args.seed)
        c = cells(m)
        print("| " + " | ".join(c) + " |" if args.markdown else "  ".join(c), flush=True)
        if not (m["ok_share"] and m["ok_mfu"] and m["ok_exposed"]):
            failed.append(row.name)
    print(f"\n{args.days:g} days, seed {args.seed}, default policy; "
          f"total CPU {time.process_time() - cpu0:.1f} s, wall {time.perf_counter() - wall0:.1f} s")
    if args.rows is None:
        print("presets without jobs of their own (nothing to preempt): "
              + (", ".join(without_jobs(args.days, args.seed)) or "none"))
    print("claims hold on every row" if not failed else f"claims FAIL on: {', '.join(failed)}")


if __name__ == "__main__":
    main()
