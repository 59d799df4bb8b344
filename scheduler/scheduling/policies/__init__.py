"""Scheduling policies, one per module, selected by name from one registry."""

from __future__ import annotations

from dataclasses import replace

from scheduler.scheduling.policies import (
    backfill,
    default,
    fair_share,
    fifo,
    las,
    sjf,
    slurm,
    topology_aware,
)
from scheduler.scheduling.policies.base import Policy

REGISTRY: dict[str, Policy] = {}


def register(policy: Policy) -> Policy:
    """Add a policy; a second policy of the same name is refused."""
    if policy.name in REGISTRY:
        raise ValueError(f"a policy named {policy.name!r} is already registered")
    REGISTRY[policy.name] = policy
    return policy


for _module in (default, fifo, backfill, fair_share, topology_aware, slurm):
    register(_module.POLICY)
for _policy in (*sjf.POLICIES, las.POLICY):  # research policies: shortest job, attained service
    register(_policy)


def get_policy(name: str, *, placement: str | None = None) -> Policy:
    """A registered policy, optionally with its placement strategy replaced.

    >>> get_policy("fifo").backfill
    False
    >>> get_policy("fifo", placement="topology").placement
    'topology'
    """
    try:
        policy = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(REGISTRY)}") from None
    return replace(policy, placement=placement) if placement else policy
