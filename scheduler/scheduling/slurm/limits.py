"""QOS limits and kill times for the ``slurm`` policy, as slurmctld 22.05 enforces them
(``src/slurmctld/acct_policy.c``, ``job_mgr.c``'s ``job_time_limit``).

With ``AccountingStorageEnforce`` naming ``limits`` (or ``safe``), a job's QOS limits hold it:

* at submission, a user with ``MaxSubmitJobsPerUser`` jobs of the QOS pending or running has
  the next one refused (``QOSMaxSubmitJobPerUserLimit``); a time limit above ``MaxWall`` is
  refused only with the QOS flag ``DenyOnLimit``;
* at every scheduling test, a job stays pending and is skipped, without blocking its
  partition (``ESLURM_ACCOUNTING_POLICY``), while ``MaxJobsPerUser`` of the user's jobs of the
  QOS run (``QOSMaxJobsPerUserLimit``), its time limit is above ``MaxWall``
  (``QOSMaxWallDurationPerJobLimit``), the QOS's running GPUs plus its own would pass
  ``GrpTRES=gres/gpu=N`` (``QOSGrpGRES``) or the user's would pass
  ``MaxTRESPerUser=gres/gpu=N`` (``QOSMaxGRESPerUser``), tested in that order.

A job is under its partition's QOS first, then its own (``qos_ptr_1``, ``qos_ptr_2``): a limit
the first sets is not read from the second.  A job naming no QOS is under ``normal`` when the
table has one (the association's default QOS in most clusters).  Usage counts running jobs:
a job books its GPUs to its QOS and its partition's.

Kill times: a job is ended at the first 30-s time-limit check at or after its limit plus
``OverTimeLimit`` (the partition's, else the cluster's); a job of an advance reservation at
the first check after the reservation's end.

>>> qos_limit_fields({"maxtrespu": "gres/gpu=8", "maxjobspu": "2", "grptres": "cpu=4",
...                   "flags": "DenyOnLimit"})["max_tres_pu_gpus"]
8
>>> tres_gpus("cpu=64,gres/gpu=16"), tres_gpus("cpu=64"), tres_gpus("")
(16, None, None)
"""

from __future__ import annotations

import math
import re

TIME_LIMIT_TICK_S = 30.0
"""slurmctld checks time limits every ``PERIODIC_TIMEOUT`` (30 s): a job runs on past its
limit until the next check; preemption grace times and reservation ends likewise."""

REASONS = {"max_jobs_pu": "QOSMaxJobsPerUserLimit",
           "max_wall": "QOSMaxWallDurationPerJobLimit",
           "grp_tres_gpus": "QOSGrpGRES",
           "max_tres_pu_gpus": "QOSMaxGRESPerUser",
           "max_submit_jobs_pu": "QOSMaxSubmitJobPerUserLimit"}
"""Slurm's pending reason (``job_reason_string``) for each limit."""


def tres_gpus(text: str) -> int | None:
    """GPUs of a TRES string (``gres/gpu=N``, typed ``gres/gpu:h100=N`` summed), or ``None``
    if it sets none."""
    total = None
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, value = item.partition("=")
        if name.lower() == "gres/gpu" or name.lower().startswith("gres/gpu:"):
            if not value.isdigit():
                raise ValueError(f"{name}={value}: not a count")
            total = (total or 0) + int(value)
    return total


def qos_limit_fields(cells: dict) -> dict:
    """The limit fields of a :class:`~scheduler.scheduling.slurm.conf.Qos` from one row of
    ``sacctmgr --parsable2 show qos`` (lower-case column names, long or short)."""
    def count(*names):
        for n in names:
            v = cells.get(n, "").strip()
            if v:
                if not v.isdigit():
                    raise ValueError(f"{n}: {v!r} is not a count")
                return int(v)
        return None

    def tres(*names):
        for n in names:
            if cells.get(n, "").strip():
                return tres_gpus(cells[n])
        return None

    return {"max_tres_pu_gpus": tres("maxtrespu", "maxtresperuser"),
            "grp_tres_gpus": tres("grptres"),
            "max_jobs_pu": count("maxjobspu", "maxjobsperuser"),
            "max_submit_jobs_pu": count("maxsubmitpu", "maxsubmitjobsperuser"),
            "flags": frozenset(f.strip().lower() for f in re.split(r"[,\s]+",
                                                                   cells.get("flags", "")) if f)}


def enforce_limits(value: str) -> bool:
    """Whether ``AccountingStorageEnforce=value`` enforces QOS limits (``limits``, or ``safe``,
    which implies it)."""
    opts = {o.strip().lower() for o in value.split(",")}
    return bool(opts & {"limits", "safe"})


