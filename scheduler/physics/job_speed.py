"""Why a job runs at the speed it does: fabric, storage and power, applied to every gang.

Every ``tick_s`` of simulated time (and when a failure changes the fabric or cooling), the
running gangs' scale-out traffic is routed over the fabric and each gang gets its max-min share
(:mod:`scheduler.fabric.routing`); its step is priced from its parallelism at that share
(:mod:`scheduler.physics.step_time`); the storage tiers serve its input reads
(:mod:`scheduler.physics.storage`); and the racks' power and cooling limits set its throttle
(:mod:`scheduler.hardware.power`).  A gang's wall time then splits into compute (productive),
the compute slowed by a cap (throttled), exposed communication, and data stall::

    T = (c / theta + x) / (1 - sigma)

with ``c`` compute and ``x`` exposed communication per step, ``theta`` the throttle factor and
``sigma`` the data-stall fraction.  A gang whose split moved by more than ``tolerance`` starts a
new run segment at its new speed.  Its rate while computing is priced by the step model's kernel
efficiency (:meth:`Physics.kernel_efficiency`), not ``job.efficiency``, so with no throttle and no
stall the gang achieves the step model's MFU.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from scheduler.fabric.routing import Router
from scheduler.hardware.cluster import ClusterPlan
from scheduler.hardware.power import PowerModel, power_report
from scheduler.model.job_run import RUNNING
from scheduler.model.state import REPLICA_BASE, ClusterState
from scheduler.physics.step_time import step_breakdown
from scheduler.physics.storage import StorageModel
from scheduler.sim import Context, Kind

INFERENCE_UTILISATION = 0.6
"""Accelerator utilisation of a serving replica for the power model (assumed)."""
COOLING_LOSS_FRACTION = 0.5
"""Cooling capacity left to a row whose loop failed (assumed: one of two redundant loops)."""
VIRTUAL_STAGES = 4
"""Interleaved pipeline stages (not published for Llama 3; see docs/collectives.md)."""


class _PowerSample(NamedTuple):
    it_mw: float
    facility_mw: float
    throttled_gpus: int
    gpu_throttle: np.ndarray
    rack_kw: np.ndarray


def _epoch(run) -> tuple:
    """Identifies one placement of a gang: it changes whenever the gang is placed again."""
    return (run.first_start, run.interruptions, run.preemptions, run.lendings)


class Physics:
    """The speed model when the physics is on (``TICK`` events).

    Parameters
    ----------
    ctx : Context
    plan, state
        The cluster.
    jobs : JobLifecycle
        Its running gangs are routed, served and powered; their speed changes go through it.
    failures : FailureEngine
        Read only: failed switches and links, rows without cooling.
    costs : CheckpointCosts
        Read only: the central tier's current bandwidth factor.
    fleet : InferenceFleet
        Read only: which GPUs serve (their power).
    tick_s : float
        Seconds of simulated time between refreshes while speeds move.
    max_tick_s : float, optional
        Adaptive tick: after a refresh that moved no gang's speed the next one comes twice as
        late, up to ``max_tick_s``; one that moved any brings it back to ``tick_s``.  Failures
        refresh at once either way.  ``None`` (or ``tick_s``): a fixed tick.  The accuracy
        against the fixed tick is measured in ``docs/performance.md``.
    load_balance : {"spread", "ecmp"}, optional
        How gangs' flows share equal-cost paths (:class:`~scheduler.fabric.routing.Router`'s
        ``balance``); ``"ecmp"`` hashes with a seed drawn from the ``ecmp`` stream.
    """

    def __init__(self, ctx: Context, *, plan: ClusterPlan, state: ClusterState, jobs,
                 failures, costs, tick_s: float = 1800.0, max_tick_s: float | None = None,
                 overlap: float = 0.7, tolerance: float = 0.01, load_balance: str = "spread"):
        if isinstance(tick_s, bool) or not tick_s > 0:
            raise ValueError(f"physics_tick_s must be a positive number, not {tick_s!r}")
        self.ctx = ctx
        self.plan = plan
        self.state = state
        self.jobs = jobs
        self.failures = failures
        self.costs = costs
        self.tick_s = float(tick_s)
        if max_tick_s is not None and (isinstance(max_tick_s, bool) or not max_tick_s >= tick_s):
            raise ValueError(f"physics_max_tick_s must be at least physics_tick_s, "
                             f"not {max_tick_s!r}")
        self.max_tick_s = float(max_tick_s if max_tick_s is not None else tick_s)
        self._next_tick_s = self.tick_s
        self.ticks = 0
        self.overlap = overlap
        self.tolerance = tolerance
        # ECMP hashes with a seed of its own stream; spreading draws nothing
        seed = (int(ctx.rng("ecmp").integers(2**63)) if load_balance == "ecmp" else 0)
        self.router = Router(plan.fabric, gpus_per_node=int(plan.models[0].per_node),
                             balance=load_balance, hash_seed=seed)
        self.storage = StorageModel(plan)
        self.power = PowerModel(plan)
        self.share: dict[int, float] = {}
        self.stall: dict[int, float] = {}
        self.throttle: dict[int, float] = {}
        self.typical_share = 1.0
        self._steps: dict = {}
        # power over time, compactly: per refresh (t, IT MW, facility MW, throttled GPUs,
        # GPU-units of speed lost), and each rack's peak; whole PowerResults would cost ~1 MB
        # per sample at 100k GPUs and grow the live engine's snapshots without bound
        self.power_trace: list[tuple[float, float, float, int, float]] = []
        self.rack_peak_kw: np.ndarray | None = None
        self._cooling_cut: set[int] = set()
        self.network_samples: list[dict] = []
        self.storage_samples: list[dict] = []
        self.last_load = None
        self._route_key: tuple | None = None
        self.route_reuses = 0
        self._spans: dict[tuple, bool] = {}
        self.last_power = None
        self.last_storage = None

        ctx.on(Kind.TICK, self.on_tick)

    def start(self) -> None:
        """Price the cluster as it stands (power, temperatures, any routed load: a frame has
        them from the start, not one tick later) and tick every ``tick_s`` from now on.

        Until the first tick, an instant that leaves gangs running which the last refresh did
        not see (a fresh engine's first placements) refreshes once more at its end, after the
        scheduler's pass: the first frames of a cold start show the fleet that runs, not an
        idle one.
        """
        self.refresh()
        self.ctx.after_instant(self._first_gangs)
        self.ctx.schedule(self.ctx.now + self.tick_s, Kind.TICK)

    def _first_gangs(self) -> None:
        if self.ticks or self.throttle:  # ticking, or the last refresh priced gangs
            return
        if any(r.state == RUNNING for r in self.jobs.running.values()):
            self.refresh()

    def on_tick(self, _=None) -> None:
        self.ticks += 1
        moved = self.refresh()
        self._next_tick_s = (self.tick_s if moved
                             else min(self.max_tick_s, 2.0 * self._next_tick_s))
        self.ctx.schedule(self.ctx.now + self._next_tick_s, Kind.TICK)

    # ----------------------------------------------------------------- the split
    def _step(self, run, share: float):
        spec = run.spec
        if spec.params_b <= 0:
            return None
        model = self.plan.models[run.model]
        key = (run.idx, run.model, run.placement.nodes.size, round(share, 2))
        bd = self._steps.get(key)
        if bd is None:
            bd = step_breakdown(spec, model, gpus_per_node=int(model.per_node),
                                nodes=int(run.placement.nodes.size),
                                scaleout_share=max(0.01, round(share, 2)),
                                overlap=self.overlap, virtual_stages=VIRTUAL_STAGES)
            self._steps[key] = bd
        return bd

    def _share(self, run) -> float:
        return self.share.get(run.idx, self.typical_share if self._spans_leaves(run) else 1.0)

    def kernel_efficiency(self, run) -> float:
        """Model FLOP/s while computing over peak: what a placed gang's rate is priced at.

        The step model's ``model_flops / (compute_s * gpus * peak)``: its per-generation kernel
        efficiencies (GEMM, attention, element-wise) in its FLOP count (``6 N`` plus causal
        attention).  Times the split's compute share ``compute_s / total_s`` the gang achieves
        ``model_flops / total_s``, the step model's MFU (docs/physics.md, "The engine's MFU").
        ``compute_s`` does not depend on the fabric share, so the figure holds while the gang
        keeps its accelerator.  A job without a size (``params_b`` 0) keeps ``job.efficiency``.
        """
        bd = self._step(run, self._share(run))
        if bd is None or not bd.compute_s > 0:
            return run.spec.efficiency
        peak = self.plan.models[run.model].bf16_tflops * 1e12
        return bd.model_flops / (bd.compute_s * run.gpus * peak)

    def split(self, run) -> tuple[tuple[str, float], ...]:
        """Share of ``run``'s wall time per lost category (throttled, communication, data)."""
        bd = self._step(run, self._share(run))
        c, x = (1.0, 0.0) if bd is None else (bd.compute_s, bd.total_s - bd.compute_s)
        theta = self.throttle.get(run.idx, 1.0)
        sigma = min(0.95, self.stall.get(run.idx, 0.0))
        total = (c / theta + x) / (1.0 - sigma)
        out = []
        for category, seconds in (("throttled", c / theta - c), ("exposed_communication", x),
                                  ("data_stall", sigma * total)):
            if seconds > 0:
                out.append((category, seconds / total))
        return tuple(out)

    # ----------------------------------------------------------------- one refresh
    def refresh(self) -> int:
        """Route, serve and power every running gang now; re-rate those whose speed moved
        (return how many)."""
        runs = [r for r in self.jobs.running.values() if r.state == RUNNING]
        rel = self.failures
        self._route(runs, rel)
        self._serve(runs)
        self._power(runs, rel)
        moved = sum(self.jobs.rerate(run, self.tolerance) for run in runs)
        if len(self._steps) > 50_000:
            self._steps.clear()
        return moved

    def _spans_leaves(self, run) -> bool:
        key = (run.idx, _epoch(run))
        spans = self._spans.get(key)
        if spans is None:
            if len(self._spans) > 50_000:
                self._spans.clear()
            spans = self._spans[key] = bool(
                np.unique(self.state.domain["leaf"][run.placement.nodes]).size > 1)
        return spans

    def _route(self, runs, rel) -> None:
        plan = self.plan
        wide = [r for r in runs if self._spans_leaves(r)]
        f = plan.fabric
        down_links = sorted(k for k, n in rel.failed_links.items() if n > 0)
        down_sw = sorted(k for k, n in rel.failed_switches.items() if n > 0)
        self.share = {}
        if not wide:
            return
        # the same gangs on the same GPUs over the same live links load the fabric as they did
        # at the last refresh: routing is the costliest part, so it is reused then
        key = (tuple((r.idx, _epoch(r)) for r in wide), tuple(down_links), tuple(down_sw))
        if key == self._route_key and self.last_load is not None:
            load = self.last_load
            self.route_reuses += 1
        else:
            failed_links = np.zeros(f.link_a.size, dtype=bool)
            failed_links[down_links] = True
            failed_sw = np.zeros(f.n_switches(), dtype=bool)
            failed_sw[down_sw] = True
            # gangs drive their NICs at line rate during collectives, up to the fabric's ports
            demand = np.minimum([plan.node_shape[r.model].nic_gbps for r in wide], f.port_gbps)
            load = self.router.update([r.gids for r in wide], demand, failed_links=failed_links,
                                      failed_switches=failed_sw,
                                      ring_stride=[self._dp_stride(r) for r in wide])
            self.last_load = load
            self._route_key = key
        shares = np.clip(np.asarray(load.job_share, dtype=float), 0.01, 1.0)
        self.share = {r.idx: float(x) for r, x in zip(wide, shares, strict=True)}
        self.typical_share = float(np.average(shares, weights=[r.gpus for r in wide]))
        self.network_samples.append({"t": self.ctx.now, **load.tier_utilisation})

    def _dp_stride(self, run) -> int:
        """Nodes between data-parallel ring neighbours: ranks are TP-major, then PP."""
        par = run.spec.parallelism
        gpn = int(self.plan.models[run.model].per_node)
        if par is None:
            return 1
        return max(1, par.tp * par.pp // gpn)

    def _serve(self, runs) -> None:
        if not runs:
            self.stall = {}
            return
        n_runs = len(self.jobs.runs)
        idx = np.full(n_runs, -1, dtype=np.int64)
        idx[[r.idx for r in runs]] = np.arange(len(runs))
        owner = self.state.gpu_owner
        training = (owner >= 0) & (owner < n_runs)
        gpu_job = np.where(training, idx[np.where(training, owner, 0)], -1)
        tokens = np.array([r.rate * r.slow / (6.0 * r.spec.params_b * 1e9)
                           if r.spec.params_b > 0 else 0.0 for r in runs])
        total = np.array([r.spec.tokens if r.spec.tokens > 0 else 0.0 for r in runs])
        result = self.storage.supply(gpu_job, tokens, total_tokens=total,
                                     central_factor=min(1.0, self.costs.storage_factor),
                                     nvme_factor=self.failures.storage_fraction("nvme"))
        self.last_storage = result
        self.stall = {r.idx: float(x) for r, x in zip(runs, result.data_stall_fraction,
                                                       strict=True)}
        self.storage_samples.append({"t": self.ctx.now, **{
            t.name: {"demand_gb_s": t.demand_gb_s, "supply_gb_s": t.supply_gb_s}
            for t in result.tiers}})

    def _power(self, runs, rel) -> None:
        owner = self.state.gpu_owner
        util = np.zeros(owner.size)
        for r in runs:
            # what the gang asks of its GPUs: the compute share before any throttling (the
            # cap's slowdown must not read as lower demand, or the next tick lifts the cap)
            util[r.gids] = r.slow + dict(r.slow_split).get("throttled", 0.0)
        util[owner >= REPLICA_BASE] = INFERENCE_UTILISATION
        cut = {row for row, n in rel.cooling_lost.items() if n > 0}
        for row in cut ^ self._cooling_cut:
            self.power.cool_row(row, COOLING_LOSS_FRACTION if row in cut else 1.0)
        self._cooling_cut = cut
        result = self.power.step(util)
        self.last_power = result
        self.power_trace.append((self.ctx.now, result.it_mw, result.facility_mw,
                                 result.throttled_gpus, float(np.sum(1.0 - result.gpu_throttle))))
        self.rack_peak_kw = (result.rack_kw.copy() if self.rack_peak_kw is None
                             else np.maximum(self.rack_peak_kw, result.rack_kw))
        self.throttle = {r.idx: float(result.gpu_throttle[r.gids].min()) for r in runs}

    # ----------------------------------------------------------------- report
    def _power_samples(self):
        """The compact trace as the samples :func:`power_report` reads: the rack peaks ride on
        every sample (their maximum is the same), the speed lost on a one-element array."""
        for t, it_mw, fac_mw, throttled, lost in self.power_trace:
            yield t, _PowerSample(it_mw, fac_mw, throttled, np.array([1.0 - lost]),
                                  self.rack_peak_kw)

    def report(self, ledger) -> dict:
        ledger_hours = ledger.gpu_hours()
        net = {}
        if self.network_samples:
            kinds = [k for k in self.network_samples[0] if k != "t"]
            for k in kinds:
                vals = [s[k] for s in self.network_samples if k in s]
                means = [v["mean"] for v in vals if isinstance(v, dict) and "mean" in v]
                p99s = [v["p99"] for v in vals if isinstance(v, dict) and "p99" in v]
                if means:
                    net[k] = {"mean": round(float(np.mean(means)), 4),
                              "p99": round(float(np.max(p99s)), 4)}
        tiers = {}
        for sample in self.storage_samples:
            for name, v in sample.items():
                if name == "t":
                    continue
                t = tiers.setdefault(name, {"demand_gb_s": [], "supply_gb_s": []})
                t["demand_gb_s"].append(v["demand_gb_s"])
                t["supply_gb_s"].append(v["supply_gb_s"])
        storage = {name: {k: round(float(np.mean(v)), 3) for k, v in t.items()}
                   for name, t in tiers.items()}
        return {
            "network": {"link_utilisation": net,
                        "exposed_communication_gpu_hours":
                            ledger_hours.get("exposed_communication", 0.0),
                        "samples": len(self.network_samples)},
            "storage": {"tiers_mean": storage,
                        "data_stall_gpu_hours": ledger_hours.get("data_stall", 0.0),
                        "checkpoint_gb_written": round(ledger.checkpoint_gb, 1)},
            "power": (power_report(self._power_samples(), until=self.ctx.now)
                      if self.power_trace else None),
        }
