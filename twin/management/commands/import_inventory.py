"""``import_inventory``: write a cluster from a JSON, CSV or NetBox inventory, or from Slurm;
or a grid of clusters from a JSON grid document (:mod:`twin.inventory.grid_formats`).

The layouts are described in :mod:`twin.inventory.importer`, :mod:`twin.inventory.formats` and
:mod:`twin.mirror.slurm_import`.  Every row is checked before anything is written; the errors go to
stderr one per line (the first :data:`~twin.inventory.importer.MAX_ERRORS`) and the command
exits with status 2, the database as it was.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from django.db import DatabaseError

from scheduler.limits.documents import DocumentError, depth_check, text_read
from twin.inventory.formats import (
    LayoutError,
    inventory_from_csv,
    inventory_from_json,
    inventory_from_netbox,
)
from twin.inventory.grid_formats import grid_import, is_grid_document
from twin.inventory.import_write import inventory_import
from twin.inventory.importer import MAX_ERRORS, InventoryError
from twin.management.one_line import OneLineCommand, refuse
from twin.mirror.slurm_import import (
    SLURM_TIMEOUT,
    SlurmError,
    gres_map_parse,
    inventory_from_slurm,
    slurm_read,
)

FORMATS = ("json", "csv", "netbox")
INVENTORY_MAX_BYTES = 1_000_000_000
"""The largest JSON inventory read (bytes): an export takes about 200 bytes a GPU, so the
largest cluster the twin plans (4,194,304 GPUs) fits; its nesting is bounded as every
document's (64 levels)."""


