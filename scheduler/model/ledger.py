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
