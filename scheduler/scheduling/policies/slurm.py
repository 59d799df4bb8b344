"""``slurm``: the cluster's own Slurm rules, read from its ``slurm.conf``.

Priority (``priority/basic`` or ``priority/multifactor``), the main scheduler and
``sched/backfill`` with their parameters, partitions, QOS and preemption, as slurmctld applies
them (:mod:`scheduler.scheduling.slurm`).  The order and switches below are not used: the
policy's mechanics replace the twin's passes.
"""

from scheduler.scheduling.policies.base import Policy, submit_order

POLICY = Policy("slurm", "the cluster's slurm.conf: multifactor priority, backfill, partitions, "
                "QOS, preemption (needs --slurm-conf)", submit_order, backfill=True,
                mechanics="slurm")
