"""The grid at the command line (issue 30): ``build_cluster --preset grid`` writes the grid
preset into the inventory, ``simulate --preset grid`` runs it headless and ``simulate --grid
NAME`` runs a grid of the inventory (docs/grid_runs.md).

The commands call in here only when a grid is asked for, so their other runs (and outputs)
are untouched.  As in the commands, every bad flag is one line and exit status 2
(:func:`~twin.management.one_line.refuse`), checked before anything is run or written.
"""

from __future__ import annotations

import json
import sys
import time

from django.db import transaction

from scheduler.grid.placement import POLICIES
from scheduler.grid.places import check_plans
from scheduler.grid.presets import GRID_PRESETS
from scheduler.grid.run import grid_preset, run_grid
from scheduler.limits import checks
from scheduler.simulate import MAX_DAYS
from twin.inventory.grid import grid_settings_read, grid_spec_read, grid_write
from twin.inventory.models import Cluster, Grid
from twin.management.one_line import checked, output_path, output_write, refuse

GRIDS_LISTED = 20
"""Most grid names an unknown ``--grid``'s message lists."""
MOVES_LISTED = 20
"""Most jobs the printed summary lists as moved between places."""

SIMULATE_GRID_FLAGS = ("grid_policy", "replication_s", "region_loss", "supply_cut")
"""``simulate``'s flags that only a grid run takes."""
SIMULATE_CLUSTER_FLAGS = {
    "cluster": None, "policy": "default", "placement": None, "gpus": None, "trace": None,
    "slurm_conf": None, "job_log": None, "failures": "on", "checkpoint_interval": None,
    "recovery": "disk", "failure_profile": "llama3", "detect_s": None, "reschedule_s": None,
    "warmup_s": None, "spares": None, "physics": "on", "fabric": None,
    "oversubscription": None, "load_balance": "spread"}
"""``simulate``'s flags (with their defaults) that shape one cluster's run, not a grid's."""
GRID_TAKES = ("--days, --seed, --load, --grid-policy, --replication-s, --region-loss, "
              "--supply-cut and --json")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _table(headers, rows, *, left: int = 1, indent: str = "  ") -> list[str]:
    """Aligned text: the first ``left`` columns (labels) left, the others right."""
    cells = [tuple(str(c) for c in headers)] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r):
        return indent + "  ".join(c.ljust(w) if i < left else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(r, widths, strict=True)))
    return [line(cells[0]), indent + "  ".join("-" * w for w in widths)] + [
        line(r) for r in cells[1:]]


def _num(value, fmt: str = ",.2f") -> str:
    return "-" if value is None else format(value, fmt)


# ------------------------------------------------------------------ build_cluster
def grid_summary(spec, plans) -> dict:
    """What ``build_cluster --preset grid`` prints and writes as JSON: the grid's places and
    links, each owned site with its plan's size."""
    sites = []
    for s in spec.sites:
        p = plans[s.name].summary()
        sites.append({"name": s.name, "region": s.region, "jurisdiction": s.jurisdiction,
                      "gpus": p["gpus"], "gpus_by_model": p["gpus_by_model"],
                      "nodes": p["nodes"], "racks": p["racks"], "fabric": p["fabric"],
                      "it_power_kw": p["it_power_kw"], "pue": s.pue,
                      "power_price_per_kwh": s.power_price_per_kwh, "stacks": list(s.stacks)})
    clouds = [{"place": c.place, "jurisdiction": c.jurisdiction, "model": c.model,
               "quota_gpus": c.quota_gpus, "on_demand_per_gpu_hour": c.on_demand_per_gpu_hour,
               "spot_per_gpu_hour": c.spot_per_gpu_hour, "startup_s": c.startup_s,
               "stacks": list(c.stacks)} for c in spec.clouds]
    links = [{"a": w.a, "b": w.b, "gbps": w.gbps, "latency_ms": w.latency_ms,
              "egress_per_gb": w.egress_per_gb, "egress_back_per_gb": w.egress_back_per_gb}
             for w in spec.links]
    return {"grid": spec.name, "sites": sites, "clouds": clouds, "links": links,
            "gpus": sum(s["gpus"] for s in sites),
            "cloud_quota_gpus": sum(c["quota_gpus"] for c in clouds),
            "it_power_kw": round(sum(s["it_power_kw"] for s in sites), 1)}


