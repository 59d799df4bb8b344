"""The gangs holding GPUs, indexed the way preemption asks for them.

Preemption looks for running gangs on a model with a lower priority than a waiting gang, or on
borrowed quota of another tenant.  Scanning every running gang for that costs a pass as much as
the cluster is large; this index keeps them by ``(model, priority)`` and ``(model, tenant)``
for borrowers, with the GPUs each group holds, so a pass can bound what eviction could free in
a few dictionary reads and walk only the gangs that qualify.

Two more indexes over the running gangs serve the scheduler's passes: :class:`EndIndex`, when
each gang frees its GPUs (what backfill plans with), and :class:`MoveLog`, which gangs started
or changed since a mark (what preemption's memo of a failed attempt reads).
"""

from __future__ import annotations

import heapq
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


class EndIndex:
    """When each running or draining gang frees its GPUs, per model: ``(time, GPUs, run index)``
    entries, earliest first (ties: fewest GPUs first); a run keeps its entry in ``end_key``.

    >>> from scheduler.workload.jobs import TrainingJob
    >>> r = JobRun(0, TrainingJob(job_id=0, name="j0", tenant="a", submit_s=0.0, gpus=8,
    ...                           work_flops=1.0), (0,), "any")
    >>> r.model = 0
    >>> ends = EndIndex(1)
    >>> ends.set(r, 60.0)
    >>> list(ends.ends([0]))
    [(60.0, 8, 0)]
    >>> ends.set(r, None)
    >>> list(ends.ends([0]))
    []
    """

    def __init__(self, n_models: int):
        self._ends = [SortedList() for _ in range(n_models)]

    def set(self, run: JobRun, t: float | None) -> None:
        """Index when ``run``'s GPUs free up (``None``: they are not expected to)."""
        if run.end_key is not None:
            self._ends[run.model].remove(run.end_key)
            run.end_key = None
        if t is not None:
            run.end_key = (t, run.gpus, run.idx)
            self._ends[run.model].add(run.end_key)

    def ends(self, models) -> Iterator[tuple[float, int, int]]:
        """The entries of ``models``, earliest first; an iterator, merged lazily."""
        if len(models) == 1:
            return iter(self._ends[models[0]])
        return heapq.merge(*(self._ends[m] for m in models))


class MoveLog:
    """Running gangs that started, or changed state or segment, in order; positions are
    absolute, and the older half is forgotten past 65,536 entries (older marks then read as
    expired).

    >>> log = MoveLog()
    >>> mark = log.mark()
    >>> log.note("a"); log.note("b")
    >>> log.since(mark), log.mark()
    (['a', 'b'], 2)
    """

    def __init__(self):
        self._moved: list[JobRun] = []
        self._base = 0

    def note(self, run: JobRun) -> None:
        self._moved.append(run)
        if len(self._moved) > 65_536:  # forget the older half: older marks read as expired
            del self._moved[:32_768]
            self._base += 32_768

    def mark(self) -> int:
        """A position in the log (for :meth:`since`)."""
        return self._base + len(self._moved)

    def since(self, mark: int) -> list[JobRun] | None:
        """Gangs noted since ``mark``; ``None`` if forgotten."""
        if mark < self._base:
            return None
        return self._moved[mark - self._base:]
