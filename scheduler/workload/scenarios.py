"""Each preset's default workload, and scaling a preset (cluster and workload) to a size.

* ``dev-small``: a lively small mix (1-128 GPUs) plus two inference services.
* ``superpod-h100``: a research lab: training jobs of 8-512 GPUs, small jobs, inference.
* ``llama3-16k``: one 16,384-GPU pre-training job of a 405B dense model, TP 8 x PP 16 x DP 128,
  15.6T tokens, running the whole period ("The Llama 3 Herd of Models", Meta 2024, sec. 3.3),
  with Llama 3 405B's shape (Table 3) and batch (Table 4): :data:`LLAMA3_405B`,
  :data:`LLAMA3_RECIPE`.
* ``hyperscale-100k``: two frontier jobs (32,768 H100 and 16,384 H200 GPUs), hundreds of
  mid-size and thousands of small jobs across tenants, and diurnal inference with bursts.  The
  1T dense job has the shape of Megatron-LM's 1T GPT (:data:`MEGATRON_1T`); the 600B one, of
  which no published dense shape was found, the generator's size rule
  (:func:`~scheduler.workload.generator.llm_shape`).
* ``noc-4k``: the default live twin, busy on purpose: three training tenants (small, mid-size
  and 1,024-2,048-GPU jobs) whose arrivals offer a little more work than the fleet holds, so a
  queue stands, and an inference tenant of diurnal services with bursts.  Job sizes and the
  heavy tail of durations follow the ``hyperscale-100k`` mix; the rates are chosen (not
  published) for the load, and ``bench/noc_preset.py`` prints the allocation they give.
* ``mixed-vendor``: jobs that accept some vendors and not others, and burstable jobs.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import ClusterPlan
from scheduler.presets import Preset, get_preset
from scheduler.workload.generator import (
    CHECKPOINT_BYTES_PER_PARAM,
    PRETRAINING_SEQ_LEN,
    JobClass,
    Mix,
    generate,
    llm_shape,
)
from scheduler.workload.jobs import (
    Burst,
    DemandCurve,
    InferenceService,
    Parallelism,
    Recipe,
    Requirement,
    Tenant,
    TrainingJob,
    Transformer,
    Workload,
)

NVIDIA = Requirement(vendors=("NVIDIA",))
H100_CLASS = Requirement(min_hbm_gb=80.0, vendors=("NVIDIA",))

LLAMA3_405B = Transformer(layers=126, hidden=16384, seq_len=8192, heads=128, kv_heads=8,
                          ffn=53248, vocab=128256)
"""Llama 3 405B: 126 layers, width 16,384, MLP 53,248, 128 attention heads, 8 key/value heads,
vocabulary 128,256 ("The Llama 3 Herd of Models", Meta 2024, Table 3); 8,192-token sequences
in the main pre-training stage (Table 4)."""

LLAMA3_70B = Transformer(layers=80, hidden=8192, seq_len=8192, heads=64, kv_heads=8,
                         ffn=28672, vocab=128256)
"""Llama 3 70B: 80 layers, width 8,192, MLP 28,672, 64 attention heads, 8 key/value heads
("The Llama 3 Herd of Models", Meta 2024, Table 3), on 8,192-token sequences as the 405B."""

LLAMA3_BATCH_TOKENS = 16 * 2 ** 20
"""Global batch of Llama 3 405B's 8K stage, tokens: 16M at 8,192 and 16,384 GPUs (Table 4)."""

LLAMA3_RECIPE = Recipe(global_batch=LLAMA3_BATCH_TOKENS // LLAMA3_405B.seq_len,
                       schedule="interleaved", virtual_stages=4, pp_edge_layers_off=1)
"""Llama 3's recipe as far as published: 2,048 sequences of 8,192 per step (Table 4),
interleaved pipeline with one Transformer layer taken off each of the first and the last
stages to balance the embedding and the logit layer (sec. 3.3.2: 126 layers on 16 stages as
7, 8 x 14, 7); 4 virtual stages assumed (not published), as in the step
model's calibration (``step_model.HOPPER_GEMM``); ZeRO-1, sequence parallelism and overlap are
:class:`~scheduler.workload.jobs.Recipe`'s defaults."""

