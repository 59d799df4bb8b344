"""A seeded synthetic workload: heavy-tailed sizes and durations, diurnal arrivals.

Shapes follow what published GPU-cluster studies report: most jobs are small and short, a few
large jobs hold most GPU-hours (Jeon et al., ATC 2019, Philly: most jobs use one GPU; Hu et
al., SC 2021, SenseTime Helios: a long tail of large jobs), durations are close to log-normal
over several orders of magnitude, and submissions follow the working day.  Each job's work is
set in FLOPs from its duration on the reference accelerator, so faster parts finish sooner.

Each job also gets a transformer shape for the step-time model (:func:`llm_shape`), by the
proportions of the Llama 3 family ("The Llama 3 Herd of Models", Meta 2024, Table 3: 8B, 70B
and 405B), since the job's size is all the generator knows of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from scheduler.hardware.catalog import get
from scheduler.workload.jobs import (
    DEFAULT_EFFICIENCY,
    Parallelism,
    Requirement,
    Tenant,
    TrainingJob,
    Transformer,
)

CHECKPOINT_BYTES_PER_PARAM = 14.0
"""Saved checkpoint with mixed-precision Adam: weights, fp32 master, two moments (figures.md)."""


HEAD_DIM = 128
"""Width per attention head: 128 in all three Llama 3 models (Table 3: 4,096 / 32,
8,192 / 64, 16,384 / 128)."""

WIDTH_PER_LAYER = 128
"""Width / depth ``h / L`` of a generated model: Llama 3 Table 3 gives 128 (8B: 4,096 / 32),
102 (70B: 8,192 / 80) and 130 (405B: 16,384 / 126); 128 taken."""

KV_HEADS = 8
"""Grouped-query attention: 8 key/value heads in all three Llama 3 models (Table 3)."""

FFN_PER_WIDTH = 3.5
"""SwiGLU MLP width / model width: 3.5 for Llama 3 8B and 70B (14,336 / 4,096, 28,672 / 8,192),
3.25 for 405B (53,248 / 16,384), Table 3; 3.5 taken."""

PRETRAINING_SEQ_LEN = 8192
"""Sequence length of Llama 3's main pre-training stage (sec. 3.4.1: 8K tokens)."""


def llm_shape(params_b: float) -> Transformer:
    """A decoder shape of about ``params_b`` billion parameters, in Llama 3's proportions.

    ``12 L h^2 = N`` with ``h = WIDTH_PER_LAYER * L``, the width rounded to whole heads of
    :data:`HEAD_DIM`; :data:`KV_HEADS` key/value heads (fewer if the model has fewer heads),
    an MLP :data:`FFN_PER_WIDTH` times as wide, :data:`PRETRAINING_SEQ_LEN`-token sequences.
    The logit layer is left out (``vocab`` 0): at a few billion parameters Llama 3's 128K
    vocabulary would be a sizeable share of the model, and the rule is only a guess at shape
    from size.  It gives Llama 3 405B's depth within 1 and its width within 1 %:

    >>> s = llm_shape(405.0)
    >>> s.layers, s.hidden, s.heads, s.kv_heads, s.ffn
    (127, 16256, 127, 8, 56896)
    >>> llm_shape(0.1).layers, llm_shape(0.1).hidden
    (8, 1024)
    """
    layers = (params_b * 1e9 / (12.0 * WIDTH_PER_LAYER ** 2)) ** (1.0 / 3.0)
    heads = max(1, round(WIDTH_PER_LAYER * layers / HEAD_DIM))
    hidden = heads * HEAD_DIM
    return Transformer(layers=max(1, round(layers)), hidden=hidden,
                       seq_len=PRETRAINING_SEQ_LEN, heads=heads, kv_heads=min(KV_HEADS, heads),
                       ffn=round(FFN_PER_WIDTH * hidden))


@dataclass(frozen=True)
class JobClass:
    """A family of jobs.

    Parameters
    ----------
    per_day : float
        Mean submissions per day.
    sizes : tuple of int
        Gang sizes, GPUs; drawn with probability proportional to ``size ** -size_alpha``.
    median_hours, sigma : float
        Log-normal duration on the reference accelerator: median (h) and shape.
    min_hours, max_hours : float
        Duration bounds, h.
    tenants : tuple of str
        Drawn uniformly.
    """

    name: str
    per_day: float
    sizes: tuple[int, ...]
    median_hours: float
    sigma: float = 1.0
    size_alpha: float = 0.8
    min_hours: float = 0.1
    max_hours: float = 96.0
    tenants: tuple[str, ...] = ("research",)
    priority: int = 0
    requirement: Requirement = Requirement()
    burstable_fraction: float = 0.0
    affinity_from_gpus: int = 8
    checkpoint_interval_s: float = 3600.0


