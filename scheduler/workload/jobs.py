"""What runs on the cluster: training jobs (gangs), inference services and tenants.

Work is counted in model FLOPs (``6 * parameters * tokens`` for a dense transformer, Kaplan et
al. 2020), so the same job runs faster on a faster accelerator.  Sizes are GPUs; times are
seconds of simulated time from the start of the scenario; memory in GB; bandwidth in Gb/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.hardware.catalog import Accelerator

AFFINITIES = ("nvlink", "leaf", "pod", "any")
"""Topology affinity, tightest first: one NVLink domain, leaf group, pod/island; anywhere."""

DEFAULT_EFFICIENCY = 0.54
"""Kernel efficiency (achieved / peak BF16 FLOPs while computing) of a large dense model.

Calibrated so that the twin reproduces Llama 3's published end-to-end figure: 400 TFLOPS per
H100 (about 40 % MFU, "The Llama 3 Herd of Models", sec. 3.3) for 405B at TP 8 x PP 16 x
DP 128.  The step-time model (:mod:`scheduler.physics.step_time`) prices that job's pipeline
bubble and exposed communication at an efficiency factor of 0.741 (docs/collectives.md), so
the kernels must run at 0.40 / 0.741 = 0.54 of peak; MegaScale (NSDI 2024) reports 55.2 %
MFU end to end on 12,288 GPUs, so 0.54 for the kernels alone is not optimistic.  With the
physics off (``simulate --physics off``) jobs compute at this efficiency with no bubble or
communication, which overstates MFU.  Jobs carry their own figure.
"""


@dataclass(frozen=True)
class Requirement:
    """Which accelerators a job accepts: by name, or by what it needs.

    >>> from scheduler.hardware.catalog import get
    >>> Requirement(min_hbm_gb=80).accepts(get("H100-SXM"))
    True
    >>> Requirement(models=("MI300X",)).accepts(get("H100-SXM"))
    False
    """

    models: tuple[str, ...] | None = None
    min_hbm_gb: float = 0.0
    min_bf16_tflops: float = 0.0
    vendors: tuple[str, ...] | None = None

    def accepts(self, model: Accelerator) -> bool:
        if self.models is not None and model.name not in self.models:
            return False
        return model.satisfies(min_hbm_gb=self.min_hbm_gb, min_bf16_tflops=self.min_bf16_tflops,
                               vendors=self.vendors)

    def describe(self) -> str:
        parts = []
        if self.models is not None:
            parts.append("|".join(self.models))
        if self.vendors is not None:
            parts.append("vendor " + "|".join(self.vendors))
        if self.min_hbm_gb:
            parts.append(f">= {self.min_hbm_gb:g} GB HBM")
        if self.min_bf16_tflops:
            parts.append(f">= {self.min_bf16_tflops:g} TFLOPS BF16")
        return ", ".join(parts) or "any"


@dataclass(frozen=True)
class Parallelism:
    """TP x CP x PP x DP (x EP for mixture-of-experts layers, inside DP).

    ``cp`` is context parallelism (each rank holds ``1/cp`` of every sequence; Llama 3 used 16
    for its 128K-token stage); it defaults to 1 so older configurations keep their GPU count.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp


SCHEDULES = ("1f1b", "interleaved", "zero_bubble")
"""Pipeline schedules the step model prices (:mod:`scheduler.physics.step_model`)."""

RECOMPUTE = ("none", "selective", "full")
"""Activation recomputation: none, attention only (Korthikanti et al. 2022), whole layers."""


@dataclass(frozen=True)
class Transformer:
    """Shape of a decoder-only transformer, for the per-layer step model.

    Zeros mean "derive": ``heads`` = hidden / 128, ``kv_heads`` = heads, ``ffn`` = 4 x hidden;
    ``vocab`` 0 leaves the logit layer out.  The parameter count stays ``TrainingJob.params_b``.
    """

    layers: int
    hidden: int
    seq_len: int = 8192
    heads: int = 0
    kv_heads: int = 0
    ffn: int = 0
    vocab: int = 0

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"transformer {name} must be an integer >= 1, not {value!r}")


