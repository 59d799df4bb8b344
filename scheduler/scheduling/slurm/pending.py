"""The pending queue in slurmctld's order, with its priorities as columns.

The order is ``sort_job_queue``'s: a job that may preempt the others first (``preempt/qos``),
then partition ``PriorityTier``, priority, submit time and job id (ties by run index), all
descending but the last three.  A job's key is frozen from the time it joins the queue until
the next ``PriorityCalcPeriod`` recalculation, which recomputes every pending job's
``priority/multifactor`` priority at once (numpy, over columns indexed by run index) and
sorts the queue again only if its order changed.

:meth:`PendingOrder.walk` goes through the queue in order while jobs start, leave or join
(as a ``SortedList`` walked with ``bisect_right`` of the last key would): it continues after
the last job it gave, by key.

>>> from scheduler.scheduling.slurm.priority import Factors
>>> p = PendingOrder({"age": 1000}, Factors(nodes=4, cpus=4, part_factor_max=1,
...                  qos_priority_max=0), max_age_s=100.0, favor_small=False)
>>> for idx in (0, 1):
...     _ = p.enter(idx, job_id=idx, tier=1, preemptor=0, nodes=1, part_factor=0,
...                 qos_prio=0, user="u", seq=idx + 1, submit=float(idx), fair={})
...     p.add(idx, submit=float(idx), eligible=float(idx))
>>> p.items, [int(p.prio[i]) for i in p.items]
([0, 1], [1, 1])
>>> p.recalc(now=60.0, fair=None); [int(p.prio[i]) for i in p.items]
[600, 590]
"""

from __future__ import annotations

import weakref
from bisect import bisect_left, bisect_right, insort

import numpy as np

from scheduler.scheduling.slurm.priority import Factors


class PendingOrder:
    """Pending jobs in slurmctld's order (see the module).

    Parameters
    ----------
    weights : dict or None
        ``PriorityWeight*`` by factor name; ``None`` for ``priority/basic``, where a job's
        priority is minus its submission sequence number.
    factors : Factors
        The cluster-wide denominators.
    max_age_s : float
        ``PriorityMaxAge``, s.
    favor_small : bool
        ``PriorityFavorSmall``.
    """

    def __init__(self, weights: dict | None, factors: Factors, *, max_age_s: float,
                 favor_small: bool):
        self.weights = weights
        self.factors = factors
        self.max_age_s = max_age_s
        self.favor_small = favor_small
        self.items: list[int] = []  # queued run indices, in order
        self.version = 0  # bumped whenever items change
        self._walks: weakref.WeakSet[Walk] = weakref.WeakSet()
        self.users: dict[str, int] = {}
        n = 256
        self.pre = np.zeros(n, np.int64)  # -(preemptor)
        self.tier = np.zeros(n, np.int64)  # -PriorityTier
        self.prio = np.zeros(n, np.int64)  # the priority (the key holds -prio)
        self.submit = np.zeros(n)
        self.jobid = np.zeros(n, np.int64)
        self.eligible = np.zeros(n)
        self.terms = np.zeros((3, n))  # weighted job size, partition and QOS factors
        self.user = np.zeros(n, np.int64)
        self.kind = np.zeros(n, np.int64)  # the caller's class of the job (backfill's shape)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["_walks"]  # walks in progress: none between events
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._walks = weakref.WeakSet()

    # ----------------------------------------------------------------- columns
    def _room(self, idx: int) -> None:
        n = self.pre.size
        if idx < n:
            return
        grow = max(2 * n, idx + 1) - n
        for name in ("pre", "tier", "prio", "submit", "jobid", "eligible", "user", "kind"):
            col = getattr(self, name)
            setattr(self, name, np.concatenate([col, np.zeros(grow, col.dtype)]))
        self.terms = np.concatenate([self.terms, np.zeros((3, grow))], axis=1)

    def enter(self, idx: int, *, job_id: int, tier: int, preemptor: int, nodes: int,
              part_factor: int | None, qos_prio: int, user: str, seq: int, submit: float,
              fair: dict) -> int:
        """Record a new job's constant factors and its priority at submission (age 0,
        ``fair``: the fair-share factors of the last recalculation; ``part_factor``: its
        partition's ``PriorityJobFactor``, ``None`` without partitions); returns that priority."""
        self._room(idx)
        self.pre[idx], self.tier[idx], self.jobid[idx] = -preemptor, -tier, job_id
        self.user[idx] = self.users.setdefault(user, len(self.users))
        w, f = self.weights, self.factors
        if w is None:  # priority/basic: each new job one below the last
            self.prio[idx] = -seq
            return -seq
        # each factor times its weight, as the sum's terms (multiplied as combine() does)
        self.terms[:, idx] = (
            w.get("jobsize", 0) * f.job_size(nodes=nodes, cpus=nodes,
                                             favor_small=self.favor_small),
            w.get("partition", 0) * (f.partition(part_factor) if part_factor is not None
                                     else 0.0),
            w.get("qos", 0) * f.qos(qos_prio))
        # _priorities' sum for one job at age 0, in Python floats (the same operations)
        total = w.get("age", 0) * 0.0
        for k in range(3):
            total = total + float(self.terms[k, idx])
        if w.get("fairshare"):
            total = total + w["fairshare"] * (fair.get(user, 1.0) if fair else 1.0)
        prio = max(1, int(total))
        self.prio[idx] = prio
        return prio

    def _priorities(self, q: np.ndarray, now: float, fair: dict | None) -> np.ndarray:
        """``priority/multifactor``'s priority of jobs ``q`` at ``now``: the weighted factors
        summed in :func:`~scheduler.scheduling.slurm.priority.combine`'s order (age, job
        size, partition, QOS, fair-share), truncated, at least 1."""
        w = self.weights
        waited = now - self.eligible[q]
        with np.errstate(divide="ignore", invalid="ignore"):
            age = np.where(waited <= 0, 0.0,
                           np.where(waited >= self.max_age_s, 1.0, waited / self.max_age_s))
        total = w.get("age", 0) * age
        for k in range(3):
            total = total + self.terms[k, q]
        if w.get("fairshare"):  # as of the last recalculation (1.0: no usage)
            users = sorted(self.users, key=self.users.get)
            table = np.array([fair.get(u, 1.0) for u in users]) if fair else np.ones(len(users))
            total = total + w["fairshare"] * table[self.user[q]]
        return np.maximum(np.trunc(total), 1.0).astype(np.int64)

    def recalc(self, now: float, fair: dict | None) -> None:
        """``PriorityCalcPeriod``: every queued job's priority, its age as of ``now``; the
        queue sorted again where the new keys change its order."""
        if not self.items or self.weights is None:
            return
        q = np.array(self.items, dtype=np.intp)
        new = self._priorities(q, now, fair)
        if np.array_equal(new, self.prio[q]):
            return
        self.prio[q] = new
        cols = (self.pre[q], self.tier[q], -new, self.submit[q], self.jobid[q], q)
        before, tied = np.zeros(q.size - 1, bool), np.ones(q.size - 1, bool)
        for c in cols:  # is each key below the next one?
            before |= tied & (c[:-1] < c[1:])
            tied &= c[:-1] == c[1:]
        if before.all():
            return
        self._before_change()
        self.items = q[np.lexsort(cols[::-1])].tolist()
        self.version += 1

    # ----------------------------------------------------------------- the order
    def key(self, idx: int) -> tuple:
        """``idx``'s sort key (frozen while it is queued)."""
        return (self.pre[idx], self.tier[idx], -self.prio[idx], self.submit[idx],
                self.jobid[idx], idx)

    def add(self, idx: int, *, submit: float, eligible: float, kind: int = 0) -> None:
        """``idx`` joins the queue with its submit time and eligibility (a requeued job's
        new ones), the priority it has and its ``kind`` (see :meth:`Walk.skip`)."""
        self._before_change()
        self.submit[idx], self.eligible[idx], self.kind[idx] = submit, eligible, kind
        insort(self.items, idx, key=self.key)
        self.version += 1

    def remove(self, idx: int) -> None:
        """``idx`` leaves the queue."""
        self._before_change()
        items = self.items
        pos = bisect_left(items, self.key(idx), key=self.key)
        if pos < len(items) and items[pos] == idx:
            del items[pos]
        else:  # not where its key says: cannot happen while keys stay frozen
            items.remove(idx)
        self.version += 1

    def _before_change(self) -> None:
        for w in self._walks:  # each walk goes on after the key of the job it passed last
            if w.last is not None and w.key is None:
                w.key = self.key(w.last)

    def walk(self) -> Walk:
        """The queue in order, tolerating jobs that start, leave or join meanwhile: after
        each job, the first one whose key is above its key."""
        w = Walk(self)
        self._walks.add(w)
        return w