def grid_build(cmd, opts: dict) -> None:
    """``build_cluster --preset grid``: write (or with ``--dry-run`` only plan) the grid."""
    for name, default in (("fabric", None), ("radix", None), ("gpus", None), ("name", None),
                          ("accelerator", "H100-SXM")):
        if opts[name] != default:
            raise refuse(f"{_flag(name)} shapes one cluster; --preset {opts['preset']} "
                         "writes the grid preset's sites as they are")
    if opts["if_empty"] and not opts["dry_run"] and Cluster.objects.exists():
        cmd.stdout.write("A cluster already exists; nothing to build.")
        return
    json_path = output_path("--json", opts["json"])
    started = time.perf_counter()
    spec, plans = grid_preset(opts["preset"])
    sites = {s.name: plans[s.name] for s in spec.sites}
    summary = grid_summary(spec, plans)
    planned = time.perf_counter() - started
    if not opts["dry_run"] and not opts["replace"]:
        if Grid.objects.filter(name=spec.name).exists():
            raise refuse(f"grid {spec.name!r} already exists; pass --replace to rebuild it")
        taken = Cluster.objects.filter(name__in=list(sites)).order_by("name") \
            .values_list("name", flat=True).first()
        if taken is not None:
            raise refuse(f"cluster {taken!r} already exists; pass --replace to rebuild it "
                         "as a site of the grid")
    with transaction.atomic():  # a JSON file that cannot be written keeps no grid either
        if not opts["dry_run"]:
            try:
                grid_write(spec, sites, replace=opts["replace"])
            except ValueError as exc:
                raise refuse(str(exc)) from None
        summary["written"] = not opts["dry_run"]
        summary["build_seconds"] = round(time.perf_counter() - started, 2)
        summary["plan_seconds"] = round(planned, 2)
        text = json.dumps(summary, indent=2) + "\n"
        if json_path is not None:
            output_write(json_path, text)
    out = cmd.stderr if opts["json"] == "-" else cmd.stdout
    out.write("\n".join(grid_build_lines(summary)))
    if opts["json"] == "-":
        sys.stdout.write(text)


def grid_build_lines(s: dict) -> list[str]:
    verb = "Planned (dry run, nothing written)" if not s["written"] else "Built"
    out = [f"{verb} grid {s['grid']}: {len(s['sites'])} sites ({s['gpus']:,} GPUs, "
           f"{s['it_power_kw']:,.0f} kW IT peak), {len(s['clouds'])} cloud regions "
           f"({s['cloud_quota_gpus']:,} GPUs of quota), {len(s['links'])} WAN links "
           f"({s['build_seconds']} s)"]
    out += _table(("place", "where", "jurisdiction", "model", "fabric", "GPUs", "nodes"),
                  [(x["name"], x["region"], x["jurisdiction"], ", ".join(x["gpus_by_model"]),
                    x["fabric"], f"{x['gpus']:,}", f"{x['nodes']:,}") for x in s["sites"]]
                  + [(c["place"], "cloud region", c["jurisdiction"], c["model"], "-",
                      f"{c['quota_gpus']:,}", "-") for c in s["clouds"]], left=5)
    out += [""] + _table(("WAN link", "Gb/s", "latency ms", "egress $/GB"),
                  [(f"{w['a']} - {w['b']}", f"{w['gbps']:g}", f"{w['latency_ms']:g}",
                    f"{w['egress_per_gb']:g}") for w in s["links"]])
    return out


# ------------------------------------------------------------------ simulate
def wants_grid(opts: dict) -> bool:
    """Whether ``simulate``'s flags ask for a grid run; grid-only flags on a cluster run are
    refused here."""
    if opts.get("grid") is not None or opts.get("preset") in GRID_PRESETS:
        return True
    for name in SIMULATE_GRID_FLAGS:
        if opts.get(name) is not None:
            raise refuse(f"{_flag(name)} goes with a grid run: --preset "
                         f"{' | '.join(GRID_PRESETS)} or --grid NAME")
    return False


