"""``manage.py mirror_check``: read each mirror source once and say what maps and what not.

    python manage.py mirror_check [--cluster NAME]

Reads Slurm (the commands, or slurmrestd when ``CLUSTERTWIN_SLURM_REST_URL`` is set) and
Prometheus (when ``CLUSTERTWIN_PROMETHEUS_URL`` is set) with the mirror's own readers, maps
what they say onto the inventory's cluster as the running mirror would, and checks the
slurm.conf the what-ifs schedule by.  One line per finding (``OK``, ``WARN``, ``FAIL``); exit
status 0 when nothing failed, 1 when something did, 2 for a bad flag
(``docs/mirror.md``: troubleshooting).
"""

from __future__ import annotations

from twin.inventory.models import Cluster
from twin.live.policy import live_policy
from twin.live.selectors import cluster_choice_problem, cluster_current
from twin.management.one_line import OneLineCommand, refuse
from twin.mirror.check import mirror_check
from twin.mirror.poller import MirrorPoller


class Command(OneLineCommand):
    help = ("Read each mirror source once (Slurm, Prometheus) and say what maps onto the "
            "inventory, what does not and why; exit 0 when the mirror can follow, 1 if not.")

    def add_arguments(self, parser):
        parser.add_argument("--cluster", metavar="NAME",
                            help="the inventory's cluster (default: the one the twin runs)")

    def handle(self, *args, **opts):
        if opts["cluster"]:
            cluster = Cluster.objects.filter(name=opts["cluster"]).first()
            if cluster is None:
                raise refuse(f"--cluster {opts['cluster']!r}: no such cluster in the inventory")
        else:
            if (problem := cluster_choice_problem()):
                raise refuse(problem)
            cluster = cluster_current()
        readers = MirrorPoller.readers
        prometheus = readers["prometheus"] if "prometheus" in MirrorPoller._sources_used() \
            else None
        report = mirror_check(cluster, slurm=readers["slurm"], prometheus=prometheus,
                              policy=lambda: live_policy(mirror=True))
        self.stdout.write("\n".join(report.lines()))
        verdict = ("the mirror can follow this cluster" if report.ok
                   else "the mirror cannot follow this cluster as it stands: see FAIL above")
        self.stdout.write(verdict)
        if not report.ok:
            raise SystemExit(1)
