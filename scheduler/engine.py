"""The engine: assembles the kernel and the components, and offers the public API.

One :class:`~scheduler.sim.Kernel` owns the clock, the event heap and the named random streams;
the components attach to it through a :class:`~scheduler.sim.Context` and own their state:

========================  ===============================================================
``jobs``                  job lifecycle: arrive, start, close, preempt, lend, requeue, books
``scheduler``             scheduling passes (policy, placement, backfill, preemption)
``reliability``           failure processes, blast radius, repairs, lemons
``recovery``              hang, detection, eviction, spare swap
``physics`` (optional)    fabric routing, storage tiers and power set each gang's speed
``fleet``                 elastic inference services
``burst``                 cloud burst pools
========================  ===============================================================

This module only wires them and keeps the API: ``Engine(...)``, :meth:`Engine.step`,
:meth:`Engine.peek`, :meth:`Engine.run_until`, :meth:`Engine.command`, :meth:`Engine.snapshot`,
:meth:`Engine.fork` and :meth:`Engine.inject`.  Same plan, workload and seed, same books.
"""

from __future__ import annotations

import copy

import numpy as np

from scheduler.control.commands import apply_command
from scheduler.control.inject import inject
from scheduler.control.mirror import MirrorBook
from scheduler.hardware.cluster import ClusterPlan
from scheduler.model.ledger import CAPACITY, MFU_WINDOW_COPIES, MFU_WINDOW_S, Ledger, LedgerWindow
from scheduler.model.state import ClusterState
from scheduler.physics.job_speed import Physics
from scheduler.reliability.checkpoint import CheckpointCosts, RestartTimes
from scheduler.reliability.failure_engine import FailureEngine
from scheduler.reliability.failures import MODES
from scheduler.reliability.recovery import Recovery
from scheduler.reliability.spares import SparePool
from scheduler.scheduling.admission import Admission
from scheduler.scheduling.cloud import CloudBurst, CloudPools
from scheduler.scheduling.inference import InferenceFleet
from scheduler.scheduling.lifecycle import JobLifecycle
from scheduler.scheduling.passes import Scheduler
from scheduler.scheduling.tenants import TenantBook
from scheduler.sim import Context, Kernel
from scheduler.workload.jobs import Workload


