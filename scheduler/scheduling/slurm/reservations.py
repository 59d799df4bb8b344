"""Advance reservations (maintenance windows) for the ``slurm`` policy, as slurmctld 22.05
applies them (``src/slurmctld/reservation.c``'s ``job_test_resv``, ``node_scheduler.c``).

Reservations are not in ``slurm.conf``: a file ``scontrol-reservations.txt`` beside it, the
output of ``scontrol show reservation``, gives them (:func:`read_reservations`).  Times there
are the controller's wall clock; the twin reads them as UTC and measures them from
``epoch_s`` (the Unix time of the twin's t = 0; 0 for traces replayed at absolute times).

What a reservation does to a job (full-node reservations, as ``Nodes=`` gives them):

* a job that does not name it (``--reservation``) may not use its nodes if the job's time
  limit would overlap it: the main scheduler and backfill test ``[start, start + limit)``
  against ``[StartTime, EndTime)``.  If the job then cannot fit on the nodes left even were
  they idle, and none of those is busy, it waits (``ReqNodeNotAvail, May be reserved for
  other job``) without blocking its partition; a ``MAINT`` (or ``ALL_NODES``) reservation
  holding every node of its partition makes it wait ``ReqNodeNotAvail, Reserved for
  maintenance``.  Jobs already running when a reservation starts run on;
* a job that names it runs only on its nodes, only from its start (reason ``Reservation``
  before), and is ended at the first time-limit check after its end (``ResvOverRun`` 0);
  Slurm refuses a job naming a reservation that does not exist or whose ``Users`` and
  ``Accounts`` leave the job's user and account (the twin's tenant) out;
* ``IGNORE_JOBS`` only let the reservation be created over running jobs: nothing more to do.

>>> r = read_reservations('''ReservationName=maint StartTime=1970-01-01T00:01:40
...    EndTime=1970-01-01T00:03:20 Duration=00:01:40
...    Nodes=gpu[1-2] NodeCnt=2 CoreCnt=128 Features=(null) PartitionName=(null)
...    Flags=MAINT,IGNORE_JOBS,SPEC_NODES
...    Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE''')
>>> r[0].name, r[0].start_s, r[0].end_s, r[0].nodes, sorted(r[0].flags)
('maint', 100.0, 200.0, ('gpu1', 'gpu2'), ['IGNORE_JOBS', 'MAINT', 'SPEC_NODES'])
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np

from scheduler.hardware.hostlist import expand
from scheduler.scheduling.slurm.conf import SlurmConfError, parse_time

RESERVATIONS_FILE = "scontrol-reservations.txt"
"""The reservations read beside a configuration file (see :func:`read_reservations`)."""

YEAR_S = 365 * 86400.0
"""An infinite time limit's length in the overlap test (slurmctld's ``YEAR_SECONDS``)."""

FLAGS = frozenset({"MAINT", "IGNORE_JOBS", "SPEC_NODES", "ALL_NODES"})
"""Flags the twin applies; any other is named in the configuration's warning line."""

NOT_AVAILABLE = "ReqNodeNotAvail, May be reserved for other job"
MAINTENANCE = "ReqNodeNotAvail, Reserved for maintenance"
WAITING = "Reservation"


@dataclass(frozen=True)
class Reservation:
    """One advance reservation.  Times in seconds of the twin's clock."""

    name: str
    start_s: float
    end_s: float
    nodes: tuple[str, ...]  # ("ALL",) with the ALL_NODES flag
    flags: frozenset = frozenset()
    users: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()

    @property
    def maint(self) -> bool:
        return "MAINT" in self.flags


def _stamp(text: str, epoch_s: float) -> float:
    t = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return t.timestamp() - epoch_s


def _names(text: str) -> tuple[str, ...]:
    return () if text in ("", "(null)") else tuple(x for x in text.split(",") if x)


