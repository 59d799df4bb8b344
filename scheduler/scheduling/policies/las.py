"""``las``: Tiresias' discretised two-dimensional least attained service (Gu et al., NSDI 2019).

Jobs are served by queue (0 the highest), first in first out within a queue; a job leaves
queue 0 once its attained service (GPUs x time it held them) reaches 3,600 GPU-seconds, a job
of a higher queue preempts running jobs of lower queues, and a job that waited 8 times its
executed time returns to queue 0 (:mod:`scheduler.scheduling.attained` has the rules, their
sources and the defaults).  Priorities and quotas play no part.  Behind a blocked head, EASY
backfill at the ``backfill`` policy's depth and interval; first-fit placement (``--placement``
overrides it).
"""

from scheduler.scheduling.attained import AttainedService
from scheduler.scheduling.policies.base import (
    BACKFILL_DEPTH,
    BACKFILL_INTERVAL_S,
    Policy,
    ranked_order,
)

POLICY = Policy("las", "Tiresias 2D-LAS: 2 queues split at 3,600 GPU-s, promotion after 8x "
                "the executed time; preemption of lower queues; EASY backfill; first-fit",
                ranked_order, backfill=True, preemption=True, backfill_depth=BACKFILL_DEPTH,
                backfill_interval_s=BACKFILL_INTERVAL_S, ranking=AttainedService)
