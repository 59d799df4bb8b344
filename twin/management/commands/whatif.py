"""``whatif``: fork the live twin (or a fresh preset engine), apply an action, compare.

The comparison is :func:`scheduler.control.whatif.whatif`; this command picks the engine
(``--from-live``: the live engine's newest snapshot, as the web's what-ifs do; ``--preset``:
a new engine of that preset, run ``--warm-hours`` first), checks the flags as the web does
(:func:`twin.studies.whatif.whatif_params_check`), shows progress, prints a table and writes JSON.
"""

from __future__ import annotations

import json
import sys

from django.core.exceptions import ValidationError
from django.utils import timezone
from tqdm import tqdm

from scheduler.control.whatif import whatif
from scheduler.limits import checks
from scheduler.limits.documents import DocumentError, json_loads
from scheduler.presets import PRESETS
from scheduler.reliability.profiles import PROFILES
from scheduler.simulate import MAX_DAYS, Scenario, ScenarioError
from scheduler.snapshot import loads as engine_loads
from twin.live import selectors
from twin.management.one_line import OneLineCommand, output_path, output_write, refuse
from twin.studies import whatif as service


def _number(flag: str, raw: str, cast=float):
    try:
        if cast is int:
            return checks.integer_from_text(flag, raw)
        return checks.number_from_text(flag, raw, unparsable="a number")
    except ValueError as exc:
        raise refuse(str(exc)) from None


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.{digits}f}".rstrip("0").rstrip(".")
    return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"


def table_lines(report: dict) -> list[str]:
    """The report as readable text: one line per figure (means, the delta's band)."""
    f = report["from"]
    action = report["action"]
    what = "no action" if action is None else json.dumps(action)
    several = len(report["seeds"]) > 1
    where = (f"mirror of cluster {f['cluster']}" if f.get("mirror")
             else f.get("cluster") or f["preset"] or "cluster")
    out = [f"what-if from t={f['t_sim']:,.0f} s ({where}, {f['gpus']:,} "
           f"GPUs): {what}, {report['hours']:g} h, seeds {report['seeds']}",
           f"scheduled by the {f.get('policy') or 'engine'} policy"
           + (f"; failures: {f['failures']['why']}" if f.get("failures") else ""),
           f"means over the seeds; band: {report['band']}", ""]
    headers = ("figure", "baseline", "action", "delta") + (("delta band",) if several else ())
    rows = []
    for name, row in report["summary"].items():
        cells = (name, _fmt(row.get("baseline")), _fmt(row.get("action")),
                 _fmt(row.get("delta")))
        if several:
            band = row.get("delta_band")
            cells += (f"{_fmt(band[0])} .. {_fmt(band[1])}" if band else "-",)
        rows.append(cells)
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    for r in [headers, None, *rows]:
        if r is None:
            out.append("  ".join("-" * w for w in widths))
            continue
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    out.append("")
    for s in report["per_seed"]:
        names = s["jobs_hit"]
        shown = ", ".join(names[:10]) + (f" (+{len(names) - 10} more)" if len(names) > 10 else "")
        out.append(f"seed {s['seed']}: {len(names)} job(s) hit{': ' + shown if names else ''}")
    return out


