"""The GPU-second ledger: every GPU-second of the period is booked to exactly one category.

Training time is booked when a job's run segment closes (finish, preemption, lending, end of
period); free, spare, serving and down GPUs are integrated between events.  MFU, its loss
waterfall, goodput and ETTR derive from these books alone.

MFU here is model FLOPs achieved over the peak BF16 FLOPs of the GPU-seconds that could train:
GPU-seconds serving inference are left out of the basis (they are reported on their own), and
the loss of the kernels themselves (peak minus achieved while computing) is its own line,
``kernel_efficiency``, so ``achieved + sum(loss_pp)`` is 100.
"""

from __future__ import annotations

from collections import deque

import numpy as np

CATEGORIES = (
    "productive",             # computing, and the progress is kept
    "idle",                   # free, and nothing queued could use it
    "fragmented",             # free, but the queue's gangs do not fit the shape that is free
    "preempted",              # work thrown away by a preemption (since the last checkpoint)
    "lost_work",              # work thrown away by a failure (failure engine)
    "recovery",               # restart: detection, rescheduling, restore from checkpoint
    "checkpoint_stall",       # training paused while a checkpoint is written
    "exposed_communication",  # waiting on collectives that compute does not hide (fabric)
    "data_stall",             # waiting on the input pipeline (storage)
    "throttled",              # slowed by a power or cooling cap
    "down_for_repair",        # failed, drained or in repair
    "hot_spare",              # held free as a hot spare
    "inference",              # serving inference replicas
)
INDEX = {c: i for i, c in enumerate(CATEGORIES)}
NOT_TRAINING = ("inference",)
CAPACITY = ("fragmented", "idle", "hot_spare", "down_for_repair", "inference")
"""Categories integrated over time from GPU counts (training time is booked per segment)."""


_CAPACITY_ROWS = np.array([INDEX[c] for c in CAPACITY])


class Ledger:
    """GPU-seconds per category and accelerator model, plus model FLOPs achieved.

    Examples
    --------
    >>> led = Ledger(peak_flops=np.array([1e15]))
    >>> led.book("productive", 0, 3600.0, achieved_flops=0.4e15 * 3600)
    >>> led.book("idle", 0, 3600.0)
    >>> led.gpu_hours()["productive"], round(led.mfu()["achieved"], 3)
    (1.0, 0.2)
    """

    def __init__(self, peak_flops: np.ndarray):
        self.peak = np.asarray(peak_flops, dtype=float)
        self.gpu_s = np.zeros((len(CATEGORIES), self.peak.size))
        self.achieved_flops = 0.0
        self.checkpoint_gb = 0.0

    def book(self, category: str, model: int, gpu_seconds: float,
             achieved_flops: float = 0.0) -> None:
        if gpu_seconds < -1e-6:
            raise ValueError(f"negative booking of {gpu_seconds} GPU-s to {category}")
        self.gpu_s[INDEX[category], model] += max(gpu_seconds, 0.0)
        self.achieved_flops += achieved_flops

    def book_checkpoint_gb(self, gb: float) -> None:
        """Count ``gb`` GB of checkpoints written."""
        self.checkpoint_gb += gb

    def book_rates(self, rates: np.ndarray, seconds: float) -> None:
        """Book ``rates[k, m]`` GPUs of model ``m`` in category :data:`CAPACITY` ``[k]`` for
        ``seconds``."""
        self.gpu_s[_CAPACITY_ROWS] += rates * seconds

    def copy(self) -> Ledger:
        out = Ledger(self.peak)
        out.gpu_s = self.gpu_s.copy()
        out.achieved_flops = self.achieved_flops
        out.checkpoint_gb = self.checkpoint_gb
        return out

    def carry(self, other: Ledger, model_map: np.ndarray) -> None:
        """Add ``other``'s books (another engine's, before a re-plan); ``model_map[m]`` is the
        model here of its model ``m`` (-1: gone, its GPU-seconds are not carried)."""
        kept = model_map >= 0
        np.add.at(self.gpu_s, (slice(None), model_map[kept]), other.gpu_s[:, kept])
        self.achieved_flops += other.achieved_flops
        self.checkpoint_gb += other.checkpoint_gb

    def total_gpu_s(self) -> float:
        return float(self.gpu_s.sum())

    def gpu_hours(self) -> dict[str, float]:
        per = self.gpu_s.sum(axis=1) / 3600.0
        return {c: round(float(per[i]), 6) for i, c in enumerate(CATEGORIES)}

    def mfu(self) -> dict:
        """``achieved`` fraction and ``loss_pp`` per category (percentage points)."""
        peak_s = self.gpu_s * self.peak[None, :]
        basis = peak_s.sum() - sum(peak_s[INDEX[c]].sum() for c in NOT_TRAINING)
        if basis <= 0:
            return {"achieved": 0.0, "loss_pp": {}, "basis": "no training GPU-time"}
        loss = {c: 100.0 * float(peak_s[INDEX[c]].sum()) / basis
                for c in CATEGORIES if c not in NOT_TRAINING and c != "productive"}
        productive = float(peak_s[INDEX["productive"]].sum())
        loss["kernel_efficiency"] = 100.0 * (productive - self.achieved_flops) / basis
        return {
            "achieved": round(float(self.achieved_flops / basis), 6),
            "loss_pp": {k: round(v, 4) for k, v in loss.items()},
            "basis": "peak BF16 FLOPs of all GPU-seconds not serving inference",
        }

    def goodput(self) -> float:
        """Share of training-eligible GPU-time that made kept progress."""
        train = self.gpu_s.sum() - sum(self.gpu_s[INDEX[c]].sum() for c in NOT_TRAINING)
        return float(self.gpu_s[INDEX["productive"]].sum() / train) if train > 0 else 0.0

    def minus(self, earlier: Ledger) -> Ledger:
        """The books kept between ``earlier`` (a :meth:`copy` of this ledger taken before) and
        now: GPU-seconds and FLOPs of that span alone, so :meth:`mfu` reads the span's MFU.

        Not clipped at zero: a horizon ledger books open segments as if they ended now, and
        work a later failure throws away moves from ``productive`` to ``lost_work`` in the
        span where that is found, as the cumulative books have it.

        Examples
        --------
        >>> led = Ledger(peak_flops=np.array([1e15]))
        >>> led.book("idle", 0, 3600.0)
        >>> before = led.copy()
        >>> led.book("productive", 0, 3600.0, achieved_flops=0.4e15 * 3600)
        >>> round(led.mfu()["achieved"], 3), round(led.minus(before).mfu()["achieved"], 3)
        (0.2, 0.4)
        """
        if earlier.gpu_s.shape != self.gpu_s.shape:
            raise ValueError(f"ledgers of {earlier.gpu_s.shape[1]} and {self.gpu_s.shape[1]} "
                             "accelerator models cannot be subtracted")
        out = Ledger(self.peak)
        out.gpu_s = self.gpu_s - earlier.gpu_s
        out.achieved_flops = self.achieved_flops - earlier.achieved_flops
        out.checkpoint_gb = self.checkpoint_gb - earlier.checkpoint_gb
        return out


