"""The queue kept in order between passes: partitions of one shape, merged in policy order.

A *partition* holds the queued runs of one tenant, priority, size and shape (accepted models and
affinity), each partition sorted by ``rank + (submit time, job id, run index)``.  Every
registered policy orders runs by a key ``prefix + rank + (submit time, job id)`` whose prefix
depends only on the tenant, the priority and the size (``fair_order``'s quota test and dominant
share) — the same for a whole partition — and whose ``rank`` is the run's own class
(:attr:`JobRun.rank`): empty for most policies, set by a *ranker* for the ranking policies
(``sjf``'s estimate, ``las``' queue and the time the run entered it).  A ranker
(:meth:`QueueIndex.rank_with`) computes the rank as a run joins the queue; a rank that changes
while the run waits (an ``las`` promotion) is re-keyed with :meth:`QueueIndex.rekey`.  So a pass
computes each partition's key once and merges the partitions with a heap: the merged order is
exactly ``sorted(queue, key=policy.order)`` (ties on ``(submit time, job id)`` go by run
index), at a cost of ``O(P log P)`` for ``P`` partitions plus ``O(log P)`` per run the pass
looks at, not ``O(Q log Q)`` for a queue of ``Q``.  A pass may drop a whole partition once one
of its runs failed to place: the others have the same shape and size.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from sortedcontainers import SortedList

from scheduler.model.job_run import JobRun


def partition_of(run: JobRun) -> tuple:
    """The partition key: tenant, priority, size, accepted models, affinity."""
    j = run.spec
    return (j.tenant, j.priority, j.gpus, run.sig)


def entry_of(run: JobRun) -> tuple:
    """``run``'s entry in its partition: its rank, submit time, job id and index."""
    return _entry(run)


def _entry(run: JobRun) -> tuple:
    rank = run.rank
    if rank:
        return rank + (run.spec.submit_s, run.spec.job_id, run.idx)
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

    ranker = None
    """``ranker(run) -> tuple``: a run's rank as it joins the queue (a ranking policy's,
    :meth:`rank_with`), or ``None``: no rank."""
    estimator = None
    """``estimator(run) -> float``: a queued run's backfill estimate, s (a backfilling
    scheduler's, :meth:`use_estimator`), or ``None``: estimates are not kept."""
    est_stamp = None  # what the kept estimates were computed under (the storage factor)

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
        if self.ranker is not None:
            run.rank = self.ranker(run)
        elif run.rank:
            run.rank = ()
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
        if self.estimator is not None:
            self._est_add(key, run, entry)

    def remove(self, run: JobRun) -> None:
        key = partition_of(run)
        part = self.parts[key]
        entry = _entry(run)
        part.remove(entry)
        self._size -= 1
        if self.estimator is not None:
            self._est_remove(key, run)
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

    # ------------------------------------------------------------- estimates
    def use_estimator(self, estimator, runs: list[JobRun], stamp=None) -> None:
        """Keep every queued run's estimate ``estimator(run)`` (s) by partition, sorted, from
        now on (``None``: keep none); ``stamp`` names what they were computed under (when
        it moves, call this again).  A queued run whose estimate changes while it waits is
        given to :meth:`stale`."""
        self.estimator, self.est_stamp = estimator, stamp
        self.ests: dict[tuple, SortedList] = {}  # partition -> (estimate, entry), sorted
        self.est_of: dict[int, tuple] = {}       # run -> its (estimate, entry) there
        if estimator is None:
            return
        for key, part in self.parts.items():
            for entry in part:
                self._est_add(key, runs[entry[-1]], entry)

    def stale(self, run: JobRun) -> None:
        """Queued ``run``'s estimate may have changed (its work, interval or first start)."""
        if self.estimator is not None and run.idx in self.est_of:
            key = partition_of(run)
            self._est_remove(key, run)
            self._est_add(key, run, _entry(run))

    def shorts(self, key: tuple, now: float, shadow: float) -> list[tuple]:
        """The entries of partition ``key`` whose runs end by ``shadow`` if started at
        ``now`` (``now + estimate <= shadow``), in queue order (needs an estimator)."""
        sl = self.ests.get(key)
        if sl is None or now + sl._lists[0][0][0] > shadow:
            return []  # (most often) even its shortest run ends too late
        out = []
        for est, entry in sl:
            if now + est > shadow:
                break  # sorted by estimate: the rest end later
            out.append(entry)
        out.sort()
        return out

    def short_finder(self, now: float, shadow: float):
        """``shorts(key)``: :meth:`shorts` for this ``now`` and ``shadow``, kept per
        partition, for one pass (runs only leave the queue during it: an entry kept for a
        run that left since is a bound the walk stops at needlessly, never a wrong one)."""
        known: dict[tuple, list] = {}

        def shorts(key: tuple) -> list[tuple]:
            found = known.get(key)
            if found is None:
                found = known[key] = self.shorts(key, now, shadow)
            return found

        return shorts

    def _est_add(self, key: tuple, run: JobRun, entry: tuple) -> None:
        item = (self.estimator(run), entry)
        self.est_of[run.idx] = item
        sl = self.ests.get(key)
        if sl is None:
            sl = self.ests[key] = SortedList()
        sl.add(item)

    def _est_remove(self, key: tuple, run: JobRun) -> None:
        item = self.est_of.pop(run.idx, None)
        if item is not None:
            sl = self.ests[key]
            sl.remove(item)
            if not sl:
                del self.ests[key]

    def rank_with(self, ranker, queued) -> None:
        """Rank the runs that join the queue from now with ``ranker(run) -> tuple`` (``None``:
        no rank), and re-rank the ``queued`` runs now."""
        queued = list(queued)
        for run in queued:
            self.remove(run)
        self.ranker = ranker
        for run in queued:
            self.add(run)

    def rekey(self, run: JobRun) -> None:
        """Rank queued ``run`` again (its rank changed while it waited)."""
        self.remove(run)
        self.add(run)

    def ordered(self, order, ctx, runs: list[JobRun]) -> Ordered:
        """The queued runs in ``order(run, ctx)`` order, keys frozen as they are now."""
        return Ordered(self, self._refresh(order, ctx, runs), runs)

    def first(self, order, ctx, runs: list[JobRun]) -> JobRun | None:
        """The run an :meth:`ordered` walk would yield first (``None`` if the queue is empty)."""
        front = self._refresh(order, ctx, runs)
        return runs[front[0][0][-1]] if front else None  # an entry ends with the run index

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
        firsts = self.firsts
        for key in self._dirty:
            old = front_of.get(key)
            first = firsts.get(key)
            if first is None:
                if old is not None:
                    del front_of[key]
                    front.remove(old)
                continue
            # the order key less its per-run tail (rank, submit time, job id): the entry
            # holds that tail and the run index
            full = order(runs[first[-1]], ctx)
            prefix = full[:len(full) - len(first) + 1]
            item = (prefix + first, key, len(prefix))
            if item == old:
                continue  # re-keyed to the same place (an order that does not read ``ctx``)
            if old is not None:
                front.remove(old)
            front_of[key] = item
            front.add(item)
        self._dirty = set()
        return front