def grid_policy(raw: str | None):
    """``--grid-policy``: a name of the placement policies or ``w_cost,w_start,w_gravity``."""
    if raw is None:
        return None
    if raw in POLICIES:
        return raw
    parts = raw.split(",")
    expect = (f"{', '.join(POLICIES)} or three weights w_cost,w_start,w_gravity (each >= 0, "
              "not all 0)")
    if len(parts) != 3:
        raise refuse(f"--grid-policy must be {expect}, not {raw!r}")
    weights = [checked(checks.number_from_text, "--grid-policy", p.strip(), at_least=0,
                       expect=expect, unparsable=expect) for p in parts]
    if not any(weights):
        raise refuse(f"--grid-policy must be {expect}, not {raw!r}")
    return dict(zip(("cost", "start", "gravity"), weights, strict=True))


def replication(raw: str | None):
    """``--replication-s``: seconds > 0, or ``never``; ``...`` when not given."""
    if raw is None:
        return ...
    if raw == "never":
        return None
    return checked(checks.number_from_text, "--replication-s", raw, above=0,
                   at_most=MAX_DAYS * 86400.0, expect="seconds > 0 (at most 366 days) or never",
                   unparsable="seconds or never")


def _window(flag: str, when: str, days: float) -> tuple[float, float | None]:
    """``HOURS[+DURATION_H]`` of ``flag`` as ``(at_s, duration_s or None)``: it starts within
    the run and lasts a positive time (left out: to the end)."""
    hours, plus, duration = when.partition("+")
    at_h = checked(checks.number_from_text, f"{flag} hours", hours, at_least=0,
                   below=days * 24.0, expect=f"hours in [0, {days * 24.0:g}) (within the run)",
                   unparsable="hours")
    if not plus:
        return at_h * 3600.0, None
    dur_h = checked(checks.number_from_text, f"{flag} duration", duration, above=0,
                    at_most=MAX_DAYS * 24.0, expect="hours > 0", unparsable="hours")
    return at_h * 3600.0, dur_h * 3600.0


def region_losses(raws, places: tuple[str, ...], days: float) -> list[tuple]:
    """``--region-loss PLACE@HOURS[+DURATION_H]`` (repeatable) as ``(place, at_s,
    duration_s or None)``: the place goes dark HOURS into the run, for DURATION_H hours
    (left out: to the end)."""
    out = []
    for raw in raws or ():
        place, at, when = raw.rpartition("@")
        form = f"--region-loss must be PLACE@HOURS or PLACE@HOURS+DURATION_H, not {raw!r}"
        if not at or not place:
            raise refuse(form)
        if place not in places:
            raise refuse(f"--region-loss {raw!r}: {place!r} is no place of the grid; places: "
                         f"{', '.join(places)}")
        out.append((place, *_window("--region-loss", when, days)))
    return out


def supply_cuts(raws, models: tuple[str, ...], days: float) -> list[tuple]:
    """``--supply-cut MODEL@HOURS[+DURATION_H]`` (repeatable) as ``(model, at_s, duration_s
    or None)``: no more parts of MODEL (an accelerator model of the grid's places) from
    HOURS into the run, for DURATION_H hours (left out: to the end)."""
    out = []
    for raw in raws or ():
        model, at, when = raw.rpartition("@")
        if not at or not model:
            raise refuse(f"--supply-cut must be MODEL@HOURS or MODEL@HOURS+DURATION_H, not "
                         f"{raw!r}")
        found = [m for m in models if m.lower() == model.lower()]
        if not found:
            raise refuse(f"--supply-cut {raw!r}: no place of the grid has accelerator model "
                         f"{model!r}; models: {', '.join(models)}")
        out.append((found[0], *_window("--supply-cut", when, days)))
    return out


def _models(plans: dict) -> tuple[str, ...]:
    """The accelerator models of a grid's places, by name."""
    return tuple(sorted({m.name for plan in plans.values() for m in plan.models}))


