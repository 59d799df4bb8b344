"""Checkpoint modes compared on a stated basis: at one interval for all, or each at its own.

A published comparison of checkpoint modes made one of two choices, and the answer depends
on it: Gemini's MT-NLG case (in-memory against remote storage) at equal intervals gives the
in-memory mode a few times less waste per failure; at each mode's own Daly interval, where
the in-memory checkpoint is taken every couple of minutes, close to a hundred times less.
:func:`compare_modes` makes either and :attr:`Comparison.line` says which
(``intervals: equal (42.0 min)`` or ``intervals: each mode's optimum (Daly)``).

Built on :mod:`~scheduler.reliability.analysis` (ETTR by Daly's model, intervals) and
:mod:`~scheduler.reliability.checkpoint` (each mode's stall and lag, the loss per failure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.reliability.analysis import (
    INTERVAL_RULES,
    RULE_NAMES,
    Ettr,
    Restart,
    job_ettr,
)
from scheduler.reliability.checkpoint import (
    CHECKPOINT_MODES,
    MODE_ALIASES,
    MODE_LABELS,
    CheckpointPrice,
    expected_lost_s,
)
from scheduler.reliability.failures import MODES, FailureMode

__all__ = ["INTERVAL_BASES", "Comparison", "ModeRow", "checkpoint_mode", "compare_modes"]

INTERVAL_BASES = ("equal", "optimum")
"""How checkpoint modes are compared: at one interval for all (``equal``), or each at its
own optimum under an interval rule (``optimum``)."""

@dataclass(frozen=True)
class ModeRow:
    """One checkpoint mode in a :class:`Comparison`: its interval, ETTR and waste per
    failure (Gemini's measure: compute lost plus the checkpoint's retrieval), s."""

    mode: str
    interval_s: float
    stall_s: float
    lag_s: float
    load_s: float
    ettr: float
    lost_per_failure_s: float

    @property
    def waste_per_failure_s(self) -> float:
        return self.lost_per_failure_s + self.load_s


@dataclass(frozen=True)
class Comparison:
    """Checkpoint modes compared on one stated basis (:data:`INTERVAL_BASES`).

    ``basis`` ``equal``: every mode at ``interval_s`` (``rule`` and ``reference``: the rule and
    mode it was taken from, or None when given in seconds); ``optimum``: each mode at its own
    interval under ``rule``, never shorter than its lag (the engine's ``auto``)."""

    basis: str
    rule: str | None
    interval_s: float | None
    reference: str | None
    rows: tuple[ModeRow, ...]

    @property
    def line(self) -> str:
        """What was compared, in words: ``intervals: equal (42.0 min)`` or ``intervals: each
        mode's optimum (Daly)``."""
        if self.basis == "optimum":
            return f"intervals: each mode's optimum ({RULE_NAMES[self.rule]})"
        where = "" if self.rule is None else \
            f", {RULE_NAMES[self.rule]} for {MODE_LABELS[self.reference]}"
        return f"intervals: equal ({self.interval_s / 60:,.1f} min{where})"

    def waste_ratio(self, mode: str) -> float:
        """Waste per failure of the first mode over ``mode``'s (how many times less ``mode``
        wastes)."""
        first = self.rows[0].waste_per_failure_s
        row = next(r for r in self.rows if r.mode == mode)
        return first / row.waste_per_failure_s if row.waste_per_failure_s > 0 else math.inf


def checkpoint_mode(name: str) -> str:
    """The engine's name of checkpoint mode ``name`` (``sync`` is ``disk``, ``in-memory``
    ``memory``); ValueError for an unknown one."""
    mode = MODE_ALIASES.get(name, name)
    if mode not in CHECKPOINT_MODES:
        raise ValueError(f"checkpoint mode must be one of {', '.join(CHECKPOINT_MODES)} (or "
                         f"{', '.join(MODE_ALIASES)}), not {name!r}")
    return mode


def compare_modes(modes: tuple[FailureMode, ...] = MODES, *, gpus: int, nodes: int,
                  prices: dict[str, CheckpointPrice], loads: dict[str, float],
                  basis: str = "optimum", interval_s: float | str = "daly",
                  restart: Restart | None = None, nics: int | None = None) -> Comparison:
    """Checkpoint modes of one job compared at equal intervals or at each one's optimum.

    Parameters
    ----------
    prices : dict
        Per mode (``disk``, ``async``, ``memory`` or an alias), in the order to show, its
        stall and usable-after lag (:func:`~scheduler.reliability.checkpoint.mode_price`).
    loads : dict
        Per mode, the time to read its checkpoint back on a restart, s.
    basis : {"equal", "optimum"}
        ``equal``: every mode at ``interval_s`` (seconds, or a rule applied to the first
        mode); ``optimum``: each at the interval the rule ``interval_s`` gives it.
    restart : Restart, optional
        Detection, rescheduling and warm-up (its ``load_s`` is replaced by each mode's load).

    Each mode's ETTR is :func:`job_ettr` (the stall as its cost, the lag as its persist
    time); its loss per failure :func:`~scheduler.reliability.checkpoint.expected_lost_s` at
    the unplanned MTTF.

    >>> from scheduler.reliability.checkpoint import mode_price
    >>> day = (FailureMode("any", "job", 1 / 24.0, 0.0, 1.0),)  # one failure a day
    >>> p = {m: mode_price(m, write_s=2520.0, snapshot_s=0.1, replicate_s=0.5)
    ...      for m in ("sync", "async", "memory")}
    >>> loads = {"sync": 2520.0, "async": 2520.0, "memory": 0.1}
    >>> c = compare_modes(day, gpus=2048, nodes=256, prices=p, loads=loads, basis="equal",
    ...                   interval_s=2520.0)
    >>> c.line, [round(r.waste_per_failure_s / 60, 1) for r in c.rows]
    ('intervals: equal (42.0 min)', [73.3, 103.7, 20.9])
    >>> c = compare_modes(day, gpus=2048, nodes=256, prices=p, loads=loads)
    >>> c.line, [round(r.interval_s) for r in c.rows], round(c.waste_ratio("memory"))
    ("intervals: each mode's optimum (Daly)", [19221, 2520, 131], 193)
    """
    restart = Restart() if restart is None else restart
    if basis not in INTERVAL_BASES:
        raise ValueError(f"intervals must be one of {', '.join(INTERVAL_BASES)}, not "
                         f"{basis!r}")
    if not prices:
        raise ValueError("compare at least one checkpoint mode")
    order = [checkpoint_mode(m) for m in prices]
    if len(set(order)) != len(order):
        raise ValueError(f"a checkpoint mode is named twice: {', '.join(prices)}")
    price = {checkpoint_mode(m): p for m, p in prices.items()}
    load = {checkpoint_mode(m): float(v) for m, v in loads.items()}
    missing = [m for m in order if m not in load]
    if missing:
        raise ValueError(f"no restore time for {', '.join(missing)}")
    rule = interval_s if isinstance(interval_s, str) else None
    if rule is not None and rule not in INTERVAL_RULES:
        raise ValueError(f"interval rule must be one of: {', '.join(INTERVAL_RULES)}, not "
                         f"{rule!r}")
    if basis == "optimum" and rule is None:
        raise ValueError("each mode's optimum comes from a rule (young, daly, daly-exact), "
                         "not a number of seconds")

    def one(mode: str, tau) -> Ettr:
        p = price[mode]
        if isinstance(tau, str) and p.stall_s <= 0:
            raise ValueError(f"a rule needs a checkpoint stall > 0 s; {mode} has none")
        return job_ettr(modes, gpus=gpus, nodes=nodes, cost_s=p.stall_s, interval_s=tau,
                        persist_s=p.lag_s, nics=nics,
                        restart=Restart(restart.detect_s, restart.reschedule_s,
                                        load[mode], restart.warmup_s))

    common, reference = None, None
    if basis == "equal":
        reference = order[0] if rule is not None else None
        common = one(order[0], interval_s).interval_s if rule is not None else float(
            interval_s)
    rows = []
    for mode in order:
        e = one(mode, common if basis == "equal" else rule)
        p = price[mode]
        m_u = e.unplanned_mttf_h * 3600.0
        lost = expected_lost_s(interval_s=e.interval_s, stall_s=p.stall_s, lag_s=p.lag_s,
                               mttf_s=m_u) if math.isfinite(e.interval_s) else 0.0
        rows.append(ModeRow(mode, e.interval_s, p.stall_s, p.lag_s, load[mode], e.ettr, lost))
    return Comparison(basis, rule, common, reference, tuple(rows))