def read_reservations(text: str, *, where: str = RESERVATIONS_FILE,
                      epoch_s: float = 0.0) -> tuple[Reservation, ...]:
    """Reservations of ``scontrol show reservation`` output (one record per
    ``ReservationName=``, over one or several lines).

    :func:`unmodelled` names what of them the twin does not apply.

    Raises
    ------
    SlurmConfError
        A record without a start, an end or a duration, or with a value that is wrong.
    """
    out = []
    starts = [m.start() for m in re.finditer(r"ReservationName=", text)]
    for i, at in enumerate(starts):
        chunk = text[at:starts[i + 1] if i + 1 < len(starts) else len(text)]
        line = text.count("\n", 0, at) + 1
        pairs = dict((k.lower(), v) for k, v in re.findall(r"(\w+)=(\S*)", chunk))
        name = pairs["reservationname"]
        try:
            if "starttime" not in pairs:
                raise ValueError("no StartTime")
            start = _stamp(pairs["starttime"], epoch_s)
            if pairs.get("endtime", "") not in ("", "(null)", "Unknown"):
                end = _stamp(pairs["endtime"], epoch_s)
            elif pairs.get("duration"):
                d = parse_time(pairs["duration"])
                end = math.inf if d is None else start + d
            else:
                raise ValueError("no EndTime or Duration")
            if end <= start:
                raise ValueError("EndTime is not after StartTime")
            flags = frozenset(f.upper() for f in _names(pairs.get("flags", "")))
            nodes = pairs.get("nodes", "")
            node_names = (("ALL",) if "ALL_NODES" in flags or nodes.upper() == "ALL"
                          else tuple(expand(nodes)) if nodes not in ("", "(null)") else ())
            out.append(Reservation(name=name, start_s=start, end_s=end, nodes=node_names,
                                   flags=flags, users=_names(pairs.get("users", "")),
                                   accounts=_names(pairs.get("accounts", ""))))
        except ValueError as exc:
            raise SlurmConfError(f"{where}:{line}: reservation {name}: {exc}") from None
    return tuple(out)


def unmodelled(reservations) -> list[str]:
    """What of ``reservations`` the twin does not apply, for the configuration's warning."""
    out = []
    for r in reservations:
        extra = sorted(r.flags - FLAGS)
        if extra:
            out.append(f"reservation {r.name} Flags={','.join(extra)}")
        if any(u.startswith("-") for u in r.users + r.accounts):
            out.append(f"reservation {r.name}: excluded users or accounts (-name)")
    return out


def refuse(book, run, user: str) -> str | None:
    """Why Slurm refuses a job naming a reservation (``None``: it names none, or one it may
    use); ``book`` is ``None`` where there are no reservations."""
    name = run.spec.reservation
    if not name:
        return None
    r = book.by_name.get(name) if book is not None else None
    if r is None:
        return f"reservation {name!r} does not exist"
    if user not in r.users and run.spec.tenant not in r.accounts:
        return f"reservation {name!r}: access denied to user {user}"
    return None


def book_for(conf, nodes: int) -> ReservationBook | None:
    """The book of ``conf``'s reservations over ``nodes`` nodes (``None`` if it has none)."""
    if not conf.reservations:
        return None
    return ReservationBook(conf.reservations, [x.name for x in conf.nodes], nodes)


def with_reservations(conf, path, epoch_s: float):
    """``conf`` with the reservations of a :data:`RESERVATIONS_FILE` in the folder of
    ``path`` (the configuration file), if there is one; those the twin does not apply are
    named in its warning."""
    resv_path = path.parent / RESERVATIONS_FILE
    if not resv_path.is_file():
        return conf
    try:
        text = resv_path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SlurmConfError(f"{resv_path.name}: not UTF-8 text") from None
    found = read_reservations(text, where=resv_path.name, epoch_s=epoch_s)
    return replace(conf, reservations=found,
                   unmodelled=conf.unmodelled + tuple(unmodelled(found)))


