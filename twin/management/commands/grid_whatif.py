"""``manage.py grid_whatif``: run a grid's mirrored what-ifs (docs/grid_whatif.md).

    python manage.py grid_whatif --id N      # one what-if (pending, source mirrored)
    python manage.py grid_whatif --grid NAME # every pending mirrored what-if of a grid, once

Each run polls the grid's Slurms once (as ``mirror_grid --once`` does), builds the federation
at that instant (running jobs holding their GPUs, queued ones waiting:
:func:`scheduler.grid.mirror_start.grid_from_mirror`) and runs the what-if in this process.
Simulated what-ifs are run by the grid's ``run_grid``, not here.
"""

from __future__ import annotations

from twin.live.grid_whatif import grid_whatif_run_mirrored
from twin.live.models import GridStateSource, GridWhatIf, GridWhatIfStatus
from twin.management.one_line import OneLineCommand, refuse
from twin.mirror.grid_mirror import GridMirror, GridMirrorError, grid_sources


def mirrored_now(name: str) -> tuple[dict, dict, tuple]:
    """One poll of every site of grid ``name``: the overview, per-site jobs, and the sites
    that did not answer."""
    grid, sites, links = grid_sources(name=name)
    mirror = GridMirror(grid.name, sites, links)
    mirror.poll_once()
    jobs = {s.source.place: list(s.reading.jobs) for s in mirror.states
            if s.reading and not s.error}
    unread = tuple(s.source.place for s in mirror.states if s.error or not s.reading)
    return mirror.overview(), jobs, unread


class Command(OneLineCommand):
    help = "Run pending mirrored grid what-ifs from one poll of the grid's Slurms."

    def add_arguments(self, parser):
        parser.add_argument("--id", type=int, help="the what-if to run")
        parser.add_argument("--grid", metavar="NAME", help="run every pending one of a grid")

    def handle(self, *args, **opts):
        rows = GridWhatIf.objects.filter(status=GridWhatIfStatus.PENDING,
                                         params__source=GridStateSource.MIRRORED.value)
        if opts["id"] is not None:
            rows = rows.filter(pk=opts["id"])
        elif opts["grid"]:
            rows = rows.filter(grid__name=opts["grid"])
        else:
            raise refuse("give --id N or --grid NAME")
        rows = list(rows.select_related("grid").order_by("pk"))
        if not rows:
            raise refuse("no pending mirrored what-if matches")
        polled = {}
        for row in rows:
            if row.grid.name not in polled:
                try:
                    polled[row.grid.name] = mirrored_now(row.grid.name)
                except GridMirrorError as exc:
                    raise refuse(str(exc)) from None
            doc, jobs, unread = polled[row.grid.name]
            done = grid_whatif_run_mirrored(row=row, doc=doc, jobs=jobs, unread=unread)
            self.stdout.write(f"grid what-if #{done.pk} on {row.grid.name}: {done.status}")
