"""Slurm's ``priority/multifactor``: a pending job's priority as slurm.conf(5) and the
multifactor priority page state it, factor by factor.

``priority = w_age * age + w_fairshare * fairshare + w_jobsize * size + w_partition * part
+ w_qos * qos``, each factor in [0, 1], truncated to an integer and at least 1:

* **age**: time since the job became eligible over ``PriorityMaxAge``, at most 1;
* **job size**: nodes and CPUs, not GPUs: ``(nodes / cluster nodes + CPUs / cluster CPUs) / 2``
  (``PriorityFavorSmall=YES``: ``((N - nodes) / N + (C - CPUs) / C) / 2``);
* **partition**: the partition's ``PriorityJobFactor`` over the largest of any partition;
* **QOS**: the QOS's priority over the largest of any QOS;
* **fair-share**: from the user's usage, decayed with ``PriorityDecayHalfLife``: classic
  ``2^(-U/S)`` (``PriorityFlags=NO_FAIR_TREE``) or Fair Tree's rank (the default): users
  sorted by ``S / U``, the best ranked 1.0, the worst ``1 / n``.

Usage is counted in GPU-seconds (as ``TRESBillingWeights=GRES/gpu=1``); users share equally.
Slurm recomputes pending jobs' priorities every ``PriorityCalcPeriod`` and sets a new job's
at submission, when its age is 0.

>>> f = Factors(nodes=4, cpus=256, part_factor_max=1, qos_priority_max=0)
>>> round(f.job_size(nodes=2, cpus=2, favor_small=False), 4)
0.2539
>>> f.age(waited_s=30.0, max_age_s=60.0)
0.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Factors:
    """The cluster-wide denominators of the factors."""

    nodes: int
    cpus: int
    part_factor_max: int
    qos_priority_max: int

    @staticmethod
    def age(*, waited_s: float, max_age_s: float) -> float:
        if waited_s <= 0:
            return 0.0
        return 1.0 if waited_s >= max_age_s else waited_s / max_age_s

    def job_size(self, *, nodes: int, cpus: int, favor_small: bool) -> float:
        if favor_small:
            value = ((self.nodes - nodes) / self.nodes + (self.cpus - cpus) / self.cpus) / 2
        else:
            value = (nodes / self.nodes + cpus / self.cpus) / 2
        return min(1.0, max(0.0, value))

    def partition(self, job_factor: int) -> float:
        return job_factor / self.part_factor_max if self.part_factor_max else 0.0

    def qos(self, priority: int) -> float:
        return priority / self.qos_priority_max if self.qos_priority_max else 0.0


def combine(weights: dict, factors: dict) -> int:
    """Slurm's sum of weighted factors, truncated, at least 1 (0 is for held jobs).

    >>> combine({"age": 1000, "jobsize": 500}, {"age": 0.5, "jobsize": 0.25})
    625
    """
    total = 0.0
    for k, v in factors.items():  # added one by one, in this order (as numpy adds columns)
        total += weights.get(k, 0) * v
    return max(1, int(total))


class Usage:
    """Each user's decayed usage, GPU-seconds; decayed with the half-life as time passes.

    >>> u = Usage(half_life_s=100.0)
    >>> u.add("a", 1000.0, now=0.0)
    >>> round(u.of("a", now=100.0), 6)
    500.0
    """

    def __init__(self, half_life_s: float):
        self.half_life_s = half_life_s
        self.raw: dict[str, float] = {}
        self.at = 0.0

    def _decay(self, now: float) -> None:
        if now > self.at and math.isfinite(self.half_life_s) and self.half_life_s > 0:
            f = 0.5 ** ((now - self.at) / self.half_life_s)
            self.raw = {k: v * f for k, v in self.raw.items()}
        self.at = max(self.at, now)

    def add(self, user: str, gpu_s: float, *, now: float) -> None:
        self._decay(now)
        self.raw[user] = self.raw.get(user, 0.0) + gpu_s

    def of(self, user: str, *, now: float) -> float:
        self._decay(now)
        return self.raw.get(user, 0.0)

    def fair_share(self, users: list[str], *, now: float, fair_tree: bool) -> dict[str, float]:
        """The fair-share factor of each of ``users`` (equal shares among them).

        >>> u = Usage(half_life_s=math.inf)
        >>> u.add("a", 300.0, now=0.0); u.add("b", 100.0, now=0.0)
        >>> sorted(u.fair_share(["a", "b", "c"], now=0.0, fair_tree=True).items())
        [('a', 0.3333333333333333), ('b', 0.6666666666666666), ('c', 1.0)]
        """
        self._decay(now)
        users = sorted(set(users) | set(self.raw))
        if not users:
            return {}
        share = 1.0 / len(users)
        total = sum(self.raw.values())
        norm = {u: (self.raw.get(u, 0.0) / total if total > 0 else 0.0) for u in users}
        if not fair_tree:
            return {u: 2.0 ** (-norm[u] / share) for u in users}
        level = {u: (math.inf if norm[u] == 0 else share / norm[u]) for u in users}
        ranked = sorted(users, key=lambda u: -level[u])
        n, out, i = len(ranked), {}, 0
        while i < n:  # ties share the better rank
            j = i
            while j < n and level[ranked[j]] == level[ranked[i]]:
                j += 1
            for u in ranked[i:j]:
                out[u] = (n - i) / n
            i = j
        return out
