"""One site of a mirrored grid (issue 30): where its Slurm is, what one poll of it says, and
its health.

A :class:`SiteSource` is what ``mirror_grid`` knows of a member cluster's Slurm (from its
:class:`~twin.inventory.grid_models.SiteMirror` row): the commands with a ``slurm.conf``, or
slurmrestd with a JWT read from an environment variable at each poll.  :func:`read_site` polls
it once, with the single-cluster mirror's readers (:mod:`twin.mirror.slurm_rest`) and parsers
(:func:`~twin.mirror.slurm_source.parse_sinfo`, :func:`~twin.mirror.slurm_source.parse_squeue`),
and :func:`summarise` reduces the answer to a place row's numbers.  :class:`SiteState` keeps a
site's last good reading and last error; :func:`health` says ``ok``, ``stale`` or ``down``.

No Django here: the grid mirror (:mod:`twin.mirror.grid_mirror`) loads the rows and writes the
document.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from twin.mirror.errors import MAX_BYTES, SourceError, json_load
from twin.mirror.slurm_rest import cli_asks, rest_asks
from twin.mirror.slurm_source import SlurmJob, SlurmNode, parse_sinfo, parse_squeue

STALE_POLLS = 3
"""A site whose last good poll is older than this many poll intervals is ``stale``."""

DOWN_NODE = frozenset({"down", "drain", "drained", "draining", "fail", "failing",
                       "not_responding"})
"""A node in any of these states (or flags) counts its GPUs as down."""

HOLDING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SIGNALING", "STAGE_OUT"})
"""Job states (as squeue shows them) whose GPUs are allocated."""

QUEUED = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})
"""Job states that wait in the queue."""


@dataclass(frozen=True, slots=True)
class SiteSource:
    """Where one site's Slurm is.  ``place``: the member cluster's name; ``kind``: ``cli`` or
    ``rest``; ``conf``: slurm.conf (None: the environment's); ``token_env``: the variable that
    holds slurmrestd's JWT ("" for none); ``poll_s``, ``timeout_s``: seconds;
    ``inventory_gpus``: the cluster's GPUs in the inventory (shown until Slurm answers)."""

    place: str
    jurisdiction: str = ""
    kind: str = "cli"
    conf: Path | None = None
    rest_url: str = ""
    rest_user: str = ""
    token_env: str = ""
    poll_s: float = 30.0
    timeout_s: float = 10.0
    inventory_gpus: int = 0


@dataclass(frozen=True, slots=True)
class SiteReading:
    """A site's numbers from one good poll (GPUs; ``read_at``: Unix seconds)."""

    gpus: int
    allocated: int
    down: int
    queued_jobs: int
    queued_gpus: int
    read_at: float
    jobs: tuple = field(default=(), repr=False, compare=False)
    """Running and pending jobs for a what-if (:func:`job_rows`); not in the Overview."""


def job_rows(jobs: list[SlurmJob], read_at: float) -> tuple[dict, ...]:
    """Running and pending jobs as a grid what-if starts them
    (:func:`scheduler.grid.mirror_start.grid_from_mirror`): id, state, GPUs, elapsed and time
    limit, seconds (``None`` where Slurm said nothing).  Jobs without GPUs are left out."""
    out = []
    for j in jobs:
        state = "running" if j.state in HOLDING else "pending" if j.state in QUEUED else None
        if state is None or j.gpus < 1:
            continue
        elapsed = (max(0.0, read_at - j.start_time) if state == "running" and j.start_time
                   else None)
        out.append({"job_id": j.job_id, "state": state, "gpus": int(j.gpus),
                    "elapsed_s": elapsed, "time_limit_s": j.time_limit_s})
    return tuple(out)


def summarise(nodes: dict[str, SlurmNode], jobs: list[SlurmJob], read_at: float
              ) -> SiteReading:
    """A place row's numbers from Slurm's nodes and jobs.

    GPUs: the nodes' GPUs; down: those of nodes down, drained, draining, failing or not
    responding; allocated: GPUs of jobs running (or completing), at most the GPUs; queued:
    pending (or requeued) jobs and their GPUs.

    >>> from twin.mirror.slurm_source import SlurmNode
    >>> n = SlurmNode("a1", frozenset({"idle", "drained"}), "fan", "gpu:8", 8, (), ())
    >>> summarise({"a1": n}, [], 0.0)
    SiteReading(gpus=8, allocated=0, down=8, queued_jobs=0, queued_gpus=0, read_at=0.0)
    """
    gpus = sum(n.gpus for n in nodes.values())
    down = sum(n.gpus for n in nodes.values() if n.state & DOWN_NODE)
    allocated = sum(j.gpus for j in jobs if j.state in HOLDING)
    queued = [j for j in jobs if j.state in QUEUED]
    return SiteReading(gpus, min(allocated, gpus), down, len(queued),
                       sum(j.gpus for j in queued), read_at, job_rows(jobs, read_at))


def read_site(site: SiteSource, *, clock=time.time, max_bytes: int = MAX_BYTES
              ) -> SiteReading:
    """One poll of ``site``'s Slurm (nodes and queue); :class:`SourceError` when it cannot be
    read, each answer given ``site.timeout_s`` seconds."""
    if site.kind == "rest":
        token = None
        if site.token_env:
            token = os.environ.get(site.token_env)
            if not token:
                raise SourceError(f"slurmrestd {site.rest_url}",
                                  f"the token variable {site.token_env} is not set")
        asks = rest_asks(site.rest_url, token=token, user=site.rest_user or None,
                         timeout=site.timeout_s, max_bytes=max_bytes, version=None,
                         accounting_start=clock())
    else:
        asks = cli_asks(conf=site.conf, timeout=site.timeout_s, max_bytes=max_bytes,
                        accounting_window_s=0)
    nodes, _ = parse_sinfo(json_load(asks.fetch(asks.nodes), source=asks.source,
                                     what=asks.nodes), origin=asks.nodes)
    jobs = parse_squeue(json_load(asks.fetch(asks.jobs), source=asks.source, what=asks.jobs),
                        origin=asks.jobs)
    return summarise(nodes, jobs, clock())


@dataclass(slots=True)
class SiteState:
    """What the mirror knows of one site: its last good reading and its last poll's error
    ("" when the last poll was good).  ``polls``: polls finished, good or not."""

    source: SiteSource
    reading: SiteReading | None = None
    error: str = ""
    polls: int = 0

    def record(self, reading: SiteReading | None, error: str = "") -> None:
        """A finished poll: a reading, or why there is none."""
        if reading is not None:
            self.reading = reading
        self.error = "" if reading is not None else (error or "no answer")
        self.polls += 1


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def health(state: SiteState, now: float) -> tuple[str, str]:
    """``(health, note)`` of a site at Unix time ``now``.

    ``down``: its last poll failed (Slurm unreachable, or not read yet); ``stale``: its last
    good poll is older than :data:`STALE_POLLS` poll intervals (a poll that hangs, a mirror
    that fell behind); else ``ok``.  The note says why, and how old the numbers shown are.
    """
    reading, poll_s = state.reading, state.source.poll_s
    if state.error or reading is None:
        why = state.error or "not polled yet"
        since = (f"; numbers from the last good poll {_age(now - reading.read_at)} ago"
                 if reading else "; no good poll yet")
        return "down", f"unreachable: {why}{since}"
    age = now - reading.read_at
    if age > STALE_POLLS * poll_s:
        return "stale", (f"last good poll {_age(age)} ago (more than {STALE_POLLS} polls of "
                         f"{poll_s:g} s)")
    return "ok", ""


def place_row(state: SiteState, now: float) -> dict:
    """The site's :class:`scheduler.grid.overview.PlaceRow` at ``now`` (the inventory's
    GPUs and zeros until a good poll)."""
    site, r = state.source, state.reading
    level, note = health(state, now)
    numbers = (r.gpus, r.allocated, r.down, r.queued_jobs, r.queued_gpus) if r else \
        (site.inventory_gpus, 0, 0, 0, 0)
    gpus, allocated, down, queued_jobs, queued_gpus = numbers
    return {"place": site.place, "kind": "site", "cluster": site.place,
            "jurisdiction": site.jurisdiction, "gpus": gpus, "allocated": allocated,
            "down": down, "queued_jobs": queued_jobs, "queued_gpus": queued_gpus,
            "mfu": None, "cost_per_hour": None, "wan_in_gb": 0.0, "wan_out_gb": 0.0,
            "health": level, "note": note}
