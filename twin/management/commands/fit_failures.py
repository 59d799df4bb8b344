"""``manage.py fit_failures``: fit a failure profile from a fleet's own records.

    python manage.py fit_failures --csv failures.csv --window-days 54 --gpus 16384 \\
        --nodes 2048 [--units leaf=528,spine=64] [--confidence 0.95] --out myfleet.toml
    python manage.py fit_failures --jobs-csv jobs.csv [--per node|gpu] --out myfleet.toml

The first prints each component's rate with its exact Poisson interval.  The second takes job
records of different sizes (columns ``units, hours, failures``) and splits their failures into
a hardware rate per node (or GPU) and a rate per job whatever its size (Poisson ML of
``a x units + b``, profile-likelihood intervals).  Either writes the profile, which
``simulate`` and ``whatif`` take as ``--failure-profile myfleet.toml`` (``docs/failures.md``).
Bad input is one line and exit status 2; nothing is written then.
"""

from __future__ import annotations

import math
from pathlib import Path

from scheduler.reliability.failures import COMPONENTS, UNITS
from scheduler.reliability.fit import (
    fit_csv,
    fit_job_sizes,
    profile_from_size_fit,
    read_job_csv,
)
from scheduler.reliability.profiles import load_profile, profile_toml
from twin.management.one_line import OneLineCommand, output_path, output_write, refuse


def _positive(flag: str, raw: str, cast=float):
    try:
        value = cast(raw)
    except (TypeError, ValueError):
        raise refuse(f"{flag} must be a positive {'integer' if cast is int else 'number'}, "
                     f"not {raw!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise refuse(f"{flag} must be a positive {'integer' if cast is int else 'number'}, "
                     f"not {raw!r}")
    return value


def _units(raw: str | None) -> dict:
    out = {}
    for part in (raw or "").split(","):
        if not part.strip():
            continue
        comp, _, n = part.partition("=")
        comp = comp.strip()
        if comp not in COMPONENTS:
            raise refuse(f"--units: unknown component {comp!r}; choose among "
                         f"{', '.join(COMPONENTS)}")
        out[comp] = _positive(f"--units {comp}", n.strip(), int)
    return out


class Command(OneLineCommand):
    help = "Fit a failure profile (rates with exact Poisson intervals) from a CSV of failures."

    def add_arguments(self, parser):
        parser.add_argument("--csv", metavar="FILE",
                            help="failures: columns time (hours since the window opened), "
                                 "component[, unit]")
        parser.add_argument("--jobs-csv", metavar="FILE",
                            help="job records of different sizes: columns units (nodes or "
                                 "GPUs), hours (run), failures; fits per-unit and per-job rates")
        parser.add_argument("--per", default="node", choices=("node", "gpu"),
                            help="what --jobs-csv's units count (default node)")
        parser.add_argument("--window-days", help="observation window, days (with --csv)")
        parser.add_argument("--gpus", help="GPUs observed (gpu, nic, link units; with --csv)")
        parser.add_argument("--nodes", help="nodes observed (host, software; with --csv)")
        parser.add_argument("--units", metavar="COMP=N,...",
                            help="unit counts of other components, e.g. leaf=528,spine=64")
        parser.add_argument("--confidence", default="0.95",
                            help="coverage of the intervals (default 0.95)")
        parser.add_argument("--name", help="the profile's name (default: the CSV's stem)")
        parser.add_argument("--out", required=True, metavar="PROFILE.toml",
                            help="the profile file to write")

    def handle(self, *args, **opts):
        confidence = _positive("--confidence", opts["confidence"])
        if not confidence < 1:
            raise refuse(f"--confidence must be in (0, 1), not {opts['confidence']!r}")
        out = output_path("--out", opts["out"])
        if out is None:
            raise refuse("--out needs the path of a .toml file")
        if out.suffix != ".toml":
            raise refuse(f"--out {opts['out']!r} must end in .toml (simulate --failure-profile "
                         "takes .toml paths)")
        if (opts["csv"] is None) == (opts["jobs_csv"] is None):
            raise refuse("give one of --csv (failures over a window) or --jobs-csv (job "
                         "records by size)")
        if opts["jobs_csv"] is not None:
            return self._jobs(opts, out, confidence)
        for flag in ("window_days", "gpus", "nodes"):
            if opts[flag] is None:
                raise refuse(f"--csv needs --{flag.replace('_', '-')}")
        try:
            profile = fit_csv(opts["csv"], window_days=_positive("--window-days",
                                                                 opts["window_days"]),
                              gpus=_positive("--gpus", opts["gpus"], int),
                              nodes=_positive("--nodes", opts["nodes"], int),
                              units=_units(opts["units"]), confidence=confidence,
                              name=opts["name"])
        except ValueError as exc:
            raise refuse(str(exc)) from None
        text = profile_toml(profile)
        output_write(out, text)
        load_profile(out)  # what was written reads back
        self.stdout.write(f"{profile.name}: {len(profile.modes)} mode(s), "
                          f"{confidence:.0%} exact Poisson intervals (chi-square), per unit-hour")
        for m in profile.modes:
            lo, hi = profile.intervals[m.cause]
            self.stdout.write(f"  {m.cause:<14} {m.per_hour:.3e} per {UNITS[m.component]}-hour "
                              f"[{lo:.3e}, {hi:.3e}]")
        self.stdout.write(f"wrote {out}")

    def _jobs(self, opts, out, confidence) -> None:
        try:
            records = read_job_csv(opts["jobs_csv"])
            fit = fit_job_sizes(records, per=opts["per"], confidence=confidence)
        except ValueError as exc:
            raise refuse(str(exc)) from None
        src = Path(opts["jobs_csv"])
        profile = profile_from_size_fit(
            fit, name=opts["name"] or src.stem, confidence=confidence,
            fleet=f"{fit.jobs} job records of {len({r[0] for r in records})} sizes",
            source=f"fitted from {src.name}")
        output_write(out, profile_toml(profile))
        load_profile(out)  # what was written reads back
        self.stdout.write(f"{profile.name}: rate = a x {opts['per']}s + b over {fit.jobs} job "
                          f"records, {fit.failures} failures; {confidence:.0%} "
                          "profile-likelihood intervals")
        for label, e in (("a (hardware)", fit.per_unit), ("b (per job)", fit.per_job)):
            unit = opts["per"] if e is fit.per_unit else "job"
            self.stdout.write(f"  {label:<13} {e.rate:.3e} per {unit}-hour "
                              f"[{e.low:.3e}, {e.high:.3e}]")
        self.stdout.write(f"wrote {out}")
