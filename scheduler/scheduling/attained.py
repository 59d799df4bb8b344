"""Attained service for the ``las`` policy: Tiresias' discretised two-dimensional LAS.

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019, §3.2
(2D attained service, priority discretisation into K queues) and Algorithm 1 (demotion,
STARVELIMIT promotion); the authors' simulator (github.com/SymbioticLab/Tiresias,
``simulator/run_sim.py``, ``dlas_sim_jobs``) for the details the paper leaves open.

- A job's *attained service* is its GPUs times the time it has held them (its
  *executed time*), counted since it last entered the highest queue.
- K queues, 0 the highest: a job enters queue 0 on arrival; a job holding GPUs whose attained
  service reaches queue k's threshold is demoted to queue k + 1 at that instant (a timer at the
  predictable crossing time).
- Queued jobs are served by queue, first in first out within a queue by the time they entered
  it (:attr:`JobRun.rank` ``= (queue, entered)``).
- A queued job may preempt running jobs of lower queues (the twin's preemption mechanics choose
  the victims: lowest queue first, then least work lost; a gang is exempt for a while after a
  start as under every policy, :func:`~scheduler.scheduling.preemption.exempt_until`); the
  victims lose the work since their last checkpoint and pay a restart, booked as every
  preemption is (:meth:`JobLifecycle.preempt`).
- Starvation (PROMOTEKNOB): a job of a lower queue that has waited, since it last stopped,
  ``knob`` times its executed time goes back to queue 0 with its attained service reset (as
  the authors' simulator resets it), at that instant (a timer).

Defaults (:data:`THRESHOLDS_GPU_S`, :data:`PROMOTE_KNOB`): K = 2 queues split at 3,600
GPU-seconds and PROMOTEKNOB = 8, the paper's settings as the vodascheduler port of Tiresias
records them (pkg.go.dev/github.com/heyfey/vodascheduler/pkg/algorithm: ``TiresiasQueueNum``,
``TiresiasThresholdsSec``, ``TiresiasPromoteKnob``); the authors' simulator puts the first
threshold at 3,250-3,600 GPU-seconds.
"""

from __future__ import annotations

import math

from scheduler.model.job_run import QUEUED, JobRun
from scheduler.scheduling.preemption import exempt_until
from scheduler.sim import Kind

THRESHOLDS_GPU_S = (3600.0,)
"""Attained service (GPU-seconds) at which a job leaves queue k for queue k + 1: K - 1 values."""
PROMOTE_KNOB = 8.0
"""A waiting job of a lower queue returns to queue 0 after this many times its executed time."""


