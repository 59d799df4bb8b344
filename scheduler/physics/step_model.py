"""Per-layer cost of a transformer training step: FLOPs, kernel efficiency, pipeline bubble.

The pieces :func:`scheduler.physics.step_time.step_breakdown` assembles into a step.

FLOPs (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21, sec. 5.1, eq. 3): per token and layer, the GEMMs do ``2 P_layer`` FLOPs
forward (``P_layer`` the layer's weights; ``24 h^2`` for a GPT layer with a 4h MLP) and the
attention ``4 s h`` (``2 s h`` for ``Q K^T``, ``2 s h`` for ``A V``); backward does twice the
forward, so attention adds ``12 s h`` per token and layer to the ``6 P`` of the weights.
Full activation recomputation adds one more forward (Narayanan's 96 instead of 72).

Time of each operation is its FLOPs (or bytes) over the accelerator's peak times a
per-operation efficiency for its generation (:data:`KERNELS`): dense GEMMs, fused attention,
and memory-bound element-wise kernels (layer norms, dropouts, residual adds, activation),
which move bytes at a share of the HBM bandwidth.  Element-wise work per layer is
``ELEMENTWISE_BYTES_PER_HIDDEN`` bytes per hidden element (divided by TP only with sequence
parallelism, Korthikanti et al. 2022) plus ``ELEMENTWISE_BYTES_PER_FFN`` per MLP element;
unfused attention also writes and reads the ``s x s`` scores (``SCORE_BYTES_PER_ELEMENT``).
"""

from __future__ import annotations

from dataclasses import dataclass

BYTES_PER_VALUE = 2
"""BF16 activations, gradients and gathered weights."""

ELEMENTWISE_BYTES_PER_HIDDEN = 40.0
"""HBM bytes moved by the non-GEMM kernels of one layer's forward, per token and hidden
element: two layer norms, two dropouts and two residual adds, each reading and writing BF16
(about 10 accesses of 2 bytes, with one extra read per fused kernel).  Assumed."""

ELEMENTWISE_BYTES_PER_FFN = 8.0
"""HBM bytes of the MLP activation (GeLU/SwiGLU with its bias) per token and MLP element:
read and write of the two halves in BF16.  Assumed."""

SCORE_BYTES_PER_ELEMENT = 8.0
"""HBM bytes per attention-score element for unfused attention: scaled-masked softmax writes
it, dropout reads and writes it, ``A V`` reads it (4 accesses x 2 bytes).  Assumed."""

CAUSAL_WORK = 0.5
"""Share of the ``s x s`` attention a fused causal kernel computes (it skips the masked
half; FlashAttention-2, Dao 2023).  Unfused kernels compute the whole square, as Narayanan's
eq. 3 counts it."""


@dataclass(frozen=True)
class KernelEfficiency:
    """Achieved / peak of each kind of kernel on one accelerator generation.

    Parameters
    ----------
    gemm : float
        Dense BF16 GEMMs, share of peak FLOP/s.
    attention : float
        Fused attention forward+backward, share of peak FLOP/s.
    hbm : float
        Memory-bound element-wise kernels, share of HBM bandwidth.
    hbm_tb_s : float
        HBM bandwidth to use when the catalog does not publish one, TB/s.
    source : str
        Where each figure comes from.
    """

    gemm: float
    attention: float
    hbm: float
    hbm_tb_s: float
    source: str


HBM_EFFICIENCY = 0.8
"""Share of HBM bandwidth streaming element-wise kernels reach (assumed)."""

AMPERE_GEMM = 0.724
"""A100 GEMM efficiency, CALIBRATED (the one Ampere point): Narayanan et al. SC'21, Table 1,
1,008B GPT on 3,072 A100 (TP 8 x PP 64 x DP 6, batch 3,072, sequence 2,048, full
recomputation, unfused attention, synchronous pipeline sends, Megatron-LM's even split of
128 layers on 64 stages, so the last stage's logit layer sets the pace): 163 TFLOP/s per GPU
in their FLOP count, with the default straggler profile (``scale_losses.SLOW_HOSTS``, 0.3 %
there; 0.721 without it).  Refitted with the pipeline stage imbalance (0.687 when the logit
layer was spread over the stages).  ``tests/core/test_step_model.py::test_regression_*`` pins
the fit."""

HOPPER_GEMM = 0.600
"""H100 GEMM efficiency, CALIBRATED (the one Hopper point): Llama 3 report, sec. 3.3.2,
Table 4, 405B on 16,384 H100 (TP 8 x PP 16 x DP 128, 8,192-token sequences, 16 per replica):
400 TFLOPS per GPU (40.4 % of 989), with the default straggler profile (1.7 % there; 0.589
without it) and one layer off each of the first and the last stages as Meta ran it (sec.
3.3.2: the middle stages' 8 layers set the pace); 0.593 when the logit layer was spread over
the stages.  Virtual stages (4) and the overlap settings of that run are not published:
assumed as in ``scenarios.LLAMA3_RECIPE``."""

