"""``fair-share``: priorities, tenant quotas and weighted dominant resource fairness.

Order: higher priority first; then jobs that stay within their tenant's quota; then the tenant
with the smallest weighted dominant share (DRF, Ghodsi et al., NSDI 2011) over GPUs, CPU cores,
RAM and NIC bandwidth; then submission time.  Jobs beyond quota borrow idle capacity and may be
preempted by a tenant reclaiming its quota.
"""

from scheduler.model.job_run import JobRun
from scheduler.scheduling.policies.base import Policy, QueueContext


def fair_order(run: JobRun, ctx: QueueContext) -> tuple:
    return (-run.spec.priority, not ctx.within_quota(run), ctx.dominant_share(run.spec.tenant),
            run.spec.submit_s, run.spec.job_id)


POLICY = Policy("fair-share", "priority, quotas, weighted DRF; preemption; first-fit",
                fair_order, preemption=True)