def _inventory_grid(name: str) -> Grid:
    grid = Grid.objects.filter(name=name).first()
    if grid is None:
        names = list(Grid.objects.order_by("name").values_list("name", flat=True)
                     [:GRIDS_LISTED + 1])
        known = (", ".join(names[:GRIDS_LISTED]) + (", ..." if len(names) > GRIDS_LISTED
                                                     else "")
                 if names else "none (make one with build_cluster --preset grid)")
        raise refuse(f"--grid {name!r}: no such grid in the inventory; grids: {known}")
    return grid


def grid_simulate(cmd, opts: dict, *, days: float, seed: int, load: float) -> None:
    """``simulate --preset grid`` / ``simulate --grid NAME``: run, print, write the JSON."""
    for name, default in SIMULATE_CLUSTER_FLAGS.items():
        if opts[name] != default:
            raise refuse(f"{_flag(name)} shapes a cluster's run; a grid run takes {GRID_TAKES}")
    policy = grid_policy(opts["grid_policy"])
    interval = replication(opts["replication_s"])
    if opts["grid"] is not None:
        if opts["preset"] is not None:
            raise refuse("--grid runs a grid of the inventory: not with --preset")
        row = _inventory_grid(opts["grid"])
        try:
            spec, plans = grid_spec_read(grid=row)
        except ValueError as exc:
            raise refuse(f"--grid {row.name!r}: its inventory cannot run: {exc}") from None
        stored = grid_settings_read(grid=row)
        defaults = ({"cost": stored["weight_cost"], "start": stored["weight_start"],
                     "gravity": stored["weight_gravity"]},
                    stored["checkpoint_replication_s"] or None)
        source = "inventory"
    else:
        spec, plans = grid_preset(opts["preset"])
        defaults, source = ("balanced", 3600.0), "preset"
    losses = region_losses(opts["region_loss"], spec.places(), days)
    cuts = supply_cuts(opts.get("supply_cut"), _models(check_plans(spec, plans)), days)
    json_path = output_path("--json", opts["json"])
    policy = defaults[0] if policy is None else policy
    interval = defaults[1] if interval is ... else interval
    try:
        _, report = run_grid(spec, plans, days=days, seed=seed, policy=policy,
                             replication_s=interval, load=load, region_loss=losses,
                             supply_cuts=cuts)
    except ValueError as exc:
        raise refuse(str(exc)) from None
    report["scenario"]["source"] = source
    out = cmd.stderr if opts["json"] == "-" else cmd.stdout
    out.write("\n".join(grid_summary_lines(report)))
    if opts["json"]:
        text = json.dumps(report, indent=2) + "\n"
        if json_path is None:
            sys.stdout.write(text)
        else:
            output_write(json_path, text)


def _policy_text(sc: dict) -> str:
    w = sc["weights"]
    weights = f"cost {w['cost']:g}, start {w['start']:g}, gravity {w['gravity']:g}"
    if sc["policy"] == "weights":
        return f"placement weights {weights}"
    return f"policy {sc['policy']} (weights {weights})"


