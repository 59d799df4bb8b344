"""Benchmark gang placement on the 101,120-GPU hyperscale-100k cluster. Target: >= 2,000/s.

Run: .venv/bin/python -m bench.placement [--decisions 20000] [--seed 0]

A seeded stream of gangs (sizes 1..1024, heavy-tailed: most are small, most GPUs go to large
ones) is placed on a fresh ``ClusterState`` per strategy; successful placements are allocated,
and whenever more than 80 % of the GPUs are held the oldest allocations are released down to a
random level between 50 % and 80 %, so the cluster stays busy and fragmented.  Only
``Placer.place`` is timed; failed placements count as decisions too.  Needs no Django.
"""

import argparse
import time
from collections import deque

import numpy as np

from scheduler.presets import get_preset

try:
    from scheduler.model.state import ClusterState
    from scheduler.scheduling.placement import STRATEGIES, Placer, Request
except ImportError:  # commits before the sub-packages (bench.side_by_side runs them)
    from scheduler.placement import STRATEGIES, Placer, Request
    from scheduler.state import ClusterState

TARGET_PER_S = 2000.0
SIZES = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
SIZE_WEIGHTS = SIZES ** -0.8 / (SIZES ** -0.8).sum()
"""P(size) ~ size^-0.8: about 10 GPUs per gang on average, a 1,024-GPU gang every ~250."""
HIGH, LOW = 0.80, 0.50
CPU_PER_GPU, RAM_GB_PER_GPU, NIC_GBPS_PER_GPU = 8.0, 100.0, 200.0
BUCKETS = (("1-8", 1, 8), ("16-128", 16, 128), ("256-1024", 256, 1024))


def gangs(state: ClusterState, rng: np.random.Generator):
    """Requests forever: a preferred model (by its share of GPUs), then the others."""
    share = state.model_gpus / state.model_gpus.sum()
    while True:
        g = int(rng.choice(SIZES, p=SIZE_WEIGHTS))
        m = int(rng.choice(state.n_models, p=share))
        models = (m,) + tuple(i for i in range(state.n_models) if i != m)
        if g <= 8:
            affinity = "nvlink"
        else:
            affinity = "pod" if rng.random() < 0.5 else "any"
        yield Request(gpus=g, models=models, affinity=affinity, cpu_per_gpu=CPU_PER_GPU,
                      ram_gb_per_gpu=RAM_GB_PER_GPU, nic_gbps_per_gpu=NIC_GBPS_PER_GPU)


def run(plan, strategy: str, decisions: int, seed: int) -> dict:
    state = ClusterState(plan)
    gang_seq, placer_seq, level_seq = np.random.SeedSequence(seed).spawn(3)
    placer = Placer(state, strategy, np.random.default_rng(placer_seq))
    levels = np.random.default_rng(level_seq)
    capacity = int(state.node_gpus[~state.node_spare].sum())
    live: deque = deque()
    held = 0
    owner = 0
    host = {"cpu_per_gpu": CPU_PER_GPU, "ram_gb_per_gpu": RAM_GB_PER_GPU,
            "nic_gbps_per_gpu": NIC_GBPS_PER_GPU}

    def step(req: Request) -> tuple[float, bool]:
        nonlocal held, owner
        t0 = time.perf_counter()
        p = placer.place(req)
        dt = time.perf_counter() - t0
        if p is None:
            return dt, False
        owner += 1
        live.append((owner, state.allocate(owner, p, **host), p))
        held += p.gpus
        if held > HIGH * capacity:
            target = levels.uniform(LOW, HIGH) * capacity
            while held > target:
                old, gids, old_p = live.popleft()
                state.release(old, gids, old_p, **host)
                held -= old_p.gpus
        return dt, True

    stream = gangs(state, np.random.default_rng(gang_seq))
    while held < 0.65 * capacity:  # warm up, untimed, to a busy cluster
        step(next(stream))
    sizes = np.zeros(decisions, dtype=np.int64)
    secs = np.zeros(decisions)
    ok = np.zeros(decisions, dtype=bool)
    occupancy = np.zeros(decisions)
    for i in range(decisions):
        req = next(stream)
        occupancy[i] = held / capacity
        sizes[i] = req.gpus
        secs[i], ok[i] = step(req)
    return {"strategy": strategy, "sizes": sizes, "secs": secs, "ok": ok,
            "occupancy": occupancy}


def table(headers, rows) -> None:
    cells = [headers] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for j, r in enumerate(cells):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if j == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="hyperscale-100k")
    parser.add_argument("--decisions", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategies", default="topology,first-fit",
                        help=f"comma-separated, of: {', '.join(STRATEGIES)}")
    args = parser.parse_args()
    started = time.perf_counter()
    plan = get_preset(args.preset).plan()
    print(f"{args.preset}: {plan.n_gpus:,} GPUs on {plan.n_nodes:,} nodes "
          f"(plan built in {time.perf_counter() - started:.1f} s); {args.decisions:,} timed "
          f"decisions per strategy, occupancy kept in {LOW:.0%}-{HIGH:.0%}\n")
    results = [run(plan, s, args.decisions, args.seed) for s in args.strategies.split(",")]

    table(("strategy", "decisions", "placed", "failed", "occupancy mean", "decisions/s",
           "p50 us", "p99 us", "max ms"),
          [(r["strategy"], f"{r['secs'].size:,}", f"{r['ok'].sum():,}",
            f"{(~r['ok']).sum():,}", f"{100 * r['occupancy'].mean():.1f} %",
            f"{r['secs'].size / r['secs'].sum():,.0f}",
            f"{1e6 * np.median(r['secs']):,.0f}", f"{1e6 * np.percentile(r['secs'], 99):,.0f}",
            f"{1e3 * r['secs'].max():.1f}") for r in results])
    print()
    rows = []
    for r in results:
        for name, lo, hi in BUCKETS:
            sel = (r["sizes"] >= lo) & (r["sizes"] <= hi)
            if sel.any():
                rows.append((f"{r['strategy']} {name}", f"{sel.sum():,}",
                             f"{100 * r['ok'][sel].mean():.1f} %",
                             f"{1e6 * r['secs'][sel].mean():,.0f}",
                             f"{sel.sum() / r['secs'][sel].sum():,.0f}"))
    table(("strategy, gang GPUs", "decisions", "placed", "mean us", "decisions/s"), rows)
    print()
    for r in results:
        rate = r["secs"].size / r["secs"].sum()
        verdict = "meets" if rate >= TARGET_PER_S else "MISSES"
        print(f"target >= {TARGET_PER_S:,.0f} decisions/s: {r['strategy']} {verdict} it "
              f"({rate:,.0f}/s)")


if __name__ == "__main__":
    main()
