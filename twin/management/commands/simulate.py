"""``simulate``: run a preset (or replay a trace) for some days and report where the GPU-hours went.

The run itself is :func:`scheduler.simulate.run_scenario`; this command parses and checks the
flags, shows progress, prints a summary and writes the JSON report (and the job log).
``--cluster NAME`` runs a cluster of the inventory database, read through the one adapter
(:func:`twin.inventory.adapter.cluster_plan_read`, as the live twin reads it) as built: the
statuses of its nodes are not applied.
"""

from __future__ import annotations

import json
import sys

from tqdm import tqdm

from scheduler.grid.presets import GRID_PRESETS
from scheduler.job_log import job_log_text
from scheduler.limits import checks
from scheduler.presets import PRESETS
from scheduler.reliability.profiles import PROFILES
from scheduler.scheduling.placement import STRATEGIES
from scheduler.scheduling.policies import REGISTRY
from scheduler.simulate import MAX_DAYS, Scenario, ScenarioError, run_scenario
from scheduler.workload.traces import TraceError
from twin.inventory.adapter import cluster_plan_read
from twin.inventory.models import Cluster
from twin.management.grid_cli import grid_simulate, wants_grid
from twin.management.one_line import OneLineCommand, checked, output_path, output_write, refuse

CLUSTERS_LISTED = 20
"""Most cluster names an unknown ``--cluster``'s message lists."""


def _days(raw: str) -> float:
    return checked(checks.number_from_text, "--days", raw, above=0, at_most=MAX_DAYS)


def _integer(flag: str, raw: str | None, *, minimum: int) -> int | None:
    return checked(checks.optional, checks.integer_from_text, flag, raw, at_least=minimum)


def _on_off(flag: str, raw: str) -> bool:
    if raw not in ("on", "off"):
        raise refuse(f"{flag} must be on or off, not {raw!r}")
    return raw == "on"


def _interval(raw: str | None):
    if raw is None or raw in ("auto", "job"):
        return raw
    return checked(checks.number_from_text, "--checkpoint-interval", raw, above=0,
                    expect="auto, job or seconds > 0", unparsable="auto, job or seconds")


def _load(raw: str) -> float:
    return checked(checks.number_from_text, "--load", raw, above=0)


def _ratio(raw: str | None) -> float | None:
    return checked(checks.optional, checks.number_from_text, "--oversubscription", raw,
                    at_least=1)


def _seconds(flag: str, raw: str | None) -> float | None:
    """A restart part in seconds (its bound is the scenario's: one line if out of it)."""
    return checked(checks.optional, checks.number_from_text, flag, raw,
                    expect="a finite number of seconds", unparsable="a number of seconds")


def _fraction(raw: str | None) -> float | None:
    return checked(checks.optional, checks.number_from_text, "--spares", raw, at_least=0,
                    below=1, expect="a fraction in [0, 1)")


def _table(headers: tuple[str, ...], rows: list[tuple], *, labels: bool = True,
           indent: str = "  ") -> list[str]:
    """Plain aligned text: numbers right-aligned, the first column left if it holds labels."""
    cells = [tuple(str(c) for c in headers)] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r):
        return indent + "  ".join(c.ljust(w) if labels and i == 0 else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(r, widths, strict=True)))
    return [line(cells[0]), indent + "  ".join("-" * w for w in widths)] + [line(r)
                                                                           for r in cells[1:]]


def _num(value, fmt: str = ",.2f") -> str:
    return "-" if value is None else format(value, fmt)


