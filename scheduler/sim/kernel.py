"""The simulation kernel: a clock, an event heap, event kinds, handlers and named streams.

Components attach to one :class:`Kernel` through a :class:`Context`: they register a handler per
event kind they own (``ctx.on(Kind.FAIL, self.on_fail)``), schedule events with
``ctx.schedule(t, kind, payload)`` and keep the returned :class:`Handle` to cancel an event that
no longer applies (a finish that a preemption overtook).  Events are handled in
``(time, kind, sequence)`` order, so within one instant capacity is freed before it is asked for,
and ties keep the order they were scheduled in.  After the events of an instant the kernel calls
its *instant hooks* (the scheduler's pass); before the clock moves it calls its *advance hooks*
(books that integrate over time).  The kernel never reads a wall clock for simulated time.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable
from enum import IntEnum

from scheduler.sim.streams import Streams


class Kind(IntEnum):
    """Event kinds, in the order they are handled within one instant."""

    FINISH = 0        # a gang's run segment ends with its work done
    DRAIN_DONE = 1    # a lending gang's checkpoint is written: its GPUs go to inference
    CLOUD_DONE = 2    # a burst job ends in its cloud pool
    DEMAND = 3        # an inference service re-evaluates its demand
    ARRIVE = 4        # a job is submitted
    BURST_CHECK = 5   # a burstable job's patience runs out
    REPAIR = 6        # a failed unit is repaired
    DETECT = 7        # a gang's failure is detected: evict, swap spares or requeue
    FAIL = 8          # a failure process fires
    TICK = 9          # the physics re-evaluates every gang's speed
    BACKFILL = 10     # a backfill cycle is due


class Handle:
    """One scheduled event; :meth:`cancel` it and it will not be handled."""

    __slots__ = ("time", "kind", "payload", "cancelled")

    def __init__(self, t: float, kind: Kind, payload):
        self.time = t
        self.kind = kind
        self.payload = payload
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __repr__(self) -> str:
        state = " cancelled" if self.cancelled else ""
        return f"<Handle {self.kind.name} at {self.time:g}{state}>"


class Kernel:
    """Clock, heap, handler registry, hooks, event log and the named random streams.

    Parameters
    ----------
    seed : int
        Root of every random stream (:class:`~scheduler.sim.streams.Streams`).
    log_size : int
        Lines the event log keeps.
    start_s : float
        Simulated time the clock starts at, s (an engine re-planned mid-run starts there).

    Examples
    --------
    >>> k = Kernel(seed=0)
    >>> seen = []
    >>> k.on(Kind.ARRIVE, seen.append)
    >>> h = k.schedule(5.0, Kind.ARRIVE, "late")
    >>> _ = k.schedule(2.0, Kind.ARRIVE, "early")
    >>> k.schedule(3.0, Kind.ARRIVE, "dropped").cancel()
    >>> k.run_until(10.0)
    >>> seen, k.now
    (['early', 'late'], 10.0)
    """

    def __init__(self, seed: int = 0, *, log_size: int = 2000, start_s: float = 0.0):
        self.streams = Streams(seed)
        self.now = float(start_s)
        self._heap: list = []
        self._seq = 0
        self._handlers: dict[Kind, Callable] = {}
        self._advance_hooks: list[Callable[[float, float], None]] = []
        self._instant_hooks: list[Callable[[], None]] = []
        self.events: deque = deque(maxlen=log_size)
        self.logged = 0  # lines ever logged (the deque keeps the last ``log_size``)

    @property
    def seed(self) -> int:
        return self.streams.seed

    # ----------------------------------------------------------------- wiring
    def on(self, kind: Kind, handler: Callable) -> None:
        """Handle events of ``kind`` with ``handler(payload)``; one handler per kind."""
        if kind in self._handlers:
            raise ValueError(f"{Kind(kind).name} events already have a handler")
        self._handlers[Kind(kind)] = handler

    def on_advance(self, hook: Callable[[float, float], None]) -> None:
        """Call ``hook(t_from, t_to)`` before the clock moves forward."""
        self._advance_hooks.append(hook)

    def after_instant(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` after the events of each instant (and after each command)."""
        self._instant_hooks.append(hook)

    # ----------------------------------------------------------------- events
    def schedule(self, t: float, kind: Kind, payload=None) -> Handle:
        """Handle ``payload`` as a ``kind`` event at simulated time ``t`` (s, not before now)."""
        t = float(t)
        if t < self.now:
            raise ValueError(f"cannot schedule {Kind(kind).name} at {t}: it is {self.now} now")
        if kind not in self._handlers:
            raise ValueError(f"no handler for {Kind(kind).name} events")
        handle = Handle(t, kind, payload)
        self._seq += 1
        heapq.heappush(self._heap, (t, int(kind), self._seq, handle))
        return handle

    def log(self, kind: str, text: str, **extra) -> None:
        """Add a line to the event log (the dashboard's and the report's)."""
        self.events.append({"t": round(self.now, 3), "kind": kind, "text": text, **extra})
        self.logged += 1

    def carry_log(self, other: Kernel) -> None:
        """Continue ``other``'s event log (a re-planned engine's predecessor): its lines come
        first and the numbering goes on from its count."""
        mine = list(self.events)
        self.events.clear()
        self.events.extend(other.events)
        self.events.extend(mine)
        self.logged += other.logged

    def events_since(self, count: int) -> tuple[int, list[dict]]:
        """Lines logged after the first ``count``: ``(number of the first returned, lines)``;
        lines that left the bounded log meanwhile are skipped."""
        missing = self.logged - count
        keep = min(missing, len(self.events))
        if keep <= 0:
            return self.logged, []
        return self.logged - keep, list(self.events)[-keep:]

    def rng(self, name: str, *sub: int):
        """The generator of the named stream (see :class:`~scheduler.sim.streams.Streams`)."""
        return self.streams.rng(name, *sub)

    # ----------------------------------------------------------------- stepping
    def peek(self) -> float | None:
        """Time of the next instant that has an event, or ``None`` when none is left."""
        heap = self._heap
        while heap and heap[0][3].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def step(self) -> bool:
        """Handle every event of the next instant, then the instant hooks; ``False`` if none."""
        t = self.peek()
        if t is None:
            return False
        self.advance(t)
        heap, handlers = self._heap, self._handlers
        while heap and heap[0][0] == t:
            handle = heapq.heappop(heap)[3]
            if not handle.cancelled:
                handlers[handle.kind](handle.payload)
        self.end_instant()
        return True

    def end_instant(self) -> None:
        for hook in self._instant_hooks:
            hook()

    def advance(self, t: float) -> None:
        """Move the clock to ``t`` (s), integrating the books on the way; no event is handled."""
        if t < self.now:
            raise ValueError(f"time cannot go back from {self.now} to {t}")
        if t > self.now:
            for hook in self._advance_hooks:
                hook(self.now, t)
            self.now = t

    def run_until(self, t_end: float, progress: Callable[[float], None] | None = None) -> None:
        """Step until simulated time ``t_end`` (s); ``progress(now)`` is called now and then."""
        last = time.perf_counter()
        while True:
            t = self.peek()
            if t is None or t > t_end:
                break
            self.step()
            if progress is not None and time.perf_counter() - last > 0.2:
                progress(self.now)
                last = time.perf_counter()
        self.advance(t_end)
        if progress is not None:
            progress(self.now)

    def pending(self, kind: Kind | None = None) -> list[Handle]:
        """Live (not cancelled) events, in handling order; of one ``kind`` if given."""
        return [h for *_, h in sorted(self._heap)
                if not h.cancelled and (kind is None or h.kind == kind)]