def grid_summary_lines(r: dict) -> list[str]:
    """A grid report as readable text: one row per place, then the grid's summary."""
    sc, sm = r["scenario"], r["summary"]
    rep = ("checkpoints never off-site" if sc["replication_s"] is None
           else f"checkpoints off-site every {sc['replication_s']:,.0f} s")
    losses = "".join(f"; region loss {p} at {at / 3600:g} h "
                     + ("to the end" if d is None else f"for {d / 3600:g} h")
                     for p, at, d in sc["region_loss"])
    losses += "".join(f"; supply of {m} cut at {at / 3600:g} h "
                      + ("to the end" if d is None else f"for {d / 3600:g} h")
                      for m, at, d in sc.get("supply_cuts", ()))
    out = [f"grid {sc['grid']} ({sc.get('source', 'preset')}): {len(r['sites'])} places; "
           f"days {sc['days']:g}, seed {sc['seed']}, load {sc['load']:g}, {_policy_text(sc)}, "
           f"{rep}{losses}", "", "Sites and cloud regions"]
    rows = [(s["place"], s["kind"], f"{s['gpus']:,}", f"{100 * s['allocation']:.1f}",
             f"{100 * s['mfu']:.1f}", _num(s["cost"], ",.0f"), _num(s["egress_cost"], ",.0f"),
             _num(s["wan_in_gb"], ",.0f"), _num(s["wan_out_gb"], ",.0f"),
             f"{s['jobs_submitted']:,}", _num(s["dark_hours"], ",.1f")) for s in r["sites"]]
    tot = lambda k: sum(s[k] for s in r["sites"])  # noqa: E731 - a column's total
    rows.append(("total", "", f"{tot('gpus'):,}", "", "", _num(tot("cost"), ",.0f"),
                 _num(tot("egress_cost"), ",.0f"), _num(tot("wan_in_gb"), ",.0f"),
                 _num(tot("wan_out_gb"), ",.0f"), f"{tot('jobs_submitted'):,}", ""))
    out += _table(("place", "kind", "GPUs", "allocation %", "MFU %", "cost $", "egress $",
                   "WAN in GB", "WAN out GB", "jobs", "dark h"), rows, left=2)
    j, w, c, m = sm["jobs"], sm["wait_hours"], sm["cost"], sm["moved_gb"]
    dm, rl = sm["data_move"], sm["region_loss"]
    out += ["", "Grid"]
    out += _table(("figure", "value"), [
        ("jobs arrived / started / completed", f"{j['arrived']:,} / {j['started']:,} / "
                                               f"{j['completed']:,}"),
        ("jobs refused / held / moving data", f"{j['refused']:,} / {j['held']:,} / "
                                              f"{j['moving']:,}"),
        ("wait mean / p95 h", f"{_num(w['mean'])} / {_num(w['p95'])}"),
        ("cost compute / egress / total $", f"{_num(c['compute'], ',.0f')} / "
                                            f"{_num(c['egress'], ',.0f')} / "
                                            f"{_num(c['total'], ',.0f')}"),
        ("moved GB for jobs (datasets + checkpoints)",
         f"{_num(m['jobs'], ',.0f')} ({_num(m['datasets'], ',.0f')} + "
         f"{_num(m['checkpoints'], ',.0f')})"),
        ("moved GB replicas / WAN total", f"{_num(m['replicas'], ',.0f')} / "
                                          f"{_num(m['total'], ',.0f')}"),
        ("data-move job hours / GPU-hours", f"{_num(dm['job_hours'])} / "
                                            f"{_num(dm['gpu_hours'])}"),
        ("region loss: jobs hit / restarted / from checkpoint",
         f"{rl['jobs_hit']:,} / {rl['restarted']:,} / {rl['from_checkpoint']:,}"),
        ("region loss: lost H100 GPU-hours", _num(rl["lost_h100_gpu_hours"])),
        ("supply cut: jobs delayed / still waiting",
         f"{sm['supply_cut']['jobs_delayed']:,} / {sm['supply_cut']['jobs_waiting']:,}"),
        ("supply cut: capacity refused GPU-hours",
         _num(sum(s["supply_cut"]["capacity_refused_gpu_hours"] for s in r["sites"]))),
        ("wall seconds", _num(r["wall_seconds"])),
    ])
    moved = [x for x in r["jobs"] if len(x["places"]) > 1]
    if moved:
        out += ["", f"Jobs placed again after a region loss ({len(moved):,}"
                    + (f", first {MOVES_LISTED}" if len(moved) > MOVES_LISTED else "") + ")"]
        out += _table(("job", "places", "GPUs", "moved GB", "lost H100 GPU-h"),
                      [(x["name"], " > ".join(x["places"]), f"{x['gpus']:,}",
                        _num(x["moved_gb"], ",.0f"), _num(x["lost_h100_gpu_hours"]))
                       for x in moved[:MOVES_LISTED]], left=2)
    if r.get("refused"):
        out += ["", f"Refused: {len(r['refused']):,} jobs no place can run (reasons in the "
                    "JSON report)"]
    return out