class ReservationBook:
    """The reservations over one cluster's nodes: which nodes a job may use when.

    Parameters
    ----------
    reservations : tuple of Reservation
    node_names : list of str
        The configuration's node names, in the cluster's node order (empty: none named).
    nodes : int
        Nodes of the cluster.
    """

    def __init__(self, reservations, node_names, nodes: int):
        pos = {name: i for i, name in enumerate(node_names)}
        self.reservations = tuple(reservations)
        self.by_name = {r.name: r for r in self.reservations}
        self.masks = []
        for r in self.reservations:
            mask = np.zeros(nodes, dtype=bool)
            if r.nodes == ("ALL",):
                mask[:] = True
            else:
                missing = [x for x in r.nodes if x not in pos]
                if missing:
                    raise ValueError(f"reservation {r.name} names node {missing[0]}, which no "
                                     "NodeName line has")
                mask[[pos[x] for x in r.nodes]] = True
            self.masks.append(mask)
        self.boundaries = sorted({t for r in self.reservations for t in (r.start_s, r.end_s)
                                  if math.isfinite(t)})
        self.failed: dict[str, int] = {}  # reservation -> the main pass that failed it

    def next_boundary(self, t: float) -> float:
        """The first reservation start or end after ``t`` (``inf`` if none)."""
        i = bisect.bisect_right(self.boundaries, t)
        return self.boundaries[i] if i < len(self.boundaries) else math.inf

    def reservation_of(self, run) -> Reservation | None:
        return self.by_name.get(run.spec.reservation) if run.spec.reservation else None

    def usable(self, run, limit: float, t: float, part_mask: np.ndarray) -> np.ndarray:
        """Per node: whether ``run`` (time limit ``limit`` s) may use it from ``t`` on."""
        end = t + (limit if math.isfinite(limit) else YEAR_S)
        own = self.reservation_of(run)
        if own is not None:
            i = self.reservations.index(own)
            if not own.start_s <= t < own.end_s:
                return np.zeros_like(part_mask)
            out = self.masks[i].copy()
            if own.maint:
                return out
            for j, r in enumerate(self.reservations):
                if j != i and r.start_s < end and r.end_s > t:
                    out &= ~self.masks[j]
            return out
        out = np.ones_like(part_mask)
        for j, r in enumerate(self.reservations):
            if r.start_s < end and r.end_s > t:
                out &= ~self.masks[j]
        return out

    def deferred(self, run, t: float) -> bool:
        """Whether ``run`` names a reservation that is not on at ``t`` (backfill's
        ``reservation defer``)."""
        own = self.reservation_of(run)
        return own is not None and not own.start_s <= t < own.end_s

    def maintenance(self, run, limit: float, t: float, part_mask: np.ndarray) -> bool:
        """Whether a ``MAINT`` or ``ALL_NODES`` reservation overlapping the job holds every node
        of its partition (``ESLURM_RESERVATION_MAINT``)."""
        end = t + (limit if math.isfinite(limit) else YEAR_S)
        for j, r in enumerate(self.reservations):
            if r.start_s < end and r.end_s > t and (
                    "ALL_NODES" in r.flags
                    or (r.maint and not (part_mask & ~self.masks[j]).any())):
                return True
        return False

    # ------------------------------------------------------------- the main scheduler
    def admit(self, m, run, rec, mask: np.ndarray) -> tuple[np.ndarray, str | None]:
        """The nodes of ``mask`` the main scheduler may give ``run`` now, or a reason to skip
        it (its reservation not started, or failed earlier in this pass)."""
        now = m.ctx.now
        own = self.reservation_of(run)
        if own is not None:
            if self.failed.get(own.name) == m.counters["main_passes"]:
                return mask, "Priority"
            if self.deferred(run, now):
                return mask, WAITING
        return mask & self.usable(run, rec.limit, now, mask), None

    def fail(self, m, run) -> None:
        """``run`` could not start in its reservation: no later job of it starts in this
        main pass (``failed_resv``)."""
        self.failed[run.spec.reservation] = m.counters["main_passes"]

    def not_available(self, m, run, rec, mask: np.ndarray, avail: np.ndarray) -> str | None:
        """After ``run`` found no nodes in ``mask`` (reservations applied): the reason it waits
        without failing its partition (``ESLURM_NODE_NOT_AVAIL``, ``ESLURM_RESERVATION_BUSY``),
        or ``None`` if it waits for busy nodes (``ESLURM_NODES_BUSY``: the partition fails)."""
        if run.spec.reservation:
            return None
        s = m.state
        part_mask = m.part_mask.get(rec.part, avail)
        if self.maintenance(run, rec.limit, m.ctx.now, part_mask):
            return MAINTENANCE
        idle = np.where(s.schedulable(), s.node_gpus, 0)
        if m.choose(run, rec, idle, mask) is not None:
            return None  # it would fit were the nodes idle: it waits for them
        busy = mask & ((s.node_free < s.node_gpus) | (m.completing > m.ctx.now))
        return None if busy.any() else NOT_AVAILABLE