MEGATRON_1T = Transformer(layers=128, hidden=25600, seq_len=PRETRAINING_SEQ_LEN, heads=160)
"""The 1T GPT of Narayanan et al. (SC'21, Table 1, last row: 1,008B, 128 layers, width 25,600,
160 heads), trained here on 8,192-token sequences (assumed, as Llama 3's) instead of 2,048."""


def frontier_job(job_id: int, name: str, gpus: int, *, params_b: float, tokens: float,
                 tenant: str, requirement: Requirement = H100_CLASS, priority: int = 50,
                 tp: int = 8, pp: int = 16, transformer: Transformer | None = None,
                 recipe: Recipe | None = None) -> TrainingJob:
    """A dense pre-training run: work ``6 N T`` FLOPs, the whole period at 40 % MFU or more.

    ``transformer`` and ``recipe`` price its step (:mod:`scheduler.physics.step_time`);
    without a shape it gets the generator's size rule
    (:func:`~scheduler.workload.generator.llm_shape`)."""
    tp = min(tp, gpus)
    while gpus % tp:
        tp -= 1
    # the deepest pipeline up to ``pp`` stages that divides the data-parallel groups evenly
    pp = next(p for p in range(min(pp, gpus // tp), 0, -1) if (gpus // tp) % p == 0)
    return TrainingJob(
        job_id=job_id, name=name, tenant=tenant, submit_s=0.0, gpus=gpus,
        work_flops=6.0 * params_b * 1e9 * tokens, requirement=requirement, affinity="any",
        parallelism=Parallelism(tp=tp, pp=pp, dp=gpus // (tp * pp)), params_b=params_b,
        tokens=tokens, priority=priority, checkpoint_gb=params_b * CHECKPOINT_BYTES_PER_PARAM,
        cpu_per_gpu=12.0, ram_gb_per_gpu=200.0, nic_gbps_per_gpu=400.0,
        transformer=transformer or llm_shape(params_b), recipe=recipe)


def _services(n: int, peak_gpus_total: float, days: float, rng: np.random.Generator,
              gpus_per_replica: tuple[int, ...] = (8,), requirement=NVIDIA,
              tenant: str = "serving") -> tuple[InferenceService, ...]:
    """``n`` services sharing ``peak_gpus_total`` at peak, each with a few seeded bursts."""
    out = []
    shares = rng.dirichlet(np.ones(n) * 2.0) if n > 1 else np.ones(1)
    for i in range(n):
        gpr = int(gpus_per_replica[i % len(gpus_per_replica)])
        peak = max(1.0, shares[i] * peak_gpus_total / gpr)
        bursts = tuple(Burst(float(rng.uniform(0, days * 86400.0)), float(rng.uniform(1, 4)) * 3600,
                             float(rng.uniform(1.3, 2.0)))
                       for _ in range(rng.poisson(days / 7.0)))
        out.append(InferenceService(
            service_id=i, name=f"svc-{i}", tenant=tenant, gpus_per_replica=gpr,
            demand=DemandCurve(peak_replicas=peak, trough_fraction=0.35,
                               peak_hour=float(rng.uniform(12, 18)), bursts=bursts),
            min_replicas=max(1, math.floor(peak * 0.2)), latency_slo_ms=200.0,
            requirement=requirement))
    return tuple(out)


def _mix(name: str, f: float, max_gpus: int) -> Mix:
    r = ("research", "product", "ads", "science")
    if name == "dev-small":
        return Mix((JobClass("small", 160, (1, 2, 4, 8, 16, 32), 1.5, tenants=r[:2]),
                    JobClass("mid", 10, (64, 128), 6.0, 0.8, max_hours=48, tenants=r[:2],
                             burstable_fraction=0.3)),
                   (Tenant("research", 0, 2.0), Tenant("product", 0, 1.0))).scaled(f, max_gpus)
    if name == "superpod-h100":
        return Mix((JobClass("small", 220, (1, 2, 4, 8), 2.0, tenants=r[:3]),
                    JobClass("mid", 10.5, (16, 32, 64, 128), 8.0, 1.0, tenants=r[:3]),
                    JobClass("large", 1.2, (256, 512), 24.0, 0.6, max_hours=96, tenants=r[:1],
                             priority=10)),
                   (Tenant("research", 0, 2.0), Tenant("product", 0, 1.0),
                    Tenant("ads", 0, 1.0))).scaled(f, max_gpus)
    if name == "hyperscale-100k":
        return Mix((JobClass("small", 300, (1, 2, 4, 8, 16, 32), 2.0, tenants=r),
                    JobClass("mid", 40, (64, 128, 256, 512, 1024), 10.0, 1.0, tenants=r,
                             size_alpha=0.5, priority=5, burstable_fraction=0.1),
                    JobClass("large", 2.2, (2048, 4096, 8192), 48.0, 0.6, max_hours=240,
                             tenants=r[:2], size_alpha=0.3, priority=20)),
                   tuple(Tenant(t, 0, w) for t, w in zip(r, (3.0, 2.0, 1.0, 1.0),
                                                         strict=True))).scaled(f, max_gpus)
    if name == "noc-4k":
        return Mix((JobClass("small", 625, (1, 2, 4, 8, 16, 32), 6.0, tenants=r[:3]),
                    JobClass("mid", 14, (64, 128, 256, 512), 8.0, 1.0, tenants=r[:3],
                             size_alpha=0.5, priority=5, burstable_fraction=0.1)),
                   tuple(Tenant(t, 0, w) for t, w in zip(r[:3], (3.0, 2.0, 1.0),
                                                         strict=True))).scaled(f, max_gpus)
    if name == "mixed-vendor":
        cuda = NVIDIA
        rocm = Requirement(vendors=("NVIDIA", "AMD"))
        ascend = Requirement(vendors=("Huawei",))
        return Mix((JobClass("cuda", 60, (1, 2, 4, 8, 16, 64), 3.0, requirement=cuda,
                             tenants=r[:2], burstable_fraction=0.4),
                    JobClass("portable", 40, (1, 8, 32, 128), 4.0, requirement=rocm,
                             tenants=r[:2]),
                    JobClass("bigmem", 8, (8, 64), 6.0, requirement=Requirement(min_hbm_gb=180),
                             tenants=r[2:3]),
                    JobClass("ascend", 20, (1, 8, 32), 4.0, requirement=ascend,
                             tenants=r[3:4])),
                   tuple(Tenant(t, 0, 1.0) for t in r)).scaled(f, max_gpus)
    return Mix(())


def scenario_workload(preset: str, plan: ClusterPlan, *, days: float,
                      rng: np.random.Generator, scale: float = 1.0,
                      load: float = 1.0) -> Workload:
    """The preset's default workload for ``days``, scaled by ``scale`` (cluster GPUs ratio);
    ``load`` multiplies the training jobs' arrival rates (a saturated cluster: load > 1)."""
    per_node = int(plan.models[0].per_node)
    total = int(plan.node_gpus[~plan.node_spare].sum())

    def nodes_of(g: float) -> int:
        return max(per_node, int(round(g / per_node)) * per_node)

    jobs: list[TrainingJob] = []
    services: tuple[InferenceService, ...] = ()
    if preset == "llama3-16k":
        jobs.append(frontier_job(0, "llama3-405b", min(total, nodes_of(16384 * scale)),
                                 params_b=405.0, tokens=15.6e12, tenant="llama",
                                 requirement=Requirement(models=("H100-SXM",)),
                                 transformer=LLAMA3_405B, recipe=LLAMA3_RECIPE))
    elif preset == "hyperscale-100k":
        h100 = int(plan.node_gpus[(plan.node_model == 0) & ~plan.node_spare].sum())
        h200 = int(plan.node_gpus[(plan.node_model == 1) & ~plan.node_spare].sum())
        jobs.append(frontier_job(0, "frontier-dense", min(h100, nodes_of(32768 * scale)),
                                 params_b=1000.0, tokens=30e12, tenant="research",
                                 requirement=Requirement(models=("H100-SXM",)), priority=60,
                                 transformer=MEGATRON_1T))
        jobs.append(frontier_job(1, "frontier-moe", min(h200, nodes_of(16384 * scale)),
                                 params_b=600.0, tokens=20e12, tenant="product",
                                 requirement=Requirement(models=("H200-SXM",)), priority=60))
    elif preset == "noc-4k":
        # a 70B dense run on a quarter of the fleet for the whole period: Llama 3 70B's shape
        # and 15T tokens ("The Llama 3 Herd of Models", Meta 2024, Table 3 and sec. 3.1)
        jobs.append(frontier_job(0, "pretrain-70b", min(total // 2, nodes_of(1024 * scale)),
                                 params_b=70.0, tokens=15e12, tenant="research",
                                 transformer=LLAMA3_70B, priority=60))
    mix = _mix(preset, scale * load, total)
    jobs.extend(generate(mix, days=days, rng=rng, first_id=len(jobs)))
    if preset == "dev-small":
        services = _services(2, 48 * scale, days, rng)
    elif preset == "superpod-h100":
        services = _services(3, 96 * scale, days, rng)
    elif preset == "hyperscale-100k":
        services = _services(24, 12000 * scale, days, rng, gpus_per_replica=(8, 4, 2, 8))
    elif preset == "mixed-vendor":
        services = _services(2, 64 * scale, days, rng)
    elif preset == "noc-4k":
        services = _services(6, 480 * scale, days, rng, gpus_per_replica=(8, 4, 2))
    return Workload(jobs=tuple(jobs), services=services, tenants=mix.tenants,
                    source=f"preset:{preset}")


def scaled_preset(name: str, gpus: int | None) -> tuple[Preset, float]:
    """The preset with its node groups scaled to about ``gpus`` GPUs, and the scale factor."""
    preset = get_preset(name)
    if gpus is None:
        return preset, 1.0
    if gpus <= 0:
        raise ValueError(f"--gpus must be a positive integer, not {gpus}")
    base = sum(g.nodes * get(g.model).per_node for g in preset.groups)
    f = gpus / base
    groups = []
    for g in preset.groups:
        nodes = max(1, round(g.nodes * f))
        spares = min(nodes - 1, round(g.spares * f)) if nodes > 1 else 0
        groups.append(replace(g, nodes=nodes, spares=spares))
    return replace(preset, groups=tuple(groups),
                   central_read_gb_s=preset.central_read_gb_s * f,
                   central_write_gb_s=preset.central_write_gb_s * f), f


REFABRIC_KINDS = ("fat-tree", "dragonfly+", "rail", "island", "dragonfly")
OVERSUBSCRIBABLE = ("fat-tree", "island")


def refabric(preset: Preset, kind: str | None, oversubscription: float | None) -> Preset:
    """The preset with another scale-out fabric (same nodes), for what-if comparisons.

    ``oversubscription`` applies to fat-trees (leaf uplinks) and islands (above the island).
    """
    if kind is None and oversubscription is None:
        return preset
    kind = kind or preset.fabric_kind
    if kind not in REFABRIC_KINDS:
        raise ValueError(f"unknown fabric {kind!r}; choose one of: {', '.join(REFABRIC_KINDS)}")
    kw = {"radix": preset.fabric_kw.get("radix", 64)} if kind != preset.fabric_kind else dict(
        preset.fabric_kw)
    if oversubscription is not None:
        if kind not in OVERSUBSCRIBABLE:
            raise ValueError(f"--oversubscription applies to {' and '.join(OVERSUBSCRIBABLE)} "
                             f"fabrics, not {kind}")
        if not oversubscription >= 1:
            raise ValueError(f"oversubscription must be >= 1, not {oversubscription!r}")
        kw["oversubscription"] = float(oversubscription)
    if kind in ("rail", "dragonfly"):
        kw.pop("radix", None)
    return replace(preset, fabric_kind=kind, fabric_kw=kw)
