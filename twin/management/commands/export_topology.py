"""``export_topology``: write a cluster's Slurm topology or Kubernetes labels from the inventory.

The formats and every choice in them are described in :mod:`twin.inventory.topology_export`; this
command
checks the flags, picks the cluster, and writes the files atomically.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.db import DatabaseError

from twin.inventory.models import Cluster
from twin.inventory.topology_export import (
    FORMATS,
    GRES_CONF,
    SLURM_NODES,
    cluster_topology_get,
    files_write,
    topology_files,
)
from twin.management.one_line import OneLineCommand, refuse


class Command(OneLineCommand):
    help = ("Export a cluster's topology from the inventory: topology.conf for Slurm's "
            "topology/tree or topology/block (with slurm-nodes.conf and gres.conf beside it), "
            "or Kubernetes node labels and a Kueue Topology (k8s).")

    def add_arguments(self, parser):
        parser.add_argument("--format", help=f"one of: {', '.join(FORMATS)}")
        parser.add_argument("--out", metavar="PATH",
                            help="file to write (Slurm formats also write slurm-nodes.conf and "
                                 "gres.conf in its directory)")
        parser.add_argument("--cluster", metavar="NAME",
                            help="cluster to export (default: the only one in the database)")

    def handle(self, *args, **opts):
        fmt, out = opts["format"], opts["out"]
        if fmt not in FORMATS:
            raise refuse(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}"
                          if fmt else f"--format is required: one of {', '.join(FORMATS)}")
        if not out:
            raise refuse("--out PATH is required")
        path = Path(out)
        if path.is_dir():
            raise refuse(f"--out {out} is a directory; give the path of the file to write")
        if not path.parent.is_dir():
            raise refuse(f"--out {out}: directory {path.parent} does not exist")
        if fmt != "k8s" and path.name in (SLURM_NODES, GRES_CONF):
            raise refuse(f"--out {out}: {path.name} is written beside topology.conf; "
                          "name the topology file otherwise")
        started = time.perf_counter()
        try:
            cluster = self._cluster(opts["cluster"])
            inventory = cluster_topology_get(cluster=cluster)
        except DatabaseError as exc:
            raise refuse(f"cannot read the inventory: {str(exc).splitlines()[0]} "
                          "(has the database been migrated?)") from None
        try:
            files = topology_files(fmt, inventory, path)
        except ValueError as exc:
            raise refuse(f"cannot export {cluster.name}: {exc}") from None
        try:
            files_write(files)
        except OSError as exc:
            raise refuse(f"cannot write {exc.filename}: {exc.strerror}") from None
        self.stdout.write(f"Exported {cluster.name} ({len(inventory.hostname):,} nodes) as "
                          f"{fmt}: {', '.join(str(p) for p in files)} "
                          f"({time.perf_counter() - started:.2f} s)")

    def _cluster(self, name: str | None) -> Cluster:
        names = list(Cluster.objects.order_by("name").values_list("name", flat=True))
        if not names:
            raise refuse("no cluster in the database; build one with manage.py build_cluster")
        if name is None:
            if len(names) > 1:
                raise refuse(f"the database holds {len(names)} clusters ({', '.join(names)}); "
                              "pass --cluster NAME")
            name = names[0]
        if name not in names:
            raise refuse(f"unknown cluster {name!r}; the database holds: {', '.join(names)}")
        return Cluster.objects.get(name=name)