def summary_lines(r: dict) -> list[str]:
    """The report as readable text (what the command prints)."""
    sc = r["scenario"]
    skipped = "".join(f"; {n:,} skipped: {why.replace('_', ' ')}"
                      for why, n in (sc.get("trace_skipped") or {}).items())
    source = (f"trace {sc['trace']} ({sc['trace_source']}{skipped})" if sc.get("trace")
              else f"{sc['preset']}'s workload" if sc.get("cluster") else "preset workload")
    if sc.get("slurm_conf"):
        source += f", {sc['slurm_conf']}"
    out = [f"{_label(sc)}: {sc['gpus']:,} GPUs on {sc['nodes']:,} nodes, {sc['fabric']} "
           f"fabric; {sc['days']:g} days, seed {sc['seed']}, policy {sc['policy']} "
           f"(placement {sc['placement']}), {source}", ""]
    hours = r["ledger_gpu_hours"]
    total = sum(hours.values()) or 1.0
    out += ["GPU-hours by category"]
    out += _table(("category", "GPU-hours", "% of total"),
                  [(c, _num(h), f"{100.0 * h / total:.2f}") for c, h in hours.items()]
                  + [("total", _num(sum(hours.values())), "100.00")])
    mfu = r["mfu"]
    losses = sorted(((c, v) for c, v in mfu["loss_pp"].items() if v), key=lambda cv: -cv[1])
    out += ["", f"MFU achieved {100.0 * mfu['achieved']:.2f} %; losses (percentage points)"]
    out += _table(("category", "pp"), [(c, f"{v:.2f}") for c, v in losses])
    j = r["jobs"]
    out += ["", "Jobs"]
    out += _table(("submitted", "completed", "running", "queued", "wait mean h", "wait p95 h",
                   "JCT mean h"),
                  [(f"{j['submitted']:,}", f"{j['completed']:,}", f"{j['running_at_end']:,}",
                    f"{j['queued_at_end']:,}", _num(j["wait_hours"]["mean"]),
                    _num(j["wait_hours"]["p95"]), _num(j["jct_hours"]["mean"]))],
                  labels=False)
    inter = r["interruptions"]
    out += ["", f"Interruptions: {inter['unplanned']:,} unplanned, {inter['planned']:,} planned; "
                f"failures {r['failures']['total']:,} (idle parts included); "
                f"ETTR {_num(r['ettr'], '.3f')}"]
    if inter["by_cause"]:
        out += _table(("cause", "interruptions"),
                      sorted(((c, f"{n:,}") for c, n in inter["by_cause"].items()),
                             key=lambda cn: -int(cn[1].replace(",", ""))))
    big = r["largest_job"]
    if big:
        out += ["", f"Largest job {big['name']}: {big['gpus']:,} GPUs, "
                    f"{big['interruptions']} interruptions, MTTF {_num(big['mttf_hours'])} h, "
                    f"checkpoint every {_num(big['checkpoint_interval_s'], ',.0f')} s "
                    f"(write {_num(big['checkpoint_write_s'])} s), restart "
                    f"{_num(big['restart_s'], ',.0f')} s, ETTR {_num(big['ettr'], '.3f')}, "
                    f"lost {_num(big['lost_gpu_hours'], ',.0f')} GPU-h"]
    net, sto, pw = r["network"], r["storage"], r["power"]
    if "model" not in net:
        rows = [(f"{tier} link utilisation mean / p99",
                 f"{100 * v['mean']:.1f} % / {100 * v['p99']:.1f} %")
                for tier, v in net["link_utilisation"].items()]
        rows += [("exposed communication GPU-hours",
                  _num(net["exposed_communication_gpu_hours"], ",.0f")),
                 ("data stall GPU-hours", _num(sto["data_stall_gpu_hours"], ",.0f")),
                 ("checkpoint GB written", _num(sto["checkpoint_gb_written"], ",.0f"))]
        if pw:
            rows += [("IT MW peak / mean",
                      f"{pw['it_mw']['peak']:.2f} / {pw['it_mw']['mean']:.2f}"),
                     ("facility MW peak / mean",
                      f"{pw['facility_mw']['peak']:.2f} / {pw['facility_mw']['mean']:.2f}"),
                     ("energy MWh (facility)", _num(pw["energy_mwh"]["facility"], ",.0f")),
                     ("rack peak kW (max)", _num(pw["rack_peak_kw"]["max"], ",.1f"))]
        out += ["", "Network, storage and power"]
        out += _table(("figure", "value"), rows)
    inf, cloud, sched = r["inference"], r["cloud"], r["scheduler"]
    slo = inf["slo_attainment"]
    out += ["", "Inference, cloud and scheduler"]
    out += _table(("figure", "value"), [
        ("inference SLO attainment", "-" if slo is None else f"{100.0 * slo:.2f} %"),
        ("inference borrowed GPU-hours", _num(inf["borrowed_gpu_hours"])),
        ("cloud GPU-hours", _num(cloud["gpu_hours"])),
        ("cloud cost", _num(cloud["cost"])),
        ("placement decisions", f"{sched['placement_decisions']:,}"),
        ("decisions per second", _num(sched["decisions_per_second"], ",.0f")),
        ("wall seconds", _num(r["wall_seconds"], ",.2f")),
    ])
    return out


def _label(sc: dict) -> str:
    """What ran: ``cluster NAME`` (``--cluster``) or the preset's name."""
    return f"cluster {sc['cluster']}" if sc.get("cluster") else sc["preset"]


def _cluster(name: str) -> Cluster:
    """The inventory's cluster ``name`` (one line listing the clusters if there is none)."""
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        names = list(Cluster.objects.order_by("name")
                     .values_list("name", flat=True)[:CLUSTERS_LISTED + 1])
        known = (", ".join(names[:CLUSTERS_LISTED]) + (", ..." if len(names) > CLUSTERS_LISTED
                                                       else "")
                 if names else "none (make one with build_cluster or import_inventory)")
        raise refuse(f"--cluster {name!r}: no such cluster in the inventory; clusters: {known}")
    return cluster