class Command(OneLineCommand):
    help = ("Fork the live twin's newest snapshot (or a fresh preset engine), apply an action "
            "and compare it with the baseline over several seeds.")

    def add_arguments(self, parser):
        parser.add_argument("--from-live", action="store_true",
                            help="fork the live engine's newest snapshot")
        parser.add_argument("--preset", help=f"fork a new engine of: {', '.join(PRESETS)}")
        parser.add_argument("--seed", default="0", help="--preset: its seed (default 0)")
        parser.add_argument("--warm-hours", default="0",
                            help="--preset: simulated hours to run before the fork (default 0)")
        parser.add_argument("--action", default="null", metavar="JSON",
                            help='the action, e.g. \'{"kind": "spine_switch", "target": 0}\' '
                                 "(default: none)")
        parser.add_argument("--failure-profile", metavar="NAME|PATH",
                            help=f"--preset: failure rates, one of {', '.join(PROFILES)} "
                                 "(default llama3) or a profile .toml file")
        parser.add_argument("--hours", default="24", help="simulated hours forward (default 24)")
        parser.add_argument("--seeds", default="3", help="futures to compare, 1-32 (default 3)")
        parser.add_argument("--first-seed", default="1", help="the first seed (default 1)")
        parser.add_argument("--json", metavar="PATH|-", help="write the report as JSON")

    def execute(self, *args, **options):
        self._json_to_stdout = options.get("json") == "-"
        return super().execute(*args, **options)

    def handle(self, *args, **opts):
        if opts["from_live"] == bool(opts["preset"]):
            raise refuse("give one of --from-live or --preset NAME")
        if opts["from_live"] and opts["failure_profile"]:
            raise refuse("--failure-profile goes with --preset (a live snapshot keeps its "
                         "cluster's profile)")
        try:
            action = json_loads(opts["action"], what="--action")
        except DocumentError as exc:
            raise refuse(str(exc)) from None
        params = {"action": action, "hours": _number("--hours", opts["hours"]),
                  "seeds": _number("--seeds", opts["seeds"], int),
                  "first_seed": _number("--first-seed", opts["first_seed"], int)}
        try:
            checked = service.whatif_params_check(params)
        except ValidationError as exc:
            raise refuse("; ".join(exc.messages)) from None
        json_path = output_path("--json", opts["json"])
        out = self.stderr if self._json_to_stdout else self.stdout
        engine = self._live(out) if opts["from_live"] else self._preset(opts, checked["hours"])
        bar = tqdm(total=len(checked["seeds"]), unit="seed", desc="what-if", file=sys.stderr,
                   disable=None)

        def progress(done: int, total: int) -> None:
            bar.n = done
            bar.refresh()

        try:
            with bar:
                report = whatif(engine, checked["action"], hours=checked["hours"],
                                seeds=checked["seeds"], progress=progress)
        except ValueError as exc:
            raise refuse(str(exc)) from None
        out.write("\n".join(table_lines(report)))
        if opts["json"]:
            text = json.dumps(report, indent=2) + "\n"
            if json_path is None:
                sys.stdout.write(text)
            else:
                output_write(json_path, text)

    def _live(self, out):
        snap = service.whatif_snapshot_latest()
        if snap is None:
            raise refuse("the live engine has stored no snapshot yet (run the twin, or use "
                         "--preset NAME)")
        age = service.snapshot_age(snap, selectors.live_state_get())
        behind = age["behind_live_sim_s"]
        out.write(f"forking snapshot #{snap.pk} of {self._run_name(snap)} at "
                  f"t={snap.t_sim:,.0f} s, written {age['age_s']:,.0f} s ago "
                  f"({timezone.localtime(snap.created_at):%Y-%m-%d %H:%M:%S})"
                  + ("" if behind is None else f", {behind:,.0f} simulated s behind the "
                                               "live frame"))
        data = type(snap).objects.filter(pk=snap.pk).values_list("data", flat=True).first()
        try:
            return engine_loads(data)
        except Exception as exc:  # any corruption: zlib, pickle, a class that moved
            raise refuse(f"snapshot #{snap.pk} cannot be loaded ({type(exc).__name__}: "
                         f"{exc})") from None

    @staticmethod
    def _run_name(snap) -> str:
        """What the snapshot ran: its cluster (an inventory's, a mirror's), else its preset."""
        cluster = selectors.cluster_current() if snap.inventory else None
        return f"cluster {cluster.name}" if cluster is not None \
            else f"{snap.preset} (seed {snap.seed})"

    def _preset(self, opts, hours: float):
        warm = _number("--warm-hours", opts["warm_hours"])
        seed = _number("--seed", opts["seed"], int)
        if not 0 <= warm <= MAX_DAYS * 24 - hours:
            raise refuse(f"--warm-hours must be in [0, {MAX_DAYS * 24 - hours:g}] (the run "
                         f"ends within {MAX_DAYS:g} days), not {opts['warm_hours']!r}")
        # the workload must arrive through the whole window: a day past its end
        days = min(MAX_DAYS, (warm + hours) / 24.0 + 1.0)
        try:
            engine, _ = Scenario(preset=opts["preset"], days=days, seed=seed,
                                 failure_profile=opts["failure_profile"] or "llama3").engine()
        except ScenarioError as exc:
            raise refuse(str(exc)) from None
        engine.run_until(warm * 3600.0)
        return engine
