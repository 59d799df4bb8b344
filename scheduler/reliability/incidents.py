"""Incidents: what is broken now, one per root cause, and what it has cost so far.

The failure engine (:class:`~scheduler.reliability.failure_engine.FailureEngine`) opens an
incident for every failure that schedules a repair (a failure process's draw or a drill) and
resolves it when that repair is handled; a leaf switch is one incident with all the nodes it
took down, a rack's PDU one with the rack's nodes, a cooling loop one with its row.  Nodes taken
out from outside the failure processes (:meth:`FailureEngine.node_out`: an operator's edit, a
mirrored cluster's observation) open incidents too: a mirror's node is one incident per node
(its cause becomes the scheduler's reason, :meth:`IncidentBook.observed_reason`), an operator's
edit one per cause and instant (a leaf marked failed is one incident); they resolve when all
their nodes are back up.  A job-level fault (component ``job``) stops one gang and takes no part
down: it is an interruption, not an incident.

GPU-hours lost by an incident, so far:

* *lost work*: the GPU-seconds of compute its interruptions threw away, as the ledger booked
  them (``lost_work``; each hit run's ``lost_gpu_s`` grew by exactly that at the interruption),
* plus *down GPUs*: the GPUs of the nodes it took down times the time it has been open (until
  it resolves).  Overlapping incidents on one node each count that node's GPUs.

The hang until detection (booked as ``recovery``) and slowdowns of jobs crossing a failed spine
or link, or throttled by a lost cooling loop, are not counted (those jobs are listed as hit,
with no lost work).  Resolved incidents beyond the last :data:`RESOLVED_KEPT` are kept as counts
by source only.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np

from scheduler.reliability.failures import EFFECTS

MIRROR_SOURCE = "mirror"
RESOLVED_KEPT = 200
"""Resolved incidents kept whole; older ones are only counted (:attr:`IncidentBook.dropped`)."""

TARGET_KINDS = {
    "gpu": "gpu", "nic": "gpu", "endpoint_link": "gpu", "host": "node", "software": "node",
    "planned": "node", "leaf": "switch", "spine": "switch", "fabric_link": "link",
    "pdu": "rack", "cooling": "row", "storage": "storage",
}
"""A failure component -> the kind of entity the twin names it by (a NIC and its link by their
GPU, software faults by their node, a cooling loop by its rack row)."""


@dataclass
class Incident:
    """One root cause: ``component`` and ``unit`` as the failure engine counts them, the
    entity it names (``target_kind``, ``target_id``: engine ids), times in simulated s.

    ``jobs`` maps a hit job's name to ``[GPUs, lost work GPU-s]``; ``gpus_down`` counts the
    GPUs of the ``nodes`` it took down (0 for a slowdown or throttle, whose ``nodes`` are the
    ones it slows or none).
    """

    id: int
    component: str
    unit: int
    target_kind: str
    target_id: int
    cause: str
    source: str  # the failure mode's source: "drill", "mirror", "inventory edit", a paper ...
    since: float
    expected_repair: float | None
    nodes: np.ndarray
    gpus_down: int
    jobs: dict[str, list] = field(default_factory=dict)
    drill_id: int | None = None
    resolved_at: float | None = None

    @property
    def drill(self) -> bool:
        return self.source == "drill"

    def lost_work_gpu_s(self) -> float:
        return float(sum(lost for _, lost in self.jobs.values()))

    def down_gpu_s(self, now: float) -> float:
        end = now if self.resolved_at is None else self.resolved_at
        return self.gpus_down * max(0.0, end - self.since)

    def gpu_hours_lost(self, now: float) -> float:
        """Lost work plus down GPUs over the time open, GPU-h (see the module's docstring)."""
        return (self.lost_work_gpu_s() + self.down_gpu_s(now)) / 3600.0

    def gpus_hit(self) -> int:
        """GPUs down plus GPUs of the jobs it hit: how the frame ranks incidents."""
        return self.gpus_down + int(sum(g for g, _ in self.jobs.values()))


class IncidentBook:
    """Open incidents by id and the last resolved ones (newest last).

    >>> book = IncidentBook()
    >>> i = book.open(component="leaf", unit=3, target=("switch", 3), cause="leaf_switch",
    ...               source="drill", now=10.0, due=70.0, nodes=np.array([0, 1]),
    ...               gpus_down=16, jobs={"llm": [16, 7200.0]}, repair=1)
    >>> round(i.gpu_hours_lost(now=40.0), 3)  # 2 GPU-h of lost work + 16 GPUs for 30 s
    2.133
    >>> book.repaired(1, now=70.0).resolved_at, len(book.open_incidents)
    (70.0, 0)
    """

    def __init__(self, resolved_kept: int = RESOLVED_KEPT):
        self.open_incidents: dict[int, Incident] = {}
        self.resolved: deque[Incident] = deque(maxlen=resolved_kept)
        self.resolved_total = 0
        self.dropped: Counter = Counter()  # source -> resolved incidents no longer kept whole
        self._next_id = 1
        self._by_repair: dict[int, int] = {}  # the failure engine's repair id -> incident id
        self._outside: dict[tuple, int] = {}  # (cause, t) or ("node", n) -> incident id
        self._node_out: dict[int, list[int]] = {}  # node -> outside incidents holding it

    # ----------------------------------------------------------------- opening
    def open(self, *, component: str, unit: int, target: tuple[str, int], cause: str,
             source: str, now: float, due: float | None, nodes: np.ndarray, gpus_down: int,
             jobs: dict[str, list], repair: int | None) -> Incident:
        """A new incident at ``now`` (s), repaired at ``due`` (s, ``None``: not known) by the
        failure engine's repair ``repair``."""
        inc = Incident(self._next_id, component, int(unit), target[0], int(target[1]), cause,
                       source, float(now), due, np.asarray(nodes, dtype=np.int64).copy(),
                       int(gpus_down), jobs)
        self._next_id += 1
        self.open_incidents[inc.id] = inc
        if repair is not None:
            self._by_repair[repair] = inc.id
        return inc

    def open_failure(self, mode, unit: int, *, plan, state, nodes: np.ndarray,
                     jobs: dict[str, list], now: float, due: float, repair: int) -> Incident:
        """A failure ``mode`` (a :class:`~scheduler.reliability.failures.FailureMode`) of
        ``unit`` that the failure engine repairs at ``due`` with repair ``repair``; ``nodes``
        are down when its effect interrupts, else only slowed or throttled."""
        down = EFFECTS[mode.component] == "interrupt"
        return self.open(component=mode.component, unit=unit,
                         target=target_of(mode.component, unit, plan), cause=mode.cause,
                         source=mode.source, now=now, due=due, nodes=nodes,
                         gpus_down=int(state.node_gpus[nodes].sum()) if down else 0,
                         jobs=jobs, repair=repair)

    def label_drill(self, repairs, drill_id: int) -> None:
        """The incidents of ``repairs`` (failure-engine repair ids) are the twin's drill
        ``drill_id``."""
        for rid in repairs:
            inc = self.open_incidents.get(self._by_repair.get(rid, 0))
            if inc is not None:
                inc.drill_id = int(drill_id)

    def node_out(self, node: int, *, cause: str, source: str, now: float, gpus: int,
                 jobs: dict[str, list]) -> Incident:
        """Node ``node`` (``gpus`` GPUs) was taken out from outside the failure processes:
        a mirror's node is an incident of its own; an operator's edits of one cause in one
        instant (the nodes of a leaf or a rack) are one."""
        key = ("node", node) if source == MIRROR_SOURCE else (cause, now)
        inc = self.open_incidents.get(self._outside.get(key, 0))
        if inc is None:
            inc = self.open(component="host", unit=node, target=("node", node), cause=cause,
                            source=source, now=now, due=None, nodes=np.array([node]),
                            gpus_down=gpus, jobs=jobs, repair=None)
            self._outside[key] = inc.id
        else:
            if node not in inc.nodes:
                inc.nodes = np.append(inc.nodes, node)
                inc.gpus_down += int(gpus)
            for name, (g, lost) in jobs.items():
                prev = inc.jobs.get(name, [g, 0.0])
                inc.jobs[name] = [max(prev[0], g), prev[1] + lost]
        self._node_out.setdefault(node, []).append(inc.id)
        return inc

    def observed_reason(self, node: int, reason: str) -> None:
        """A mirrored node's open incident takes the cluster scheduler's reason as its cause."""
        inc = self.open_incidents.get(self._outside.get(("node", node), 0))
        if inc is not None and reason:
            inc.cause = reason

    # ----------------------------------------------------------------- resolving
    def repaired(self, repair: int, *, now: float) -> Incident | None:
        """The repair ``repair`` was handled at ``now``: its incident resolves."""
        iid = self._by_repair.pop(repair, None)
        return None if iid is None else self._resolve(iid, now)

    def node_back(self, node: int, *, now: float, up: bool) -> None:
        """A cause holding ``node`` out is gone (``up``: the node is up again).  Outside
        incidents resolve once every node they hold is back."""
        held = self._node_out.get(node)
        if not held:
            return
        if not up:  # one cause of several went: the latest incident lets go of the node
            held = [held.pop()]
        else:
            del self._node_out[node]
        for iid in held:
            if not any(iid in ids for ids in self._node_out.values()):
                self._resolve(iid, now)

    def _resolve(self, iid: int, now: float) -> Incident | None:
        inc = self.open_incidents.pop(iid, None)
        if inc is None:
            return None
        inc.resolved_at = float(now)
        for key in [k for k, v in self._outside.items() if v == iid]:
            del self._outside[key]
        if len(self.resolved) == self.resolved.maxlen:
            self.dropped[self.resolved[0].source] += 1
        self.resolved.append(inc)
        self.resolved_total += 1
        return inc

    # ----------------------------------------------------------------- re-plans
    def carry(self, old: IncidentBook, node_map: np.ndarray, repairs: list[tuple], *,
              now: float) -> None:
        """Take over ``old``'s incidents after a re-plan (``node_map``: its node ids to this
        engine's, -1 where gone).  An open incident whose repair this engine now holds
        (``repairs``: ``(time, repair id, cause, unit)`` of its pending repairs) stays open
        on that repair; the others resolve at ``now`` (s): their failure was not carried.  A
        failed leaf takes the switch id its repair holds here (the fabric may be renumbered)."""
        self._next_id = max(self._next_id, old._next_id)
        self.resolved_total = old.resolved_total
        self.dropped.update(old.dropped)
        self.resolved.extend(_remapped(i, node_map) for i in old.resolved)
        free = list(repairs)
        for inc in list(old.open_incidents.values()):
            inc = _remapped(inc, node_map)
            self.open_incidents[inc.id] = inc
            leaf = inc.component == "leaf"
            match = next((r for r in free if inc.expected_repair is not None
                          and abs(r[0] - inc.expected_repair) < 1e-6 and r[2] == inc.cause
                          and (r[3] == inc.unit or r[3] == -1 or leaf)), None)
            if match is None:
                self._resolve(inc.id, now)
                continue
            free.remove(match)
            self._by_repair[match[1]] = inc.id
            if leaf and match[3] >= 0:
                inc.unit = inc.target_id = int(match[3])


def _remapped(inc: Incident, node_map: np.ndarray) -> Incident:
    nodes = node_map[inc.nodes] if inc.nodes.size else inc.nodes
    inc.nodes = nodes[nodes >= 0]
    if inc.target_kind == "node":
        inc.target_id = int(node_map[inc.target_id])
    return inc


def hit_jobs(runs, hit: list[int], lost_before: dict[int, float]) -> dict[str, list]:
    """Job name -> ``[GPUs, lost work GPU-s]`` of the runs ``hit`` (indices into ``runs``):
    what each run's ``lost_gpu_s`` grew by since ``lost_before`` (0 for a run not in it)."""
    return {runs[i].spec.name: [int(runs[i].gpus),
                                runs[i].lost_gpu_s - lost_before.get(i, runs[i].lost_gpu_s)]
            for i in hit}


def target_of(component: str, unit: int, plan) -> tuple[str, int]:
    """The entity the twin names a failed ``unit`` of ``component`` by: ``(kind, engine
    id)``; a spine's unit counts the switches above the leaves, its id is the switch's."""
    kind = TARGET_KINDS.get(component, component)
    if component == "spine":
        return kind, int(np.flatnonzero(plan.fabric.switch_tier > 0)[unit])
    return kind, int(unit)


# ----------------------------------------------------------------- the frame's view
NODES_SHOWN = 16
"""Node ids an incident lists in the frame (``nodes_count`` counts them all)."""
JOBS_SHOWN = 8
"""Jobs an incident lists in the frame, most GPUs first (``jobs_count`` counts them all)."""
RESOLVED_SHOWN = 20
"""Resolved incidents the frame lists, newest first."""
FRAME_BYTES_MAX = 32_768
"""Most bytes of the frame's incidents (compact JSON): the records that fit, open ones worst
first, then resolved ones newest first; the counts always.  Every dashboard receives them each
tick, however many incidents a storm opens (about 450 bytes a record: some 50 open and 20
resolved ones fit)."""
RECORD_BYTES_MAX = 2_048
"""Most bytes of one record: past it the record lists fewer jobs (``jobs_count`` still counts
them all), so one incident with long job names cannot take the others' room."""
TEXT_SHOWN = 120
"""Characters of a record's ``cause`` and ``source`` the frame carries (a mirror's cause is its
scheduler's reason, free text)."""


def _size(obj) -> int:
    return len(json.dumps(obj, separators=(",", ":")))


def _short(text: str) -> str:
    return text if len(text) <= TEXT_SHOWN else text[:TEXT_SHOWN - 1] + "\u2026"


def incident_record(inc: Incident, now: float) -> dict:
    """``inc`` at ``now`` (s) as the frame's :class:`~scheduler.frame_schema.IncidentRecord`,
    at most :data:`RECORD_BYTES_MAX` bytes."""
    jobs = sorted(inc.jobs.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    record = {
        "id": inc.id, "component": inc.component, "unit": inc.unit,
        "target_kind": inc.target_kind, "target_id": inc.target_id,
        "cause": _short(inc.cause), "source": _short(inc.source), "drill": inc.drill,
        "drill_id": inc.drill_id, "since": round(inc.since, 3),
        "expected_repair": None if inc.expected_repair is None else round(inc.expected_repair, 3),
        "resolved_at": None if inc.resolved_at is None else round(inc.resolved_at, 3),
        "duration_s": None if inc.resolved_at is None else round(inc.resolved_at - inc.since, 3),
        "nodes": inc.nodes[:NODES_SHOWN].tolist(), "nodes_count": int(inc.nodes.size),
        "gpus_down": inc.gpus_down,
        "jobs": [{"name": name, "gpus": int(g), "lost_gpu_h": round(lost / 3600.0, 4)}
                 for name, (g, lost) in jobs[:JOBS_SHOWN]],
        "jobs_count": len(jobs), "gpus_hit": inc.gpus_hit(),
        "lost_work_gpu_h": round(inc.lost_work_gpu_s() / 3600.0, 4),
        "down_gpu_h": round(inc.down_gpu_s(now) / 3600.0, 4),
        "gpu_hours_lost": round(inc.gpu_hours_lost(now), 4),
    }
    while record["jobs"] and _size(record) > RECORD_BYTES_MAX:
        record["jobs"].pop()
    return record


def worst_first(incidents, now: float, top: int | None = None) -> list[Incident]:
    """Most GPUs hit (down, and held by the jobs it hit) first, then most GPU-hours lost,
    then the oldest; the first ``top`` (all by default)."""
    def key(i):
        return -i.gpus_hit(), -i.gpu_hours_lost(now), i.id

    if top is None:
        return sorted(incidents, key=key)
    return heapq.nsmallest(top, incidents, key=key)


def incidents_view(book: IncidentBook, now: float, top: int = 50,
                   max_bytes: int = FRAME_BYTES_MAX) -> dict:
    """The frame's :class:`~scheduler.frame_schema.Incidents`: of the ``top`` worst open ones
    and the last :data:`RESOLVED_SHOWN` resolved ones (newest first), those that fit in
    ``max_bytes`` with the counts (compact JSON), in that order; and the counts of all."""
    open_ = list(book.open_incidents.values())
    by_component = Counter(i.target_kind for i in open_)
    view = {"open": [], "resolved": [],
            "counts": {"open": len(open_), "open_drills": sum(i.drill for i in open_),
                       "resolved": book.resolved_total, "resolved_kept": len(book.resolved),
                       "open_by_kind": dict(sorted(by_component.items()))}}
    room = max_bytes - _size(view)
    for key, incidents in (("open", worst_first(open_, now, top)),
                           ("resolved", list(book.resolved)[::-1][:RESOLVED_SHOWN])):
        for inc in incidents:
            record = incident_record(inc, now)
            size = _size(record) + 1  # and its comma
            if size > room:
                break
            view[key].append(record)
            room -= size
    return view
