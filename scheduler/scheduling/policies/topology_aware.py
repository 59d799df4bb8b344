"""``topology-aware``: FIFO order with span-minimising, best-fit gang placement."""

from scheduler.scheduling.policies.base import Policy, submit_order

POLICY = Policy("topology-aware", "FIFO, topology-aware best-fit placement", submit_order,
                placement="topology")
