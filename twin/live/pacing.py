"""The live driver's clock: how much simulated time each step covers, and when the next one is.

Every ``frame_interval_s`` of wall time the driver steps the engine by ``speed`` times the wall
seconds that really passed since the last step (so a slow step does not slow the twin down:
the next one covers more simulated time). Ticks a slow step overran are skipped and counted
(``lag_ticks``). Paused, a step covers no simulated time.
"""

from __future__ import annotations

import asyncio
import time

MAX_CATCH_UP_S = 60.0
"""Most wall seconds one step makes up for (after a suspended machine, not a slow step)."""


class Pacer:
    """Wall-clock pacing of one live engine.

    Parameters
    ----------
    frame_interval_s : float
        Wall seconds between steps.
    clock : callable
        Wall clock in seconds (monotonic); tests inject a fake one.
    """

    def __init__(self, *, frame_interval_s: float, clock=time.monotonic):
        self.frame_interval_s = frame_interval_s
        self.clock = clock
        self.speed: float | None = None  # simulated s per wall s (set when the driver starts)
        self.paused = False
        self.lag_ticks = 0
        self._last_wall: float | None = None
        self._next_tick: float | None = None

    def begin(self) -> None:
        """Start counting wall time now (the first step covers none)."""
        self._last_wall = self.clock()

    def ticks_from_now(self) -> None:
        """The first tick is now (:meth:`wait_s` counts on from it)."""
        self._next_tick = self.clock()

    def elapsed(self) -> float:
        """Wall seconds since the last step (at most :data:`MAX_CATCH_UP_S`); marks now."""
        now = self.clock()
        elapsed = min(max(now - self._last_wall, 0.0), MAX_CATCH_UP_S)
        self._last_wall = now
        return elapsed

    def advance_s(self, elapsed: float) -> float:
        """Simulated seconds a step covering ``elapsed`` wall seconds advances."""
        return 0.0 if self.paused else self.speed * elapsed

    def wait_s(self) -> float:
        """Wall seconds until the next tick; ticks already missed are skipped and counted."""
        interval = self.frame_interval_s
        self._next_tick += interval
        now = self.clock()
        if now > self._next_tick:  # the step overran: skip the ticks it missed
            missed = int((now - self._next_tick) // interval) + 1
            self.lag_ticks += missed
            self._next_tick += missed * interval
        return max(0.0, self._next_tick - now)

    async def sleep_until_next(self, stop: asyncio.Event) -> None:
        """Until the next tick, or until ``stop`` is set."""
        try:
            await asyncio.wait_for(stop.wait(), timeout=self.wait_s())
        except TimeoutError:
            pass