KERNELS: dict[str, KernelEfficiency] = {
    "ampere": KernelEfficiency(
        AMPERE_GEMM, 0.60, HBM_EFFICIENCY, 2.0,
        "gemm fitted (AMPERE_GEMM); attention: FlashAttention-2 reaches 50-73 % of A100 peak "
        "(Dao 2023, abstract), 0.60 taken; HBM 2.0 TB/s (A100 80 GB datasheet)"),
    "hopper": KernelEfficiency(
        HOPPER_GEMM, 0.55, HBM_EFFICIENCY, 3.35,
        "gemm fitted (HOPPER_GEMM); attention: FlashAttention-3 forward reaches up to 75 % of "
        "H100 peak (Shah et al. 2024); forward+backward assumed 0.55"),
    "blackwell": KernelEfficiency(
        HOPPER_GEMM, 0.55, HBM_EFFICIENCY, 7.7,
        "assumed: Hopper's figures (no published end-to-end calibration point found)"),
    "cdna3": KernelEfficiency(
        0.45, 0.40, HBM_EFFICIENCY, 5.3,
        "assumed: no published large-scale MFU found; lower than Hopper for a younger stack"),
    "other": KernelEfficiency(
        0.45, 0.40, HBM_EFFICIENCY, 2.0, "assumed: no published calibration point"),
}
"""Per-generation kernel efficiencies; override an entry to try other figures."""

GENERATIONS = (("A100", "ampere"), ("A800", "ampere"), ("H100", "hopper"), ("H200", "hopper"),
               ("H800", "hopper"), ("GH200", "hopper"), ("B200", "blackwell"),
               ("GB200", "blackwell"), ("B300", "blackwell"), ("MI300", "cdna3"),
               ("MI325", "cdna3"))
"""Accelerator-name prefixes and their generation (first match wins)."""


def generation(name: str) -> str:
    """Generation of the accelerator called ``name`` (a key of :data:`KERNELS`).

    >>> generation("H100-SXM"), generation("A100-80GB"), generation("TPUv5p")
    ('hopper', 'ampere', 'other')
    """
    upper = name.upper()
    for prefix, gen in GENERATIONS:
        if upper.startswith(prefix):
            return gen
    return "other"


def bubble_fraction(schedule: str, pp: int, microbatches: int, virtual_stages: int) -> float:
    """Pipeline bubble as a share of the steady-state compute.

    ``1f1b``: ``(p-1)/m``; ``interleaved`` with ``v`` chunks per rank: ``(p-1)/(v m)``
    (Narayanan et al. SC'21, sec. 2.2); ``zero_bubble``: ZB-H1 of Qi et al., "Zero Bubble
    Pipeline Parallelism" (ICLR 2024), which splits the backward into input and weight
    gradients and cuts the 1F1B bubble to about a third at the same memory.

    >>> bubble_fraction("1f1b", 8, 16, 1), bubble_fraction("interleaved", 8, 16, 4)
    (0.4375, 0.109375)
    """
    if pp < 2:
        return 0.0
    if schedule == "interleaved":
        return (pp - 1) / (microbatches * max(1, virtual_stages))
    if schedule == "zero_bubble":
        return (pp - 1) / (3.0 * microbatches)
    return (pp - 1) / microbatches


def stage_layers(layers: float, pp: int, edge_off: int = 0) -> tuple[float, float]:
    """Transformer layers on each middle pipeline stage and on each of the first and last.

    Megatron-LM splits the layers evenly (``edge_off = 0``); the first stage also runs the
    embedding and the last the logit layer and loss, so the last is the slowest and the
    pipeline's steady state runs at its pace.  Taking ``edge_off`` layers off each edge stage
    and spreading them over the middle ones balances it (Llama 3 report, sec. 3.3.2: "we reduce
    one Transformer layer each from the first and the last stages"; 126 layers on 16 stages:
    7 on each edge, 8 on the 14 others).  With fewer than 3 stages there is no middle stage and
    the split stays even.

    >>> stage_layers(126, 16, 1), stage_layers(96, 8), stage_layers(105, 35, 0)
    ((8.0, 7.0), (12.0, 12.0), (3.0, 3.0))

    Raises
    ------
    ValueError
        ``edge_off`` so large that the edge stages would hold fewer than zero layers.
    """
    if pp < 3:
        return layers / pp, layers / pp
    middle = (layers + 2.0 * edge_off) / pp
    if middle - edge_off < 0:
        raise ValueError(f"pp_edge_layers_off {edge_off} leaves the edge stages of a "
                         f"{layers:g}-layer model on {pp} stages without layers")
    return middle, middle - edge_off


