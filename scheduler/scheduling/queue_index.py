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
        self.firsts: dict[tuple, tuple] = {}  # partition -> its first entry
        # The *front*: every partition's first run under the last order walked, kept sorted
        # between passes.  With a context that stamps its tenants (TenantBook), a pass re-keys
        # only the partitions whose first run changed or whose tenant's books moved.
        self._front = SortedList()
        self._front_of: dict[tuple, tuple] = {}   # partition -> its item in the front
        self._front_order = None
        self._dirty: set[tuple] = set()            # partitions to re-key
        self._tenants: dict[str, set] = {}         # tenant -> its partitions
        self._stamps: dict[str, int] = {}          # tenant -> stamp its partitions were keyed at

    def __len__(self) -> int:
        return self._size

    def add(self, run: JobRun) -> None:
        key = partition_of(run)
        entry = _entry(run)
        part = self.parts.get(key)
        if part is None:
            part = self.parts[key] = SortedList()
            self.firsts[key] = entry
            self._tenants.setdefault(key[0], set()).add(key)
            self._dirty.add(key)
        elif entry < self.firsts[key]:
            self.firsts[key] = entry
            self._dirty.add(key)
        part.add(entry)
        self._size += 1

    def remove(self, run: JobRun) -> None:
        key = partition_of(run)
        part = self.parts[key]
        entry = _entry(run)
        part.remove(entry)
        self._size -= 1
        if not part:
            del self.parts[key]
            del self.firsts[key]
            mine = self._tenants[key[0]]
            mine.discard(key)
            if not mine:  # a pass checks the stamps of tenants with queued runs only
                del self._tenants[key[0]]
                self._stamps.pop(key[0], None)
            self._dirty.add(key)
        elif entry == self.firsts[key]:
            self.firsts[key] = part[0]
            self._dirty.add(key)

    def ordered(self, order, ctx, runs: list[JobRun]) -> Ordered:
        """The queued runs in ``order(run, ctx)`` order, keys frozen as they are now."""
        return Ordered(self, self._refresh(order, ctx, runs), runs)

    def first(self, order, ctx, runs: list[JobRun]) -> JobRun | None:
        """The run an :meth:`ordered` walk would yield first (``None`` if the queue is empty)."""
        front = self._refresh(order, ctx, runs)
        return runs[front[0][0][-1]] if front else None

    def _refresh(self, order, ctx, runs: list[JobRun]) -> SortedList:
        """The front, current for ``order`` and ``ctx``."""
        stamp = getattr(ctx, "stamp", None)
        if stamp is None or order is not self._front_order:
            self._front = SortedList()
            self._front_of = {}
            self._front_order = order if stamp is not None else None
            self._dirty = set(self.parts)
            self._stamps = {}
        if stamp is not None:
            for tenant, keys in self._tenants.items():
                st = stamp(tenant)
                if self._stamps.get(tenant) != st:
                    self._stamps[tenant] = st
                    self._dirty |= keys
        front, front_of = self._front, self._front_of
        for key in self._dirty:
            old = front_of.pop(key, None)
            if old is not None:
                front.remove(old)
            first = self.firsts.get(key)
            if first is not None:
                prefix = order(runs[first[2]], ctx)[:-2]
                item = front_of[key] = (prefix + first, key, len(prefix))
                front.add(item)
        self._dirty = set()
        return front


class Ordered:
    """One walk over a :class:`QueueIndex`; it tolerates runs leaving the queue meanwhile.

    The walk merges the index's sorted front (each partition's first run) with a small heap
    of the partitions it has moved past their first run, so starting it costs nothing per
    partition.  Runs that join a partition during the walk are seen only if they sort after
    the walk's position in that partition; a pass skips those itself (it plans with the queue
    it began with).
    """

    def __init__(self, index: QueueIndex, front: SortedList, runs: list[JobRun]):
        self.index = index
        self.runs = runs
        self.front = front
        self.dropped: set[tuple] = set()

    def drop(self, key: tuple) -> None:
        """Skip the rest of partition ``key`` in this walk."""
        self.dropped.add(key)

    def __iter__(self) -> Iterator[tuple[tuple, JobRun]]:
        parts, runs, front, dropped = self.index.parts, self.runs, self.front, self.dropped
        heap: list = []
        i, n_front = 0, len(front)
        while True:
            if i < n_front and (not heap or front[i] < heap[0]):
                full, key, n = front[i]
                i += 1
            elif heap:
                full, key, n = heapq.heappop(heap)
            else:
                return
            if key in dropped:
                continue
            entry = full[n:]
            yield key, runs[entry[2]]
            if key in dropped:
                continue
            part = parts.get(key)
            if part is not None:
                j = part.bisect_right(entry)
                if j < len(part):
                    heapq.heappush(heap, (full[:n] + part[j], key, n))
