"""One batch run: a preset's (or a given) cluster and workload (or a replayed trace), for some days.

This is what ``manage.py simulate`` and ``bench/simulate.py`` call; it needs no Django.  The
workload draws from the seed's ``workload`` stream (:mod:`scheduler.sim.streams`), a child of
the same root as the engine's streams but apart from them, so a different policy or placement
strategy meets the very same jobs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scheduler.engine import Engine
from scheduler.fabric.ecmp import BALANCES
from scheduler.fabric.routing import check_balance
from scheduler.hardware.cluster import ClusterPlan
from scheduler.limits import checks
from scheduler.limits.bounds import (
    CHECKPOINT_INTERVAL,
    CLUSTER_GPUS,
    LOAD,
    OVERSUBSCRIPTION,
    POWER_CAP,
    RESTART_PART,
)
from scheduler.presets import PRESETS
from scheduler.reliability.checkpoint import RECOVERY_MODES, RestartTimes
from scheduler.reliability.profiles import PROFILES, load_profile
from scheduler.report import build_report
from scheduler.scheduling.placement import STRATEGIES
from scheduler.scheduling.policies import REGISTRY
from scheduler.scheduling.slurm.conf import read_slurm_conf
from scheduler.sim import Streams
from scheduler.workload.jobs import Workload
from scheduler.workload.scenarios import (
    REFABRIC_KINDS,
    refabric,
    scaled_preset,
    scenario_workload,
)
from scheduler.workload.traces import read_trace

MAX_DAYS = 366.0
"""Longest run accepted, days of simulated time (a year, leap day included)."""


class ScenarioError(ValueError):
    """A scenario that cannot run as asked: a bad preset, policy, size, horizon or trace path.

    The message is one line, meant to be shown as it is.
    """


def _failure_profile(name: str, value) -> None:
    """A shipped profile's name or a ``.toml`` file's path, and a profile that loads."""
    if not isinstance(value, str) or (value not in PROFILES and not value.endswith(".toml")):
        raise ValueError(f"unknown {name} {value!r}; choose one of: {', '.join(PROFILES)} "
                         "(or a .toml file's path)")
    load_profile(value)


def _path(name: str, value) -> None:
    if not isinstance(value, str | os.PathLike):
        raise ValueError(f"{name} must be a file's path, not {value!r}")
    if not Path(value).is_file():
        raise ValueError(f"{name} file {os.fspath(value)!r} does not exist or is not a file")


@dataclass(frozen=True)
class _Rule:
    """How one :class:`Scenario` field is checked: ``check(label, value, **options)``, a
    parser of :mod:`scheduler.limits.checks`; ``None`` (when ``optional``) and the names in
    ``words`` pass as they are."""

    check: Callable
    options: dict = field(default_factory=dict)
    label: str | None = None
    optional: bool = False
    words: tuple[str, ...] = ()


_SECONDS = {"bound": RESTART_PART}
_RULES: dict[str, _Rule] = {
    "preset": _Rule(checks.choice, {"known": PRESETS}, optional=True),
    "days": _Rule(checks.number, {"above": 0, "at_most": MAX_DAYS,
                                  "expect": f"a finite number > 0 and <= {MAX_DAYS:g}"}),
    "seed": _Rule(checks.integer, {"at_least": 0}),
    "policy": _Rule(checks.choice, {"known": REGISTRY}),
    "placement": _Rule(checks.choice, {"known": STRATEGIES}, optional=True),
    "gpus": _Rule(checks.integer, {"at_least": 1, "bound": CLUSTER_GPUS}, optional=True),
    "failures": _Rule(checks.flag, {"expect": "on or off", "numpy_bool": False}),
    "physics": _Rule(checks.flag, {"expect": "on or off", "numpy_bool": False}),
    "checkpoint_interval": _Rule(
        checks.number, {"above": 0, "bound": CHECKPOINT_INTERVAL,
                        "expect": "'auto', 'job' or a positive number of seconds"},
        label="checkpoint interval", optional=True, words=("auto", "job")),
    "recovery": _Rule(checks.choice, {"known": RECOVERY_MODES}),
    "spares": _Rule(checks.number, {"at_least": 0, "below": 1, "expect": "a fraction in [0, 1)"},
                    optional=True),
    "fabric": _Rule(checks.choice, {"known": REFABRIC_KINDS}, optional=True),
    "oversubscription": _Rule(checks.number, {"at_least": 1, "bound": OVERSUBSCRIPTION},
                              optional=True),
    "load_balance": _Rule(checks.choice, {"known": BALANCES}, label="load balance"),
    "load": _Rule(checks.number, {"above": 0, "bound": LOAD}),
    "physics_max_tick_s": _Rule(checks.number, {"at_least": 1800.0,
                                                "expect": "a number >= 1800 s"},
                                label="physics max tick", optional=True),
    "detect_s": _Rule(checks.within, _SECONDS, optional=True),
    "reschedule_s": _Rule(checks.within, _SECONDS, optional=True),
    "warmup_s": _Rule(checks.within, _SECONDS, optional=True),
    "failure_profile": _Rule(_failure_profile, label="failure profile"),
    "power_cap": _Rule(checks.within, {"bound": POWER_CAP}, label="power cap", optional=True),
    "trace": _Rule(_path, optional=True),
    "slurm_conf": _Rule(_path, label="slurm.conf", optional=True),
}
"""How each :class:`Scenario` field is checked, in the order the checks run."""


@dataclass(frozen=True)
class Scenario:
    """One batch run: a preset's cluster and workload (or a replayed trace), for some days.

    Every field is checked when the scenario is made; a bad one raises :class:`ScenarioError`.

    Parameters
    ----------
    preset : str or None
        A name of :data:`scheduler.presets.PRESETS`: the cluster, and its default workload.
        ``None`` runs the cluster given to :meth:`engine` (``plan``) with ``trace``'s jobs.
    days : float
        Simulated time to run, days (0 < days <= :data:`MAX_DAYS`).
    seed : int
        Seeds the workload and the engine (>= 0); the same seed gives the same report, apart
        from :data:`scheduler.report.WALL_CLOCK_FIELDS`.
    policy : str
        A name of :data:`scheduler.scheduling.policies.REGISTRY`.
    gpus : int, optional
        Scale the preset's cluster, and its workload with it, to about this many GPUs.
    trace : path, optional
        A Philly, Alibaba openb or Slurm CSV, or a ``sacct --json`` export (see
        :func:`~scheduler.workload.traces.read_trace`); its jobs replace the preset's workload,
        services included.  Durations are replayed as compute time on the cluster's first
        accelerator model.
    placement : str, optional
        Override the policy's placement strategy: one of
        :data:`scheduler.scheduling.placement.STRATEGIES`.
    failures : bool
        Run the failure processes (False: the failure-free baseline).
    checkpoint_interval : "auto", "job" or float
        Young/Daly from each gang's failure rate and checkpoint cost ("auto", the default;
        ``None`` means the same), each job's own interval ("job"), or seconds for all.
    recovery : {"disk", "async", "memory"}
        Checkpoint to the central tier synchronously or asynchronously (snapshot to host
        memory, persisted in the background), or in-memory replicas on peers (Gemini).
    spares : float, optional
        Fraction of nodes held as hot spares (default: the preset's).
    fabric : str, optional
        Replace the preset's scale-out fabric: fat-tree, dragonfly+, rail or island.
    oversubscription : float, optional
        Oversubscription of a fat-tree's leaves or above an island (>= 1).
    load_balance : {"spread", "ecmp"}
        How gangs' flows share equal-cost paths: evenly ("spread", the default: packet
        spraying or ideal adaptive routing), or each flow on one hashed path ("ecmp": elephant
        flows collide; tree fabrics only; :mod:`scheduler.fabric.ecmp`).
    physics : bool
        Fabric routing, storage tiers and power limits set each gang's speed (off: compute at
        kernel efficiency only).
    load : float
        Multiplies the preset workload's job arrival rates (> 1 saturates the cluster; not
        with ``trace``).
    physics_max_tick_s : float, optional
        The physics' adaptive tick grows from 30 min up to this while no gang's speed moves
        (``None``: a fixed 30-min tick).  At 2 h, hyperscale-100k's 30 days differ from the
        fixed tick by +0.13 MFU points (``docs/performance.md``).
    failure_profile : str
        The failure rates: a name of :data:`scheduler.reliability.profiles.PROFILES`
        (``llama3``, the default) or a profile file's path (``docs/failures.md``).
    detect_s, reschedule_s, warmup_s : float, optional
        The parts of a restart besides loading, s (``docs/checkpointing.md``): detection
        (default: each failure mode's own), rescheduling (default 120) and warm-up (default
        60); each in [0, 86,400].
    power_cap : float, optional
        Cap every rack at this fraction of its power budget from the start (in
        :data:`~scheduler.limits.bounds.POWER_CAP`; needs ``physics``).
    slurm_conf : path, optional
        A cluster's ``slurm.conf`` (or ``scontrol show config``'s output), read by
        :func:`scheduler.scheduling.slurm.conf.read_slurm_conf` and given to the engine: what
        ``policy="slurm"`` schedules by.  That policy needs one; no other policy reads it.

    Examples
    --------
    >>> Scenario(preset="dev-small", days=0)
    Traceback (most recent call last):
    ...
    scheduler.simulate.ScenarioError: days must be a finite number > 0 and <= 366, not 0
    """

    preset: str
    days: float
    seed: int = 0
    policy: str = "default"
    gpus: int | None = None
    trace: str | os.PathLike | None = None
    placement: str | None = None
    failures: bool = True
    checkpoint_interval: float | str | None = "auto"
    recovery: str = "disk"
    spares: float | None = None
    fabric: str | None = None
    oversubscription: float | None = None
    load_balance: str = "spread"
    physics: bool = True
    load: float = 1.0
    physics_max_tick_s: float | None = 7200.0
    failure_profile: str = "llama3"
    # checkpointing and restart (issue 15, docs/checkpointing.md)
    detect_s: float | None = None
    reschedule_s: float | None = None
    warmup_s: float | None = None
    # a power cap on every rack from the start (a fraction of each rack's budget; issue 17)
    power_cap: float | None = None
    # the cluster's own scheduler configuration (issue 25)
    slurm_conf: str | os.PathLike | None = None

    def __post_init__(self):
        for name, rule in _RULES.items():
            value = getattr(self, name)
            if (value is None and rule.optional) or value in rule.words:
                continue
            try:
                rule.check(rule.label or name, value, **rule.options)
            except ValueError as exc:
                raise ScenarioError(str(exc)) from None
        self._power_cap_needs_physics()
        self._trace_is_replayed_as_it_is()
        self._slurm_policy_has_its_conf()

    def _power_cap_needs_physics(self) -> None:
        if self.power_cap is not None and not self.physics:
            raise ScenarioError("a power cap needs the power model (physics on)")

    def _trace_is_replayed_as_it_is(self) -> None:
        if self.trace is not None and self.load != 1.0:
            raise ScenarioError("load scales a preset's workload; a trace is replayed as it is")
        if self.preset is None and self.trace is None:
            raise ScenarioError("a scenario needs a workload: a preset's or a trace's")

    def _slurm_policy_has_its_conf(self) -> None:
        if self.policy == "slurm" and self.slurm_conf is None:
            raise ScenarioError("policy 'slurm' schedules by a cluster's slurm.conf: give "
                                "slurm_conf (simulate --slurm-conf PATH)")
        if self.slurm_conf is not None and self.policy != "slurm":
            raise ScenarioError(f"a slurm.conf is read by policy 'slurm' only, not by "
                                f"{self.policy!r}")

    def engine(self, plan: ClusterPlan | None = None) -> tuple[Engine, dict]:
        """Build the engine at time 0, with the report's ``scenario`` description.

        ``plan`` runs that cluster (the live twin passes the inventory's) instead of the
        preset's; the preset then only gives the workload, scaled to the plan's GPUs (none
        needed with a trace).

        Raises :class:`ScenarioError` for a fabric the preset cannot take, a scenario with
        neither preset nor plan, or a slurm.conf that cannot be read, and
        :class:`~scheduler.workload.traces.TraceError` (file and line named) for a bad trace.
        """
        seed = int(self.seed)
        given = plan
        if plan is not None:
            scale = 1.0 if self.preset is None else scaled_preset(self.preset, plan.n_gpus)[1]
        else:
            plan, scale = self.plan()
        scenario: dict = {"preset": self.preset, "cluster": None if given is None else plan.name,
                          "days": self.days,
                          "gpus_requested": self.gpus, "trace": None, "trace_source": None,
                          "load": self.load, "physics_max_tick_s": self.physics_max_tick_s,
                          "failure_profile": self.failure_profile}
        if self.trace is None:
            rng = Streams(seed).rng("workload")
            workload = scenario_workload(self.preset, plan, days=self.days, rng=rng,
                                         scale=scale, load=self.load)
        else:
            workload = _trace_workload(self.trace, reference_model=plan.models[0].name)
            scenario.update(trace=Path(self.trace).name, trace_source=workload.source,
                            trace_jobs_in_file=workload.meta.get("jobs_in_file"),
                            trace_skipped={k.removeprefix("skipped_"): v
                                           for k, v in workload.meta.items()
                                           if k.startswith("skipped_") and v})
        if self.slurm_conf is not None:
            scenario["slurm_conf"] = Path(self.slurm_conf).name
        if self.load_balance != "spread":
            self._balance_fits(plan)
            scenario["load_balance"] = self.load_balance
        engine = Engine(plan, workload, seed=seed, policy=self.policy,
                        placement=self.placement, failures=self.failures,
                        checkpoint_interval=self.engine_interval(), recovery=self.recovery,
                        spares=self.spares, physics=self.physics,
                        physics_max_tick_s=self.physics_max_tick_s,
                        restart=self.restart_times(),
                        failure_modes=load_profile(self.failure_profile).modes,
                        load_balance=self.load_balance,
                        **slurm_engine_options(self.slurm_conf))
        if self.power_cap is not None:  # in force from the physics' first tick, as the
            # rest of the power model: both arms of a study are sampled over the same period
            engine.physics.power.cap_all(float(self.power_cap))
            scenario["power_cap"] = self.power_cap
        return engine, scenario

    def plan(self) -> tuple[ClusterPlan, float]:
        """The preset's cluster at the asked size and fabric, and the workload's scale.

        Raises :class:`ScenarioError` for a fabric or oversubscription the cluster cannot
        build (a study checks every arm with this before any run starts), and for a scenario
        without a preset (its cluster is given to :meth:`engine`).
        """
        if self.preset is None:
            raise ScenarioError("a scenario without a preset runs a given cluster (a plan)")
        spec, scale = scaled_preset(self.preset, None if self.gpus is None else int(self.gpus))
        try:
            plan = refabric(spec, self.fabric, self.oversubscription).plan()
        except ValueError as exc:
            raise ScenarioError(str(exc)) from None
        self._balance_fits(plan)
        return plan, scale

    def _balance_fits(self, plan: ClusterPlan) -> None:
        try:
            check_balance(plan.fabric, self.load_balance)
        except ValueError as exc:
            raise ScenarioError(str(exc)) from None

    def engine_interval(self):
        """The engine's ``checkpoint_interval``: ``"auto"``, ``None`` (each job's own) or s."""
        ci = self.checkpoint_interval
        return "auto" if ci is None else None if ci == "job" else ci

    def restart_times(self) -> RestartTimes:
        """The restart's detection override, rescheduling and warm-up, defaults filled in."""
        d = RestartTimes()
        return RestartTimes(
            detect_s=None if self.detect_s is None else float(self.detect_s),
            reschedule_s=d.reschedule_s if self.reschedule_s is None else float(self.reschedule_s),
            warmup_s=d.warmup_s if self.warmup_s is None else float(self.warmup_s))

    def options(self) -> dict:
        """The fields as a plain dict (for a report or a study's arm)."""
        out = asdict(self)
        for name in ("trace", "slurm_conf"):
            if out[name] is not None:
                out[name] = os.fspath(out[name])
        return out


