"""The incidents' part of the live frame (:class:`~scheduler.frame_schema.LiveFrame`'s
``incidents``): open incidents worst first, the last resolved ones and the counts, as
:mod:`scheduler.reliability.incidents` reports them."""

from __future__ import annotations

from typing import TypedDict


class IncidentJob(TypedDict):
    """A job an incident hit: its GPUs and the work its interruption threw away (GPU-h, the
    ledger's ``lost_work``; 0 for a job only slowed or throttled)."""

    name: str
    gpus: int
    lost_gpu_h: float


class IncidentRecord(TypedDict):
    """One incident, one root cause (:mod:`scheduler.reliability.incidents`).

    ``component`` and ``unit``: the failure component and its unit as the failure engine counts
    them; ``target_kind`` (``gpu``, ``node``, ``switch``, ``link``, ``rack``, ``row``,
    ``storage``) and ``target_id`` (engine id) name the part; ``source`` is the failure mode's
    (``drill``, ``mirror``, ``inventory edit``, the rate's paper); ``drill_id`` the twin's
    drill; ``cause`` and ``source`` are cut to 120 characters. Times in s: ``since``,
    ``expected_repair`` (null: not known, an operator's or a mirror's node), ``resolved_at`` and
    ``duration_s`` (null while open). ``nodes``: the first 16 engine node ids (``nodes_count``
    all); ``gpus_down``: GPUs of the nodes it took down; ``jobs``: the first 8 it hit, most GPUs
    first (``jobs_count`` all; fewer where their names would take the record past 2,048 bytes);
    ``gpus_hit``: GPUs down plus the jobs' GPUs. GPU-h lost so far: ``lost_work_gpu_h`` plus
    ``down_gpu_h`` (GPUs down times the time open) is ``gpu_hours_lost``."""

    id: int
    component: str
    unit: int
    target_kind: str
    target_id: int
    cause: str
    source: str
    drill: bool
    drill_id: int | None
    since: float
    expected_repair: float | None
    resolved_at: float | None
    duration_s: float | None
    nodes: list[int]
    nodes_count: int
    gpus_down: int
    jobs: list[IncidentJob]
    jobs_count: int
    gpus_hit: int
    lost_work_gpu_h: float
    down_gpu_h: float
    gpu_hours_lost: float


class IncidentCounts(TypedDict):
    """Incidents open (of them drills), resolved so far, resolved kept whole by the engine,
    and open ones by ``target_kind``."""

    open: int
    open_drills: int
    resolved: int
    resolved_kept: int
    open_by_kind: dict[str, int]


class Incidents(TypedDict):
    """What is broken now: the first 50 open incidents, worst first (most GPUs hit, then
    GPU-h lost), the last 20 resolved ones (newest first) and the counts, in at most 32,768
    bytes of compact JSON: records that would take it past them are left out (open ones
    come first; ``counts`` counts them all)."""

    open: list[IncidentRecord]
    resolved: list[IncidentRecord]
    counts: IncidentCounts
