"""``fifo``: strict first come, first served on the lowest-numbered nodes that fit."""

from scheduler.scheduling.policies.base import Policy, submit_order

POLICY = Policy("fifo", "strict FIFO, first-fit placement, no backfill", submit_order)
