"""``default``: what a production GPU scheduler combines.

Priority, quotas with borrowing and weighted DRF ordering (as ``fair-share``), EASY backfill
(as ``backfill``), topology-aware placement (as ``topology-aware``) and preemption, bounded as
production schedulers bound it (:mod:`scheduler.scheduling.preemption`): a gang that fits only
across domains starts there rather than evicting anyone (``compact`` is off).
"""

from scheduler.scheduling.policies.base import BACKFILL_DEPTH, BACKFILL_INTERVAL_S, Policy
from scheduler.scheduling.policies.fair_share import fair_order

POLICY = Policy("default", "priority + quotas + DRF, EASY backfill, topology-aware, preemption",
                fair_order, placement="topology", backfill=True, preemption=True,
                compact=False,
                backfill_depth=BACKFILL_DEPTH,
                backfill_interval_s=BACKFILL_INTERVAL_S)