MFU_WINDOW_S = 3600.0
"""The windowed MFU's window: the last simulated hour."""
MFU_WINDOW_COPIES = 60
"""Ledger copies a window keeps: one per ``window / 60`` (a minute of an hour's window)."""


class LedgerWindow:
    """MFU over a sliding window of simulated time, from snapshots of a cumulative ledger.

    The ledger only grows, so the books of the last ``window_s`` seconds are the ledger now
    minus a copy taken ``window_s`` ago.  :meth:`observe` keeps a copy at most every
    ``resolution_s`` (a ring of about ``window_s / resolution_s`` copies, each categories x
    models floats) and drops the ones the window has passed; reading costs one subtraction,
    whatever the cluster's size.

    Parameters
    ----------
    window_s : float
        Length of the window, simulated seconds (> 0).
    resolution_s : float
        Least simulated seconds between two kept copies (> 0, at most ``window_s``); the window
        read spans ``window_s`` to ``window_s + resolution_s`` plus one observation interval,
        and :meth:`mfu` says how long exactly.

    Examples
    --------
    >>> led = Ledger(peak_flops=np.array([1e15]))
    >>> win = LedgerWindow(3600.0, 600.0)
    >>> win.observe(0.0, led)
    >>> led.book("idle", 0, 7200.0)
    >>> win.observe(7200.0, led)
    >>> led.book("productive", 0, 3600.0, achieved_flops=0.5e15 * 3600)
    >>> win.observe(10800.0, led)
    >>> round(led.mfu()["achieved"], 3), win.mfu(10800.0, led)
    (0.167, {'achieved': 0.5, 'span_s': 3600.0})
    """

    def __init__(self, window_s: float, resolution_s: float):
        if not (0 < resolution_s <= window_s < float("inf")):
            raise ValueError(f"need 0 < resolution_s <= window_s < inf, not resolution_s="
                             f"{resolution_s!r}, window_s={window_s!r}")
        self.window_s = float(window_s)
        self.resolution_s = float(resolution_s)
        self._kept: deque[tuple[float, Ledger]] = deque()

    def __len__(self) -> int:
        """Ledger copies kept now."""
        return len(self._kept)

    def observe(self, t: float, ledger: Ledger) -> None:
        """Note ``ledger`` (cumulative, with open segments booked up to ``t``) at time ``t`` s."""
        kept = self._kept
        if kept and t < kept[-1][0]:
            raise ValueError(f"time went back: observed at {kept[-1][0]} s, now {t} s")
        if not kept or t - kept[-1][0] >= self.resolution_s:
            kept.append((float(t), ledger.copy()))
        # the base of the window is the newest copy at or before t - window_s: older ones go
        while len(kept) >= 2 and kept[1][0] <= t - self.window_s:
            kept.popleft()

    def mfu(self, t: float, ledger: Ledger) -> dict | None:
        """MFU of the books between the window's base copy and ``ledger`` at ``t`` s:
        ``achieved`` (fraction, as :meth:`Ledger.mfu`; None when the window holds no training
        GPU-time) and ``span_s``, the seconds it covers (less than ``window_s`` while the
        window fills).  None before any observation."""
        if not self._kept:
            return None
        t0, base = self._kept[0]
        mfu = ledger.minus(base).mfu()
        # no training GPU-time in the window (it has just started): no figure, not a zero
        return {"achieved": mfu["achieved"] if mfu["loss_pp"] else None,
                "span_s": round(t - t0, 3)}
