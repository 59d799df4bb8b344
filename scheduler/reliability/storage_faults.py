"""What failures and operators do to the storage tiers: a mixin of
:class:`~scheduler.reliability.failure_engine.FailureEngine` (its books, its repairs)."""

from __future__ import annotations

import numpy as np

from scheduler.reliability.failures import FailureMode


class StorageFaults:
    """Storage slowdowns (a failure mode or a drill, repaired after a while) and the tiers'
    operator-set status; uses the failure engine's ``failures``, ``component_of``, ``costs``,
    repairs and incidents."""

    def slow_storage(self, mode: FailureMode, factor: float, duration_s: float) -> None:
        """Multiply the storage tiers' bandwidth by ``factor`` for ``duration_s``."""
        self.failures[mode.cause] += 1
        self.component_of[mode.cause] = mode.component
        self.costs.scale_storage(factor)
        self._push_repair(mode, 0, duration_s)
        self._storage_factors[self._repair_id] = factor
        self._open_incident(mode, 0, np.zeros(0, dtype=np.int64), [], {}, duration_s)

    def set_storage(self, tier: str, left: float) -> None:
        """An operator set a storage tier's status: ``left`` (0 .. 1) of its bandwidth is
        left, 1 when it is up.  A status, not a count: it replaces the tier's previous one
        and composes with drills' and failures' slowdowns.  The central tier's share scales
        checkpoint costs (and its reads); the physics reads :meth:`storage_fraction`."""
        if tier == "central" and not left > 0:
            raise ValueError("the central tier keeps some bandwidth (checkpoint costs divide "
                             "by it)")
        before = self.storage_left.pop(tier, 1.0)
        if tier == "central":
            self.costs.restore_storage(before)
            self.costs.scale_storage(left)
        if left < 1.0:
            self.storage_left[tier] = float(left)

    def storage_fraction(self, tier: str) -> float:
        """Share of a tier's bandwidth an operator left it (1: up)."""
        return self.storage_left.get(tier, 1.0)