class QosLimits:
    """The QOS limits of one :class:`~scheduler.scheduling.slurm.mechanics.SlurmMechanics`
    ``m``: what holds a job now, refused submissions, and usage of running jobs."""

    def __init__(self, m):
        self.m = m
        conf = m.conf
        self.on = conf.enforce_limits and any(
            q.max_wall_s is not None or q.max_jobs_pu is not None
            or q.max_submit_jobs_pu is not None or q.grp_tres_gpus is not None
            or q.max_tres_pu_gpus is not None for q in conf.qos.values())
        self._usage_at = None
        self._usage: tuple[dict, dict, dict] = ({}, {}, {})

    def qos_of(self, run, part_name: str) -> list:
        """The job's QOS records, its partition's first."""
        conf = self.m.conf
        part = next((p for p in conf.partitions if p.name == part_name), None)
        names = [part.qos if part is not None else "", run.spec.qos or "normal"]
        out = []
        for name in names:
            q = conf.qos.get(name)
            if q is not None and q not in out:
                out.append(q)
        return out

    def _first(self, qos: list, field: str):
        """The limit the first QOS that sets ``field`` gives, and that QOS."""
        for q in qos:
            v = getattr(q, field)
            if v is not None:
                return v, q
        return None, None

    def time_limit(self, run, part, limit: float | None) -> float | None:
        """A job's time limit, s: its own, else the partition's ``DefaultTime``, else the
        QOS's ``MaxWall`` (``_set_time_limit``), else what ``limit`` already says."""
        if not self.on or run.spec.time_limit_s is not None or (
                part is not None and part.default_time_s is not None):
            return limit
        wall, _ = self._first(self.qos_of(run, part.name if part else ""), "max_wall_s")
        return limit if wall is None else wall

    def refuse(self, run, rec) -> str | None:
        """Why Slurm refuses the job at submission (``None``: accepted)."""
        if not self.on:
            return None
        qos = self.qos_of(run, rec.part)
        cap, q = self._first(qos, "max_submit_jobs_pu")
        if cap is not None:
            user, jobs = self.m.user_of(run), self.m.jobs
            held = sum(1 for r in (*jobs.queue.values(), *jobs.running.values())
                       if r.idx != run.idx and r.idx in self.m.rec
                       and self.m.user_of(r) == user
                       and q in self.qos_of(r, self.m.rec[r.idx].part))
            if held + 1 > cap:
                return f"{REASONS['max_submit_jobs_pu']} ({q.name}: {cap})"
        wall, q = self._first(qos, "max_wall_s")
        if wall is not None and rec.limit > wall and "denyonlimit" in q.flags:
            return f"{REASONS['max_wall']} ({q.name}: {wall:g} s)"
        return None

    def usage(self) -> tuple[dict, dict, dict]:
        """Running jobs per (QOS, user), GPUs per (QOS, user) and GPUs per QOS."""
        version = self.m.state.version
        if self._usage_at == version:
            return self._usage
        jobs_pu: dict = {}
        gpus_pu: dict = {}
        gpus: dict = {}
        for r in self.m.jobs.running.values():
            rec = self.m.rec.get(r.idx)
            if rec is None:
                continue
            user = self.m.user_of(r)
            for q in self.qos_of(r, rec.part):
                jobs_pu[q.name, user] = jobs_pu.get((q.name, user), 0) + 1
                gpus_pu[q.name, user] = gpus_pu.get((q.name, user), 0) + r.gpus
                gpus[q.name] = gpus.get(q.name, 0) + r.gpus
        self._usage_at, self._usage = version, (jobs_pu, gpus_pu, gpus)
        return self._usage

    def blocked(self, run, rec) -> str | None:
        """Slurm's pending reason if a limit holds the job now (``None``: none does)."""
        if not self.on:
            return None
        qos = self.qos_of(run, rec.part)
        jobs_pu, gpus_pu, gpus = self.usage()
        user = self.m.user_of(run)
        cap, q = self._first(qos, "max_jobs_pu")
        if cap is not None and jobs_pu.get((q.name, user), 0) >= cap:
            return REASONS["max_jobs_pu"]
        wall, q = self._first(qos, "max_wall_s")
        if wall is not None and rec.limit > wall:
            return REASONS["max_wall"]
        cap, q = self._first(qos, "grp_tres_gpus")
        if cap is not None and gpus.get(q.name, 0) + run.gpus > cap:
            return REASONS["grp_tres_gpus"]
        cap, q = self._first(qos, "max_tres_pu_gpus")
        if cap is not None and gpus_pu.get((q.name, user), 0) + run.gpus > cap:
            return REASONS["max_tres_pu_gpus"]
        return None


def admission(m, run, rec, mask):
    """The nodes of ``mask`` the main scheduler may give ``run`` now and ``None``, or ``mask``
    and the reason a QOS limit or a reservation holds it (it is skipped, its partition left
    open)."""
    why = m.limits.blocked(run, rec)
    if why is None and m.book is not None:
        return m.book.admit(m, run, rec, mask)
    return mask, why


def over_time_s(conf, part_name: str) -> float:
    """``OverTimeLimit`` of a job's partition, else the cluster's, s (``inf``: UNLIMITED)."""
    part = next((p for p in conf.partitions if p.name == part_name), None)
    if part is not None and part.over_time_limit_s is not None:
        return part.over_time_limit_s
    return conf.over_time_limit_s


def next_check(t: float) -> float:
    """The first time-limit check at or after ``t``, s."""
    return math.ceil(t / TIME_LIMIT_TICK_S - 1e-9) * TIME_LIMIT_TICK_S


def kill_time(m, run, rec) -> float:
    """When slurmctld ends a job started now: its limit plus ``OverTimeLimit``, or its
    reservation's end (``ResvOverRun`` 0), whichever check comes first; ``inf`` if neither."""
    now = m.ctx.now
    kill = math.inf
    if math.isfinite(rec.limit):
        over = over_time_s(m.conf, rec.part)
        if math.isfinite(over):
            kill = next_check(now + rec.limit + over)
    book = getattr(m, "book", None)
    resv = book.reservation_of(run) if book is not None else None
    if resv is not None and math.isfinite(resv.end_s):
        # killed once end + ResvOverRun < now: the first check strictly after the end
        kill = min(kill, next_check(resv.end_s + 1e-6))
    return kill


def planned_end(m, run, rec, now: float) -> float:
    """Where backfill plans a running job's end (cons_common's ``_guess_job_end``): at its
    limit, or, past its limit with an ``OverTimeLimit``, at the limit plus it (a second from
    now at the least)."""
    end = rec.started + rec.limit
    if end > now:
        return end
    over = over_time_s(m.conf, rec.part)
    if over <= 0:
        return end
    if not math.isfinite(over):
        return now + rec.limit
    return max(end + over, now + 1.0)