class Engine:
    """A cluster run forward in simulated time.

    Parameters
    ----------
    plan : ClusterPlan
        The inventory.
    workload : Workload
        Jobs, inference services and tenants.
    seed : int
        Seeds every random stream.
    policy : str
        A registered policy name (see :mod:`scheduler.scheduling.policies`).
    placement : str, optional
        Override the policy's placement strategy (``topology``, ``first-fit``, ``random``).
    slurm_conf : SlurmConf, optional
        The cluster's Slurm configuration
        (:func:`scheduler.scheduling.slurm.conf.read_slurm_conf`), which the ``slurm``
        policy needs.
    demand_step_s : float
        How often inference demand is re-evaluated, s.
    failures : bool
        Run the failure processes (off: the failure-free baseline).
    weibull_shape : float, optional
        Weibull gaps of the same mean instead of exponential ones.
    checkpoint_interval : None, "auto" or float
        Compute seconds between checkpoints: each job's own (None), Young/Daly from the job's
        failure rate and checkpoint cost ("auto"), or one figure for all.
    recovery : {"disk", "async", "memory"}
        Checkpoint to the central tier synchronously or asynchronously, or to peers' memory
        (Gemini) with disk as fallback (:mod:`scheduler.reliability.checkpoint`).
    spares : float, optional
        Fraction of each model's nodes held as hot spares (default: the plan's own).
    physics : bool
        Let the fabric, storage and power models set each gang's speed
        (:mod:`scheduler.physics.job_speed`); off, gangs compute at their kernel efficiency.
    physics_tick_s : float
        How often the physics is re-evaluated while speeds move, s.
    physics_max_tick_s : float, optional
        Longest tick of the adaptive physics tick, s (``None``: a fixed ``physics_tick_s``).
    load_balance : {"spread", "ecmp"}
        How gangs' flows share equal-cost fabric paths (:mod:`scheduler.fabric.ecmp`).
    start_s : float
        Simulated time the engine starts at, s (0; a re-planned engine starts where its
        predecessor stopped, see :func:`scheduler.control.replan.replan`).
    submit : bool
        Submit the workload's jobs (off: the caller carries them over from another engine).
    restart : RestartTimes, optional
        Detection override, rescheduling and warm-up times of a restart (default: each
        failure mode's detection, :data:`~scheduler.reliability.checkpoint.RESCHEDULE_S`,
        :data:`~scheduler.reliability.checkpoint.WARMUP_S`).
    failure_modes : tuple of FailureMode, optional
        The failure processes and their rates (default: the Llama 3 ones,
        :data:`scheduler.reliability.failures.MODES`); a profile's ``modes``
        (:func:`scheduler.reliability.profiles.load_profile`).
    """

    keys: dict | None
    """The owner's ids for this engine's plan, carried by snapshots: the twin keeps its cluster's
    and nodes' primary keys here (``{"cluster": pk, "nodes": array}``) to map a re-plan."""
    lineage: str | None
    """The run this engine continues (re-plans keep it): what the twin files its log under."""
    mirror: MirrorBook | None
    """A mirror's own book (:mod:`scheduler.control.mirror`) once :meth:`become_mirror` made
    this engine follow a real cluster; ``None`` while it simulates by itself."""
    active_drills: dict[int, dict]
    """Drills that can still be ended (:func:`scheduler.control.drills.active_drills`)."""

    def __init__(self, plan: ClusterPlan, workload: Workload, *, seed: int = 0,
                 policy: str = "default", placement: str | None = None,
                 demand_step_s: float = 900.0, failures: bool = False,
                 weibull_shape: float | None = None, checkpoint_interval=None,
                 recovery: str = "disk", spares: float | None = None,
                 physics: bool = False, physics_tick_s: float = 1800.0,
                 physics_max_tick_s: float | None = None, start_s: float = 0.0,
                 submit: bool = True, restart: RestartTimes | None = None,
                 failure_modes: tuple | None = None, slurm_conf=None,
                 load_balance: str = "spread"):
        self.plan = plan
        self.workload = workload
        # what a re-planned successor is built with (the plan and the clock aside)
        self.settings = {"policy": policy, "placement": placement,
                         "demand_step_s": demand_step_s, "failures": failures,
                         "weibull_shape": weibull_shape,
                         "checkpoint_interval": checkpoint_interval, "recovery": recovery,
                         "spares": spares, "physics": physics, "physics_tick_s": physics_tick_s,
                         "physics_max_tick_s": physics_max_tick_s, "restart": restart,
                         "failure_modes": failure_modes, "slurm_conf": slurm_conf,
                         "load_balance": load_balance}
        self.replans = 0  # times this run moved onto a changed inventory
        self.keys = None
        self.lineage = None
        self.mirror = None
        self.active_drills = {}
        self._mfu_window = LedgerWindow(MFU_WINDOW_S, MFU_WINDOW_S / MFU_WINDOW_COPIES)
        self.kernel = kernel = Kernel(seed, start_s=start_s)
        ctx = Context(kernel)
        self.state = state = ClusterState(plan)
        if spares is not None:
            state.hold_spares(spares)
        central = [s for s in plan.storage if s.tier == "central"]
        self.costs = costs = CheckpointCosts(
            recovery, write_gb_s=central[0].write_gb_s if central else 0.0,
            read_gb_s=central[0].read_gb_s if central else 0.0, cluster_gpus=state.n_gpus,
            restart=restart)
        self._ledger = ledger = Ledger(np.array([m.bf16_tflops * 1e12 for m in plan.models]))
        self._cap_key: tuple | None = None
        self._cap_rates = np.zeros((len(CAPACITY), state.n_models))
        self._cap_s = 0.0
        modes = failure_modes or MODES
        self.jobs = jobs = JobLifecycle(
            ctx, state=state, ledger=ledger, tenants=TenantBook(state, workload),
            costs=costs, admission=Admission(plan, state), peak_flops=ledger.peak,
            checkpoint_interval=checkpoint_interval, failure_modes=modes)
        self.scheduler = sched = Scheduler(ctx, state=state, jobs=jobs, policy=policy,
                                           placement=placement, slurm_conf=slurm_conf)
        self.spares = SparePool(state)
        self.recovery = Recovery(ctx, state=state, jobs=jobs, spares=self.spares,
                                 recovery=recovery)
        self.reliability = FailureEngine(ctx, plan=plan, state=state, jobs=jobs,
                                         recovery=self.recovery, spares=self.spares,
                                         costs=costs, enabled=failures,
                                         weibull_shape=weibull_shape, modes=modes)
        self.burst = CloudBurst(ctx, pools=CloudPools(plan.cloud_pools), jobs=jobs)
        self.fleet = InferenceFleet(ctx, plan=plan, state=state, jobs=jobs,
                                    place=sched.place, services=workload.services,
                                    step_s=demand_step_s)
        self.physics = (Physics(ctx, plan=plan, state=state, jobs=jobs,
                                failures=self.reliability, costs=costs, tick_s=physics_tick_s,
                                max_tick_s=physics_max_tick_s, load_balance=load_balance)
                        if physics else None)
        self.reliability.watch_node_loss(self.fleet)
        jobs.use_speed_model(self.physics or self.reliability)
        kernel.on_advance(self._book_capacity)
        for job in workload.jobs if submit else ():
            jobs.submit(job)
        self.fleet.start()
        self.reliability.start()
        if self.physics is not None:
            self.physics.start()
        self.scheduler.settle()

    def _book_capacity(self, t_from: float, t_to: float) -> None:
        """Free, spare, down and serving GPUs between events (training books on close).

        The counts change only with the cluster state or the scheduler's fragmentation
        verdict; while they stay, the seconds are summed and booked once when they change.
        """
        key = (self.state.version, self.scheduler.frag_version)
        if key != self._cap_key:
            self._flush_capacity()
            free, spare, down = self.state.free_counts()
            frag = np.where(self.scheduler.frag_models, free, 0)
            self._cap_rates = np.stack([frag, free - frag, spare, down,
                                        self.fleet.serving_by_model]).astype(float)
            self._cap_key = key
        self._cap_s += t_to - t_from

    def _flush_capacity(self) -> None:
        if self._cap_s:
            self._ledger.book_rates(self._cap_rates, self._cap_s)
            self._cap_s = 0.0

    @property
    def ledger(self) -> Ledger:
        """The books up to now (training segments still open are booked when they close)."""
        self._flush_capacity()
        return self._ledger

    # ----------------------------------------------------------------- stepping API
    @property
    def now(self) -> float:
        """Simulated time, s."""
        return self.kernel.now

    @property
    def seed(self) -> int:
        return self.kernel.seed

    def peek(self) -> float | None:
        """Time of the next event, or ``None`` when none is left."""
        return self.kernel.peek()

    def step(self) -> bool:
        """Handle every event of the next instant, then schedule; ``False`` if none is left."""
        return self.kernel.step()

    def run_until(self, t_end: float, progress=None) -> None:
        """Step until simulated time ``t_end`` (s); ``progress(now)`` is called now and then."""
        self.kernel.run_until(t_end, progress)

    def command(self, command: str, /, **params) -> dict:
        """Apply a what-if or operator command now; bad parameters raise ``ValueError``."""
        result = apply_command(self, command, **params)
        self.kernel.end_instant()
        return result

    def inject(self, **changes) -> dict:
        """Set status and jobs from outside (a mirrored real cluster); see
        :func:`scheduler.control.inject.inject`.  All or nothing: a bad id raises
        ``ValueError`` and changes nothing."""
        result = inject(self, **changes)
        self.kernel.end_instant()
        return result

    def successor(self, plan: ClusterPlan) -> Engine:
        """A new engine on ``plan`` with this one's workload, seed and settings, starting at
        this engine's now with no job submitted (:func:`scheduler.control.replan.replan` moves
        the jobs over): the factory re-planning uses, so the control layer need not import
        the engine.  It continues this engine's lineage, one re-plan further on."""
        new = Engine(plan, self.workload, seed=self.seed, **self.settings, start_s=self.now,
                     submit=False)
        new.replans = self.replans + 1
        new.lineage = self.lineage
        return new

    def become_mirror(self) -> MirrorBook:
        """Follow a real cluster from now: its scheduler places the jobs, so this engine's is
        held; returns the mirror's book (made on the first call)."""
        self.scheduler.hold()
        if self.mirror is None:
            self.mirror = MirrorBook(self.state.n_gpus)
        return self.mirror

    def fork(self, seed: int | None = None) -> Engine:
        """An independent copy of this engine, now; with ``seed``, a different random future.

        The copy shares only what never changes (the plan and the workload's specs): driving it
        leaves this engine untouched.  With ``seed`` every random stream is redrawn from that
        seed and each failure process draws its next failure again from now.
        """
        memo = {id(self.plan): self.plan, id(self.workload): self.workload}
        for job in self.workload.jobs:
            memo[id(job)] = job
        twin = copy.deepcopy(self, memo)
        if seed is not None:
            twin.kernel.streams.reseed(seed)
            twin.reliability.redraw()
        return twin

    def snapshot(self) -> dict:
        """JSON-safe view of the state now, as the dashboard's frame shows it (books of open
        segments included): :func:`scheduler.live.live_frame`."""
        from scheduler.live import live_frame
        return live_frame(self)

    # ----------------------------------------------------------------- views
    @property
    def events(self):
        """The event log (the last lines, each ``{"t", "kind", "text", ...}``)."""
        return self.kernel.events

    @property
    def runs(self):
        return self.jobs.runs

    @property
    def queue(self):
        return self.jobs.queue

    @property
    def running(self):
        return self.jobs.running

    @property
    def tenants(self):
        return self.jobs.tenants

    @property
    def policy(self):
        return self.scheduler.policy

    @property
    def cloud(self) -> CloudPools:
        return self.burst.pools

    @property
    def counters(self) -> dict:
        """Scheduling counters: placements, preemptions, decisions, passes, backfills."""
        return {**self.scheduler.counters, **self.jobs.counters}

    def free_counts(self) -> np.ndarray:
        """Free GPUs per model on schedulable, spare and unavailable nodes (3 x models)."""
        return self.state.free_counts()

    @property
    def mfu_window(self) -> LedgerWindow:
        """Copies of the horizon ledger over the last hour, for the windowed MFU; the frame
        builder (:func:`scheduler.live.live_frame`) feeds it.  Kept in the engine so that
        snapshots and forks carry it."""
        return self._mfu_window

    def horizon_ledger(self) -> Ledger:
        """The ledger with every open segment booked up to now (the engine is not changed)."""
        self._flush_capacity()
        return self.jobs.horizon_ledger()

    def ettr(self, run, led_t: float | None = None) -> float | None:
        """Share of ``run``'s wall time since its first start that made kept progress."""
        return self.jobs.ettr(run, led_t)