class Command(OneLineCommand):
    help = ("Import a cluster's inventory from a JSON file, a directory of CSV files, NetBox's "
            "device and cable CSV exports, or a running Slurm (--from-slurm); every row is "
            "checked first and nothing is written when one is wrong.")

    def add_arguments(self, parser):
        parser.add_argument("path", nargs="?", metavar="PATH",
                            help="a JSON file, or a directory of CSV files (csv, netbox)")
        parser.add_argument("--format", choices=FORMATS,
                            help="json (default for a file) or csv (default for a directory), "
                                 "or netbox (devices.csv and cables.csv)")
        parser.add_argument("--name", metavar="CLUSTER",
                            help="cluster name (overrides the file's; required for netbox, "
                                 "for csv without cluster.csv, and with --from-slurm)")
        parser.add_argument("--replace", action="store_true",
                            help="replace an existing cluster of that name")
        parser.add_argument("--from-slurm", action="store_true",
                            help="read nodes and the switch tree from a running Slurm")
        parser.add_argument("--slurm-conf", metavar="PATH",
                            help="slurm.conf of the Slurm to read (sets SLURM_CONF)")
        parser.add_argument("--gres-map", metavar="TYPE=MODEL,...",
                            help="--from-slurm: catalog model of each GRES type that is not a "
                                 "catalog name (gpu=MODEL for untyped gpu:N, TYPE=MODEL/K for "
                                 "MIG slices, K per GPU); kept with the cluster")
        parser.add_argument("--slurm-timeout", type=float, default=SLURM_TIMEOUT,
                            metavar="SECONDS", help="how long to wait for each Slurm command")

    def handle(self, *args, **opts):
        started = time.perf_counter()
        inventory, source = self._read(opts)
        if isinstance(inventory, dict):  # a grid document (twin.inventory.grid_formats)
            return self._grid(inventory, source, opts["replace"], started)
        try:
            cluster = inventory_import(inventory, replace=opts["replace"])
        except InventoryError as exc:
            for line in exc.errors[:MAX_ERRORS]:
                self.stderr.write(line)
            if len(exc.errors) > MAX_ERRORS:
                self.stderr.write(f"... and {len(exc.errors) - MAX_ERRORS} more errors")
            raise refuse(f"{source}: {len(exc.errors)} error(s); nothing was written") \
                from None
        except DatabaseError as exc:
            raise refuse(f"cannot write the inventory: {str(exc).splitlines()[0]} "
                          "(has the database been migrated?)") from None
        s = cluster.summary
        self.stdout.write(f"Imported {cluster.name} from {source}: {s['nodes']:,} nodes, "
                          f"{s['gpus']:,} accelerators, {sum(s['switches'].values()):,} "
                          f"switches, {s['links']:,} cables "
                          f"({time.perf_counter() - started:.2f} s)")
        for line in inventory.warnings:
            self.stdout.write(f"warning: {line}")

    def _grid(self, doc: dict, source: str, replace: bool, started: float) -> None:
        try:
            grid = grid_import(doc, source=source, replace=replace)
        except InventoryError as exc:
            for line in exc.errors[:MAX_ERRORS]:
                self.stderr.write(line)
            raise refuse(f"{source}: {len(exc.errors)} error(s); nothing was written") \
                from None
        except DatabaseError as exc:
            raise refuse(f"cannot write the grid: {str(exc).splitlines()[0]} "
                          "(has the database been migrated?)") from None
        names = [c.name for c in grid.clusters.order_by("id")]
        self.stdout.write(f"Imported grid {grid.name} from {source}: sites {', '.join(names)}, "
                          f"{grid.cloud_regions.count()} cloud region(s), "
                          f"{grid.wan_links.count()} WAN link(s) "
                          f"({time.perf_counter() - started:.2f} s)")

    def _read(self, opts):
        path, fmt, name = opts["path"], opts["format"], opts["name"]
        if opts["from_slurm"]:
            if path or fmt:
                raise refuse("--from-slurm reads Slurm, not a PATH or --format")
            if not name:
                raise refuse("--from-slurm needs --name CLUSTER")
            conf = Path(opts["slurm_conf"]) if opts["slurm_conf"] else None
            if conf is not None and not conf.is_file():
                raise refuse(f"--slurm-conf {conf}: no such file")
            try:
                gres_map = gres_map_parse(opts["gres_map"])
            except ValueError as exc:
                raise refuse(f"--gres-map: {exc}") from None
            try:
                nodes, topology = slurm_read(conf=conf, timeout=opts["slurm_timeout"])
                return inventory_from_slurm(nodes, topology, name=name,
                                            gres_map=gres_map), "Slurm"
            except SlurmError as exc:
                raise refuse(f"cannot read Slurm: {exc}") from None
        if opts["slurm_conf"] or opts["gres_map"]:
            raise refuse(f"{'--slurm-conf' if opts['slurm_conf'] else '--gres-map'} goes with "
                         "--from-slurm")
        if not path:
            raise refuse("give a PATH to import, or --from-slurm")
        p = Path(path)
        if not p.exists():
            raise refuse(f"{path}: no such file or directory")
        fmt = fmt or ("csv" if p.is_dir() else "json")
        if (fmt == "json") == p.is_dir():
            raise refuse(f"{path}: --format {fmt} reads "
                          f"{'a file' if fmt == 'json' else 'a directory'}")
        if fmt == "netbox" and not name:
            raise refuse("--format netbox needs --name CLUSTER")
        try:
            if fmt == "json":
                try:
                    text = text_read(p, what=path, max_bytes=INVENTORY_MAX_BYTES)
                    depth_check(text, what=path)
                    doc = json.loads(text)
                except (OSError, UnicodeDecodeError) as exc:
                    raise LayoutError(f"{path}: cannot read: {exc}") from None
                except DocumentError as exc:
                    raise LayoutError(str(exc)) from None
                except ValueError as exc:  # not JSON; an integer of 5,000 digits
                    raise LayoutError(f"{path}: not JSON: {exc}") from None
                if is_grid_document(doc):
                    if name:
                        raise refuse("--name names a cluster; a grid document names its own")
                    return doc, path
                return inventory_from_json(doc, source=path, name=name), path
            if fmt == "csv":
                return inventory_from_csv(p, name=name), path
            return inventory_from_netbox(p, name=name), path
        except LayoutError as exc:
            raise refuse(str(exc)) from None
