"""The queue kept in order between passes: partitions of one shape, merged in policy order.

A *partition* holds the queued runs of one tenant, priority, size and shape (accepted models and
affinity), each partition sorted by ``(submit time, job id, run index)``.  Every registered
policy orders runs by a key whose last fields are ``(submit time, job id)`` and whose other
fields depend only on the tenant, the priority and the size (``fair_order``'s quota test and
dominant share) — the same for a whole partition.  So a pass computes each partition's key once
and merges the partitions with a heap: the merged order is exactly
``sorted(queue, key=policy.order)`` (ties on ``(submit time, job id)`` go by run index), at a
cost of ``O(P log P)`` for ``P`` partitions plus ``O(log P)`` per run the pass looks at, not
``O(Q log Q)`` for a queue of ``Q``.  A pass may drop a whole partition once one of its runs
failed to place: the others have the same shape and size.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from sortedcontainers import SortedList

from scheduler.model.job_run import JobRun


def partition_of(run: JobRun) -> tuple:
    """The partition key: tenant, priority, size, accepted models, affinity."""
    j = run.spec
    return (j.tenant, j.priority, j.gpus, run.sig)


def _entry(run: JobRun) -> tuple:
    return (run.spec.submit_s, run.spec.job_id, run.idx)


class QueueIndex:
    """Queued runs by partition; :meth:`ordered` walks them in a policy's order.

    Examples
    --------
    >>> from scheduler.model.job_run import JobRun
    >>> from scheduler.workload.jobs import TrainingJob
    >>> def run(i, submit, gpus):
    ...     job = TrainingJob(job_id=i, name=f"j{i}", tenant="t", submit_s=submit, gpus=gpus,
    ...                       work_flops=1.0)
    ...     return JobRun(i, job, (0,), "any")
    >>> runs = [run(0, 5.0, 8), run(1, 1.0, 1), run(2, 3.0, 8)]
    >>> q = QueueIndex()
    >>> for r in runs:
    ...     q.add(r)
    >>> fifo = lambda r, ctx: (r.spec.submit_s, r.spec.job_id)
    >>> [r.idx for _, r in q.ordered(fifo, None, runs)]
    [1, 2, 0]
    """

    def __init__(self):
        self.parts: dict[tuple, SortedList] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, run: JobRun) -> None:
        part = self.parts.get(partition_of(run))
        if part is None:
            part = self.parts[partition_of(run)] = SortedList()
        part.add(_entry(run))
        self._size += 1

    def remove(self, run: JobRun) -> None:
        key = partition_of(run)
        part = self.parts[key]
        part.remove(_entry(run))
        self._size -= 1
        if not part:
            del self.parts[key]

    def ordered(self, order, ctx, runs: list[JobRun]) -> Ordered:
        """The queued runs in ``order(run, ctx)`` order, keys frozen as they are now."""
        return Ordered(self, order, ctx, runs)


class Ordered:
    """One walk over a :class:`QueueIndex`; it tolerates runs leaving the queue meanwhile.

    Runs that join a partition during the walk are seen only if they sort after the walk's
    position in that partition; a pass skips those itself (it plans with the queue it began
    with).
    """

    def __init__(self, index: QueueIndex, order, ctx, runs: list[JobRun]):
        self.index = index
        self.runs = runs
        self.dropped: set[tuple] = set()
        heap = []
        for key, part in index.parts.items():
            first = part[0]
            prefix = order(runs[first[2]], ctx)[:-2]
            heap.append((prefix + first, key, len(prefix)))
        heapq.heapify(heap)
        self._heap = heap

    def drop(self, key: tuple) -> None:
        """Skip the rest of partition ``key`` in this walk."""
        self.dropped.add(key)

    def __iter__(self) -> Iterator[tuple[tuple, JobRun]]:
        heap, parts, runs = self._heap, self.index.parts, self.runs
        while heap:
            full, key, n = heap[0]
            entry = full[n:]
            if key not in self.dropped:
                yield key, runs[entry[2]]
            part = parts.get(key)
            nxt = None
            if part is not None and key not in self.dropped:
                i = part.bisect_right(entry)
                if i < len(part):
                    nxt = part[i]
            if nxt is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (full[:n] + nxt, key, n))
