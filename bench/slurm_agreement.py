"""Slurm against itself, and the twin against Slurm, on issue 25's four scenarios.

Runs every scenario of ``tests/slurm/agreement.py`` (plain backfill holes, multifactor age +
job size, two partitions with PriorityTier, QOS preemption with REQUEUE) on a real Slurm 22.05
twice (four Slurms at once each time, one slurmdbd on a throw-away MariaDB), compares each
stream's two runs job by job (the fair bar), and, where ``simulate`` has ``--policy slurm``,
``--slurm-conf``, ``--cluster`` and ``--job-log``, replays each run's stream through the twin
and compares it with that run.  Needs root and Debian's slurm-wlm, slurmdbd, munge and
mariadb-server.

Run: sudo nice .venv/bin/python -m bench.slurm_agreement [--repeats 2] [--out bench/out/agreement]
Prints one table: scenario, jobs, median |Δstart| s, share within 5 s, Kendall tau, for
Slurm-vs-Slurm and twin-vs-Slurm, with wall and CPU seconds (Slurm's: its daemons' and
clients' CPU, children of this process; the twin's: this process's).
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.environ.update({"DATABASE_URL": f"sqlite:///{db}", "CLUSTERTWIN_INSECURE_DEMO": "1",
                       "CLUSTERTWIN_ENGINE": "off",
                       "DJANGO_SETTINGS_MODULE": "twin.config.settings"})
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "-v0")


def twin_ready() -> str:
    """'' when ``simulate`` has the options the replay needs, else what it lacks."""
    from django.core.management import load_command_class

    parser = load_command_class("twin", "simulate").create_parser("manage.py", "simulate")
    have = {o for a in parser._actions for o in a.option_strings}
    missing = [o for o in ("--cluster", "--slurm-conf", "--job-log") if o not in have]
    choices = next((a.choices for a in parser._actions if "--policy" in a.option_strings), None)
    if choices is not None and "slurm" not in choices:
        missing.append("--policy slurm")
    return ", ".join(missing)


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2, help="Slurm runs of each stream (>= 2)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "agreement"))
    ap.add_argument("--days", default="0.02", help="the twin's --days (0.02 d = 28.8 min)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    setup_django(out / "twin.sqlite3")
    from django.core.management import call_command

    from scheduler.study.agreement import compare, read_job_log
    from tests.slurm.agreement import (
        BATCH,
        SCENARIOS,
        Run,
        Scenario,
        run_scenarios,
        slurm_site,
    )

    missing = twin_ready()
    runs, rows = [], []
    with slurm_site() as (munge, acct):
        for k in range(max(2, args.repeats)):
            wall, cpu = time.perf_counter(), children_cpu()
            runs.append(run_scenarios(list(SCENARIOS), out, munge, acct, tag=f"-{k}"))
            print(f"Slurm run {k}: four scenarios at once, "
                  f"{time.perf_counter() - wall:.0f} s wall, "
                  f"{children_cpu() - cpu:.1f} CPU s (daemons and clients)", flush=True)
        if not missing:
            idle = Run(Scenario("inventory", "PriorityType=priority/basic\n" + BATCH, seed=0),
                       Path(tempfile.mkdtemp(prefix="twin-inventory-")))
            try:
                idle.start(munge, acct)
                idle.ready()
                call_command("import_inventory", "--from-slurm", "--slurm-conf",
                             str(idle.conf), "--name", "agree", stdout=io.StringIO())
            finally:
                idle.daemons.stop()
                shutil.rmtree(idle.root, ignore_errors=True)
    starts = {s.name: [{j.job_id: j.start_s for j in r[s.name].jobs.values()} for r in runs]
              for s in SCENARIOS}
    for s in SCENARIOS:
        for k in range(1, len(runs)):
            rows.append((s.name, f"Slurm run {k} vs run 0",
                         compare(starts[s.name][k], starts[s.name][0]), "", ""))
    for s in SCENARIOS if not missing else ():
        for k, r in enumerate(runs):
            log = r[s.name].trace.parent / "twin-log.csv"
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                call_command("simulate", "--cluster", "agree", "--policy", "slurm",
                             "--slurm-conf", str(r[s.name].conf), "--trace",
                             str(r[s.name].trace), "--job-log", str(log), "--failures", "off",
                             "--physics", "off", "--days", args.days, "--seed", "0",
                             stdout=io.StringIO(), stderr=io.StringIO())
            except Exception as err:  # a twin still being written: report it, go on
                print(f"{s.name} twin replay of run {k} failed: {type(err).__name__}: {err}")
                continue
            rows.append((s.name, f"twin vs Slurm run {k}",
                         compare(read_job_log(log), starts[s.name][k]),
                         f"{time.perf_counter() - wall:.1f}", f"{time.process_time() - cpu:.1f}"))
    print()
    print(f"{'scenario':<12} {'pair':<22} {'jobs':>4} {'median |Δ| s':>12} "
          f"{'within 5 s':>10} {'tau':>6} {'wall s':>7} {'CPU s':>6}")
    for name, pair, a, wall, cpu in rows:
        print(f"{name:<12} {pair:<22} {a.jobs:>4} {a.median_abs_s:>12g} "
              f"{100 * a.within_share:>9.1f}% {a.tau:>6.3f} {wall:>7} {cpu:>6}")
    if missing:
        print(f"\ntwin vs Slurm not run: simulate lacks {missing}")
    for s in SCENARIOS:
        print(f"{s.name}: slurmctld started {runs[0][s.name].ctld_s:+.1f} s from the first "
              f"submit; {sum(j.requeues for j in runs[0][s.name].jobs.values())} requeues")
    print(f"files (traces, slurm.conf, sacct --json, slurmctld logs): {out}")


if __name__ == "__main__":
    main()
