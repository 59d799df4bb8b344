"""One batch run: a preset's cluster and workload (or a replayed trace), run for some days.

This is what ``manage.py simulate`` and ``bench/simulate.py`` call; it needs no Django.  The
workload's random stream is derived from the seed apart from the engine's own streams, so a
different policy or placement strategy meets the very same jobs.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from scheduler.engine import Engine
from scheduler.presets import PRESETS
from scheduler.reliability.checkpoint import RECOVERY_MODES
from scheduler.report import build_report
from scheduler.scheduling.placement import STRATEGIES
from scheduler.scheduling.policies import REGISTRY
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

WORKLOAD_STREAM = 0x776F726B
"""Second entropy word of the workload's ``SeedSequence``.

The engine seeds its streams with ``SeedSequence(seed).spawn(n)``; a spawned child of the same
seed would be one of those streams, so the workload draws from ``SeedSequence((seed, this))``,
a sequence no engine child can equal (the word must not be 0: zero words are padding)."""


class ScenarioError(ValueError):
    """A scenario that cannot run as asked: a bad preset, policy, size, horizon or trace path.

    The message is one line, meant to be shown as it is.
    """


def check_scenario(*, preset: str, days: float, seed: int = 0, policy: str = "default",
                   gpus: int | None = None, trace: str | os.PathLike | None = None,
                   placement: str | None = None, failures: bool = True,
                   checkpoint_interval=None, recovery: str = "disk",
                   spares: float | None = None,
                   fabric: str | None = None, oversubscription: float | None = None,
                   physics: bool = True) -> None:
    """Raise :class:`ScenarioError` unless every option is valid.

    Parameters are those of :func:`run_scenario`.

    >>> check_scenario(preset="dev-small", days=0)
    Traceback (most recent call last):
    ...
    scheduler.simulate.ScenarioError: days must be a finite number > 0 and <= 366, not 0
    """
    if preset not in PRESETS:
        raise ScenarioError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
    if (isinstance(days, bool) or not isinstance(days, int | float)
            or not (math.isfinite(days) and 0 < days <= MAX_DAYS)):
        raise ScenarioError(f"days must be a finite number > 0 and <= {MAX_DAYS:g}, not {days!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ScenarioError(f"seed must be an integer >= 0, not {seed!r}")
    if policy not in REGISTRY:
        raise ScenarioError(f"unknown policy {policy!r}; choose one of: {', '.join(REGISTRY)}")
    if placement is not None and placement not in STRATEGIES:
        raise ScenarioError(f"unknown placement {placement!r}; choose one of: "
                            f"{', '.join(STRATEGIES)}")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int | np.integer)
                             or gpus <= 0):
        raise ScenarioError(f"gpus must be a positive integer, not {gpus!r}")
    if not isinstance(failures, bool):
        raise ScenarioError(f"failures must be on or off, not {failures!r}")
    if not isinstance(physics, bool):
        raise ScenarioError(f"physics must be on or off, not {physics!r}")
    if checkpoint_interval not in (None, "auto") and (
            isinstance(checkpoint_interval, bool)
            or not isinstance(checkpoint_interval, int | float)
            or not (math.isfinite(checkpoint_interval) and checkpoint_interval > 0)):
        raise ScenarioError("checkpoint interval must be 'auto' or a positive number of "
                            f"seconds, not {checkpoint_interval!r}")
    if recovery not in RECOVERY_MODES:
        raise ScenarioError(f"unknown recovery {recovery!r}; choose one of: "
                            f"{', '.join(RECOVERY_MODES)}")
    if spares is not None and (isinstance(spares, bool) or not isinstance(spares, int | float)
                               or not 0 <= spares < 1):
        raise ScenarioError(f"spares must be a fraction in [0, 1), not {spares!r}")
    if fabric is not None and fabric not in REFABRIC_KINDS:
        raise ScenarioError(f"unknown fabric {fabric!r}; choose one of: "
                            f"{', '.join(REFABRIC_KINDS)}")
    if oversubscription is not None and (
            isinstance(oversubscription, bool) or not isinstance(oversubscription, int | float)
            or not (math.isfinite(oversubscription) and oversubscription >= 1)):
        raise ScenarioError(f"oversubscription must be a number >= 1, not {oversubscription!r}")
    if trace is not None and not Path(trace).is_file():
        raise ScenarioError(f"trace file {os.fspath(trace)!r} does not exist or is not a file")


def scenario_engine(*, preset: str, days: float, seed: int = 0, policy: str = "default",
                    gpus: int | None = None, trace: str | os.PathLike | None = None,
                    placement: str | None = None, failures: bool = True,
                    checkpoint_interval=None, recovery: str = "disk",
                    spares: float | None = None, fabric: str | None = None,
                    oversubscription: float | None = None,
                    physics: bool = True) -> tuple[Engine, dict]:
    """Validate the options and build the engine at time 0, with its ``scenario`` description.

    Parameters are those of :func:`run_scenario`.  Raises :class:`ScenarioError` for a bad
    option and :class:`~scheduler.workload.traces.TraceError` (file and line named) for a bad
    trace.
    """
    options = {"failures": failures, "checkpoint_interval": checkpoint_interval,
               "recovery": recovery, "spares": spares, "physics": physics}
    check_scenario(preset=preset, days=days, seed=seed, policy=policy, gpus=gpus, trace=trace,
                   placement=placement, fabric=fabric, oversubscription=oversubscription,
                   **options)
    seed = int(seed)
    spec, scale = scaled_preset(preset, None if gpus is None else int(gpus))
    try:
        plan = refabric(spec, fabric, oversubscription).plan()
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    scenario: dict = {"preset": preset, "days": days, "gpus_requested": gpus,
                      "trace": None, "trace_source": None}
    if trace is None:
        rng = np.random.default_rng(np.random.SeedSequence((seed, WORKLOAD_STREAM)))
        workload = scenario_workload(preset, plan, days=days, rng=rng, scale=scale)
    else:
        workload = _trace_workload(trace, reference_model=plan.models[0].name)
        scenario.update(trace=Path(trace).name, trace_source=workload.source,
                        trace_jobs_in_file=workload.meta.get("jobs_in_file"))
    engine = Engine(plan, workload, seed=seed, policy=policy, placement=placement, **options)
    return engine, scenario


def _trace_workload(trace: str | os.PathLike, *, reference_model: str) -> Workload:
    """The trace's jobs alone: a replay has no inference services of the preset."""
    try:
        return read_trace(trace, reference_model=reference_model)
    except UnicodeDecodeError:
        raise ScenarioError(f"trace file {Path(trace).name!r} is not UTF-8 text") from None