class AttainedService:
    """The ``las`` ranking: queues, attained service, demotion and promotion timers.

    Parameters
    ----------
    scheduler : Scheduler
        Its ``ctx`` (clock, timers), ``jobs`` (queue index, runs) and memos (cleared when a
        job's queue changes, since that changes who may preempt whom).
    thresholds : tuple of float
        Attained service, GPU-s, that ends each queue but the last, increasing.
    knob : float, optional
        PROMOTEKNOB; ``None`` or 0: no promotion.
    """

    evicts = True  # the queues, not priority and quota, say who may preempt whom

    def __init__(self, scheduler, thresholds: tuple[float, ...] = THRESHOLDS_GPU_S,
                 knob: float | None = PROMOTE_KNOB):
        thresholds = tuple(float(t) for t in thresholds)
        if any(not (t > 0 and math.isfinite(t)) for t in thresholds) or list(thresholds) != \
                sorted(set(thresholds)):
            raise ValueError(f"las thresholds must be finite, positive and increasing, "
                             f"not {thresholds}")
        if knob is not None and not (knob >= 0 and math.isfinite(knob)):
            raise ValueError(f"las promote knob must be >= 0, not {knob}")
        self.s = scheduler
        self.ctx, self.jobs = scheduler.ctx, scheduler.jobs
        self.thresholds = thresholds
        self.knob = knob or 0.0
        self.level: dict[int, int] = {}        # run -> its queue (0 the highest)
        self.entered: dict[int, float] = {}    # run -> when it entered that queue, s
        self.attained: dict[int, float] = {}   # run -> GPU-s held since queue 0, closed runs
        self.executed: dict[int, float] = {}   # run -> s held since queue 0, closed runs
        self.stopped: dict[int, float] = {}    # run -> when it last gave its GPUs back, s
        self.started: dict[int, float] = {}    # holding run -> when it took its GPUs, s
        self.holders: list[dict[int, JobRun]] = [{} for _ in range(len(thresholds) + 1)]
        self.timers: dict[int, tuple] = {}     # run -> (sequence, handle) of its timer
        self.wakes: dict[int, object] = {}     # run -> the handle of its exemption's end
        self._seq = 0
        self.counters = {"demotions": 0, "promotions": 0}
        self.jobs.run_watchers.append(self)
        for run in list(self.jobs.running.values()):  # gangs holding GPUs when it is set
            self.on_start(run)

    # ----------------------------------------------------------------- the rank
    def queue_of(self, run: JobRun) -> int:
        """The queue ``run`` is in (0, the highest, for a job it has not seen)."""
        return self.level.get(run.idx, 0)

    def attained_gpu_s(self, run: JobRun) -> float:
        """``run``'s attained service since it last entered queue 0, GPU-s, up to now."""
        i = run.idx
        held = self.ctx.now - self.started[i] if i in self.started else 0.0
        return self.attained.get(i, 0.0) + run.gpus * held

    def rank(self, run: JobRun) -> tuple:
        """``(queue, entered)`` of a run joining the queue; a run of a lower queue gets its
        promotion timer."""
        i, now = run.idx, self.ctx.now
        if i not in self.level:
            self.level[i], self.entered[i] = 0, now
        level = self.level[i]
        if level > 0 and self.knob > 0:
            due = self.stopped.get(i, now) + self.knob * self.executed.get(i, 0.0)
            self._set_timer(i, "promote", max(due, now))
        return (level, self.entered[i])

    # ----------------------------------------------------------------- the run watcher
    def on_start(self, run: JobRun) -> None:
        i, now = run.idx, self.ctx.now
        self._cancel(i)
        if i not in self.level:
            self.level[i], self.entered[i] = 0, now
        self.started[i] = now
        self.holders[self.level[i]][i] = run
        self._plan_demotion(run)
        if self.level[i] > 0:
            self._wake_when_evictable(run)

    def on_release(self, run: JobRun) -> None:
        i, now = run.idx, self.ctx.now
        start = self.started.pop(i, None)
        if start is None:
            return  # a gang it never saw start (carried over by a re-plan)
        self._cancel(i)
        wake = self.wakes.pop(i, None)
        if wake is not None:
            wake.cancel()
        self.holders[self.level[i]].pop(i, None)
        self.attained[i] = self.attained.get(i, 0.0) + run.gpus * (now - start)
        self.executed[i] = self.executed.get(i, 0.0) + (now - start)
        self.stopped[i] = now
        if run.remaining_flops == 0.0:  # it finished: forget it
            for book in (self.level, self.entered, self.attained, self.executed, self.stopped):
                book.pop(i, None)

    # ----------------------------------------------------------------- timers
    def _set_timer(self, i: int, what: str, t: float) -> None:
        self._cancel(i)
        self._seq += 1
        handle = self.ctx.schedule(t, Kind.BACKFILL, ("rank", what, i, self._seq))
        self.timers[i] = (self._seq, handle)

    def _cancel(self, i: int) -> None:
        timer = self.timers.pop(i, None)
        if timer is not None:
            timer[1].cancel()

    def _plan_demotion(self, run: JobRun) -> None:
        i, level = run.idx, self.level[run.idx]
        if level < len(self.thresholds):
            left = self.thresholds[level] - self.attained_gpu_s(run)
            self._set_timer(i, "demote", self.ctx.now + max(0.0, left) / run.gpus)

    def _wake_when_evictable(self, run: JobRun) -> None:
        """A gang of a lower queue may be preempted once its exemption after its start ends:
        a pass then (nothing else may happen at that instant)."""
        t = exempt_until(run)
        if t > self.ctx.now:
            old = self.wakes.get(run.idx)
            if old is not None:
                old.cancel()
            self.wakes[run.idx] = self.ctx.schedule(t, Kind.BACKFILL,
                                                    ("rank", "wake", run.idx, 0))

    def on_timer(self, payload) -> None:
        _, what, i, seq = payload
        if what == "wake":
            self.wakes.pop(i, None)
            if i in self.started and self.level.get(i, 0) > 0:
                self.s.no_victims.clear()
                self.s.wake()
            return
        timer = self.timers.get(i)
        if timer is None or timer[0] != seq:
            return  # overtaken (the run stopped, started or moved meanwhile)
        del self.timers[i]
        run, now = self.jobs.runs[i], self.ctx.now
        if what == "demote" and i in self.started:
            level = self.level[i]
            self.holders[level].pop(i, None)
            self.level[i], self.entered[i] = level + 1, now
            self.holders[level + 1][i] = run
            run.rank = (level + 1, now)  # a running gang's rank, as shown (not in the queue)
            self.counters["demotions"] += 1
            self._plan_demotion(run)
            if exempt_until(run) > now:
                # not evictable before its exemption ends: failed preemption attempts still
                # fail until then, when a wake-up clears them
                self._wake_when_evictable(run)
                return
            self.s.no_victims.clear()  # a new victim: failed attempts may succeed now
        elif what == "promote" and run.state == QUEUED and self.level.get(i, 0) > 0:
            self.level[i], self.entered[i] = 0, now
            self.attained[i] = self.executed[i] = 0.0
            self.jobs.index.rekey(run)
            self.counters["promotions"] += 1
            self.s.no_victims.pop(i, None)  # it may evict more now; no one else may
        else:
            return
        self.s.wake()

    # ----------------------------------------------------------------- preemption
    def may_evict(self, run: JobRun, other: JobRun) -> bool:
        """``run`` may evict ``other`` (if old enough) if ``other`` is of a lower queue."""
        return other.model in run.models and self.queue_of(other) > self.queue_of(run)

    def evictable(self, run: JobRun) -> list[JobRun]:
        """The gangs of lower queues than ``run``'s holding GPUs of models it accepts."""
        return [r for held in self.holders[self.queue_of(run) + 1:] for r in held.values()
                if r.model in run.models]

    def victim_order(self, other: JobRun) -> tuple:
        """Lowest queue first (then, as under every policy, least work lost)."""
        return (-self.queue_of(other),)

    def detach(self) -> None:
        for i in list(self.timers):
            self._cancel(i)
        for handle in self.wakes.values():
            handle.cancel()
        self.wakes.clear()
        if self in self.jobs.run_watchers:
            self.jobs.run_watchers.remove(self)
