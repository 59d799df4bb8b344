"""The documented bounds of every number a command, drill, injected job or CLI size takes.

One definition, used by the core (:func:`~scheduler.control.commands.apply_command`, the
drills, :func:`~scheduler.control.inject.inject`, the trace readers, the scenario) and by the
twin (``drill_validate`` in ``twin/services.py`` and the management commands).  A value outside
its bound is refused with one ``ValueError`` that names the parameter and the bound, before
anything changes.  Non-finite numbers (nan, inf, and so a JSON ``1e400``, which parses as inf),
booleans and strings where a number is expected get the same one message.

======================  ======================  ===================================================
parameter               bound                   why
======================  ======================  ===================================================
surge ``factor``        (0, 100] x demand       launch-day surges run at 10-30x, so 100x leaves
                                                headroom; demand (replicas) stays finite
drill ``duration_s``    (0, 2,592,000] s, 30 d  a rehearsed incident; a longer one is a status
                                                (``storage_degraded``), not a drill
storage drill           [0.0001, 1]             share of bandwidth left; 0.0001 is what a central
``factor``                                      tier marked down keeps (``CENTRAL_DOWN_LEFT``):
                                                less underflows bandwidth to 0, which checkpoint
                                                costs read as free
degraded ``factor``     [0.0001, 1)             the same floor; 1 is ``storage_up``
power-cap ``fraction``  [0.1, 1]                share of rack power; hosts idle near half their
                                                peak and GPUs throttle no lower than 30 %
                                                (``THROTTLE_FLOOR``): below 0.1 nothing changes but
                                                the caps underflow
``done_fraction``       [0, 1)                  an injected running job has work left
GPUs of a cluster,      [1, 4,194,304]          a full-size radix-256 fat-tree: 20x the largest
gang, collective,                               cluster in service in 2025 (about 200,000 GPUs);
trace row                                       its plan takes 0.4 GB, far larger ones run out of
                                                memory
``--radix``             [4, 512], even          512 ports (x 100G) is the most a shipping switch
                                                ASIC offers (Tomahawk 5); the full-size fabric must
                                                also fit the GPU bound
checkpoint interval     [60, 31,622,400] s      a job's ``checkpoint_interval_s`` and simulate's
                                                ``--checkpoint-interval``: at most once a minute;
                                                a year (the longest run) means never; 0 would
                                                divide by 0
restart ``detect_s``,   [0, 86,400] s           simulate's restart parts; 0 is an instant one; a
``reschedule_s``,                               day is past any published hang or relaunch (the
``warmup_s``                                    NCCL watchdog's default is 10 min, silent data
                                                corruption is found within hours)
job ``checkpoint_gb``   [0, 1,000,000] GB       1 PB is a 70-trillion-parameter model at 14 bytes
                                                per parameter
job host demands per    [0, 1e9)                finite cores, GB and Gb/s (nan compares false and
GPU                                             would place anywhere)
job ``submit_s``,       [0, 1e10) s             finite: 1e10 s is about 300 years
``burst_after_s``
trace duration          [0, 31,622,400] s       366 days: no run is longer (``MAX_DAYS``), so the
                                                job would never end; the bundled traces peak at 145
                                                days (openb) and 54 (Philly)
trace time stamp        [0, 1e10) s             openb seconds reach 1.3e7; later than 1e10 s a job
                                                would never arrive
collective ``--bytes``  [1, 2^40] B             1 TiB: the buffer sits in one GPU's HBM (256 GB at
                                                most in the catalog)
``--nic-gbps``          [1, 3,200] Gb/s         1 Gb/s is a management port (slower, a 1 TiB
                                                transfer's time overflows); 1.6 Tb/s per GPU is on
                                                2026 roadmaps, twice that is headroom
job ``priority``        [-1,000, 1,000],        an operator's reprioritisation: the workloads run
                        integer                 -10 (best effort) to 100 (inference); ten times
                                                that either way leaves room to jump any of them
``--oversubscription``  [1, 100]                fabrics run 1:1 to 7:1 (islands); 100 keeps a
                                                scale-out share above 1 %
simulate ``--load``     (0, 100] x arrivals     saturates every preset many times over
======================  ======================  ===================================================

Simulated days (``MAX_DAYS``, 366) and the live engine's speed-up (``SPEED_MAX``, 10,000) are
bounded where they are used, :mod:`scheduler.simulate` and ``twin/engine_commands.py``.

>>> SURGE_FACTOR.check("factor", 2)
2.0
>>> SURGE_FACTOR.check("factor", 1e308)
Traceback (most recent call last):
...
ValueError: factor must be at most 100, not 1e+308
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DAY_S = 86400.0


def _shown(x: float) -> str:
    """``100``, ``2,592,000``, ``0.0001``: integers with thousands separators."""
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:g}"


@dataclass(frozen=True)
class Bound:
    """A closed, open or half-open interval of finite numbers (or integers), with a unit.

    ``note`` follows the upper bound in messages (``"30 days"``).  Why each bound is what it
    is: the module docstring's table.
    """

    low: float
    high: float
    unit: str = ""
    low_open: bool = True
    high_open: bool = False
    integer: bool = False
    note: str = ""

    def interval(self) -> str:
        """``(0, 100]``, ``[1, 4,194,304]``."""
        return (f"{'(' if self.low_open else '['}{_shown(self.low)}, {_shown(self.high)}"
                f"{')' if self.high_open else ']'}{' ' + self.unit if self.unit else ''}")

    @property
    def positive(self) -> bool:
        """Every value inside is > 0."""
        return self.low > 0 or (self.low == 0 and self.low_open)

    def _kind(self) -> str:
        return f"a{' positive' if self.positive else 'n' if self.integer else ''} " \
               f"{'integer' if self.integer else 'number'}"

    def check(self, name: str, value) -> float | int:
        """``value`` as a float (an int for an integer bound); ``ValueError`` outside.

        >>> POWER_CAP.check("fraction", 0.05)
        Traceback (most recent call last):
        ...
        ValueError: fraction must be at least 0.1, not 0.05
        """
        kinds = (int, np.integer) if self.integer else (int, float, np.integer, np.floating)
        if (isinstance(value, bool) or not isinstance(value, kinds)
                or not math.isfinite(value)
                or (self.positive and not value > 0)):
            raise ValueError(f"{name} must be {self._kind()} in {self.interval()}, "
                             f"not {value!r}")
        unit = f" {self.unit}" if self.unit else ""
        if value < self.low or (self.low_open and value == self.low):
            word = "above" if self.low_open else "at least"
            raise ValueError(f"{name} must be {word} {_shown(self.low)}{unit}, not {value!r}")
        if value > self.high or (self.high_open and value == self.high):
            word = "below" if self.high_open else "at most"
            note = f" ({self.note})" if self.note else ""
            raise ValueError(f"{name} must be {word} {_shown(self.high)}{unit}{note}, "
                             f"not {value!r}")
        return int(value) if self.integer else float(value)


# ----------------------------------------------------------------- drills and commands
SURGE_FACTOR = Bound(0.0, 100.0)
DRILL_DURATION = Bound(0.0, 30 * DAY_S, "s", note="30 days")
STORAGE_LEFT_MIN = 1e-4
"""Least share of a storage tier's bandwidth a drill or a status may leave, and what a central
tier marked down keeps (:data:`scheduler.control.storage_status.CENTRAL_DOWN_LEFT`)."""
STORAGE_SLOWDOWN = Bound(STORAGE_LEFT_MIN, 1.0, low_open=False)
STORAGE_DEGRADED = Bound(STORAGE_LEFT_MIN, 1.0, low_open=False, high_open=True)
POWER_CAP = Bound(0.1, 1.0, low_open=False)
DONE_FRACTION = Bound(0.0, 1.0, low_open=False, high_open=True)
JOB_PRIORITY = Bound(-1000, 1000, low_open=False, integer=True)

DRILL_PARAMS: dict[str, dict[str, Bound]] = {
    "storage_slowdown": {"factor": STORAGE_SLOWDOWN, "duration_s": DRILL_DURATION},
    "inference_surge": {"factor": SURGE_FACTOR, "duration_s": DRILL_DURATION},
    "power_cap": {"fraction": POWER_CAP},
}
"""The parameters each drill kind takes and their bounds (other kinds take none)."""

DRILL_DEFAULTS: dict[str, dict[str, float]] = {
    "storage_slowdown": {"factor": 0.5, "duration_s": 3600.0},
    "inference_surge": {"factor": 2.0, "duration_s": 3600.0},
    "power_cap": {"fraction": 0.8},
}
"""What a drill uses for a parameter it was not given."""


def drill_params(kind: str, params: dict, *, defaults: bool = False) -> dict[str, float]:
    """A drill's parameters checked against :data:`DRILL_PARAMS` (``defaults``: filled in).

    >>> drill_params("inference_surge", {"factor": 3}, defaults=True)
    {'factor': 3.0, 'duration_s': 3600.0}
    >>> drill_params("node", {"factor": 3})
    Traceback (most recent call last):
    ...
    ValueError: a node drill takes no parameters; not factor
    """
    allowed = DRILL_PARAMS.get(kind, {})
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) or "no parameters"
        article = "an" if kind[:1] in ("a", "e", "i", "o", "u") else "a"
        raise ValueError(f"{article} {kind} drill takes {takes}; not {', '.join(unknown)}")
    given = {**DRILL_DEFAULTS.get(kind, {}), **params} if defaults else params
    return {name: allowed[name].check(name, value) for name, value in given.items()}


# ----------------------------------------------------------------- sizes
CLUSTER_GPUS = Bound(1, 4_194_304, "GPUs", low_open=False, integer=True)
RADIX = Bound(4, 512, "ports", low_open=False, integer=True)
COLLECTIVE_BYTES = Bound(1, 2 ** 40, "B", low_open=False, note="1 TiB")
NIC_GBPS = Bound(1.0, 3200.0, "Gb/s", low_open=False)
OVERSUBSCRIPTION = Bound(1.0, 100.0, low_open=False)
LOAD = Bound(0.0, 100.0)

# ----------------------------------------------------------------- jobs and traces
YEAR_S = 366 * DAY_S
CHECKPOINT_INTERVAL = Bound(60.0, YEAR_S, "s", low_open=False, note="366 days")
CHECKPOINT_GB = Bound(0.0, 1e6, "GB", low_open=False)
RESTART_PART = Bound(0.0, DAY_S, "s", low_open=False, note="a day")
HOST_DEMAND = Bound(0.0, 1e9, low_open=False, high_open=True)
TIME_S = Bound(0.0, 1e10, "s", low_open=False, high_open=True)
TRACE_DURATION = Bound(0.0, YEAR_S, "s", low_open=False, note="366 days")

_JOB_FIELDS = {"gpus": CLUSTER_GPUS, "submit_s": TIME_S, "burst_after_s": TIME_S,
               "checkpoint_interval_s": CHECKPOINT_INTERVAL, "checkpoint_gb": CHECKPOINT_GB,
               "cpu_per_gpu": HOST_DEMAND, "ram_gb_per_gpu": HOST_DEMAND,
               "nic_gbps_per_gpu": HOST_DEMAND}


def job_check(job) -> None:
    """Refuse a training job (submitted or injected) whose numbers are out of bounds.

    ``job`` is a :class:`~scheduler.workload.jobs.TrainingJob`, which already checks that its
    work is positive and finite and its efficiency in (0, 1].
    """
    for name, bound in _JOB_FIELDS.items():
        try:
            bound.check(name, getattr(job, name))
        except ValueError as exc:
            raise ValueError(f"job {job.name!r}: {exc}") from None
