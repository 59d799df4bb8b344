"""Benchmark a whole run: hyperscale-100k for 30 simulated days.

Targets: under 120 s with neither failures nor physics, under 150 s with the failure engine
on, under 180 s with physics on (issues 3, 4, 5); with both on, under 30 s (issue 11).
Run: .venv/bin/python -m bench.simulate [--preset hyperscale-100k] [--days 30] [--seed 0]
     [--failures on|off] [--physics on|off] [--trace PATH] [--policy slurm --slurm-conf PATH]
     [--job-log PATH]
Needs no Django and writes nothing but the job log; prints wall-clock and CPU seconds
(``time.process_time``: this shared machine's wall time varies) and the run's key figures.
"""

import argparse
import sys
import time

from tqdm import tqdm

from scheduler import simulate

TARGET_S = {("off", "off"): 120.0, ("on", "off"): 150.0, ("off", "on"): 180.0,
            ("on", "on"): 30.0}
"""Wall seconds allowed for hyperscale-100k over 30 simulated days, by (failures, physics)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="hyperscale-100k")
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", default="default")
    parser.add_argument("--placement", default=None)
    parser.add_argument("--failures", choices=("on", "off"), default="on")
    parser.add_argument("--physics", choices=("on", "off"), default="on")
    parser.add_argument("--trace", help="replay a trace (Philly, openb or Slurm CSV, or a sacct "
                                        "--json export) instead of the preset's workload")
    parser.add_argument("--slurm-conf", help="the slurm.conf --policy slurm schedules by")
    parser.add_argument("--job-log", help="write job_id,submit_s,start_s,end_s,gpus,nodes here")
    args = parser.parse_args()
    extra = {k: v for k, v in (("trace", args.trace), ("slurm_conf", args.slurm_conf))
             if v is not None}
    cpu0 = time.process_time()

    with tqdm(total=args.days, unit="day", file=sys.stderr, disable=None,
              bar_format="{l_bar}{bar}| {n:.1f}/{total:g} days [{elapsed}]") as bar:
        def progress(now_s: float) -> None:
            bar.n = round(now_s / 86400.0, 3)
            bar.refresh()
        kw = dict(preset=args.preset, days=args.days, seed=args.seed, policy=args.policy,
                  placement=args.placement, failures=args.failures == "on",
                  checkpoint_interval="auto", physics=args.physics == "on")
        if hasattr(simulate, "Scenario"):
            engine, r = simulate.run_scenario(simulate.Scenario(**kw, **extra),
                                              progress=progress)
        else:  # commits before the Scenario dataclass (bench.side_by_side runs them)
            engine, r = simulate.run_scenario(**kw, progress=progress)
    cpu_s = time.process_time() - cpu0
    if args.job_log:
        from scheduler.job_log import write_job_log
        write_job_log(engine, args.job_log)

    sc, jobs, sched = r["scenario"], r["jobs"], r["scheduler"]
    hours = r["ledger_gpu_hours"]
    total = sum(hours.values())
    rows = [
        ("cluster", f"{sc['gpus']:,} GPUs, {sc['nodes']:,} nodes, {sc['fabric']}"),
        ("simulated", f"{sc['days']:g} days, seed {sc['seed']}, policy {sc['policy']} "
                      f"({sc['placement']})"),
        ("failures", f"{args.failures}: {r['failures']['total']:,} failures, "
                     f"{r['interruptions']['unplanned']:,} unplanned and "
                     f"{r['interruptions']['planned']:,} planned interruptions, "
                     f"ETTR {r['ettr']}"),
        ("physics", f"{args.physics}: exposed communication "
                    f"{hours['exposed_communication']:,.0f} GPU-h, data stall "
                    f"{hours['data_stall']:,.0f} GPU-h, throttled {hours['throttled']:,.0f} GPU-h"),
        ("wall seconds", f"{r['wall_seconds']:.1f}"),
        ("CPU seconds", f"{cpu_s:.1f}"),
        ("simulated days per wall second", f"{sc['days'] / max(r['wall_seconds'], 1e-9):.2f}"),
        ("GPU-hours booked / expected", f"{total:,.0f} / {sc['gpus'] * sc['days'] * 24:,.0f}"),
        ("productive share", f"{100 * hours['productive'] / total:.2f} %"),
        ("MFU achieved", f"{100 * r['mfu']['achieved']:.2f} %"),
        ("goodput", f"{100 * r['goodput']:.2f} %"),
        ("jobs submitted / completed", f"{jobs['submitted']:,} / {jobs['completed']:,}"),
        ("jobs running / queued at end", f"{jobs['running_at_end']:,} / "
                                         f"{jobs['queued_at_end']:,}"),
        ("wait mean / p95 h", f"{jobs['wait_hours']['mean']} / {jobs['wait_hours']['p95']}"),
        ("inference SLO attainment", f"{r['inference']['slo_attainment']}"),
        ("cloud GPU-hours / cost", f"{r['cloud']['gpu_hours']:,.0f} / {r['cloud']['cost']:,.0f}"),
        ("placement decisions", f"{sched['placement_decisions']:,}"),
        ("scheduler wall seconds", f"{sched['wall_seconds']:.1f}"),
        ("decisions per second", f"{sched['decisions_per_second']:,}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    target = TARGET_S[(args.failures, args.physics)]
    what = f"failures {args.failures}, physics {args.physics}"
    if args.preset == "hyperscale-100k" and args.days == 30:
        verdict = "meets" if r["wall_seconds"] < target else "MISSES"
        print(f"target: < {target:g} s for hyperscale-100k over 30 days with {what}: "
              f"{verdict} it")
    else:
        print(f"target (hyperscale-100k, 30 days, {what}): < {target:g} s")


if __name__ == "__main__":
    main()
