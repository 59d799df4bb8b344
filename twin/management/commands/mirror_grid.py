"""``manage.py mirror_grid``: follow every site of a grid, each its own Slurm, as one grid.

    python manage.py mirror_grid --grid NAME [--once]

Each member cluster's :class:`~twin.inventory.grid_models.SiteMirror` says where its Slurm is
and how often to poll it; every site is polled in a thread of its own, each poll bounded by the
site's timeout, and the grid's mirrored overview (``GridState``, source ``mirrored``) is
rewritten after each poll and at least once per shortest poll interval (so a site's health
ages).  ``--once``: poll every site once, at the same time, write, print one line per site and
exit.  SIGTERM or SIGINT stops the loop within a second (``docs/grid_mirror.md``).
"""

from __future__ import annotations

import signal
import time

from twin.management.one_line import OneLineCommand, refuse
from twin.mirror.grid_mirror import GridMirror, GridMirrorError, grid_sources, grid_state_write

TICK_S = 0.2


class Command(OneLineCommand):
    help = ("Poll each site's Slurm of a grid on its own interval and write the grid's "
            "mirrored overview; --once polls every site once and exits.")

    def add_arguments(self, parser):
        parser.add_argument("--grid", required=True, metavar="NAME", help="the grid to mirror")
        parser.add_argument("--once", action="store_true",
                            help="poll every site once, write the overview, and exit")

    def handle(self, *args, **opts):
        try:
            grid, sites, links = grid_sources(name=opts["grid"])
        except GridMirrorError as exc:
            raise refuse(str(exc)) from None
        mirror = GridMirror(grid.name, sites, links)
        if opts["once"]:
            mirror.poll_once()
            doc = mirror.overview()
            grid_state_write(grid=grid, doc=doc)
            for row in doc["places"]:
                self.stdout.write(self._line(row))
            return
        self._stop = False
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        tick_s = min(s.poll_s for s in sites)
        health: dict[str, str] = {}
        try:
            mirror.start()
            seen, written = -1, float("-inf")
            while not self._stop:
                if mirror.version != seen or time.monotonic() - written >= tick_s:
                    seen, written = mirror.version, time.monotonic()
                    doc = mirror.overview()
                    grid_state_write(grid=grid, doc=doc)
                    for row in doc["places"]:
                        if health.get(row["place"]) != row["health"]:
                            health[row["place"]] = row["health"]
                            self.stdout.write(self._line(row))
                    self.stdout.flush()
                time.sleep(TICK_S)
        finally:
            mirror.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum, frame) -> None:
        self._stop = True

    @staticmethod
    def _line(row: dict) -> str:
        note = f" ({row['note']})" if row["note"] else ""
        return (f"{row['place']}: {row['health']}{note}; {row['gpus']} GPUs, "
                f"{row['allocated']} allocated, {row['down']} down, {row['queued_jobs']} jobs "
                f"({row['queued_gpus']} GPUs) queued")
