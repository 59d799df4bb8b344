"""``run_grid --grid NAME``: an inventory grid's federation run forward in paced simulated
time (issue 30; docs/grid_page.md).

Every frame interval (``CLUSTERTWIN_FRAME_INTERVAL_S``) it steps the grid by the speed-up
times the wall seconds that passed (:class:`twin.live.pacing.Pacer`, as the live engine),
applies the grid's pending drills and writes ``GridState(simulated)``; every snapshot interval
(``CLUSTERTWIN_SNAPSHOT_INTERVAL_S``), after a drill, and when it stops, it writes its
snapshot (:mod:`twin.live.grid_run`), which the next start resumes from.  SIGTERM or SIGINT
ends the current step, writes the snapshot and exits.
"""

from __future__ import annotations

import math
import signal
import threading

from twin import app_setting
from twin.inventory.models import Grid
from twin.live.grid_run import LiveGrid
from twin.live.pacing import Pacer
from twin.management.one_line import OneLineCommand, refuse, speed_flag


class Command(OneLineCommand):
    help = "Run an inventory grid's federation live; the grid page shows it."

    def add_arguments(self, parser):
        parser.add_argument("--grid", required=True, help="the inventory grid's name")
        parser.add_argument("--speed", help="simulated seconds per wall second "
                            "(default CLUSTERTWIN_SPEEDUP)")
        parser.add_argument("--seed", default="0", help="workload and engines' seed (0)")
        parser.add_argument("--days", default="30",
                            help="simulated days of generated workload (30)")
        parser.add_argument("--fresh", action="store_true",
                            help="ignore the snapshot and start at t=0")

    def handle(self, *args, **opts):
        speed = app_setting("SPEEDUP") if opts["speed"] is None else speed_flag(opts["speed"])
        if not opts["seed"].isdigit() or len(opts["seed"]) > 9:
            raise refuse(f"--seed must be an integer in [0, 999999999], not {opts['seed']}")
        seed = int(opts["seed"])
        try:
            days = float(opts["days"])
        except ValueError:
            raise refuse(f"--days {opts['days']!r} is not a number") from None
        if not (math.isfinite(days) and 0 < days <= 366):
            raise refuse(f"--days must be in (0, 366], not {opts['days']}")
        row = Grid.objects.filter(name=opts["grid"]).first()
        if row is None:
            names = ", ".join(Grid.objects.order_by("name").values_list("name", flat=True))
            raise refuse(f"no grid {opts['grid']!r} in the inventory (grids: {names or 'none'})")
        try:
            live = LiveGrid(row, seed=seed, days=days, resume=not opts["fresh"])
        except ValueError as exc:
            raise refuse(f"grid {row.name}: {exc}") from None
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        if live.note:
            self.stdout.write(live.note)
        start = ("resumed at" if live.resumed_from is not None else "started at")
        self.stdout.write(f"grid {live.name}: {start} t={live.grid.now:.0f} s, seed {seed}, "
                          f"x{speed:g}")
        self.stdout.flush()
        self._run(live, speed, stop)
        live.save()
        self.stdout.write(f"grid {live.name}: stopped at t={live.grid.now:.0f} s, "
                          "snapshot stored")

    def _run(self, live: LiveGrid, speed: float, stop: threading.Event) -> None:
        pacer = Pacer(frame_interval_s=app_setting("FRAME_INTERVAL_S"))
        pacer.speed = speed
        snapshot_every = app_setting("SNAPSHOT_INTERVAL_S")
        pacer.begin()
        pacer.ticks_from_now()
        live.drills_apply()
        live.publish()
        since_snapshot = 0.0
        while not stop.is_set():
            stop.wait(pacer.wait_s())
            if stop.is_set():
                break
            elapsed = pacer.elapsed()
            live.step(pacer.advance_s(elapsed))
            drilled = live.drills_apply()
            live.publish()
            since_snapshot += elapsed
            if drilled or since_snapshot >= snapshot_every:
                live.save()
                since_snapshot = 0.0
