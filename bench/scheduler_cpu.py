"""CPU seconds spent in the scheduler's passes, for the benches that report decisions per
scheduler CPU-second (``bench.saturated``, ``bench.philly``, ``bench.long_queue``)."""

from __future__ import annotations

import time


def scheduler_cpu() -> list[float] | None:
    """Count the CPU seconds spent in scheduling passes (``Scheduler.run``) from now on, in
    the returned one-item list; ``None`` where the tree has no such method (older commits)."""
    try:
        from scheduler.scheduling import passes
        original = passes.Scheduler.run
    except (ImportError, AttributeError):
        return None
    spent = [0.0]

    def run(self):
        started = time.process_time()
        try:
            return original(self)
        finally:
            spent[0] += time.process_time() - started

    passes.Scheduler.run = run
    return spent
