"""Published scaling tables the step model is checked against, and the jobs that reproduce them.

MegaScale (Jiang et al., "MegaScale: Scaling Large Language Model Training to More Than 10,000
GPUs", NSDI 2024), sec. 6.1: Megatron-LM (commit 285068c8) against MegaScale on the same
NVIDIA Ampere cluster; sequence 2,048, vocabulary 64,000, interleaved schedule with 6 chunks
(175B) or 3 (530B); Table 1 shapes (175B: 96 layers of 12,288, 128 heads, TP 8 x PP 8; 530B:
105 layers of 20,480, 160 heads, TP 8 x PP 35).  What the twin assumes beyond the paper:
A100 80 GB SXM kernels (``step_model.KERNELS["ampere"]``), 200 Gb/s per GPU (the paper splits
each 400G switch port in two, sec. 3.6), micro-batch 1, ZeRO-1 (distributed optimizer), and
Megatron-LM's even split of the layers over the pipeline stages (``Recipe.pp_edge_layers_off``
0: the paper does not say it rebalanced them), so the last stage, which also computes the logit
layer, sets the pace: 3.4 % slower than the others for the 175B (12 layers per stage), 8.4 %
for the 530B (3 layers per stage at PP 35).

Columns (one :class:`Column` each):

* ``megascale``: MegaScale's 3D-parallel overlap (TP fused into GEMMs, asynchronous pipeline
  sends, DP reduce-scatter and all-gather overlapped, sec. 3.2), FlashAttention-2 (sec. 3.3),
  BF16 gradients (assumed: with FP32 ones the unfitted rows fall 0.3-1.9 points before the
  jitter is refitted), straggler profile ``scale_losses.MEGASCALE_CLUSTER``;
* ``megatron``: the "unoptimised" baseline: :func:`scheduler.physics.step_time.no_overlap` of the
  same recipe, unfused attention (MegaScale's efficient operators are its own), gradients reduced
  in FP32 (Megatron-LM ``arguments.py``: "bfloat16 requires gradient accumulation and all-reduce
  to be done in fp32"), straggler profile ``scale_losses.MEGATRON_2023_STACK`` (without
  MegaScale's problematic-code fixes).

The parallel transformer block and sliding-window attention (Table 3, +5.6 points) are not
modelled: both columns compute the standard GPT layer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scheduler.hardware.catalog import get
from scheduler.physics.scale_losses import MEGASCALE_CLUSTER, MEGATRON_2023_STACK, Stragglers
from scheduler.physics.step_time import StepBreakdown, no_overlap, step_breakdown
from scheduler.workload.jobs import Parallelism, Recipe, TrainingJob, Transformer

A100 = get("A100-SXM4-80GB")
NIC_GBPS = 200.0
"""Per-GPU NIC rate assumed for MegaScale's cluster (sec. 3.6: 400G ports split into 2 x 200G)."""

GPT_175B = Transformer(96, 12288, 2048, heads=128, vocab=64000)
GPT_530B = Transformer(105, 20480, 2048, heads=160, vocab=64000)

MEGASCALE_RECIPE = Recipe(micro_batch=1, schedule="interleaved", virtual_stages=6, zero_stage=1,
                          tp_overlap=1.0, pp_overlap=True, dp_overlap=1.0)
MEGATRON_RECIPE = replace(no_overlap(MEGASCALE_RECIPE), flash_attention=False)


@dataclass(frozen=True)
class Column:
    """One system of the comparison: its recipe, straggler profile and gradient bytes."""

    name: str
    recipe: Recipe
    stragglers: Stragglers
    grad_bytes: int


COLUMNS = {
    "megatron": Column("Megatron-LM", MEGATRON_RECIPE, MEGATRON_2023_STACK, 4),
    "megascale": Column("MegaScale", MEGASCALE_RECIPE, MEGASCALE_CLUSTER, 2),
}


@dataclass(frozen=True)
class Row:
    """One published row: GPUs, global batch (sequences), MFU of each column (fractions)."""

    table: str
    model: str
    gpus: int
    batch: int
    mfu: dict

    def fitted(self, column: str) -> bool:
        """The one row used to calibrate (``scale_losses.MEGASCALE_JITTER_CV``)."""
        return (self.table, self.gpus, column) == ("Table 2", 12288, "megascale")


def _t2(gpus, batch, megatron, megascale):
    return Row("Table 2", "175B", gpus, batch, {"megatron": megatron, "megascale": megascale})


TABLE2 = (
    _t2(256, 768, 0.530, 0.653), _t2(512, 768, 0.499, 0.635), _t2(768, 768, 0.467, 0.613),
    _t2(1024, 768, 0.447, 0.590), _t2(3072, 6144, 0.487, 0.591),
    _t2(6144, 6144, 0.478, 0.573), _t2(8192, 6144, 0.433, 0.549),
    _t2(12288, 6144, 0.412, 0.552),
)
"""MegaScale Table 2, strong scaling of the 175B model (MFU; iteration times 40.0 ... 8.57 s for
Megatron-LM and 32.0 ... 6.34 s for MegaScale agree with these MFUs at ``6N + 6Lhs`` FLOPs per
token; the table's aggregate PFLOP/s of the 12,288 MegaScale row does not)."""

FIGURE9 = tuple(Row("Figure 9", "530B", g, g, {"megatron": a, "megascale": b})
                for g, a, b in ((2240, 0.492, 0.543), (4480, 0.488, 0.541),
                                (11200, 0.482, 0.543)))
"""MegaScale Figure 9, weak scaling of the 530B model (batch = GPUs), bar labels."""


def step(row: Row, column: str | Column, *,
         stragglers: Stragglers | None = None) -> StepBreakdown:
    """The twin's step for ``row`` under ``column`` (``"megatron"``, ``"megascale"`` or a
    :class:`Column`); ``stragglers`` overrides the column's profile."""
    col = COLUMNS[column] if isinstance(column, str) else column
    shape, pp, chunks = ((GPT_175B, 8, 6) if row.model == "175B" else (GPT_530B, 35, 3))
    par = Parallelism(8, pp, row.gpus // (8 * pp))
    job = TrainingJob(0, f"{row.model}-{col.name}", "t", 0.0, row.gpus, 1e21,
                      params_b=float(row.model.rstrip("B")), parallelism=par, transformer=shape,
                      recipe=replace(col.recipe, global_batch=row.batch, virtual_stages=chunks))
    return step_breakdown(job, A100, gpus_per_node=8, nodes=row.gpus // 8, nic_gbps=NIC_GBPS,
                          stragglers=col.stragglers if stragglers is None else stragglers,
                          grad_bytes=col.grad_bytes)


TREND_TOLERANCE = 0.03
"""Loss from the smallest to the largest scale of a column: within 3 MFU points (issue 29)."""
ROW_TOLERANCE = 0.05
"""Each held-out row: within 5 MFU points (the setup is partly assumed)."""
