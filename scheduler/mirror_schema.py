"""The mirror's part of the live frame (:class:`~scheduler.frame_schema.LiveFrame`'s
``mirror``): what a twin following a real cluster read, as
:func:`scheduler.control.mirror.mirror_summary` builds it."""

from __future__ import annotations

from typing import TypedDict


class MirrorTelemetry(TypedDict):
    """Measured telemetry of the mirrored cluster: GPUs reporting of all, mean utilisation
    (%), total draw (kW), hottest GPU (°C), mean tensor activity (0-1); null: not reported."""

    gpus_reporting: int
    gpus: int
    util_mean_pct: float | None
    power_kw: float | None
    temp_max_c: float | None
    tensor_active_mean: float | None


class MirrorJob(TypedDict):
    """A followed job as the real scheduler names it: its id, name, user, account, partition
    and state (``running``, ``suspended``, ``pending`` or ``ended``)."""

    key: str
    name: str
    user: str
    account: str
    partition: str
    state: str


class MirrorReservation(TypedDict):
    """A reservation of the real scheduler: its name, how many nodes (the first ten hosts),
    start and end (epoch s; end null when open), whether it is a maintenance window, flags."""

    name: str
    nodes: int
    hosts: list[str]
    start: float | None
    end: float | None
    maintenance: bool
    flags: list[str]


class MirrorFailures(TypedDict):
    """Nodes the cluster took down while the mirror watched, over how many node-hours, the
    failure profile forks draw until that is enough to fit, and whether it is
    (``docs/mirror.md``)."""

    nodes_down: int
    node_hours: float
    profile: str | None
    fitted: bool


class MirrorSummary(TypedDict):
    """A mirror's state: polls applied, pending jobs by reason, ended jobs by end state, jobs
    the engine could not follow (first 20, job id -> why) and their count, suspended jobs,
    the scheduler's names of the followed jobs (run name -> job; the largest running and the
    longest waiting, first 100), XID codes seen (code -> GPUs), the scheduler's reservations
    (first 20), the node failures measured and the telemetry summary."""

    polls: int
    pending_reasons: dict[str, int]
    ended: dict[str, int]
    rejected: dict[str, str]
    rejected_count: int
    suspended: int
    jobs: dict[str, MirrorJob]
    xid: dict[str, int]
    reservations: list[MirrorReservation]
    failures_measured: MirrorFailures
    telemetry: MirrorTelemetry