@dataclass(frozen=True)
class Recipe:
    """How a job trains: batch, pipeline schedule, sharding, overlap (all optional).

    Parameters
    ----------
    micro_batch : int
        Sequences per micro-batch.
    global_batch : int
        Sequences per optimizer step; 0: 16 per DP replica (Llama 3, Table 4).
    schedule : str
        One of :data:`SCHEDULES`.
    virtual_stages : int
        Model chunks per pipeline rank (``interleaved`` only).
    zero_stage : int
        0 (all-reduce of gradients), 1/2 (reduce-scatter + all-gather of the shard), 3 (also
        gathers the weights every micro-batch).
    sequence_parallel : bool
        Shards layer norms and dropouts across TP (Korthikanti et al. 2022).
    tp_overlap : float
        Share of TP communication hidden behind GEMMs, [0, 1].
    pp_overlap : bool
        Steady-state pipeline sends overlap compute (asynchronous send/recv).
    dp_overlap : float or None
        Share of the bucketed DP traffic that may hide behind backward / forward; ``None``:
        the caller's ``overlap``.
    recompute : str
        One of :data:`RECOMPUTE`.
    flash_attention : bool
        Fused attention (no ``s x s`` scores in HBM, causal half skipped).
    pp_edge_layers_off : int
        Transformer layers taken off each of the first and the last pipeline stages and given
        to the middle ones, which the embedding and the logit layer load (Llama 3 report, sec.
        3.3.2: one each); 0 (default) is Megatron-LM's even split.
    """

    micro_batch: int = 1
    global_batch: int = 0
    schedule: str = "interleaved"
    virtual_stages: int = 0
    zero_stage: int = 1
    sequence_parallel: bool = True
    tp_overlap: float = 0.0
    pp_overlap: bool = True
    dp_overlap: float | None = None
    recompute: str = "none"
    flash_attention: bool = True
    pp_edge_layers_off: int = 0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, not {self.schedule!r}")
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {RECOMPUTE}, not {self.recompute!r}")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"zero_stage must be 0, 1, 2 or 3, not {self.zero_stage!r}")
        for name in ("micro_batch", "global_batch", "virtual_stages", "pp_edge_layers_off"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (
                    name == "micro_batch" and value < 1):
                raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
        for name in ("tp_overlap", "dp_overlap"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise ValueError(f"{name} must be in [0, 1], not {value!r}")


@dataclass(frozen=True)
class TrainingJob:
    """One training job: a gang of ``gpus`` accelerators that starts whole or not at all.

    Parameters
    ----------
    job_id : int
        Unique within a workload.
    gpus : int
        Gang size.
    work_flops : float
        Model FLOPs to finish, FLOP.
    submit_s : float
        Submission time, s.
    cpu_per_gpu, ram_gb_per_gpu, nic_gbps_per_gpu : float
        Host resources per accelerator: cores, GB, Gb/s.
    affinity : str
        Loosest topology span accepted, one of :data:`AFFINITIES`; a gang larger than any
        domain of that level is placed at the next level that can hold it.
    priority : int
        Higher runs first and may preempt lower.
    checkpoint_gb : float
        Size of one checkpoint, GB (about 14 bytes per parameter with Adam, figures.md).
    checkpoint_interval_s : float
        Compute time between checkpoints, s.
    efficiency : float
        Kernel efficiency while computing (achieved / peak FLOPs).
    burstable : bool
        May run in a cloud pool after waiting ``burst_after_s``.
    partition, qos, user : str
        What a Slurm job names (its partition, quality of service and user); empty for jobs
        that name none.  The ``slurm`` policy reads them (``docs/scheduling.md``).
    time_limit_s : float, optional
        The job's time limit, s (Slurm's ``--time``): the ``slurm`` policy plans backfill by
        it and ends a job that reaches it; ``None``: the partition's, or no limit.
    gpus_per_node : int, optional
        GPUs on each node (Slurm's ``--gres=gpu:N`` with ``--nodes``); ``None``: whole nodes
        plus one partial node, as the placement chooses.
    reservation : str
        The advance reservation the job runs in (Slurm's ``--reservation``); empty for none.
    """

    job_id: int
    name: str
    tenant: str
    submit_s: float
    gpus: int
    work_flops: float
    requirement: Requirement = Requirement()
    cpu_per_gpu: float = 8.0
    ram_gb_per_gpu: float = 64.0
    nic_gbps_per_gpu: float = 100.0
    affinity: str = "any"
    parallelism: Parallelism | None = None
    params_b: float = 0.0
    tokens: float = 0.0
    priority: int = 0
    checkpoint_gb: float = 0.0
    checkpoint_interval_s: float = 3600.0
    efficiency: float = DEFAULT_EFFICIENCY
    burstable: bool = False
    burst_after_s: float = 4 * 3600.0
    transformer: Transformer | None = None
    recipe: Recipe | None = None
    partition: str = ""
    qos: str = ""
    user: str = ""
    time_limit_s: float | None = None
    gpus_per_node: int | None = None
    reservation: str = ""

    def __post_init__(self) -> None:
        if self.gpus <= 0:
            raise ValueError(f"job {self.name}: gpus must be positive, not {self.gpus}")
        if not self.work_flops > 0 or not math.isfinite(self.work_flops):
            raise ValueError(f"job {self.name}: work_flops must be positive and finite")
        if self.affinity not in AFFINITIES:
            raise ValueError(f"job {self.name}: affinity must be one of {AFFINITIES}")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"job {self.name}: efficiency must be in (0, 1]")
        if self.parallelism is not None and self.parallelism.gpus != self.gpus:
            raise ValueError(f"job {self.name}: TP x CP x PP x DP = {self.parallelism.gpus} "
                             f"does not match gpus = {self.gpus}")
        if self.submit_s < 0:
            raise ValueError(f"job {self.name}: submit time must be >= 0")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ValueError(f"job {self.name}: time limit must be positive")
        if self.gpus_per_node is not None and (
                self.gpus_per_node <= 0 or self.gpus % self.gpus_per_node):
            raise ValueError(f"job {self.name}: {self.gpus} GPUs are not a whole number of "
                             f"nodes of {self.gpus_per_node}")

    @property
    def nodes(self) -> int | None:
        """Nodes asked for (``gpus / gpus_per_node``), or ``None`` if the job names none."""
        return None if self.gpus_per_node is None else self.gpus // self.gpus_per_node

    def runtime_s(self, model: Accelerator) -> float:
        """Compute time on ``model`` without stalls, s.

        >>> from scheduler.hardware.catalog import get
        >>> j = TrainingJob(0, "j", "t", 0.0, 8, 8 * 989e12 * DEFAULT_EFFICIENCY * 3600)
        >>> round(j.runtime_s(get("H100-SXM")))
        3600
        """
        return self.work_flops / (self.gpus * model.bf16_tflops * 1e12 * self.efficiency)


@dataclass(frozen=True)
class Burst:
    """Demand multiplied by ``factor`` from ``start_s`` for ``duration_s``."""

    start_s: float
    duration_s: float
    factor: float


@dataclass(frozen=True)
class DemandCurve:
    """Inference demand in replicas: a diurnal sine between trough and peak, plus bursts.

    >>> c = DemandCurve(peak_replicas=10, trough_fraction=0.5, peak_hour=12.0)
    >>> c.replicas_at(12 * 3600), c.replicas_at(0)
    (10, 5)
    """

    peak_replicas: float
    trough_fraction: float = 0.4
    peak_hour: float = 14.0
    bursts: tuple[Burst, ...] = ()

    def load_at(self, t: float) -> float:
        """Demand at ``t`` s, in replicas (fractional)."""
        hour = (t / 3600.0) % 24.0
        phase = math.cos(2.0 * math.pi * (hour - self.peak_hour) / 24.0)
        low = self.peak_replicas * self.trough_fraction
        load = low + (self.peak_replicas - low) * (0.5 + 0.5 * phase)
        for b in self.bursts:
            if b.start_s <= t < b.start_s + b.duration_s:
                load *= b.factor
        return load

    def replicas_at(self, t: float) -> int:
        return max(1, math.ceil(self.load_at(t) - 1e-9))


@dataclass(frozen=True)
class InferenceService:
    """An inference service: replicas of ``gpus_per_replica`` GPUs following a demand curve.

    ``min_replicas`` are placed at start and never lent; the rest scale with demand, up to
    ``max_replicas``, borrowing GPUs from low-priority training when the pool is full.
    """

    service_id: int
    name: str
    tenant: str
    gpus_per_replica: int
    demand: DemandCurve
    min_replicas: int = 1
    max_replicas: int = 1_000_000
    latency_slo_ms: float = 200.0
    requirement: Requirement = Requirement()
    priority: int = 100
    cpu_per_gpu: float = 8.0
    ram_gb_per_gpu: float = 64.0
    nic_gbps_per_gpu: float = 100.0


@dataclass(frozen=True)
class Tenant:
    """A queue with a GPU quota (guaranteed share) and a fair-share weight."""

    name: str
    quota_gpus: int
    weight: float = 1.0


@dataclass(frozen=True)
class Workload:
    """Everything a scenario submits."""

    jobs: tuple[TrainingJob, ...]
    services: tuple[InferenceService, ...] = ()
    tenants: tuple[Tenant, ...] = ()
    source: str = "generator"
    meta: dict = field(default_factory=dict)

    def tenant_names(self) -> list[str]:
        names = [t.name for t in self.tenants]
        for j in self.jobs:
            if j.tenant not in names:
                names.append(j.tenant)
        for s in self.services:
            if s.tenant not in names:
                names.append(s.tenant)
        return names
