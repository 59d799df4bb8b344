"""``build_cluster``: generate a cluster's inventory from a preset or a fabric and a size."""

from __future__ import annotations

import json
import sys
import time

from django.db import transaction
from tqdm import tqdm

from scheduler.fabric.dragonfly import max_groups
from scheduler.fabric.fattree import fat_tree_capacity
from scheduler.fabric.rail import rail_capacity
from scheduler.grid.presets import GRID_PRESETS
from scheduler.hardware.catalog import get as get_model
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.limits.bounds import CLUSTER_GPUS, RADIX, Bound
from scheduler.presets import PRESETS, get_preset
from twin.inventory.adapter import cluster_plan_write, plan_row_count
from twin.inventory.models import Cluster
from twin.management.grid_cli import grid_build
from twin.management.one_line import OneLineCommand, output_path, output_write, refuse

FABRICS = ("fat-tree", "dragonfly+", "rail", "dragonfly")


def _positive_int(flag: str, raw: str | None, bound: Bound) -> int | None:
    """``raw`` as an integer within ``bound`` (:mod:`scheduler.limits.bounds`)."""
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise refuse(f"{flag} must be a positive integer, not {raw!r}") from None
    try:
        return bound.check(flag, value)
    except ValueError as exc:
        raise refuse(str(exc)) from None


def full_size(fabric: str, radix: int) -> int:
    """GPUs of the full-size fabric ``build_fabric(fabric, radix=radix)`` builds, counted
    without building it (a large radix would not fit in memory).

    >>> full_size("fat-tree", 8), full_size("dragonfly+", 8), full_size("rail", 64)
    (128, 272, 65536)
    """
    if fabric == "fat-tree":
        return fat_tree_capacity(radix)
    if fabric == "dragonfly+":
        return max_groups(radix) * (radix // 2) ** 2
    if fabric == "dragonfly":   # balanced a = 2p = 2h: router radix 4p - 1
        p = (radix + 1) // 4
        return 2 * p * p * (2 * p * p + 1)
    return rail_capacity(radix, su_per_group=max(1, min(4, (radix // 2) // 8)))


class Command(OneLineCommand):
    help = "Build a cluster's inventory (sites, racks, nodes, GPUs, fabric, storage)."

    def add_arguments(self, parser):
        parser.add_argument("--preset", help=f"one of: {', '.join(PRESETS)}; or "
                            f"{', '.join(GRID_PRESETS)}: a grid of sites, cloud regions and "
                            "WAN links (docs/grid_runs.md)")
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
        if opts["preset"] in GRID_PRESETS:
            return grid_build(self, opts)
        if opts["if_empty"] and not opts["dry_run"] and Cluster.objects.exists():
            self.stdout.write("A cluster already exists; nothing to build.")
            return
        json_path = output_path("--json", opts["json"])  # before anything is written
        started = time.perf_counter()
        plan = self._plan(opts)
        planned = time.perf_counter() - started
        summary = plan.summary()
        # one transaction: if the JSON file cannot be written, the cluster is not kept either
        with transaction.atomic():
            if not opts["dry_run"]:
                self._write(plan, replace=opts["replace"])
            summary["build_seconds"] = round(time.perf_counter() - started, 2)
            summary["plan_seconds"] = round(planned, 2)
            text = json.dumps(summary, indent=2) + "\n"
            if json_path is not None:
                output_write(json_path, text)
        self._print(summary, dry_run=opts["dry_run"])
        if opts["json"] == "-":
            sys.stdout.write(text)

    def _plan(self, opts):
        radix = _positive_int("--radix", opts["radix"], RADIX)
        gpus = _positive_int("--gpus", opts["gpus"], CLUSTER_GPUS)
        if opts["preset"] and opts["fabric"]:
            raise refuse("give --preset or --fabric, not both")
        try:
            if opts["preset"] or not opts["fabric"]:
                if radix or gpus:
                    raise refuse("--radix and --gpus go with --fabric, not --preset")
                return get_preset(opts["preset"] or "dev-small").plan(opts["name"])
            if opts["fabric"] not in FABRICS:
                raise refuse(f"unknown fabric {opts['fabric']!r}; choose one of: "
                             f"{', '.join(FABRICS)}")
            return self._custom_plan(opts["fabric"], radix, gpus, opts)
        except (KeyError, ValueError) as exc:
            raise refuse(str(exc).strip("'\"")) from None

    def _custom_plan(self, fabric, radix, gpus, opts):
        model = get_model(opts["accelerator"])
        kw = {"radix": radix} if radix else {}
        if fabric == "dragonfly" and radix:
            kw = {"p": (radix + 1) // 4}
        if gpus is None:
            if radix is None:
                raise refuse("--fabric needs --radix K or --gpus N")
            if radix % 2:
                raise refuse(f"--radix must be an even integer in {RADIX.interval()}, "
                             f"not {radix}")
            gpus = full_size(fabric, radix)
            if gpus > CLUSTER_GPUS.high:
                raise refuse(f"a full-size radix-{radix} {fabric} fabric holds {gpus:,} GPUs, "
                             f"more than the {CLUSTER_GPUS.high:,} the twin builds; give "
                             "--gpus N as well")
        if gpus % model.per_node:
            raise refuse(f"--gpus {gpus} is not a multiple of {model.per_node} "
                         f"({model.name} GPUs per node)")
        name = opts["name"] or f"{fabric.replace('+', 'plus')}-{gpus}"
        return plan_cluster(name, (NodeGroup(model.name, gpus // model.per_node),),
                            fabric_kind=fabric, fabric_kw=kw)

    def _write(self, plan, *, replace):
        if Cluster.objects.filter(name=plan.name).exists() and not replace:
            raise refuse(f"cluster {plan.name!r} already exists; pass --replace to "
                         "rebuild it")
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