@dataclass(frozen=True)
class LayerCost:
    """Seconds of one micro-batch through one layer on one GPU, by kind of kernel.

    ``gemm_s``, ``attention_s`` and ``elementwise_s`` cover forward, backward and any
    recomputation; ``forward_s`` is the forward alone (the window a parameter gather may hide
    behind) and ``attention_fwd_s`` its attention part (what ring attention hides behind).
    """

    gemm_s: float
    attention_s: float
    elementwise_s: float
    forward_s: float
    attention_fwd_s: float

    @property
    def total_s(self) -> float:
        return self.gemm_s + self.attention_s + self.elementwise_s


def layer_cost(*, tokens: float, seq_len: float, hidden: float, heads: float, ffn: float,
               weights: float, tp: int, cp: int, peak_flops: float, hbm_bytes_s: float,
               eff: KernelEfficiency, sequence_parallel: bool, flash_attention: bool,
               recompute: str) -> LayerCost:
    """Price one layer for a micro-batch of ``tokens`` (all its sequences, before CP).

    Parameters
    ----------
    tokens : float
        Tokens in the micro-batch (sequences x ``seq_len``).
    seq_len, hidden, heads, ffn : float
        Shape; ``weights`` is the layer's weight count (``12 h^2`` for a GPT layer).
    tp, cp : int
        Tensor- and context-parallel degrees sharing the layer.
    peak_flops, hbm_bytes_s : float
        Accelerator peak, FLOP/s, and HBM bandwidth, B/s.
    eff : KernelEfficiency
    sequence_parallel, flash_attention : bool
    recompute : str
        ``none``, ``selective`` (attention again) or ``full`` (the whole forward again).

    Examples
    --------
    One 2,048-token sequence through a 12,288-wide GPT layer on one GPU at 100 % efficiency:
    GEMMs ``6 x 12 h^2 x 2,048`` = 2.23e13 FLOPs, attention ``12 x 2,048^2 x h / 2`` (causal)
    = 3.09e11, at 1e15 FLOP/s:

    >>> e = KernelEfficiency(1.0, 1.0, 1.0, 1.0, "")
    >>> c = layer_cost(tokens=2048, seq_len=2048, hidden=12288, heads=96, ffn=49152,
    ...                weights=12 * 12288 ** 2, tp=1, cp=1, peak_flops=1e15, hbm_bytes_s=1e20,
    ...                eff=e, sequence_parallel=True, flash_attention=True, recompute="none")
    >>> round(c.gemm_s, 5), round(c.attention_s, 6)
    (0.02227, 0.000309)
    """
    local = tokens / cp
    gemm_fwd = 2.0 * local * weights / tp / (peak_flops * eff.gemm)
    attn_flops = 4.0 * local * seq_len * hidden / tp
    if flash_attention:
        attn_fwd = attn_flops * CAUSAL_WORK / (peak_flops * eff.attention)
        scores = 0.0
    else:
        # unfused: batched GEMMs at GEMM efficiency, scores through HBM
        attn_fwd = attn_flops / (peak_flops * eff.gemm)
        scores = local * seq_len * heads / tp * SCORE_BYTES_PER_ELEMENT
    hidden_bytes = ELEMENTWISE_BYTES_PER_HIDDEN * local * hidden / (tp if sequence_parallel else 1)
    ew_fwd = (hidden_bytes + ELEMENTWISE_BYTES_PER_FFN * local * ffn / tp + scores) / (
        hbm_bytes_s * eff.hbm)
    passes = {"none": 0.0, "selective": 0.0, "full": 1.0}[recompute]
    attn_passes = 1.0 if recompute == "selective" else passes
    gemm = gemm_fwd * (3.0 + passes)
    attention = attn_fwd * (3.0 + attn_passes)
    elementwise = ew_fwd * (3.0 + passes) + (scores / (hbm_bytes_s * eff.hbm)
                                             if recompute == "selective" else 0.0)
    return LayerCost(gemm, attention, elementwise, gemm_fwd + attn_fwd + ew_fwd, attn_fwd)


def model_flops_per_token(params: float, layers: float, hidden: float, seq_len: float) -> float:
    """Model FLOPs of one training token of a causal model: ``6 N`` plus attention.

    Attention: ``2 s h`` per token and layer forward for ``Q K^T`` and ``A V`` together (the
    causal half of Narayanan's ``4 s h``), three times with backward: ``6 L h s``.  No
    recomputation: MFU counts what the model needs, not what the kernels redo.

    >>> round(model_flops_per_token(175e9, 96, 12288, 2048) / 1e12, 5)
    1.0645
    """
    return 6.0 * params + 6.0 * layers * hidden * seq_len
