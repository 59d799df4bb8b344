"""``run_engine``: the live engine in its own process (CLUSTERTWIN_ENGINE=separate).

Frames reach the daphne workers through the Redis channel layer (REDIS_URL). SIGTERM or SIGINT
finishes the current step, stores a snapshot and exits; the next start resumes from it.
"""

import asyncio
import gc
import signal
import time

from scheduler.presets import PRESETS
from twin.config import instance
from twin.config.checks import IN_MEMORY_LAYER, channel_layer_backend
from twin.live.driver import EngineDriver, EngineStartError
from twin.management.one_line import OneLineCommand, refuse, speed_flag
from twin.mirror.poller import live_driver

PROGRESS_EVERY_S = 10.0


class Command(OneLineCommand):
    help = ("Run the live engine in its own process; frames go to the web processes through "
            "the channel layer (set REDIS_URL).")

    def add_arguments(self, parser):
        parser.add_argument("--speed", help="simulated seconds per wall second "
                            "(default: the last one set, else CLUSTERTWIN_SPEEDUP)")
        parser.add_argument("--preset", choices=sorted(PRESETS),
                            help="scenario (default: the cluster's preset, else "
                            "CLUSTERTWIN_PRESET)")

    def handle(self, *args, **opts):
        speed = None if opts["speed"] is None else speed_flag(opts["speed"])
        instance.claim_or_exit(engine=True)
        if channel_layer_backend() == IN_MEMORY_LAYER:
            self.stderr.write("warning: in-memory channel layer: no web process will see these "
                              "frames (set REDIS_URL)")
        driver = live_driver(preset=opts["preset"], speed=speed)
        asyncio.run(self._run(driver))
        # the engine's millions of objects are freed with the process, not walked by the
        # interpreter's last collections (seconds at noc-4k)
        gc.freeze()

    async def _run(self, driver: EngineDriver) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, driver.request_stop)
        try:
            await driver.start()
        except EngineStartError as exc:  # e.g. several clusters and none chosen
            raise refuse(str(exc)) from None
        self.stdout.write(f"live engine: {driver.preset}, seed {driver.seed}, "
                          f"t={driver.engine.now / 86400:.2f} d, x{driver.speed:g}")
        self.stdout.flush()
        progress = asyncio.create_task(self._progress(driver))
        try:
            await driver.run()
        finally:
            progress.cancel()
        self.stdout.write(f"stopped at t={driver.engine.now / 86400:.3f} d, frame #{driver.seq}, "
                          "snapshot stored")

    async def _progress(self, driver: EngineDriver) -> None:
        last_wall, last_t = time.monotonic(), driver.engine.now
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            wall, t = time.monotonic(), driver.engine.now
            pace = (t - last_t) / max(wall - last_wall, 1e-9)
            last_wall, last_t = wall, t
            self.stdout.write(f"t={t / 86400:.3f} d  frame #{driver.seq}  x{driver.speed:g}"
                              f"{' paused' if driver.paused else ''}  pace {pace:.1f} sim-s/s  "
                              f"lag {driver.lag_ticks} tick(s)  health {driver.health}")
            self.stdout.flush()