def _trace_workload(trace: str | os.PathLike, *, reference_model: str) -> Workload:
    """The trace's jobs alone: a replay has no inference services of the preset."""
    try:
        return read_trace(trace, reference_model=reference_model)
    except UnicodeDecodeError:
        raise ScenarioError(f"trace file {Path(trace).name!r} is not UTF-8 text") from None


def slurm_engine_options(path: str | os.PathLike | None) -> dict:
    """What the engine is given for a ``slurm.conf``: ``{"slurm_conf": SlurmConf}`` (read by
    :func:`scheduler.scheduling.slurm.conf.read_slurm_conf`), nothing without one.

    Raises :class:`ScenarioError`, one line naming the file, line and key, for a
    configuration that cannot be read.
    """
    if path is None:
        return {}
    try:
        return {"slurm_conf": read_slurm_conf(path)}
    except UnicodeDecodeError:
        raise ScenarioError(f"slurm.conf {Path(path).name!r} is not UTF-8 text") from None
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None


def run_scenario(scenario: Scenario, *, plan: ClusterPlan | None = None,
                 progress: Callable[[float], None] | None = None) -> tuple[Engine, dict]:
    """Run ``scenario`` for its days of simulated time; return the engine and its report.

    Parameters
    ----------
    scenario : Scenario
        What to run.
    plan : ClusterPlan, optional
        Run this cluster instead of the preset's (``simulate --cluster``: the inventory's);
        see :meth:`Scenario.engine`.
    progress : callable, optional
        Called now and then with the simulated time reached, s.

    Returns
    -------
    tuple of (Engine, dict)
        The engine at the end of the period, and the JSON-safe report of
        :func:`scheduler.report.build_report`; ``wall_seconds`` covers building the cluster
        and workload as well as the run.

    Examples
    --------
    >>> engine, report = run_scenario(Scenario(preset="dev-small", days=0.05, seed=1))
    >>> report["scenario"]["gpus"], report["scenario"]["policy"], engine.now
    (512, 'default', 4320.0)
    """
    started = time.perf_counter()
    engine, description = scenario.engine(plan=plan)
    engine.run_until(scenario.days * 86400.0, progress=progress)
    report = build_report(engine, scenario=description,
                          wall_seconds=time.perf_counter() - started)
    return engine, report
