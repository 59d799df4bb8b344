"""Wall-clock times of simulated instants, for pages that show when something happened.

Engine events keep only their simulated time.  The history samples (``twin.live.history``)
record the wall time at which each simulated instant was reached, and the live state the latest
pair; between two pairs the wall time is interpolated, before the first it runs back at the
engine's speed-up.  A warm start that ran days of simulated time in seconds shows its events at
the wall time they were simulated.
"""

from __future__ import annotations

import bisect
from datetime import datetime, timedelta

from twin.live.models import HistorySample


class SimClock:
    """Maps simulated seconds to wall-clock datetimes (aware, UTC) through known pairs."""

    def __init__(self, pairs: list[tuple[float, datetime]], speed: float) -> None:
        pairs = sorted(pairs, key=lambda p: p[0])
        self._t = [t for t, _ in pairs]
        self._wall = [w for _, w in pairs]
        self.speed = speed if speed > 0 else 1.0

    def wall(self, t_sim: float | None) -> datetime | None:
        if t_sim is None or not self._t:
            return None
        k = bisect.bisect_right(self._t, t_sim)
        if k == 0:  # before the first known instant: back at the speed-up
            return self._wall[0] - timedelta(seconds=(self._t[0] - t_sim) / self.speed)
        if k == len(self._t):  # after the last (the live state's own pair): on at the speed-up
            return self._wall[-1] + timedelta(seconds=(t_sim - self._t[-1]) / self.speed)
        t0, t1 = self._t[k - 1], self._t[k]
        w0, w1 = self._wall[k - 1], self._wall[k]
        share = 0.0 if t1 == t0 else (t_sim - t0) / (t1 - t0)
        return w0 + (w1 - w0) * share


def sim_clock(live, *, t_from: float | None = None, t_to: float | None = None) -> SimClock | None:
    """The clock of the run now live (``None`` before any engine ran); ``t_from``/``t_to``
    narrow the samples read to those around that span of simulated time."""
    if live is None or live.updated_at is None:
        return None
    samples = HistorySample.objects.filter(run=live.inventory)
    pairs = []
    if t_from is not None and t_to is not None:
        before = (samples.filter(t_sim__lte=t_from).order_by("-t_sim")
                  .values_list("t_sim", "recorded_at").first())
        after = (samples.filter(t_sim__gte=t_to).order_by("t_sim")
                 .values_list("t_sim", "recorded_at").first())
        pairs += [p for p in (before, after) if p is not None]
        samples = samples.filter(t_sim__gt=t_from, t_sim__lt=t_to)
    pairs += list(samples.values_list("t_sim", "recorded_at"))
    pairs = [p for p in pairs if p[0] < live.t_sim] + [(live.t_sim, live.updated_at)]
    return SimClock(pairs, live.speed)