SKIP, WAIT, STOP = 0, 1, 2
"""What a caller of :meth:`Ordered.wait_through` says of a run."""


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
        self._heap: list = []  # partitions moved past their first run, by their next run
        self._at = self._nxt = None  # the item last yielded, and the front's next (a walk's)

    def drop(self, key: tuple) -> None:
        """Skip the rest of partition ``key`` in this walk."""
        self.dropped.add(key)

    def wait_through(self, waiting: set, verdict, limit: int) -> list[JobRun]:
        """Go on from the run last yielded without yielding, while the next run belongs to a
        partition in ``waiting``: ``verdict(run)`` is :data:`SKIP` (pass over it), :data:`WAIT`
        (pass over it and return it) or :data:`STOP` (stop before it: the walk yields it
        next); at most ``limit`` runs are returned.  The order is the walk's own.

        The runs of one partition that come one after another are read off its sorted list
        (the heap is left alone until another partition's run comes first)."""
        at, self._at = self._at, None
        if at is None:
            return []
        heap, parts, runs, dropped, nxt = self._heap, self.index.parts, self.runs, \
            self.dropped, self._nxt
        full, key, n = at
        if key not in dropped:  # what the walk does after a yield: the partition goes on
            part = parts.get(key)
            after = _after(part, full[n:]) if part is not None else None
            if after is not None:
                heapq.heappush(heap, (full[:n] + after, key, n))
        walked: list[JobRun] = []
        while heap and len(walked) < limit:
            top = heap[0]
            if nxt is not None and nxt < top:
                break  # a partition not walked yet comes first
            full, key, n = top
            if key in dropped:
                heapq.heappop(heap)
                continue
            if key not in waiting:
                break
            heapq.heappop(heap)
            # this partition's runs, from this one on, until another partition's comes first
            bound = heap[0] if heap and (nxt is None or heap[0] < nxt) else nxt
            prefix = full[:n]
            tail = None  # None: no bound inside this partition
            if bound is not None:
                if prefix == bound[0][:n]:
                    tail = bound[0][n:]
                elif not prefix < bound[0][:n]:
                    tail = ()  # (cannot happen: this run came first) stop at once
            entry = full[n:]
            # the sorted list's sublists, read from the first entry after this one on (the
            # partition does not change while the verdicts are given)
            part = parts.get(key)
            lists = part._lists if part is not None else []
            pos = bisect_right(part._maxes, entry) if part is not None else 0
            sub = lists[pos] if pos < len(lists) else []
            j = bisect_right(sub, entry) - 1
            stopped = False
            while len(walked) < limit:
                run = runs[entry[-1]]
                v = verdict(run)
                if v == STOP:
                    stopped = True
                    break
                if v == WAIT:
                    walked.append(run)
                j += 1  # the partition's next run
                if j >= len(sub):
                    pos += 1
                    if pos >= len(lists):
                        entry = None
                        break
                    sub, j = lists[pos], 0
                entry = sub[j]
                if tail is not None and not entry < tail:
                    break
            if entry is not None:
                heapq.heappush(heap, (prefix + entry, key, n))
            if stopped:
                break
        return walked

    def wait_bulk(self, waiting: set, shorts, limit: int | float) -> int:
        """:meth:`wait_through` for a pass whose verdicts are known by partition: a run of a
        ``waiting`` partition waits unless its entry is in ``shorts(key)`` (that partition's
        short runs' entries, sorted), and every run in the index is queued.  Counts the runs
        passed, partition by partition (bisects, no verdict per run); returns that count, or
        ``-1`` if more than ``limit`` would wait (the walk is then left unusable: the pass
        stops at its depth).

        It goes on as far as the first run that is not passed over: the next run of a
        partition not waiting, a short run, or the end; so each waiting partition's runs up
        to that bound are passed, as the one-by-one walk passes them."""
        at, self._at = self._at, None
        if at is None:
            return 0
        heap, parts, dropped, nxt = self._heap, self.index.parts, self.dropped, self._nxt
        full, key, n = at
        if key not in dropped:  # what the walk does after a yield: the partition goes on
            part = parts.get(key)
            after = _after(part, full[n:]) if part is not None else None
            if after is not None:
                heapq.heappush(heap, (full[:n] + after, key, n))
        popped = []  # waiting partitions whose next run comes before any other's
        while heap:
            top = heap[0]
            if nxt is not None and nxt < top:
                break
            if top[1] in dropped:
                heapq.heappop(heap)
                continue
            if top[1] not in waiting:
                break
            popped.append(heapq.heappop(heap))
        if not popped:
            return 0
        bound = heap[0] if heap and (nxt is None or heap[0] < nxt) else nxt
        bound = bound[0] if bound is not None else None  # a full order key, or the end
        for full, key, n in popped:  # the first short run before the bound stops the walk
            entries = shorts(key)
            if not entries:
                continue
            entry = full[n:]
            j = bisect_left(entries, entry)
            if j < len(entries):
                stop = full[:n] + entries[j]
                if bound is None or stop < bound:
                    bound = stop
        total, ahead = 0, []
        for full, key, n in popped:
            part = parts[key]
            lists = part._lists
            if len(lists) == 1:  # most partitions: one sublist, read without an index
                lst = lists[0]
                start = bisect_left(lst, full[n:])
                end = len(lst) if bound is None else _stop_in(lst, full[:n], bound, n)
            else:
                lst = part
                start = part.bisect_left(full[n:])
                end = len(part) if bound is None else _stop_in(part, full[:n], bound, n)
            total += end - start
            if end < len(lst):
                ahead.append((full[:n] + lst[end], key, n))
        if total > limit:
            return -1
        for item in ahead:
            heapq.heappush(heap, item)
        return total

    def __iter__(self) -> Iterator[tuple[tuple, JobRun]]:
        parts, runs, front, dropped = self.index.parts, self.runs, self.front, self.dropped
        heap: list = []
        self._heap = heap
        ahead = iter(front)  # nothing re-keys the front during a walk
        nxt = next(ahead, None)
        while True:
            if nxt is not None and (not heap or nxt < heap[0]):
                at = nxt
                nxt = next(ahead, None)
            elif heap:
                at = heapq.heappop(heap)
            else:
                return
            full, key, n = at
            if key in dropped:
                continue
            self._at, self._nxt = at, nxt  # what wait_through goes on from
            entry = full[n:]
            yield key, runs[entry[-1]]
            if self._at is None or key in dropped:
                continue  # wait_through went on from it (or the partition was dropped)
            part = parts.get(key)
            if part is not None:
                after = _after(part, entry)
                if after is not None:
                    heapq.heappush(heap, (full[:n] + after, key, n))


def _after(part: SortedList, entry: tuple) -> tuple | None:
    """The first entry of ``part`` after ``entry`` (``None``: none is), read from the sorted
    list's sublists without its positional index (``bisect_right`` and ``[j]`` each build a
    position, which a walk does not need)."""
    maxes = part._maxes
    pos = bisect_right(maxes, entry)
    if pos == len(maxes):
        return None
    sub = part._lists[pos]
    return sub[bisect_right(sub, entry)]


def _stop_in(part, prefix: tuple, bound: tuple, n: int) -> int:
    """The position in ``part`` (a sorted list of a partition's entries, whose runs' order
    keys are ``prefix + entry``, ``n`` long prefix) of its first run at or after the order
    key ``bound``."""
    head = bound[:n]
    if prefix == head:
        return bisect_left(part, bound[n:]) if isinstance(part, list) \
            else part.bisect_left(bound[n:])
    return len(part) if prefix < head else 0
