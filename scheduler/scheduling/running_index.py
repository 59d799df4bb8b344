"""The gangs holding GPUs, indexed the way preemption asks for them.

Preemption looks for running gangs on a model with a lower priority than a waiting gang, or on
borrowed quota of another tenant.  Scanning every running gang for that costs a pass as much as
the cluster is large; this index keeps them by ``(model, priority)`` and ``(model, tenant)``
for borrowers, with the GPUs each group holds, so a pass can bound what eviction could free in
a few dictionary reads and walk only the gangs that qualify.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from sortedcontainers import SortedList

from scheduler.model.job_run import JobRun


class RunningIndex:
    """Running (and draining or hung) gangs by model and priority, and borrowers by tenant.

    Examples
    --------
    >>> from scheduler.workload.jobs import TrainingJob
    >>> def run(i, prio, gpus, tenant="a"):
    ...     r = JobRun(i, TrainingJob(job_id=i, name=f"j{i}", tenant=tenant, submit_s=0.0,
    ...                               gpus=gpus, work_flops=1.0, priority=prio), (0,), "any")
    ...     r.model, r.borrowed = 0, False
    ...     return r
    >>> ix = RunningIndex()
    >>> for r in (run(0, 1, 8), run(1, 5, 16), run(2, 9, 4)):
    ...     ix.add(r)
    >>> ix.evictable_bound(0, priority=9, tenant="a", within=False)
    24
    >>> sorted(r.idx for r in ix.evictable(0, priority=6, tenant="a", within=False))
    [0, 1]
    """

    def __init__(self):
        self._by_priority: dict[tuple, dict[int, JobRun]] = defaultdict(dict)
        self._by_borrower: dict[tuple, dict[int, JobRun]] = defaultdict(dict)
        self._gpus: Counter = Counter()           # (model, priority) -> GPUs held
        self._borrowed_gpus: Counter = Counter()  # (model, tenant) -> GPUs held on borrow
        self._priorities = SortedList()           # one entry per gang
        self._borrowing: Counter = Counter()      # tenant -> gangs on borrowed quota

    def add(self, run: JobRun) -> None:
        j = run.spec
        self._by_priority[(run.model, j.priority)][run.idx] = run
        self._gpus[(run.model, j.priority)] += j.gpus
        self._priorities.add(j.priority)
        if run.borrowed:
            self._by_borrower[(run.model, j.tenant)][run.idx] = run
            self._borrowed_gpus[(run.model, j.tenant)] += j.gpus
            self._borrowing[j.tenant] += 1

    def remove(self, run: JobRun) -> None:
        j = run.spec
        del self._by_priority[(run.model, j.priority)][run.idx]
        self._gpus[(run.model, j.priority)] -= j.gpus
        self._priorities.remove(j.priority)
        if run.borrowed:
            del self._by_borrower[(run.model, j.tenant)][run.idx]
            self._borrowed_gpus[(run.model, j.tenant)] -= j.gpus
            self._borrowing[j.tenant] -= 1

    def lowest_priority(self) -> float:
        """The lowest priority of a gang holding GPUs (infinity if none does)."""
        return self._priorities[0] if self._priorities else float("inf")

    def borrowers_besides(self, tenant: str) -> int:
        """Gangs on borrowed quota that belong to other tenants than ``tenant``."""
        return sum(n for t, n in self._borrowing.items() if t != tenant)

    def evictable_bound(self, model: int, *, priority: int, tenant: str, within: bool) -> int:
        """At least the GPUs of ``model`` held by gangs a gang of ``priority`` and ``tenant``
        may evict (``within`` its quota: also other tenants' borrowers), whatever their age;
        a borrower of low priority is counted twice, which keeps it a bound."""
        total = sum(g for (m, p), g in self._gpus.items() if m == model and p < priority)
        if within:
            total += sum(g for (m, t), g in self._borrowed_gpus.items()
                         if m == model and t != tenant)
        return total

    def evictable(self, model: int, *, priority: int, tenant: str,
                  within: bool) -> Iterator[JobRun]:
        """The gangs a gang of ``priority`` and ``tenant`` may evict on ``model``, each once."""
        for (m, p), runs in self._by_priority.items():
            if m == model and p < priority:
                yield from runs.values()
        if within:
            for (m, t), runs in self._by_borrower.items():
                if m == model and t != tenant:
                    yield from (r for r in runs.values() if r.spec.priority >= priority)
