"""The failure engine: seeded failure processes, blast radius, detection, repair, lemons.

Each failure mode is a renewal process over all units of its component with its own child
random stream (adding a mode does not shift another's draws): exponential gaps by default,
Weibull of the same mean with ``weibull_shape``.  A failure hits one unit chosen uniformly; what
it does follows :data:`scheduler.reliability.failures.EFFECTS`.  Software faults and planned
maintenance only happen where training runs (a draw on an idle node is discarded); a job-level
mode draws over one slot per GPU and hits the running gang in that slot (thinning: each gang
meets the mode's rate whatever its size).  A failure on a gang already stopped by an earlier one
(hung until detected) is counted in ``while_down``, not dropped.  Nodes that fail
:data:`LEMON_FAILURES` times within :data:`LEMON_WINDOW_S` are quarantined.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from scheduler.hardware.cluster import ClusterPlan
from scheduler.model.job_run import DRAINING, RUNNING
from scheduler.model.state import ClusterState
from scheduler.reliability.checkpoint import CheckpointCosts
from scheduler.reliability.failures import EFFECTS, MODES, FailureMode, unit_counts
from scheduler.reliability.incidents import IncidentBook, hit_jobs
from scheduler.reliability.recovery import Jobs, Recovery
from scheduler.reliability.spares import SparePool
from scheduler.reliability.storage_faults import StorageFaults
from scheduler.sim import Context, Handle, Kind

LEMON_FAILURES = 3
LEMON_WINDOW_S = 14 * 86400.0
THROTTLE_FACTOR = 0.7
"""Throughput of accelerators under a cooling-loss power cap (assumed: clocks cut ~30 %)."""
SLOW_PER_LOST_SPINE = 0.5
"""Share of a lost uplink's capacity that shows up as slower steps for a job crossing it
(assumed: about half of a step's time is communication on the cut links)."""
STORAGE_SLOW_FACTOR = 0.5


class FailureEngine(StorageFaults):
    """The failure processes and their effects (``FAIL`` and ``REPAIR`` events).

    It owns what failures leave behind: nodes down (``down_count``), failed switches and
    links, rows without cooling, pods with lost uplinks, throttled racks; the physics reads
    these.  Gangs are interrupted through :class:`~scheduler.reliability.recovery.Recovery`.
    """

    def __init__(self, ctx: Context, *, plan: ClusterPlan, state: ClusterState,
                 jobs: Jobs, recovery: Recovery, spares: SparePool,
                 costs: CheckpointCosts, enabled: bool, weibull_shape: float | None = None,
                 modes: tuple[FailureMode, ...] = MODES):
        if weibull_shape is not None and (isinstance(weibull_shape, bool)
                                          or not weibull_shape > 0):
            raise ValueError(f"weibull_shape must be a positive number, not {weibull_shape!r}")
        self.ctx = ctx
        self.plan = plan
        self.state = state
        self.jobs = jobs
        self.recovery = recovery
        self.spares = spares
        self.costs = costs
        self.enabled = enabled
        self.shape = weibull_shape
        self.modes = modes
        self.units = unit_counts(plan)
        self.rngs = [ctx.rng("failures", k) for k in range(len(modes))]
        self.failures: Counter = Counter()
        self.component_of: dict[str, str] = {}
        self.interruptions: Counter = Counter()
        self.while_down: Counter = Counter()  # cause -> hits on gangs already stopped
        self.planned = 0
        self.unplanned = 0
        self.repairs_done = 0
        self.repairs_pending = 0
        self.node_fail_times: dict[int, list[float]] = {}
        self.lemons: list[int] = []
        self.slowed: Counter = Counter()   # pod -> lost uplink share (spine/link failures)
        self.throttled_racks: Counter = Counter()
        # what the fabric and power physics read: failed switches, links, cooling of rows
        self.failed_switches: Counter = Counter()
        self.failed_links: Counter = Counter()
        self.cooling_lost: Counter = Counter()
        self.down_count = np.zeros(plan.n_nodes, dtype=np.int64)
        self._repairs: dict[int, tuple[FailureMode, int, np.ndarray | None]] = {}
        self._repair_id = 0
        self._storage_factors: dict[int, float] = {}
        # storage tier -> share of its bandwidth an operator left it (absent: all of it)
        self.storage_left: dict[str, float] = {}
        self._next: dict[int, Handle] = {}
        self._node_watchers: list = []
        self.incidents = IncidentBook()  # one per root cause (scheduler.reliability.incidents)
        ctx.on(Kind.FAIL, self.on_fail)
        ctx.on(Kind.REPAIR, self.on_repair)

    def watch_node_loss(self, watcher) -> None:
        """``watcher.on_nodes_lost(nodes)`` is called when nodes go down (after training gangs
        on them were interrupted): what else runs there (inference replicas) dies too."""
        self._node_watchers.append(watcher)

    def _nodes_lost(self, nodes) -> None:
        for w in self._node_watchers:
            w.on_nodes_lost(nodes)

    def start(self) -> None:
        if not self.enabled:
            return
        for k in range(len(self.modes)):
            self._schedule(k)

    def enable(self) -> None:
        """Run the failure processes from now, each drawing its next failure afresh (a fork
        of a mirror forecasting on its own); nothing changes if they already run."""
        if not self.enabled:
            self.enabled = True
            self.redraw()

    def set_modes(self, modes: tuple[FailureMode, ...]) -> None:
        """Draw failures from ``modes`` from now on (a mirror's fork drawing the rates the
        mirror measured); pending draws are dropped and, when enabled, drawn again."""
        for handle in self._next.values():
            handle.cancel()
        self._next.clear()
        self.modes = tuple(modes)
        self.rngs = [self.ctx.rng("failures", k) for k in range(len(self.modes))]
        self.start()

    def count_interruption(self, cause: str, *, planned: bool) -> None:
        """Count a training gang stopped by ``cause`` (here, or in a mirrored cluster)."""
        self.interruptions[cause] += 1
        if planned:
            self.planned += 1
        else:
            self.unplanned += 1

    def redraw(self) -> None:
        """Draw every process's next failure again from now (after the streams were reseeded:
        a forked engine's future then differs from the original's)."""
        for handle in self._next.values():
            handle.cancel()
        self._next.clear()
        self.start()

    # ----------------------------------------------------------------- processes
    def _rate(self, k: int) -> float:
        m = self.modes[k]
        return m.per_hour * self.units[m.component] / 3600.0

    def _schedule(self, k: int) -> None:
        rate = self._rate(k)
        if rate <= 0:
            return
        rng = self.rngs[k]
        if self.shape is None:
            gap = rng.exponential(1.0 / rate)
        else:
            gap = rng.weibull(self.shape) / (rate * math.gamma(1.0 + 1.0 / self.shape))
        self._next[k] = self.ctx.schedule(self.ctx.now + gap, Kind.FAIL, k)

    def on_fail(self, k: int) -> None:
        self._schedule(k)
        self.inject(self.modes[k], int(self.rngs[k].integers(self.units[self.modes[k].component])),
                    rng=self.rngs[k])

    # ----------------------------------------------------------------- effects
    def nodes_of(self, component: str, unit: int) -> np.ndarray:
        s, plan = self.state, self.plan
        if component in ("gpu", "nic", "endpoint_link"):
            return np.array([s.gpu_node[unit]])
        if component in ("host", "software", "planned"):
            return np.array([unit])
        if component == "job":
            run = self._gang_in_slot(unit)
            return np.zeros(0, dtype=np.int64) if run is None else run.placement.nodes
        if component == "leaf":
            return np.unique(s.gpu_node[plan.fabric.endpoint_leaf[:s.n_gpus] == unit])
        if component == "pdu":
            return np.flatnonzero(plan.node_rack == unit)
        if component == "cooling":
            rows = plan.rack_hall * 1000 + plan.rack_row
            row = np.unique(rows)[unit]
            return np.flatnonzero(rows[plan.node_rack] == row)
        return np.zeros(0, dtype=np.int64)

    def inject(self, mode: FailureMode, unit: int, *, rng: np.random.Generator) -> dict:
        """Apply one failure now; return what it hit (jobs, GPUs, nodes)."""
        runs = self.jobs.runs
        effect = EFFECTS[mode.component]
        nodes = self.nodes_of(mode.component, unit)
        repair_s = float(rng.lognormal(math.log(mode.repair_h * 3600.0), 0.5))
        hit: list = []
        lost_before: dict[int, float] = {}
        repairs_before = self._repair_id
        owners = None
        if mode.component == "job":
            run = self._gang_in_slot(unit)
            owners = [] if run is None else [run.idx]
        elif mode.component in ("software", "planned"):
            owners = self._training_owners(nodes)
        if owners is not None:
            if not owners:
                return {"cause": mode.cause, "jobs": [], "nodes": [], "discarded": True}
        self.failures[mode.cause] += 1
        self.component_of[mode.cause] = mode.component
        if mode.component == "job":  # the gang's own fault: its nodes stay up
            hit = self._interrupt(owners, nodes, mode)
        elif effect == "interrupt":
            lost_before = self._lost_of(self._training_owners(nodes))
            hit = self.interrupt_nodes(nodes, mode)
            self._take_down(nodes, mode, repair_s, unit)
        elif effect == "slow":
            pod = self._pod_of_switch_unit(mode.component, unit)
            share = self._lost_share(mode.component, pod)
            self.slowed[pod] += share
            self._mark_fabric(mode.component, unit, +1)
            hit = self.jobs.rerate_all()
            self._push_repair(mode, unit, repair_s)
        elif effect == "throttle":
            racks = np.unique(self.plan.node_rack[nodes])
            for r in racks.tolist():
                self.throttled_racks[r] += 1
            self.cooling_lost[unit] += 1
            hit = self.jobs.rerate_all()
            self._push_repair(mode, unit, repair_s)
        elif effect == "slow_storage":
            self.failures[mode.cause] -= 1  # counted by slow_storage
            self.slow_storage(mode, STORAGE_SLOW_FACTOR, repair_s)
        gpus = int(sum(runs[i].gpus for i in hit))
        if self._repair_id != repairs_before:  # a part is down until repaired: an incident
            self._open_incident(mode, unit, nodes, hit, lost_before, repair_s)
        self.ctx.log("failure", f"{mode.cause} on {mode.component} {unit}: "
                         f"{len(hit)} job(s), {gpus} GPUs hit", cause=mode.cause,
                     component=f"{mode.component} {unit}",
                     jobs=[self.jobs.runs[i].spec.name for i in hit])
        return {"cause": mode.cause, "component": mode.component, "unit": unit,
                "effect": effect, "jobs": [runs[i].spec.name for i in hit], "gpus": gpus,
                "nodes": nodes.tolist()[:64], "repair_s": round(repair_s, 1)}

    def _lost_of(self, owners: list[int]) -> dict[int, float]:
        return {i: self.jobs.runs[i].lost_gpu_s for i in owners}

    def _open_incident(self, mode: FailureMode, unit: int, nodes: np.ndarray,
                       hit: list[int], lost_before: dict[int, float], repair_s: float) -> None:
        self.incidents.open_failure(mode, unit, plan=self.plan, state=self.state,
                                    nodes=nodes, jobs=hit_jobs(self.jobs.runs, hit, lost_before),
                                    now=self.ctx.now, due=self.ctx.now + repair_s,
                                    repair=self._repair_id)

    def _training_owners(self, nodes: np.ndarray) -> list[int]:
        s = self.state
        n_runs = len(self.jobs.runs)
        owners = set()
        for n in nodes.tolist():
            first = int(s.node_first_gpu[n])
            ids = s.gpu_owner[first:first + int(s.node_gpus[n])]
            owners.update(int(o) for o in ids[(ids >= 0) & (ids < n_runs)])
        return sorted(owners)

    def _gang_in_slot(self, slot: int):
        """The running (or draining) gang in job slot ``slot``, or ``None`` (an empty slot)."""
        gangs = [r for r in self.jobs.running.values() if r.state in (RUNNING, DRAINING)]
        return gangs[slot] if slot < len(gangs) else None

    def interrupt_nodes(self, nodes: np.ndarray, mode: FailureMode) -> list[int]:
        """Interrupt every gang running (or lending) on ``nodes``; return their indices."""
        return self._interrupt(self._training_owners(nodes), nodes, mode)

    def _interrupt(self, owners: list[int], nodes: np.ndarray, mode: FailureMode) -> list[int]:
        hit = []
        for idx in owners:
            run = self.jobs.runs[idx]
            if run.state in ("running", "draining"):
                self.recovery.interrupt(run, cause=mode.cause, detect_s=mode.detect_s,
                                        planned=mode.planned, failed_nodes=nodes)
                hit.append(idx)
                self.count_interruption(mode.cause, planned=mode.planned)
            else:
                self.while_down[mode.cause] += 1
        return hit

    def _take_down(self, nodes: np.ndarray, mode: FailureMode, repair_s: float, unit=-1) -> None:
        if nodes.size == 0:
            return
        now = self.ctx.now
        self.down_count[nodes] += 1
        self.state.set_node_flags(nodes, up=False)
        self._nodes_lost(nodes)
        self._push_repair(mode, unit, repair_s, nodes)
        if mode.component == "leaf":  # the switch is down too: its links, its pages
            self._mark_fabric("leaf", unit, +1)
        if not mode.planned and mode.component in ("gpu", "host", "nic"):
            for n in nodes.tolist():
                times = [t for t in self.node_fail_times.get(n, []) if now - t < LEMON_WINDOW_S]
                times.append(now)
                self.node_fail_times[n] = times
                if len(times) >= LEMON_FAILURES and n not in self.lemons:
                    self.lemons.append(n)
                    self.state.set_node_flags([n], drained=True)
                    self.ctx.log("lemon", f"node {n} failed {len(times)} times in "
                                   f"{LEMON_WINDOW_S / 86400:.0f} days: quarantined")

    def _push_repair(self, mode: FailureMode, unit: int, repair_s: float,
                     nodes: np.ndarray | None = None) -> None:
        self._repair_id += 1
        self._repairs[self._repair_id] = (mode, unit, nodes)
        self.repairs_pending += 1
        self.ctx.schedule(self.ctx.now + repair_s, Kind.REPAIR, self._repair_id)

    def on_repair(self, rid: int) -> None:
        mode, unit, nodes = self._repairs.pop(rid)
        self.repairs_pending -= 1
        self.repairs_done += 1
        inc = self.incidents.repaired(rid, now=self.ctx.now)
        if inc is not None:  # the timeline's end: what came back, after how long
            self.ctx.log("repair", f"{inc.cause} on {inc.component} {inc.unit} repaired after "
                                   f"{(inc.resolved_at - inc.since) / 3600:.2f} h",
                         cause=inc.cause, component=f"{inc.component} {inc.unit}")
        effect = EFFECTS[mode.component]
        if effect == "interrupt":
            if mode.component == "leaf" and unit >= 0:
                self._mark_fabric("leaf", unit, -1)
            nodes = self.spares.park_cut(nodes)  # no parts of a cut model: its nodes wait
            self.down_count[nodes] -= 1
            back = nodes[self.down_count[nodes] == 0]
            self.state.set_node_flags(back, up=True)
            self.spares.refill(back)
        elif effect == "slow":
            pod = self._pod_of_switch_unit(mode.component, unit)
            self.slowed[pod] -= self._lost_share(mode.component, pod)
            self._mark_fabric(mode.component, unit, -1)
            self.jobs.rerate_all()
        elif effect == "throttle":
            nodes = self.nodes_of(mode.component, unit)
            for r in np.unique(self.plan.node_rack[nodes]).tolist():
                self.throttled_racks[r] -= 1
            self.cooling_lost[unit] -= 1
            self.jobs.rerate_all()
        elif effect == "slow_storage":
            self.costs.restore_storage(self._storage_factors.pop(rid, STORAGE_SLOW_FACTOR))

    # ----------------------------------------------------------------- slowdowns
    def _pod_of_switch_unit(self, component: str, unit: int) -> int:
        f = self.plan.fabric
        if component == "spine":
            sw = np.flatnonzero(f.switch_tier > 0)[unit]
        else:
            sw = f.link_a[unit]
        return int(f.switch_pod[sw])

    def _lost_share(self, component: str, pod: int) -> float:
        f = self.plan.fabric
        in_pod = (f.switch_pod == pod) if pod >= 0 else np.ones(f.switch_tier.size, bool)
        if component == "spine":
            return 1.0 / max(1, int(np.count_nonzero(in_pod & (f.switch_tier > 0))))
        return 1.0 / max(1, int(np.count_nonzero(in_pod[f.link_a])))

    # the speed model when the physics is off
    def split(self, run) -> tuple[tuple[str, float], ...]:
        """Wall-time share a placed gang loses to failures' slowdowns, by ledger category.

        Used when the fabric/power physics is off; with it on, failed switches and links and
        lost cooling act through routing and the power model instead.
        """
        s = self.state
        nodes = run.placement.nodes
        racks = self.plan.node_rack[nodes]
        if any(self.throttled_racks.get(int(r), 0) > 0 for r in np.unique(racks)):
            return (("throttled", 1.0 - THROTTLE_FACTOR),)
        leaves = s.domain["leaf"][nodes]
        if np.unique(leaves).size > 1:
            pods = np.unique(s.domain["pod"][nodes]).tolist()
            lost = sum(self.slowed.get(p, 0.0) for p in pods) + self.slowed.get(-1, 0.0)
            if lost > 0:
                return (("exposed_communication", min(0.9, SLOW_PER_LOST_SPINE * min(1.0, lost))),)
        return ()

    def refresh(self) -> None:
        """Nothing to re-evaluate: :meth:`split` reads the failures' state as it is."""

    def _mark_fabric(self, component: str, unit: int, sign: int) -> None:
        if component == "leaf":  # a leaf's unit is its switch id (as in nodes_of)
            self.failed_switches[unit] += sign
        elif component == "spine":
            sw = int(np.flatnonzero(self.plan.fabric.switch_tier > 0)[unit])
            self.failed_switches[sw] += sign
        else:
            self.failed_links[unit] += sign

    def mark_switch(self, switch: int, sign: int) -> None:
        """An operator marked a spine or core switch failed (+1) or back (-1)."""
        self.failed_switches[switch] = max(0, self.failed_switches[switch] + sign)

    def set_switch(self, switch: int, up: bool) -> None:
        """A spine or core switch observed up or down (a status, not a count)."""
        self.failed_switches[switch] = 0 if up else 1

    def cool(self, loop: int, racks: list[int], sign: int) -> None:
        """An operator marked a cooling loop failed (+1) or back (-1): its racks throttle."""
        self.cooling_lost[loop] = max(0, self.cooling_lost[loop] + sign)
        for r in racks:
            self.throttled_racks[r] = max(0, self.throttled_racks[r] + sign)

    def set_link(self, link: int, up: bool) -> None:
        """A switch-to-switch link observed up or down (a status, not a count)."""
        self.failed_links[link] = 0 if up else 1

    def node_out(self, node: int, mode: FailureMode) -> list[int]:
        """Take a node out from outside the failure processes (an operator, a mirror): its
        gangs are interrupted by ``mode``; it stays out until :meth:`node_back`.  An incident
        (:meth:`~scheduler.reliability.incidents.IncidentBook.node_out`) holds it meanwhile."""
        lost_before = self._lost_of(self._training_owners(np.array([node])))
        hit = self.interrupt_nodes(np.array([node]), mode)
        self.down_count[node] += 1
        self.state.set_node_flags([node], up=False)
        self._nodes_lost([node])
        self.incidents.node_out(int(node), cause=mode.cause, source=mode.source,
                                now=self.ctx.now, gpus=int(self.state.node_gpus[node]),
                                jobs=hit_jobs(self.jobs.runs, hit, lost_before))
        return hit

    def node_back(self, node: int, *, all_causes: bool = False) -> None:
        """One cause that held the node out is gone (``all_causes``: every one); it is up
        again when none is left."""
        self.down_count[node] = 0 if all_causes else max(0, self.down_count[node] - 1)
        if self.down_count[node] == 0:
            self.state.set_node_flags([node], up=True)
        self.incidents.node_back(int(node), now=self.ctx.now, up=self.down_count[node] == 0)

    # ----------------------------------------------------------------- re-plan
    def repairs_in_flight(self) -> list[tuple[float, FailureMode, int, np.ndarray | None, float]]:
        """Every repair still to come: ``(time, mode, unit, nodes, storage factor)``."""
        out = []
        for h in self.ctx.pending(Kind.REPAIR):
            mode, unit, nodes = self._repairs[h.payload]
            out.append((h.time, mode, unit, nodes, self._storage_factors.get(h.payload, 1.0)))
        return out

    def carry_repair(self, t: float, mode: FailureMode, unit: int, nodes: np.ndarray | None,
                     factor: float = 1.0) -> None:
        """Hold a failure another engine had in flight (a re-plan) until its repair at ``t``:
        ``nodes`` (this engine's ids) stay down, a fabric ``unit`` stays failed (a leaf's
        switch id here, else -1), a row throttled, the storage slow by ``factor``."""
        effect = EFFECTS[mode.component]
        repair_s = max(0.0, t - self.ctx.now)
        if effect == "interrupt":
            nodes = np.asarray(nodes, dtype=np.int64)
            self.down_count[nodes] += 1
            self.state.set_node_flags(nodes, up=False)
            if mode.component == "leaf" and unit >= 0:  # as _take_down: the switch is down
                self._mark_fabric("leaf", unit, +1)
            self._push_repair(mode, unit, repair_s, nodes)
        elif effect == "slow":
            pod = self._pod_of_switch_unit(mode.component, unit)
            self.slowed[pod] += self._lost_share(mode.component, pod)
            self._mark_fabric(mode.component, unit, +1)
            self._push_repair(mode, unit, repair_s)
        elif effect == "throttle":
            for r in np.unique(self.plan.node_rack[self.nodes_of(mode.component, unit)]).tolist():
                self.throttled_racks[r] += 1
            self.cooling_lost[unit] += 1
            self._push_repair(mode, unit, repair_s)
        elif effect == "slow_storage":
            self.costs.scale_storage(factor)
            self._push_repair(mode, 0, repair_s)
            self._storage_factors[self._repair_id] = factor

    def carry_books(self, old: FailureEngine, node_map: np.ndarray) -> None:
        """Take over another engine's failure statistics and lemon records (``node_map``: its
        node ids to this engine's, -1 where gone)."""
        self.failures.update(old.failures)
        self.component_of.update(old.component_of)
        self.interruptions.update(old.interruptions)
        self.while_down.update(getattr(old, "while_down", ()))
        self.planned += old.planned
        self.unplanned += old.unplanned
        self.repairs_done += old.repairs_done
        for n, times in old.node_fail_times.items():
            if node_map[n] >= 0:
                self.node_fail_times[int(node_map[n])] = list(times)
        lemons = [int(node_map[n]) for n in old.lemons if node_map[n] >= 0]
        self.lemons.extend(lemons)
        self.state.set_node_flags(lemons, drained=True)
        pending = [(h.time, h.payload, self._repairs[h.payload][0].cause,
                    self._repairs[h.payload][1]) for h in self.ctx.pending(Kind.REPAIR)]
        self.incidents.carry(old.incidents, node_map, pending, now=self.ctx.now)

    def report(self) -> dict:
        by_component: Counter = Counter()
        for cause, n in self.failures.items():
            by_component[self.component_of[cause]] += n
        return {
            "total": sum(self.failures.values()),
            "by_component": dict(sorted(by_component.items())),
            "by_cause": dict(sorted(self.failures.items())),
            "while_down": dict(sorted(self.while_down.items())),
            "repairs": {"done": self.repairs_done, "pending": self.repairs_pending},
            "lemon_nodes": list(self.lemons),
            "memory_fallbacks_to_disk": self.recovery.memory_fallbacks,
        }