@dataclass(frozen=True)
class Mix:
    """A job mix: classes, tenants and the daily arrival pattern."""

    classes: tuple[JobClass, ...]
    tenants: tuple[Tenant, ...] = ()
    diurnal_amplitude: float = 0.5
    peak_hour: float = 15.0
    reference_model: str = "H100-SXM"

    def scaled(self, factor: float, max_gpus: int) -> Mix:
        """Rates times ``factor``; sizes above ``max_gpus`` dropped (kept at least one)."""
        classes = []
        for c in self.classes:
            sizes = tuple(s for s in c.sizes if s <= max_gpus) or (min(c.sizes),)
            classes.append(replace(c, per_day=c.per_day * factor, sizes=sizes))
        tenants = tuple(replace(t, quota_gpus=int(t.quota_gpus * factor)) for t in self.tenants)
        return replace(self, classes=tuple(classes), tenants=tenants)


def arrival_times(rng: np.random.Generator, per_day: float, days: float, amplitude: float,
                  peak_hour: float) -> np.ndarray:
    """Poisson arrivals whose rate follows the day, by thinning, sorted (s).

    >>> t = arrival_times(np.random.default_rng(1), 100.0, 2.0, 0.5, 15.0)
    >>> 150 < t.size < 250 and bool(np.all(np.diff(t) >= 0))
    True
    """
    peak_rate = per_day * (1.0 + amplitude)
    n = rng.poisson(peak_rate * days)
    t = np.sort(rng.uniform(0.0, days * 86400.0, size=n))
    hour = (t / 3600.0) % 24.0
    rate = 1.0 + amplitude * np.cos(2.0 * np.pi * (hour - peak_hour) / 24.0)
    keep = rng.uniform(0.0, 1.0 + amplitude, size=n) < rate
    return t[keep]


def _parallelism(gpus: int) -> Parallelism:
    tp = min(8, gpus)
    pp = 1
    while gpus // (tp * pp) > 64 and pp < 16:
        pp *= 2
    return Parallelism(tp=tp, pp=pp, dp=gpus // (tp * pp))


def generate(mix: Mix, *, days: float, rng: np.random.Generator, first_id: int = 0,
             ) -> tuple[TrainingJob, ...]:
    """Draw every class's jobs for ``days`` days; ids from ``first_id`` in submit order."""
    ref = get(mix.reference_model).bf16_tflops * 1e12
    drawn = []
    for c in mix.classes:
        times = arrival_times(rng, c.per_day, days, mix.diurnal_amplitude, mix.peak_hour)
        n = times.size
        sizes = np.asarray(c.sizes, dtype=float)
        p = sizes ** -c.size_alpha
        gpus = rng.choice(np.asarray(c.sizes), size=n, p=p / p.sum())
        hours = np.exp(rng.normal(math.log(c.median_hours), c.sigma, size=n))
        hours = np.clip(hours, c.min_hours, c.max_hours)
        tenant = rng.integers(0, len(c.tenants), size=n)
        burst = rng.uniform(size=n) < c.burstable_fraction
        for k in range(n):
            drawn.append((float(times[k]), c, int(gpus[k]), float(hours[k]),
                          c.tenants[tenant[k]], bool(burst[k])))
    drawn.sort(key=lambda d: (d[0], d[1].name))
    jobs = []
    for i, (t, c, g, h, tenant, burst) in enumerate(drawn):
        work = h * 3600.0 * g * ref * DEFAULT_EFFICIENCY
        # a model size that keeps the optimizer state within the gang's HBM: ~1 B per GPU
        params_b = max(0.1, 1.0 * g ** 0.9)
        par = _parallelism(g)
        jobs.append(TrainingJob(
            job_id=first_id + i, name=f"{c.name}-{first_id + i}", tenant=tenant, submit_s=t,
            gpus=g, work_flops=work, requirement=c.requirement,
            affinity="any" if g < c.affinity_from_gpus else "pod",
            parallelism=par, params_b=round(params_b, 2), tokens=work / (6 * params_b * 1e9),
            transformer=llm_shape(round(params_b, 2)),
            priority=c.priority, checkpoint_gb=params_b * CHECKPOINT_BYTES_PER_PARAM,
            checkpoint_interval_s=c.checkpoint_interval_s, burstable=burst))
    return tuple(jobs)