def _cluster_plan(cluster: Cluster):
    """The cluster's plan, read as the live twin reads it (one line if it cannot run)."""
    try:
        return cluster_plan_read(cluster=cluster)
    except ValueError as exc:
        raise refuse(f"--cluster {cluster.name!r}: its inventory cannot run: {exc}") from None


class Command(OneLineCommand):
    help = ("Run a preset's (or the inventory's) cluster and workload (or replay a trace) and "
            "report the GPU-hours.")

    def add_arguments(self, parser):
        # Values are parsed here, not by argparse, so every bad flag is one line and status 2.
        parser.add_argument("--preset", help=f"one of: {', '.join(PRESETS)} (required "
                                             "without --cluster); or "
                                             f"{', '.join(GRID_PRESETS)}: a grid run")
        parser.add_argument("--cluster", metavar="NAME",
                            help="run this cluster of the inventory database (build_cluster, "
                                 "import_inventory) instead of a preset's; the workload is "
                                 "--trace's, else --preset's (default: the cluster's own "
                                 "preset) scaled to the cluster")
        parser.add_argument("--days", default="1", help="simulated days (default 1)")
        parser.add_argument("--seed", default="0", help="random seed, >= 0 (default 0)")
        parser.add_argument("--policy", default="default",
                            help=f"one of: {', '.join(REGISTRY)} (default: default)")
        parser.add_argument("--placement",
                            help=f"override the policy's placement: {', '.join(STRATEGIES)}")
        parser.add_argument("--gpus", help="scale the preset's cluster and workload to N GPUs")
        parser.add_argument("--trace", metavar="PATH",
                            help="replay a trace instead of the preset's workload (the cluster "
                                 "stays the preset's): a Philly, Alibaba openb or Slurm CSV "
                                 "(recognised by its header) or a sacct --json export "
                                 "(a .json file)")
        parser.add_argument("--slurm-conf", metavar="PATH",
                            help="the cluster's slurm.conf (or scontrol show config's output), "
                                 "which --policy slurm schedules by")
        parser.add_argument("--job-log", metavar="PATH",
                            help="write job_id,submit_s,start_s,end_s,gpus,nodes of every job "
                                 "of the run (CSV)")
        parser.add_argument("--failures", default="on", help="on (default) or off: the "
                            "failure-free baseline")
        parser.add_argument("--checkpoint-interval", metavar="{auto,job,SECONDS}",
                            help="auto (Young/Daly per job, the default), job (each job's own) "
                                 "or seconds")
        parser.add_argument("--recovery", default="disk",
                            help="disk (default, synchronous), async or memory")
        parser.add_argument("--failure-profile", metavar="NAME|PATH", default="llama3",
                            help=f"failure rates: one of {', '.join(PROFILES)} (default llama3) "
                                 "or a profile .toml file (docs/failures.md)")
        for flag, what in (("--detect-s", "failure detection (default: each failure mode's "
                                          "own)"),
                           ("--reschedule-s", "rescheduling a gang after a failure"),
                           ("--warmup-s", "warm-up after loading the checkpoint")):
            parser.add_argument(flag, metavar="SECONDS", help=f"restart part: {what}")
        parser.add_argument("--spares", metavar="FRACTION",
                            help="fraction of nodes held as hot spares (default: the preset's)")
        parser.add_argument("--physics", default="on", help="on (default): fabric routing, "
                            "storage and power set each job's speed; off: compute only")
        parser.add_argument("--fabric", help="replace the preset's scale-out fabric: "
                            "fat-tree, dragonfly+, rail or island")
        parser.add_argument("--oversubscription", metavar="R",
                            help="oversubscription (>= 1) of a fat-tree's leaves or above islands")
        parser.add_argument("--load-balance", default="spread",
                            help="spread (default: flows split evenly over equal-cost paths, "
                                 "as packet spraying or adaptive routing) or ecmp (each flow "
                                 "hashed onto one path; tree fabrics)")
        parser.add_argument("--load", metavar="X", default="1",
                            help="multiply the preset workload's arrival rates (saturate: > 1)")
        parser.add_argument("--json", metavar="PATH|-", help="write the report as JSON")
        # a grid run (docs/grid_runs.md): --preset grid or --grid NAME, and these
        parser.add_argument("--grid", metavar="NAME",
                            help="run this grid of the inventory (its stored placement weights "
                                 "and replication interval are the defaults)")
        parser.add_argument("--grid-policy", metavar="cost|start|gravity|balanced|W,W,W",
                            help="grid placement: a policy or the weights of cost, start and "
                                 "data gravity")
        parser.add_argument("--replication-s", metavar="SECONDS|never",
                            help="how often checkpoints are copied off-site (grid runs)")
        parser.add_argument("--region-loss", metavar="PLACE@HOURS[+DURATION_H]",
                            action="append", help="a place of the grid goes dark HOURS into "
                                                  "the run, for DURATION_H hours (default: to "
                                                  "the end); repeatable")
        parser.add_argument("--supply-cut", metavar="MODEL@HOURS[+DURATION_H]",
                            action="append", help="no more parts of an accelerator model from "
                                                  "HOURS into the run, for DURATION_H hours "
                                                  "(default: to the end); repeatable")

    def execute(self, *args, **options):
        self._json_to_stdout = options.get("json") == "-"
        return super().execute(*args, **options)

    def handle(self, *args, **opts):
        if wants_grid(opts):
            return grid_simulate(self, opts, days=_days(opts["days"]),
                                 seed=_integer("--seed", opts["seed"], minimum=0),
                                 load=_load(opts["load"]))
        cluster = None if opts["cluster"] is None else _cluster(opts["cluster"])
        scenario = self._options(opts, cluster)
        json_path = output_path("--json", opts["json"])
        if opts["job_log"] == "-":
            raise refuse("--job-log needs the path of a file")
        log_path = output_path("--job-log", opts["job_log"])
        plan = None if cluster is None else _cluster_plan(cluster)
        bar = tqdm(total=round(scenario.days, 3), unit="day",
                   desc=f"simulating {cluster.name if cluster else scenario.preset}",
                   file=sys.stderr, disable=None, bar_format="{l_bar}{bar}| {n:.2f}/{total} "
                   "days [{elapsed}<{remaining}]")

        def progress(now_s: float) -> None:
            bar.n = round(min(now_s / 86400.0, scenario.days), 3)
            bar.refresh()

        try:
            with bar:
                engine, report = run_scenario(scenario, plan=plan, progress=progress)
        except (ScenarioError, TraceError) as exc:
            raise refuse(str(exc)) from None
        for line in engine.kernel.events:  # e.g. slurm.conf keys the twin does not model
            if line["kind"] == "config":
                self.stderr.write(f"warning: {line['text']}")
        out = self.stderr if self._json_to_stdout else self.stdout
        out.write("\n".join(summary_lines(report)))
        if opts["json"]:
            text = json.dumps(report, indent=2, sort_keys=False) + "\n"
            if json_path is None:
                sys.stdout.write(text)
            else:
                output_write(json_path, text)
        if log_path is not None:
            output_write(log_path, job_log_text(engine))

    def _options(self, opts, cluster: Cluster | None) -> Scenario:
        preset = opts["preset"]
        if cluster is not None:
            for flag in ("gpus", "fabric", "oversubscription"):
                if opts[flag] is not None:
                    raise refuse(f"--{flag} shapes a preset's cluster; --cluster runs the "
                                 "inventory's as it is")
            preset = preset or (cluster.preset if cluster.preset in PRESETS else None)
            if preset is None and not opts["trace"]:
                raise refuse(f"--cluster {cluster.name!r} has no preset's workload: give "
                             "--trace PATH (its history) or --preset NAME (a preset's "
                             "workload, scaled to the cluster)")
        elif not preset:
            raise refuse(f"--preset is required; choose one of: {', '.join(PRESETS)} (or run "
                         "a cluster of the inventory with --cluster NAME)")
        kw = {"preset": preset, "days": _days(opts["days"]),
              "seed": _integer("--seed", opts["seed"], minimum=0),
              "policy": opts["policy"], "placement": opts["placement"],
              "gpus": _integer("--gpus", opts["gpus"], minimum=1), "trace": opts["trace"],
              "failures": _on_off("--failures", opts["failures"]),
              "checkpoint_interval": _interval(opts["checkpoint_interval"]),
              "recovery": opts["recovery"], "spares": _fraction(opts["spares"]),
              "fabric": opts["fabric"], "physics": _on_off("--physics", opts["physics"]),
              "oversubscription": _ratio(opts["oversubscription"]),
              "load_balance": opts["load_balance"],
              "load": _load(opts["load"]), "failure_profile": opts["failure_profile"],
              "detect_s": _seconds("--detect-s", opts["detect_s"]),
              "reschedule_s": _seconds("--reschedule-s", opts["reschedule_s"]),
              "warmup_s": _seconds("--warmup-s", opts["warmup_s"]),
              "slurm_conf": opts["slurm_conf"]}
        try:
            return Scenario(**kw)
        except ScenarioError as exc:
            raise refuse(str(exc)) from None
