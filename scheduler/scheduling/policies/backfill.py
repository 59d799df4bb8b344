"""``backfill``: FIFO with EASY backfill (Lifka 1995; Mu'alem & Feitelson, IEEE TPDS 2001).

The head of the queue gets a reservation at the earliest time enough GPUs free up; a later job
may start now only if it ends before that time or fits in the GPUs the head will not need.
"""

from scheduler.scheduling.policies.base import (
                BACKFILL_DEPTH,
                BACKFILL_INTERVAL_S,
                Policy,
                submit_order,
)

POLICY = Policy("backfill", "FIFO with EASY backfill, first-fit placement", submit_order,
                backfill=True, backfill_depth=BACKFILL_DEPTH,
                backfill_interval_s=BACKFILL_INTERVAL_S)
