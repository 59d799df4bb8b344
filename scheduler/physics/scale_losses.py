"""Losses that grow with the number of GPUs: stragglers and synchronisation jitter.

A synchronous training step ends when its slowest rank ends: the gradient reduce-scatter (and
every pipeline send before it) waits for the last rank to arrive (MegaScale, Jiang et al.,
NSDI 2024, sec. 6.3, "MFU decreasing": reduce-scatter launches staggered by fluctuating forward
times, "all ranks waited for the slowest rank").  Two mechanisms, each priced as a share of the
step's kernel time that the critical path adds:

* **Synchronisation jitter** (transient): each rank's time per micro-batch varies with a
  coefficient of variation ``jitter_cv`` (garbage collection, host-side Python, clock and power
  management), independently across ranks and micro-batches.  Over ``m`` micro-batches a rank's
  step varies by ``jitter_cv / sqrt(m)``; the step waits for the maximum of ``N`` such ranks, whose
  expectation exceeds the mean by ``E[max of N standard normals]`` standard deviations (about
  ``sqrt(2 ln N)``; :func:`expected_max_normal`).  This grows with ``N`` and shrinks with the
  micro-batches per replica, so a larger batch helps.
* **Slow hosts** (persistent): a share ``slow_share`` of hosts runs ``slow_by`` slower (MegaScale
  sec. 6.3, "Computational stragglers": specific hosts took about 10 % more time for the same
  forward computation).  A job of ``H`` hosts holds at least one with probability
  ``1 - (1 - slow_share)^H`` and then runs at its pace.

Both are booked inside the step's ``compute_s`` (the critical path's kernels: the slowest rank
is computing while the others wait), so they lower the engine's kernel efficiency, not its
compute share.  The profile is a property of the cluster and its software stack: MegaScale's
problematic-code elimination and straggler isolation cut it (``docs/physics.md``, "Scale
losses").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

_NORMAL = NormalDist()


def expected_max_normal(n: int) -> float:
    """``E[max of n independent standard normals]`` (Blom 1958: ``Phi^-1((n - 0.375)/(n + 0.25))``).

    0 for one rank; 4 % high at ``n = 2`` (exact 0.564), under 1 % from about 100 (exact 3.241
    at 1,000); grows like ``sqrt(2 ln n)``.

    >>> [round(expected_max_normal(n), 3) for n in (1, 2, 1000)]
    [0.0, 0.589, 3.227]
    """
    if n < 2:
        return 0.0
    return _NORMAL.inv_cdf((n - 0.375) / (n + 0.25))


@dataclass(frozen=True)
class Stragglers:
    """A cluster's straggler profile (module docstring).

    Parameters
    ----------
    jitter_cv : float
        Coefficient of variation of one rank's time for one micro-batch, >= 0.
    slow_share : float
        Share of hosts that run persistently slow, [0, 1].
    slow_by : float
        How much slower such a host is, >= 0 (0.10: 10 % more time).
    source : str
    """

    jitter_cv: float
    slow_share: float
    slow_by: float
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("jitter_cv", "slow_share", "slow_by"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if self.slow_share > 1:
            raise ValueError(f"slow_share must be in [0, 1], not {self.slow_share!r}")

    def jitter(self, gpus: int, microbatches: int) -> float:
        """Share of the kernel time the slowest of ``gpus`` ranks adds through transient jitter.

        >>> round(Stragglers(0.1, 0.0, 0.0).jitter(1024, 16), 4)
        0.0809
        """
        return self.jitter_cv * expected_max_normal(gpus) / math.sqrt(max(1, microbatches))

    def slow_hosts(self, hosts: int) -> float:
        """Expected share of the kernel time lost to the slowest host (persistent stragglers).

        >>> round(Stragglers(0.0, 0.001, 0.1).slow_hosts(1000), 4)
        0.0632
        """
        return self.slow_by * (1.0 - (1.0 - self.slow_share) ** max(0, hosts))

    def share(self, gpus: int, hosts: int, microbatches: int) -> float:
        """Both terms: the critical path's kernel time is ``(1 + share)`` times a rank's."""
        return self.jitter(gpus, microbatches) + self.slow_hosts(hosts)


NO_STRAGGLERS = Stragglers(0.0, 0.0, 0.0, "an ideal cluster: every rank runs at the mean pace")

SLOW_BY = 0.10
"""MegaScale sec. 6.3: specific hosts took "approximately 10 % more time" for the same forward."""

SLOW_HOST_SHARE = 8.8e-5
"""Share of slow hosts, DERIVED (not fitted to any MFU): MegaScale sec. 6.3 reports that removing
the slow hosts gained about 0.7 % MFU; read as 0.7 of 55.2 points on 1,536 hosts (12,288 GPUs),
the expected loss ``SLOW_BY * (1 - (1 - p)^1536)`` is 1.27 %, so ``p`` = 8.8e-5 per host."""

SLOW_HOSTS = Stragglers(0.0, SLOW_HOST_SHARE, SLOW_BY,
                        "slow hosts from MegaScale sec. 6.3; no transient jitter (a tuned stack)")
"""The default profile (``step_time.DEFAULT_STRAGGLERS``): grows with hosts, 1.9 % at 2,048."""

MEGASCALE_JITTER_CV = 0.166
"""Per-micro-batch jitter of MegaScale's cluster, CALIBRATED (the one point of that cluster):
MegaScale abstract / Table 2, 55.2 % MFU on 12,288 GPUs (175B, batch 6,144), with the last
pipeline stage computing the logit layer (0.129 when it was spread over the stages) and the
Ampere kernels refitted with that imbalance (``step_model.AMPERE_GEMM``).  The other seven
MegaScale rows, all eight Megatron-LM rows of Table 2 and Figure 9 are held out."""

MEGATRON_EXTRA_JITTER_CV = 0.05
"""What MegaScale's "misc optimizations" (data pipeline, problematic code segments such as
irregular garbage collection, sec. 6.3) removed, DERIVED from Table 3: +1.1 MFU points
(61.2 -> 62.3 %) on 256 GPUs at batch 256 (DP 4, 64 micro-batches), i.e. 1.8 % of the step;
``1.8 % * sqrt(64) / expected_max_normal(256)`` = 0.05."""

MEGASCALE_CLUSTER = Stragglers(MEGASCALE_JITTER_CV, SLOW_HOST_SHARE, SLOW_BY,
                               "MegaScale's cluster and stack (Jiang et al., NSDI 2024)")
MEGATRON_2023_STACK = Stragglers(MEGASCALE_JITTER_CV + MEGATRON_EXTRA_JITTER_CV,
                                 SLOW_HOST_SHARE, SLOW_BY,
                                 "the same cluster under Megatron-LM 285068c8 (no misc fixes)")
