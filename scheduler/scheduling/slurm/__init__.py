"""The ``slurm`` policy: Slurm's own rules, read from a cluster's ``slurm.conf``.

:mod:`~scheduler.scheduling.slurm.conf` reads the configuration,
:mod:`~scheduler.scheduling.slurm.priority` computes ``priority/multifactor``,
:mod:`~scheduler.scheduling.slurm.nodespace` is the backfill plan and
:mod:`~scheduler.scheduling.slurm.mechanics` runs the main scheduler, backfill, preemption
and requeue in place of the twin's own passes.
"""

from __future__ import annotations


def mechanics_for(policy, scheduler):
    """The mechanics object a policy runs instead of the twin's passes (``None`` for the
    policies that use them)."""
    if getattr(policy, "mechanics", None) != "slurm":
        return None
    from scheduler.scheduling.slurm.mechanics import SlurmMechanics

    return SlurmMechanics(scheduler, scheduler.slurm_conf)