class Walk:
    """An iterator over a :class:`PendingOrder` (its :meth:`~PendingOrder.walk`)."""

    __slots__ = ("order", "items", "version", "i", "last", "key", "__weakref__")

    def __init__(self, order: PendingOrder):
        self.order, self.items, self.version = order, order.items, order.version
        self.i = 0
        self.last = None  # the last job passed
        self.key = None  # its key, once the queue changed since

    def __iter__(self):
        return self

    def _resync(self) -> None:
        o = self.order
        self.items, self.version = o.items, o.version
        if self.key is not None:
            self.i = bisect_right(self.items, self.key, key=o.key)
            self.key = None

    def __next__(self) -> int:
        if self.order.version != self.version:
            self._resync()
        i = self.i
        if i >= len(self.items):
            raise StopIteration
        self.i = i + 1
        self.last = idx = self.items[i]
        return idx

    def skip(self, now: float, known: np.ndarray, budget: int) -> tuple[int, list[int], bool]:
        """Go past the jobs a backfill cycle only counts, at once: those not eligible at
        ``now`` (not counted) and the eligible ones whose kind is ``known`` (counted), up to
        the next eligible job of another kind, which stays next.  At most ``budget`` are
        counted: if another eligible job follows them, the walk stops there (``stop``).
        Returns ``(counted, not eligible, stop)``, the jobs not eligible in walk order."""
        if self.order.version != self.version:
            self._resync()
        items, o = self.items, self.order
        counted, late, size = 0, [], 64
        while self.i < len(items):
            chunk = np.array(items[self.i:self.i + size], dtype=np.intp)
            size *= 2
            ok = o.eligible[chunk] <= now
            pos = np.flatnonzero(ok)
            stop = False
            cut = chunk.size  # the jobs passed in this chunk
            other = np.flatnonzero(~known[o.kind[chunk[pos]]])
            if other.size:  # an eligible job of another kind: the walk's next job
                cut = int(pos[other[0]])
                pos = pos[:other[0]]
            if pos.size > budget - counted:  # the next eligible job past the budget
                cut, pos, stop = int(pos[budget - counted]), pos[:budget - counted], True
            counted += int(pos.size)
            late += chunk[:cut][~ok[:cut]].tolist()
            self.i += cut
            if cut:
                self.last = items[self.i - 1]
            if stop or cut < chunk.size:
                return counted, late, stop
        return counted, late, False
