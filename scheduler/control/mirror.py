"""A real cluster's state applied to a running engine: the twin as a mirror.

In mirror mode the real cluster's scheduler (Slurm) decides where jobs run and the real
hardware decides what fails; the engine keeps the books, the physics and the pages.  Its own
scheduler is *held* (:attr:`Scheduler.held`: no pass places anything) and it runs no failure
processes.  Each poll the twin reads the cluster and calls :func:`observe` with an
:class:`Observation` in engine ids (the twin's adapter maps hostnames to node ids); the engine
is brought to the observed state:

* jobs that ended (or left the scheduler's view) are ended with the scheduler's verdict:
  ``COMPLETED`` books the job done; ``NODE_FAIL``, ``BOOT_FAIL``, ``FAILED`` and
  ``OUT_OF_MEMORY`` count as an interruption by that cause (the measured failure statistics
  next to the model's predictions); ``PREEMPTED`` as a planned one;
* pending jobs wait in the engine's queue with the scheduler's reason; a running job that went
  back to pending (requeued) is stopped and queued;
* node statuses (up, drained) are set (:func:`~scheduler.control.inject.inject`);
* running jobs are placed where the scheduler put them, holding the cores and memory it
  allocated (:mod:`.mirror_jobs`: never the simulator's per-GPU defaults, never refused for
  host resources), with the work done so far estimated
  from their elapsed time and time limit (a mirrored job is assumed to run to its time limit,
  :data:`DEFAULT_LIMIT_S` when it has none: the engine cannot know a real job's length); a job
  that declared its model (parameters, tensor and pipeline parallelism) is priced by the
  physics (communication over the fabric), one that did not as compute only;
* GPU telemetry (DCGM, through Prometheus) is kept per GPU; a new XID error on a GPU is an
  event.

A fork of a mirrored engine (a what-if from now) releases the scheduler with
:func:`release_fork`: its own policy then places the pending jobs.

Each poll applies whole or not at all: everything that refuses an observation is checked
before anything changes; a job the engine cannot place (its GPUs are busy in the twin, or its
nodes' accelerators differ) is not guessed at: it is listed in :attr:`MirrorBook.rejected`
with the reason, the rest applies, and the next poll tries it again. Events name nodes by
hostname (:attr:`MirrorBook.hostnames`, set by the twin's adapter); the scheduler's job
names, users and states (``suspended``) are kept in :attr:`MirrorBook.jobs`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from scheduler.control import mirror_jobs as mj
from scheduler.control.inject import inject
from scheduler.control.mirror_jobs import DEFAULT_LIMIT_S, INTERRUPTING, PLANNED  # noqa: F401
from scheduler.model.job_run import QUEUED
from scheduler.reliability.mirror_fit import MIN_FAILURES
from scheduler.sim import Kind

JOB_STATES = ("running", "pending", "ended")
TELEMETRY = ("util", "power_w", "temp_c", "tensor_active", "xid")
SUSPENDED = frozenset({"SUSPENDED", "STOPPED"})
"""Scheduler states of a job that holds its GPUs but does no work (shown as suspended)."""


@dataclass
class ObservedJob:
    """One job as the real scheduler reports it (engine ids).

    ``cpus_per_gpu`` and ``ram_gb_per_gpu``: cores and GB the scheduler allocated per GPU
    (``None``: not said, the mirror books 0; the scheduler already decided the job fits).
    ``slurm_state``: the scheduler's own word for the state (``SUSPENDED``, ``REQUEUED`` ...).
    """

    key: str  # the scheduler's job id
    state: str  # running, pending or ended
    gpus: int
    name: str = ""
    tenant: str = "mirror"
    nodes: tuple[int, ...] = ()
    gpus_per_node: tuple[int, ...] | None = None
    reason: str = ""  # a pending job's reason; an ended job's end state (COMPLETED, NODE_FAIL…)
    elapsed_s: float = 0.0
    time_limit_s: float | None = None
    partition: str = ""
    params_b: float = 0.0  # the model, when the job declared it (else priced as compute only)
    tp: int = 1
    pp: int = 1
    cpus_per_gpu: float | None = None
    ram_gb_per_gpu: float | None = None
    user: str = ""
    account: str = ""
    slurm_state: str = ""


@dataclass
class Observation:
    """What one poll read: node statuses, jobs and, optionally, per-GPU telemetry."""

    nodes: dict[int, dict] = field(default_factory=dict)  # id -> {"up": bool, "drained": bool}
    jobs: list[ObservedJob] = field(default_factory=list)
    complete: bool = True  # the job list is the scheduler's whole view (absent jobs ended)
    telemetry: dict[str, np.ndarray] | None = None  # TELEMETRY name -> per-GPU (NaN: unknown)
    reasons: dict[int, str] = field(default_factory=dict)  # node id -> the scheduler's reason
    reservations: list[dict] | None = None  # name, nodes (ids), start/end (s), flags, maint
    unmapped: set[str] = field(default_factory=set)  # listed, but the adapter could not map


class MirrorBook:
    """The mirror's own state, kept on the engine (:attr:`Engine.mirror
    <scheduler.engine.Engine.mirror>`): what it adopted."""

    origin: float | None = None
    """Wall-clock time (s) the twin's mirror driver maps simulated time 0 to; it sets this."""

    def __init__(self, n_gpus: int):
        self.runs: dict[str, int] = {}  # scheduler job id -> run index
        self.reasons: dict[str, str] = {}  # run name -> pending reason
        self.node_reasons: dict[int, str] = {}
        self.rejected: dict[str, str] = {}  # job id -> why the engine could not follow it
        self.ended: dict[str, int] = {}  # end state -> jobs
        self.counted: set[str] = set()  # ended jobs already counted (still listed)
        self.xid: dict[int, int] = {}  # XID code -> errors seen
        self.telemetry = {k: np.full(n_gpus, np.nan) for k in TELEMETRY}
        self.polls = 0
        self._fill()

    def _fill(self) -> None:
        """Fields later releases added (an engine restored from an older snapshot lacks them)."""
        v = vars(self)
        v.setdefault("hostnames", None)  # node id -> hostname, set by the twin's adapter
        v.setdefault("jobs", {})  # run name -> the scheduler's id, name, user, account, state
        v.setdefault("profile", None)  # the failure profile the forks draw until measured
        v.setdefault("nodes_down", 0)  # nodes the cluster took down while watched
        v.setdefault("node_hours", 0.0)  # node-hours watched up (the exposure of nodes_down)
        v.setdefault("watched_t", None)  # engine time the exposure was last counted to
        v.setdefault("reservations", [])  # the scheduler's reservations, as last read

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state)
        self._fill()

    def host(self, node: int) -> str:
        """``node``'s hostname (``node <id>`` when the adapter gave none)."""
        names = self.hostnames
        return names[node] if names is not None and 0 <= node < len(names) else f"node {node}"


def mirror_hold(engine) -> MirrorBook:
    """Make ``engine`` a mirror (:meth:`Engine.become_mirror
    <scheduler.engine.Engine.become_mirror>`): its scheduler held; returns its book."""
    return engine.become_mirror()


def release_fork(fork, *, failures: bool = True) -> None:
    """A fork of a mirror runs by itself from now (a what-if): its scheduler places the
    pending jobs and (``failures``) the failure processes draw failures from now on, from the
    fork's own random streams (so seeds give the forecast its band)."""
    fork.scheduler.release()
    if failures:
        fork.reliability.enable()
    # an instant now, so a pass runs even if nothing else happens (a backfill cycle wakes it)
    fork.scheduler.ctx.schedule(fork.now, Kind.BACKFILL, None)


def _check(engine, obs: Observation) -> None:
    """Everything that refuses the whole observation, before anything changes."""
    n_nodes = engine.plan.n_nodes
    for r in obs.reservations or ():
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or any(
                not isinstance(n, int | np.integer) or not 0 <= n < n_nodes
                for n in r.get("nodes", ())):
            raise ValueError(f"reservation {r!r}: a name and nodes of this cluster "
                             f"(0-{n_nodes - 1})")
    for n, st in obs.nodes.items():
        if not isinstance(n, int | np.integer) or not 0 <= n < n_nodes:
            raise ValueError(f"node {n!r} is not a node of this cluster (0-{n_nodes - 1})")
        if (not isinstance(st, dict) or set(st) - {"up", "drained"}
                or not all(isinstance(v, bool) for v in st.values())):
            raise ValueError(f"node {n}: status must be a mapping of up/drained to true or "
                             f"false, not {st!r}")
    for n in obs.reasons:
        if not isinstance(n, int | np.integer) or not 0 <= n < n_nodes:
            raise ValueError(f"reason for node {n!r}, not a node of this cluster")
    keys = set()
    for job in obs.jobs:
        if job.state not in JOB_STATES:
            raise ValueError(f"job {job.key}: state must be one of {JOB_STATES}, "
                             f"not {job.state!r}")
        if job.key in keys:
            raise ValueError(f"job {job.key} is listed twice")
        keys.add(job.key)
        if job.state == "running" and not job.nodes:
            raise ValueError(f"running job {job.key} has no nodes")
        if any(not isinstance(n, int | np.integer) or not 0 <= n < n_nodes for n in job.nodes):
            raise ValueError(f"job {job.key}: a node outside 0-{n_nodes - 1}")
    if obs.telemetry is not None:
        for k, col in obs.telemetry.items():
            if k not in TELEMETRY:
                raise ValueError(f"unknown telemetry {k!r}; known: {', '.join(TELEMETRY)}")
            if np.shape(col) != (engine.state.n_gpus,):
                raise ValueError(f"telemetry {k}: one value per GPU ({engine.state.n_gpus})")


def observe(engine, obs: Observation) -> dict:
    """Bring ``engine`` (a mirror, :func:`mirror_hold`) to ``obs``; returns what changed.

    Applies whole or not at all: everything that can refuse the observation is checked before
    anything changes (``ValueError``, the engine as it was); after that only one job can be
    refused (it is listed in :attr:`MirrorBook.rejected` and under ``rejected``, and tried
    again the next poll), never the rest.  A job the twin already follows is matched to its
    run, never added twice.
    """
    book = mirror_hold(engine)
    _check(engine, obs)
    _watched(engine, book)
    changes = {"ended": [], "queued": [], "requeued": [], "started": [], "moved": [],
               "rejected": [], "clamped": [], "nodes": {}, "xid": []}
    seen = {j.key: j for j in obs.jobs}
    runs = engine.runs
    taken = _refollow(engine, book, seen)
    for key, idx in list(book.runs.items()):
        job = seen.get(key)
        if job is None and not obs.complete:
            continue
        run = runs[idx]
        if job is None and key in obs.unmapped:  # still the scheduler's, now beyond the twin
            if run.state in mj.HOLDING:
                mj.stop(engine, run, "moved where the twin cannot follow it")
            book.rejected[key] = "the scheduler lists it where the twin cannot follow it"
            changes["rejected"].append(key)
            continue
        if job is None or job.state == "ended":
            mj.end(engine, book, run, job.reason if job else "GONE")
            if run.spec.name in book.jobs:
                book.jobs[run.spec.name] = {**book.jobs[run.spec.name], "state": "ended"}
            del book.runs[key]
            book.counted.add(key)
            changes["ended"].append(key)
        elif job.state == "pending" and run.state in mj.HOLDING:
            mj.stop(engine, run, "requeued by the cluster's scheduler")
            changes["requeued"].append(key)
    nodes = _node_changes(engine, obs.nodes)
    if nodes:
        changed = inject(engine, nodes=nodes)
        changes["nodes"] = {k: v for k, v in changed.items()
                            if k in ("nodes_down", "nodes_up", "drained", "undrained") and v}
        _node_events(engine, book, changes["nodes"], obs.reasons)
        for n in changes["nodes"].get("nodes_down", ()):  # the incident names Slurm's reason
            engine.reliability.incidents.observed_reason(n, obs.reasons.get(n, ""))
        book.nodes_down += len(changes["nodes"].get("nodes_down", ()))
    if obs.reservations is not None:
        book.reservations = [dict(r) for r in obs.reservations]
    book.node_reasons = dict(obs.reasons) if obs.complete else {**book.node_reasons,
                                                                **obs.reasons}
    # jobs the scheduler moved (or started again) leave their old GPUs first, so that every
    # placement below is checked against the GPUs free once they all moved
    to_place = []
    for job in obs.jobs:
        if job.state == "ended":
            if job.key not in book.counted:  # seen only after it ended: counted once
                book.counted.add(job.key)
                book.ended[job.reason] = book.ended.get(job.reason, 0) + 1
            continue
        if job.key in book.runs and runs[book.runs[job.key]].state not in mj.LIVE:
            # the twin's estimate of its length ran out before the job did: a run anew
            del book.runs[job.key]
            taken = taken or {r.spec.name: r for r in runs}
        if job.key in book.runs:
            run = runs[book.runs[job.key]]
            _note(book, run.spec.name, job)
            try:
                if not mj.unmoved(engine, book, run, job):
                    book.rejected.pop(job.key, None)
                    continue
            except ValueError as exc:  # its new size fits no accelerator: it waits as it was
                book.rejected[job.key] = str(exc)
                changes["rejected"].append(job.key)
                continue
        to_place.append(job)
    _place(engine, book, to_place, taken, changes)
    for key in [k for k in book.rejected
                if (k not in seen and (k not in obs.unmapped or k not in book.runs))
                or (k in seen and seen[k].state == "ended")]:
        del book.rejected[key]
    if obs.complete:  # ended jobs the scheduler no longer lists need no memory
        book.counted &= seen.keys()
    if obs.telemetry is not None:
        changes["xid"] = _telemetry(engine, book, obs.telemetry)
    book.polls += 1
    return changes


def _watched(engine, book: MirrorBook) -> None:
    """Count the node-hours watched since the last poll (nodes up then): the exposure the
    forks' measured failure rate divides by (:mod:`scheduler.reliability.mirror_fit`)."""
    now = float(engine.now)
    if book.watched_t is not None and now > book.watched_t:
        up = int(np.count_nonzero(engine.state.node_up))
        book.node_hours += up * (now - book.watched_t) / 3600.0
    book.watched_t = now


def _refollow(engine, book: MirrorBook, seen: dict) -> dict:
    """Run names taken (name -> run); a live run named for a job the book lost (an apply an
    error cut short) is followed again instead of being added twice."""
    new = [k for k, j in seen.items() if j.state != "ended" and k not in book.runs]
    if not new:
        return {}
    taken = {r.spec.name: r for r in engine.runs}
    followed = set(book.runs.values())
    for key in new:
        run = taken.get(f"slurm-{key}")
        if run is not None and run.state in mj.LIVE and run.idx not in followed:
            book.runs[key] = run.idx
            if run.state == QUEUED and run.idx not in engine.queue:
                engine.jobs.requeue(run)  # an adoption cut short: back where it belongs
    return taken


def _place(engine, book: MirrorBook, to_place: list, taken: dict, changes: dict) -> None:
    """Place (or queue) each job: checked one by one against the GPUs, cores and memory free
    after those placed before it; a job that does not fit is refused alone."""
    s = engine.state
    free = s.node_free.copy()
    host = (s.node_free_cpu.copy(), s.node_free_ram.copy(), s.node_free_nic.copy())
    new_rows: list[tuple[ObservedJob, dict]] = []
    for job in to_place:
        try:
            if job.key in book.runs:
                run = engine.runs[book.runs[job.key]]
                ran = run.first_start is not None
                mj.place_again(engine, run, job, free, host, changes["clamped"])
                changes["moved" if ran else "started"].append(job.key)
            else:
                name = mj.run_name(job.key, taken)
                row = mj.new_row(engine, job, name, free, host, changes["clamped"])
                taken[name] = None
                new_rows.append((job, row))
        except (ValueError, TypeError) as exc:
            book.rejected[job.key] = str(exc)
            changes["rejected"].append(job.key)
        else:
            book.rejected.pop(job.key, None)
    if not new_rows:
        return
    try:  # one call (one log line): checked above against the same free resources
        added = inject(engine, jobs=[row for _, row in new_rows])["jobs"]
        done = list(zip(new_rows, added, strict=True))
    except ValueError:  # not expected: then each alone, so one job cannot refuse the rest
        done = []
        for job, row in new_rows:
            try:
                done.append(((job, row), inject(engine, jobs=[row])["jobs"][0]))
            except ValueError as exc:
                book.rejected[job.key] = str(exc)
                changes["rejected"].append(job.key)
    for (job, row), got in done:
        book.runs[job.key] = got["idx"]
        name = row["job"].name
        if job.state == "pending":
            book.reasons[name] = job.reason
        _note(book, name, job)
        changes["started" if row["state"] == "running" else "queued"].append(job.key)


def _note(book: MirrorBook, name: str, job: ObservedJob) -> None:
    """What the pages show of a followed job: the scheduler's id, name, user and state."""
    state = "suspended" if job.slurm_state in SUSPENDED else job.state
    entry = book.jobs.get(name)
    if entry is None or entry["state"] != state or entry["name"] != job.name:
        book.jobs[name] = {"key": job.key, "name": job.name, "user": job.user,
                           "account": job.account, "partition": job.partition,
                           "state": state}


def _node_changes(engine, nodes: dict[int, dict]) -> dict[int, dict]:
    """The statuses in ``nodes`` that differ from the engine's (inject sets only those)."""
    s = engine.state
    out = {}
    for n, st in nodes.items():
        diff = {k: v for k, v in st.items()
                if (k == "up" and bool(s.node_up[n]) != v)
                or (k == "drained" and bool(s.node_drained[n]) != v)}
        if diff:
            out[int(n)] = diff
    return out


NODE_EVENTS = {"nodes_down": ("node_down", "down"), "nodes_up": ("node_up", "back up"),
               "drained": ("drain", "drained"), "undrained": ("undrain", "undrained")}
MAX_NODE_EVENTS = 50  # per poll; more are one summary line


def _node_events(engine, book: MirrorBook, changed: dict, reasons: dict) -> None:
    """One event per node whose status the cluster changed, by hostname (its reason in the
    text)."""
    lines = [(kind, n, verb) for key, (kind, verb) in NODE_EVENTS.items()
             for n in changed.get(key, [])]
    for kind, n, verb in lines[:MAX_NODE_EVENTS]:
        why = reasons.get(n, "")
        engine.kernel.log(kind, f"{book.host(n)} {verb} in the cluster"
                          + (f": {why}" if why else ""), component=f"node {n}", node=int(n))
    if len(lines) > MAX_NODE_EVENTS:
        engine.kernel.log("observed", f"{len(lines) - MAX_NODE_EVENTS} more node changes in "
                                      "the cluster this poll")


def _telemetry(engine, book: MirrorBook, columns: dict[str, np.ndarray]) -> list[dict]:
    """Keep the columns; a GPU whose XID code changed to a non-zero one is an event."""
    out = []
    new = columns.get("xid")
    if new is not None:
        old = book.telemetry["xid"]
        fresh = np.flatnonzero(np.isfinite(new) & (new > 0) & ~(new == old))
        node_of = engine.state.gpu_node
        for g in fresh.tolist():
            code = int(new[g])
            book.xid[code] = book.xid.get(code, 0) + 1
            node = int(node_of[g])
            local = g - int(engine.state.node_first_gpu[node])
            engine.kernel.log("xid", f"XID {code} on {book.host(node)} GPU {local}",
                              component=f"node {node}", xid=code, node=node, gpu=int(g))
            out.append({"gpu": g, "xid": code})
    for k, col in columns.items():
        book.telemetry[k] = np.asarray(col, dtype=float).copy()
    return out


def mirror_summary(engine) -> dict | None:
    """The mirror's part of a live frame (``None`` for an engine that simulates)."""
    book = engine.mirror
    if book is None:
        return None
    tel = book.telemetry
    up = engine.state.gpu_up

    def stat(col, fn):
        vals = col[np.isfinite(col)]
        return round(float(fn(vals)), 3) if vals.size else None

    pending = {}
    for reason in book.reasons.values():
        pending[reason or "None"] = pending.get(reason or "None", 0) + 1
    suspended = sum(1 for e in book.jobs.values() if e["state"] == "suspended")
    return {"polls": book.polls,
            "pending_reasons": dict(sorted(pending.items(), key=lambda kv: -kv[1])),
            "ended": dict(sorted(book.ended.items())),
            "rejected": dict(list(sorted(book.rejected.items()))[:20]),
            "rejected_count": len(book.rejected),
            "suspended": suspended,
            "jobs": _shown_jobs(engine, book),
            "xid": {str(k): v for k, v in sorted(book.xid.items())},
            "reservations": [_reservation_shown(book, r) for r in book.reservations[:20]],
            "failures_measured": {"nodes_down": int(book.nodes_down),
                                  "node_hours": round(float(book.node_hours), 1),
                                  "profile": book.profile,
                                  "fitted": int(book.nodes_down) >= MIN_FAILURES},
            "telemetry": {"gpus_reporting": int(np.isfinite(tel["util"]).sum()),
                          "gpus": int(up.size),
                          "util_mean_pct": stat(tel["util"], np.mean),
                          "power_kw": (round(float(np.nansum(tel["power_w"])) / 1000.0, 3)
                                       if np.isfinite(tel["power_w"]).any() else None),
                          "temp_max_c": stat(tel["temp_c"], np.max),
                          "tensor_active_mean": stat(tel["tensor_active"], np.mean)}}


def _reservation_shown(book: MirrorBook, r: dict) -> dict:
    nodes = [int(n) for n in r.get("nodes", ())]
    return {"name": str(r.get("name", "")), "nodes": len(nodes),
            "hosts": [book.host(n) for n in nodes[:10]],
            "start": r.get("start"), "end": r.get("end"),
            "maintenance": bool(r.get("maintenance")),
            "flags": [str(f) for f in r.get("flags", ())]}


JOBS_SHOWN = 100
"""Followed jobs whose scheduler names a frame carries (the largest running first, then the
longest waiting); the engine's book keeps them all."""


def _shown_jobs(engine, book: MirrorBook) -> dict[str, dict]:
    """Run name -> the scheduler's id, name, user, account, partition and state."""
    running = heapq.nsmallest(JOBS_SHOWN, engine.running.values(), key=lambda r: (-r.gpus, r.idx))
    queued = heapq.nsmallest(JOBS_SHOWN, engine.queue.values(),
                             key=lambda r: (r.queued_since, r.idx))
    out = {}
    for r in running + queued:
        entry = book.jobs.get(r.spec.name)
        if entry is not None:
            out[r.spec.name] = dict(entry)
            if len(out) >= JOBS_SHOWN:
                break
    return out
