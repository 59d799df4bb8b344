"""``build_cluster``: generate a cluster's inventory from a preset or a fabric and a size."""

from __future__ import annotations

import json
import sys
import time

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from scheduler.hardware.catalog import get as get_model
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.presets import PRESETS, get_preset
from twin import models as m
from twin.inventory import cluster_plan_write, plan_row_count

FABRICS = ("fat-tree", "dragonfly+", "rail")


def _positive_int(flag: str, raw: str | None) -> int | None:
    if raw is None:
        return None
    message = f"{flag} must be a positive integer, not {raw!r}"
    try:
        value = int(raw)
    except ValueError:
        raise CommandError(message, returncode=2) from None
    if value <= 0:
        raise CommandError(message, returncode=2)
    return value


class Command(BaseCommand):
    help = "Build a cluster's inventory (sites, racks, nodes, GPUs, fabric, storage)."

    def add_arguments(self, parser):
        parser.add_argument("--preset", help=f"one of: {', '.join(PRESETS)}")
        parser.add_argument("--fabric", help=f"custom cluster fabric: {', '.join(FABRICS)}")
        parser.add_argument("--radix", help="switch radix (alone: the full-size fabric)")
        parser.add_argument("--gpus", help="size the custom cluster to this many GPUs")
        parser.add_argument("--accelerator", default="H100-SXM",
                            help="accelerator model of a custom cluster")
        parser.add_argument("--name", help="cluster name (default: the preset or fabric)")
        parser.add_argument("--dry-run", action="store_true", help="build in memory only")
        parser.add_argument("--replace", action="store_true",
                            help="replace an existing cluster of the same name")
        parser.add_argument("--if-empty", action="store_true",
                            help="do nothing if the database already holds a cluster")
        parser.add_argument("--json", metavar="PATH|-", help="write the summary as JSON")

    def handle(self, *args, **opts):
        if opts["if_empty"] and not opts["dry_run"] and m.Cluster.objects.exists():
            self.stdout.write("A cluster already exists; nothing to build.")
            return
        started = time.perf_counter()
        plan = self._plan(opts)
        planned = time.perf_counter() - started
        summary = plan.summary()
        if not opts["dry_run"]:
            self._write(plan, replace=opts["replace"])
        summary["build_seconds"] = round(time.perf_counter() - started, 2)
        summary["plan_seconds"] = round(planned, 2)
        self._print(summary, dry_run=opts["dry_run"])
        if opts["json"]:
            text = json.dumps(summary, indent=2)
            if opts["json"] == "-":
                sys.stdout.write(text + "\n")
            else:
                with open(opts["json"], "w") as fh:
                    fh.write(text + "\n")

    def _plan(self, opts):
        radix = _positive_int("--radix", opts["radix"])
        gpus = _positive_int("--gpus", opts["gpus"])
        if opts["preset"] and opts["fabric"]:
            raise CommandError("give --preset or --fabric, not both", returncode=2)
        try:
            if opts["preset"] or not opts["fabric"]:
                if radix or gpus:
                    raise CommandError("--radix and --gpus go with --fabric, not --preset",
                                       returncode=2)
                return get_preset(opts["preset"] or "dev-small").plan(opts["name"])
            if opts["fabric"] not in FABRICS:
                raise CommandError(f"unknown fabric {opts['fabric']!r}; choose one of: "
                                   f"{', '.join(FABRICS)}", returncode=2)
            return self._custom_plan(opts["fabric"], radix, gpus, opts)
        except (KeyError, ValueError) as exc:
            raise CommandError(str(exc).strip("'\""), returncode=2) from None

    def _custom_plan(self, fabric, radix, gpus, opts):
        model = get_model(opts["accelerator"])
        kw = {"radix": radix} if radix else {}
        if gpus is None:
            if radix is None:
                raise CommandError("--fabric needs --radix K or --gpus N", returncode=2)
            from scheduler.physics.fabric import build_fabric
            gpus = build_fabric(fabric, radix=radix).n_endpoints
        if gpus % model.per_node:
            raise CommandError(f"--gpus {gpus} is not a multiple of {model.per_node} "
                               f"({model.name} GPUs per node)", returncode=2)
        name = opts["name"] or f"{fabric.replace('+', 'plus')}-{gpus}"
        return plan_cluster(name, (NodeGroup(model.name, gpus // model.per_node),),
                            fabric_kind=fabric, fabric_kw=kw)

    def _write(self, plan, *, replace):
        if m.Cluster.objects.filter(name=plan.name).exists() and not replace:
            raise CommandError(f"cluster {plan.name!r} already exists; pass --replace to "
                               "rebuild it", returncode=2)
        with tqdm(total=plan_row_count(plan), unit="rows", desc=f"writing {plan.name}",
                  file=sys.stderr, disable=None) as bar:
            def progress(stage, n):
                bar.set_postfix_str(stage)
                bar.update(n)
            cluster_plan_write(plan, replace=replace, progress=progress)

    def _print(self, s, *, dry_run):
        out = self.stderr if self._json_to_stdout else self.stdout
        verb = "Planned (dry run, nothing written)" if dry_run else "Built"
        out.write(f"{verb} {s['name']}: {s['gpus']:,} GPUs on {s['nodes']:,} nodes in "
                  f"{s['racks']:,} racks; {s['fabric']} fabric with "
                  + ", ".join(f"{n:,} {t}" for t, n in s["switches"].items())
                  + f" switches, {s['links']:,} links, {s['transceivers']:,} transceivers; "
                  f"{s['it_power_kw']:,.0f} kW IT peak ({s['build_seconds']} s)")

    @property
    def _json_to_stdout(self) -> bool:
        return getattr(self, "_opts_json", None) == "-"

    def execute(self, *args, **options):
        self._opts_json = options.get("json")
        return super().execute(*args, **options)