def run_scenario(*, preset: str, days: float, seed: int = 0, policy: str = "default",
                 gpus: int | None = None, trace: str | os.PathLike | None = None,
                 placement: str | None = None, failures: bool = True,
                 checkpoint_interval=None, recovery: str = "disk",
                 spares: float | None = None, fabric: str | None = None,
                 oversubscription: float | None = None, physics: bool = True,
                 progress: Callable[[float], None] | None = None) -> tuple[Engine, dict]:
    """Run a scenario for ``days`` of simulated time; return the engine and its report.

    Parameters
    ----------
    preset : str
        A name of :data:`scheduler.presets.PRESETS`: the cluster, and its default workload.
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
        A Philly or Alibaba openb CSV (see :func:`~scheduler.workload.traces.read_trace`); its
        jobs replace the preset's workload, services included.  Durations are replayed as
        compute time on the cluster's first accelerator model.
    placement : str, optional
        Override the policy's placement strategy: one of
        :data:`scheduler.scheduling.placement.STRATEGIES`.
    failures : bool
        Run the failure processes (False: the failure-free baseline).
    checkpoint_interval : None, "auto" or float
        Each job's own interval, Young/Daly from the job's failure rate ("auto"), or seconds.
    recovery : {"disk", "memory"}
        Checkpoint to the central tier, or in-memory replicas on peers (Gemini).
    spares : float, optional
        Fraction of nodes held as hot spares (default: the preset's).
    fabric : str, optional
        Replace the preset's scale-out fabric: fat-tree, dragonfly+, rail or island.
    oversubscription : float, optional
        Oversubscription of a fat-tree's leaves or above an island (>= 1).
    physics : bool
        Fabric routing, storage tiers and power limits set each gang's speed (off: compute at
        kernel efficiency only).
    progress : callable, optional
        Called now and then with the simulated time reached, s.

    Returns
    -------
    tuple of (Engine, dict)
        The engine at the end of the period, and the JSON-safe report of
        :func:`scheduler.report.build_report`; ``wall_seconds`` covers building the cluster
        and workload as well as the run.

    Raises
    ------
    ScenarioError
        A bad option (one-line message).
    TraceError
        A trace that cannot be read (file and line named).

    Examples
    --------
    >>> engine, report = run_scenario(preset="dev-small", days=0.05, seed=1)
    >>> report["scenario"]["gpus"], report["scenario"]["policy"], engine.now
    (512, 'default', 4320.0)
    """
    started = time.perf_counter()
    engine, scenario = scenario_engine(preset=preset, days=days, seed=seed, policy=policy,
                                       gpus=gpus, trace=trace, placement=placement,
                                       failures=failures,
                                       checkpoint_interval=checkpoint_interval,
                                       recovery=recovery, spares=spares, fabric=fabric,
                                       oversubscription=oversubscription, physics=physics)
    engine.run_until(days * 86400.0, progress=progress)
    report = build_report(engine, scenario=scenario,
                          wall_seconds=time.perf_counter() - started)
    return engine, report
