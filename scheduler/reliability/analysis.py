"""Closed forms for a planner: job MTTF by size, optimal checkpoint intervals, expected ETTR.

No simulation: every figure here is a formula over a failure profile (a tuple of
:class:`~scheduler.reliability.failures.FailureMode`), so the event simulation can be checked
against it and a planner can ask without running one.

Sources (``../shared/reference/figures.md``):

* Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974:
  ``tau = sqrt(2 C M)`` for checkpoint cost ``C`` and mean time to failure ``M``.
* Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", Future
  Generation Computer Systems 22(3), 2006 (doi:10.1016/j.future.2004.11.016).  Under Poisson
  failures of mean ``M``, a job of solve time ``T_s`` that computes ``tau`` between dumps of
  ``delta`` and restarts in ``R`` takes the expected wall time
  ``T_w(tau) = M e^(R/M) (e^((tau + delta)/M) - 1) T_s / tau``; his perturbation solution for
  its minimum is ``sqrt(2 delta M) [1 + sqrt(delta/2M)/3 + (delta/2M)/9] - delta`` for
  ``delta < 2M``, else ``M``.  Setting the derivative of ``T_w`` to zero gives the exact
  minimum ``tau = M (1 + W0(-e^(-1 - delta/M)))`` (Lambert W, the function his paper names);
  :func:`daly_exact_interval` finds it numerically.

The job's failure rate counts the modes that stop a job on its own hardware (GPU, HBM, host,
NIC, NIC-to-leaf link, software, maintenance), as :func:`~scheduler.reliability.failures.
job_failure_rate` does: per GPU, per NIC or per node, times the job's units.  Modes of the
``job`` component happen once per running job, whatever its size (user, data and launcher
faults).  Shared parts (switches, PDUs, cooling, storage) slow or stop several jobs at once and
are left out of a job's own MTTF.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.reliability.checkpoint import RESTART_FIXED_S, daly_interval, young_interval
from scheduler.reliability.failures import MODES, FailureMode

__all__ = [
    "DEFAULT_SIZES", "GPUS_PER_NODE", "INTERVAL_RULES", "PER_GPU", "PER_JOB", "PER_NIC",
    "PER_NODE", "RULE_NAMES", "SHARED", "Ettr", "JobRates", "MttfRow", "Restart",
    "daly_exact_interval", "daly_interval", "daly_wall_time", "expected_ettr", "interval",
    "job_ettr", "job_mttf_h", "job_rates", "mttf_table", "young_interval",
]

GPUS_PER_NODE = 8
"""HGX/DGX nodes hold 8 GPUs (figures.md); override per call for NVL72 trays (4) and others."""

DEFAULT_SIZES = tuple(1024 * 2 ** k for k in range(8))
"""Job sizes of the MTTF table: 1,024 to 131,072 GPUs, doubling."""

PER_GPU = ("gpu",)
PER_NIC = ("nic", "endpoint_link")
PER_NODE = ("host", "software", "planned")
PER_JOB = ("job",)
SHARED = ("leaf", "spine", "fabric_link", "pdu", "cooling", "storage")
"""How a component's units scale with the job: per GPU, per NIC (one per GPU unless told),
per node, once per job, or shared with other jobs (not in the job's own MTTF)."""

INTERVAL_RULES = ("young", "daly", "daly-exact")
RULE_NAMES = {"young": "Young", "daly": "Daly", "daly-exact": "Daly-exact"}


@dataclass(frozen=True)
class JobRates:
    """A job's interruption rates and the mean detection delay of each kind.

    Attributes
    ----------
    unplanned_per_h, planned_per_h : float
        Interruptions per hour the job is up (a part that fails while the job already hangs
        on an earlier failure interrupts nothing); planned ones checkpoint first (no work
        lost, as the engine's planned stops do).
    unplanned_detect_s, planned_detect_s : float
        Rate-weighted mean time from a failure until the job is stopped, s.
    """

    unplanned_per_h: float
    planned_per_h: float
    unplanned_detect_s: float
    planned_detect_s: float

    @property
    def per_h(self) -> float:
        """All interruptions per hour."""
        return self.unplanned_per_h + self.planned_per_h

    @property
    def mttf_h(self) -> float:
        """Mean time between interruptions of any kind, h (inf for a profile with none)."""
        return 1.0 / self.per_h if self.per_h > 0 else math.inf

    @property
    def hang_s(self) -> float:
        """Mean time an interruption leaves the job hanging before it is stopped, s: wall
        time in which it is not up (restarting counts as up: a failure then interrupts
        again, as in the engine)."""
        if not self.per_h > 0:
            return 0.0
        return (self.unplanned_per_h * self.unplanned_detect_s
                + self.planned_per_h * self.planned_detect_s) / self.per_h

    def interruptions(self, days: float) -> float:
        """Interruptions expected in ``days`` of wall time: a renewal of up-time (mean
        ``mttf_h``) then a hang (``hang_s``).

        >>> r = JobRates(1.0, 0.0, 3600.0, 0.0)  # one an up-hour, each hangs an hour
        >>> r.interruptions(1.0)
        12.0
        """
        if not self.per_h > 0:
            return 0.0
        return days * 24.0 / (self.mttf_h + self.hang_s / 3600.0)


def _units(component: str, *, gpus: int, nodes: int, nics: int) -> int:
    if component in PER_GPU:
        return gpus
    if component in PER_NIC:
        return nics
    if component in PER_NODE:
        return nodes
    if component in PER_JOB:
        return 1
    if component in SHARED:
        return 0
    raise ValueError(f"failure mode component {component!r} has no rule for how it scales "
                     f"with a job; known: {', '.join(PER_GPU + PER_NIC + PER_NODE + PER_JOB)} "
                     f"and shared {', '.join(SHARED)}")


def _check_size(gpus: int, nodes: int) -> None:
    if gpus < 1 or nodes < 1 or nodes > gpus:
        raise ValueError(f"a job needs 1 <= nodes <= gpus, not {gpus} GPUs on {nodes} nodes")


def job_rates(modes: tuple[FailureMode, ...] = MODES, *, gpus: int, nodes: int,
              nics: int | None = None) -> JobRates:
    """Interruption rates of a job of ``gpus`` GPUs on ``nodes`` nodes (``nics`` NICs, default
    one per GPU).

    >>> from scheduler.reliability.failures import LLAMA3_UP_HOURS  # Table 5's exposure
    >>> r = job_rates(gpus=16384, nodes=2048)
    >>> round(r.per_h * LLAMA3_UP_HOURS), round(r.planned_per_h * LLAMA3_UP_HOURS)  # 466 - 2 leaves
    (464, 47)
    """
    _check_size(gpus, nodes)
    nics = gpus if nics is None else nics
    rate = {False: 0.0, True: 0.0}
    detect = {False: 0.0, True: 0.0}
    for m in modes:
        r = m.per_hour * _units(m.component, gpus=gpus, nodes=nodes, nics=nics)
        rate[m.planned] += r
        detect[m.planned] += r * m.detect_s
    return JobRates(rate[False], rate[True],
                    detect[False] / rate[False] if rate[False] else 0.0,
                    detect[True] / rate[True] if rate[True] else 0.0)


def job_mttf_h(modes: tuple[FailureMode, ...] = MODES, *, gpus: int, nodes: int,
               nics: int | None = None) -> float:
    """A job's mean time to interruption, h (planned stops included, as the Llama 3 table
    counts them).

    >>> round(job_mttf_h(gpus=16384, nodes=2048), 2)  # 1,268 up-hours / 464
    2.73
    """
    return job_rates(modes, gpus=gpus, nodes=nodes, nics=nics).mttf_h


@dataclass(frozen=True)
class MttfRow:
    """One job size of :func:`mttf_table`."""

    gpus: int
    nodes: int
    mttf_h: float
    unplanned_mttf_h: float
    interruptions_per_day: float


def mttf_table(modes: tuple[FailureMode, ...] = MODES, *, sizes=DEFAULT_SIZES,
               gpus_per_node: int = GPUS_PER_NODE) -> list[MttfRow]:
    """Job MTTF for each size in ``sizes`` (GPUs; nodes rounded up).

    >>> [round(r.mttf_h, 1) for r in mttf_table(sizes=(1024, 131072))]
    [43.7, 0.3]
    """
    rows = []
    for gpus in sizes:
        nodes = -(-int(gpus) // gpus_per_node)
        r = job_rates(modes, gpus=int(gpus), nodes=nodes)
        rows.append(MttfRow(int(gpus), nodes, r.mttf_h,
                            1.0 / r.unplanned_per_h if r.unplanned_per_h else math.inf,
                            24.0 * r.per_h))
    return rows


def daly_wall_time(work_s: float, *, interval_s: float, cost_s: float, restart_s: float,
                   mttf_s: float) -> float:
    """Daly's (2006) expected wall time of ``work_s`` of computation, s.

    ``T_w = M e^(R/M) (e^((tau + C)/M) - 1) T_s / tau``: segments of ``tau`` compute plus a
    dump of ``C`` are retried until one survives; every failure costs a restart ``R`` (itself
    retried if a failure hits it).  Without failures it tends to ``T_s (tau + C) / tau``.

    >>> round(daly_wall_time(3600.0, interval_s=600.0, cost_s=0.0, restart_s=0.0,
    ...                      mttf_s=1e12))
    3600
    """
    m = mttf_s
    return m * math.exp(restart_s / m) * math.expm1((interval_s + cost_s) / m) * work_s \
        / interval_s


def daly_exact_interval(cost_s: float, mttf_s: float) -> float:
    """The compute time between checkpoints that minimises Daly's wall time, s.

    Only ``f(tau) = (e^((tau + C)/M) - 1) / tau`` depends on ``tau`` (the restart ``R``
    multiplies the whole), so the optimum does not depend on ``R``.  Setting ``f'(tau) = 0``
    gives ``x e^x = -e^-(1 + C/M)`` with ``x = tau/M - 1``, so ``tau = M (1 + W0(-e^-(1+C/M)))``
    with ``W0`` the principal branch of Lambert's W (``x`` lies in (-1, 0)).  ``W0`` is found by
    Halley's iteration here rather than with ``scipy`` (whose import alone takes about 0.2-0.4 s
    of the command's one-second budget); the test checks it against ``scipy.optimize``'s
    numerical minimum of Daly's formula.

    >>> round(daly_exact_interval(100.0, 20000.0), 1)
    1933.9
    """
    if cost_s <= 0:
        return 0.0
    m = float(mttf_s)
    z = -math.exp(-1.0 - cost_s / m)  # in (-1/e, 0)
    # start from the branch-point series (accurate near -1/e) and polish with Halley's steps
    p = math.sqrt(2.0 * (math.e * z + 1.0))
    w = -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p ** 3
    for _ in range(50):
        ew = math.exp(w)
        f = w * ew - z
        step = f / (ew * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0))
        w -= step
        if abs(step) <= 1e-15 * max(1.0, abs(w)):
            break
    return m * (1.0 + w)


def interval(rule: str, *, cost_s: float, mttf_s: float) -> float:
    """The interval ``rule`` (``young``, ``daly`` or ``daly-exact``) gives, s."""
    if rule == "young":
        return young_interval(cost_s, mttf_s)
    if rule == "daly":
        return daly_interval(cost_s, mttf_s)
    if rule == "daly-exact":
        return daly_exact_interval(cost_s, mttf_s)
    raise ValueError(f"interval rule must be one of: {', '.join(INTERVAL_RULES)}, not {rule!r}")


def expected_ettr(*, interval_s: float, cost_s: float, restart_s: float, mttf_s: float,
                  persist_s: float = 0.0, planned_mttf_s: float = math.inf,
                  planned_restart_s: float = 0.0) -> float:
    """Expected effective training time ratio: useful compute over wall time.

    Unplanned failures (mean ``mttf_s``) follow Daly's model: ``T_s / T_w``.

    Asynchronous checkpointing (``persist_s > 0``): ``cost_s`` is only the stall (the
    snapshot to host memory); the copy is persisted in the background in ``persist_s`` and
    only then can a restart use it.  A failure in the ``cost_s + persist_s`` after a snapshot
    began falls back to the one before, one cycle earlier, so on average it loses
    ``cost_s + persist_s`` more than a synchronous write would: that lag is added to the
    restart.  A persist longer than the interval holds the next snapshot back
    (``persist_s - interval_s`` more stall).

    Planned stops (mean ``planned_mttf_s``) checkpoint first: each costs only
    ``planned_restart_s`` of wall time, a share ``planned_restart_s / planned_mttf_s`` of it.

    >>> round(expected_ettr(interval_s=600.0, cost_s=6.0, restart_s=0.0, mttf_s=1e12), 4)
    0.9901
    """
    stall = cost_s + max(0.0, persist_s - interval_s)
    lag = cost_s + persist_s if persist_s > 0 else 0.0
    wall = daly_wall_time(1.0, interval_s=interval_s, cost_s=stall, restart_s=restart_s + lag,
                          mttf_s=mttf_s)
    planned = planned_restart_s / planned_mttf_s if math.isfinite(planned_mttf_s) else 0.0
    return max(0.0, 1.0 - planned) / wall


@dataclass(frozen=True)
class Restart:
    """What one restart costs, s, split as the issue asks.

    Attributes
    ----------
    detect_s : float or None
        From the failure until the job is stopped; None: each mode's own ``detect_s``,
        rate-weighted.
    reschedule_s : float
        Relaunch, rendezvous and communicator set-up on healthy nodes (hot spares: no queue).
        Default the engine's :data:`~scheduler.reliability.checkpoint.RESTART_FIXED_S`
        (assumed 180 s).
    load_s : float
        Reading the last checkpoint back.
    warmup_s : float
        Steps until the job is at full speed again (data loader, compilation caches), counted
        as lost; 0 unless given (assumed: no published split).
    """

    detect_s: float | None = None
    reschedule_s: float = RESTART_FIXED_S
    load_s: float = 0.0
    warmup_s: float = 0.0

    def after_detection_s(self) -> float:
        return self.reschedule_s + self.load_s + self.warmup_s


@dataclass(frozen=True)
class Ettr:
    """:func:`job_ettr`'s answer for one interval."""

    rule: str
    interval_s: float
    ettr: float
    mttf_h: float
    unplanned_mttf_h: float
    restart_s: float
    planned_restart_s: float
    cost_s: float
    persist_s: float
    hang_s: float = 0.0

    def interruptions(self, days: float) -> float:
        """Interruptions expected in ``days`` of wall time (:meth:`JobRates.interruptions`)."""
        if not math.isfinite(self.mttf_h):
            return 0.0
        return days * 24.0 / (self.mttf_h + self.hang_s / 3600.0)


def job_ettr(modes: tuple[FailureMode, ...] = MODES, *, gpus: int, nodes: int,
             cost_s: float, interval_s: float | str = "daly", persist_s: float = 0.0,
             restart: Restart = Restart(), nics: int | None = None) -> Ettr:
    """Expected ETTR of a job of ``gpus`` GPUs on ``nodes`` nodes under a failure profile.

    Parameters
    ----------
    modes : tuple of FailureMode
        The failure profile.
    gpus, nodes : int
        The job's size.
    cost_s : float
        Training stalled per checkpoint, s (the whole write when synchronous, the snapshot
        when asynchronous).
    interval_s : float or {"young", "daly", "daly-exact"}
        Compute between checkpoints, s, or the rule that picks it from ``cost_s`` and the
        unplanned MTTF (asynchronous: never below ``persist_s``).
    persist_s : float
        Background persist time of an asynchronous checkpoint, s (0: synchronous).
    restart : Restart
        Detection, rescheduling, loading and warm-up.

    >>> e = job_ettr(gpus=16384, nodes=2048, cost_s=2.92, interval_s=600.0)
    >>> round(e.ettr, 3), round(e.restart_s)
    (0.93, 421)
    """
    if cost_s < 0 or persist_s < 0:
        raise ValueError("checkpoint cost and persist time must be >= 0 s")
    rates = job_rates(modes, gpus=gpus, nodes=nodes, nics=nics)
    m_u = 3600.0 / rates.unplanned_per_h if rates.unplanned_per_h else math.inf
    m_p = 3600.0 / rates.planned_per_h if rates.planned_per_h else math.inf
    after = restart.after_detection_s()
    r_u = (rates.unplanned_detect_s if restart.detect_s is None else restart.detect_s) + after
    r_p = (rates.planned_detect_s if restart.detect_s is None else restart.detect_s) + after
    if isinstance(interval_s, str):
        rule = interval_s
        tau = interval(rule, cost_s=cost_s, mttf_s=m_u) if math.isfinite(m_u) else math.inf
        # below the persist time the stall grows by persist - tau a cycle, faster than the
        # rework falls (for persist <= 2M), so the optimum of the asynchronous model is here
        tau = max(tau, persist_s)
    else:
        rule, tau = "given", float(interval_s)
        if not tau > 0:
            raise ValueError(f"checkpoint interval must be > 0 s, not {interval_s!r}")
    if math.isfinite(m_u) and math.isfinite(tau) and tau > 0:
        ettr = expected_ettr(interval_s=tau, cost_s=cost_s, restart_s=r_u, mttf_s=m_u,
                             persist_s=persist_s, planned_mttf_s=m_p, planned_restart_s=r_p)
    else:  # no unplanned failures: only the checkpoint stalls and planned stops
        stall = tau / (tau + cost_s) if math.isfinite(tau) and tau > 0 else 1.0
        ettr = stall * max(0.0, 1.0 - (r_p / m_p if math.isfinite(m_p) else 0.0))
    return Ettr(rule, tau, ettr, rates.mttf_h,
                1.0 / rates.unplanned_per_h if rates.unplanned_per_h else math.inf,
                r_u, r_p, cost_s, persist_s, rates.hang_s)

