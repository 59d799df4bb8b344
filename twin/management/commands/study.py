"""``study``: run a scenario x seed sweep on Dask and compare the arms (docs/studies.md).

``study check SPEC`` checks a spec (every arm's scenario and cluster) and prints its runs;
``study run SPEC --out DIR`` runs what is not yet in DIR (on an embedded LocalCluster, or on
``--scheduler tcp://HOST:8786``), shows a progress bar, and writes results.json, CSVs and
report.html.  Bad input (the spec, the flags, an unreachable scheduler) is one line and exit
status 2 before any run starts; runs that fail are listed with their arm and seed, the others
are kept, and the exit status is 1.  ``--save`` also stores the study on the Studies page.
"""

from __future__ import annotations

import sys

from django.core.management.base import CommandError
from tqdm import tqdm

from scheduler.study.spec import SpecError, load_spec
from twin.management.one_line import OneLineCommand, refuse
from twin.studies.grids import inventory_grid
from twin.studies.report import write_all
from twin.studies.runner import StudyError, run_study


def _workers(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise refuse(f"--workers must be an integer, not {raw!r}") from None
    if not 1 <= n <= 256:
        raise refuse(f"--workers must be between 1 and 256, not {n}")
    return n


def verdict_lines(summary: dict) -> list[str]:
    """The paired comparison as a table: one line per (arm, figure)."""
    units = {f["name"]: (f["label"], f["unit"]) for f in summary["figures"]}
    rows = [("arm", "figure", "difference", "95 % CI", "verdict")]
    for row in summary["paired"]:
        for name, d in row["figures"].items():
            label, unit = units[name]
            scale = 100.0 if unit == "fraction" else 1.0
            u = "pp" if unit == "fraction" else unit
            ci = "-" if d["low"] is None else f"[{d['low'] * scale:,.4g}, {d['high'] * scale:,.4g}]"
            mean = "-" if d["mean"] is None else f"{d['mean'] * scale:+,.4g} {u}"
            rows.append((row["arm"], label, mean, ci, d["verdict"]))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    out = []
    for i, r in enumerate(rows):
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    if summary.get("checkpoint_intervals"):  # arms that differ in checkpoint mode say on what
        out.append(f"checkpoint {summary['checkpoint_intervals']}")
    return out


class Command(OneLineCommand):
    help = "Run or check a study: arms x seeds of a scenario, compared with 95 % intervals."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        check = sub.add_parser("check", help="check a spec and list its runs")
        check.add_argument("spec", help="the study spec (YAML or JSON)")
        run = sub.add_parser("run", help="run a study (what is not done yet) and report")
        run.add_argument("spec", help="the study spec (YAML or JSON)")
        run.add_argument("--out", required=True, help="folder for runs and results")
        run.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                         help="an existing Dask scheduler (default: an embedded LocalCluster)")
        run.add_argument("--workers", help="LocalCluster worker processes (default: one per "
                                           "core)")
        run.add_argument("--serial", action="store_true",
                         help="run in this process without Dask (a reference for timings)")
        run.add_argument("--save", action="store_true",
                         help="also store the study and its runs on the Studies page")

    def handle(self, *args, **opts):
        try:
            spec = load_spec(opts["spec"], grids=inventory_grid)
        except SpecError as exc:
            raise refuse(str(exc)) from None
        runs = spec.runs()
        self.stdout.write(f"study {spec.name}: {len(spec.arms)} arms x {len(spec.seeds)} seeds "
                          f"= {len(runs)} runs; baseline {spec.baseline.name}")
        if opts["action"] == "check":
            for arm in spec.arms:
                self.stdout.write(f"  {arm.name}: {arm.changes or '(the base)'}")
            return
        if opts["scheduler"] and (opts["serial"] or opts["workers"]):
            raise refuse("--scheduler runs on that scheduler's workers: not with --serial or "
                         "--workers")
        workers = _workers(opts["workers"])
        bar = tqdm(total=len(runs), unit="run", desc=spec.name, file=sys.stderr, disable=None)
        failed: list[str] = []

        def on_run(rec, done: int, total: int) -> None:
            bar.update(1)
            if rec.status == "failed":
                failed.append(f"arm {rec.arm!r} seed {rec.seed}: {rec.error}")
                bar.write(f"run failed: arm {rec.arm!r} seed {rec.seed}: {rec.error}")

        try:
            with bar:
                outcome = run_study(spec, opts["out"], scheduler=opts["scheduler"],
                                    workers=workers, serial=opts["serial"], on_run=on_run)
        except StudyError as exc:
            raise refuse(str(exc)) from None
        res = write_all(spec, outcome, opts["out"])
        self.stdout.write(f"ran {outcome.ran}, kept {outcome.kept} from an earlier run, "
                          f"failed {outcome.failed}; on {outcome.where}")
        self.stdout.write("\n".join(verdict_lines(res["summary"])))
        self.stdout.write(f"written: {opts['out']}/results.json, arms.csv, paired.csv, "
                          "runs.csv, report.html")
        if opts["save"]:
            from twin.studies.store import study_record
            study = study_record(spec=spec, outcome=outcome, results=res)
            self.stdout.write(f"saved as study #{study.pk}")
        if failed:
            raise CommandError(f"{len(failed)} run(s) failed: " + "; ".join(failed[:5]),
                               returncode=1)
