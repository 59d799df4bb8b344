"""Step time of a training job from its parallelism: compute plus exposed communication.

One optimizer step of a dense (or mixture-of-experts) transformer trained with TP x PP x DP
(x EP), priced per GPU with :mod:`scheduler.physics.fabric.collectives`:

* compute: ``6 N T / (gpus * peak * job.efficiency)`` for ``N`` parameters and ``T`` tokens per
  step (Kaplan et al. 2020); ``job.efficiency`` is the kernel efficiency while computing;
* TP: Megatron-LM (Shoeybi et al. 2019) all-reduces the activations of a micro-batch
  (``tokens x hidden x 2`` bytes, BF16) twice per layer forward and twice backward, inside the
  TP group, on the critical path (exposed in full);
* PP: the pipeline bubble ``(pp-1)/(m v)`` of the per-micro-batch stage time with ``m``
  micro-batches and ``v`` virtual stages (interleaved 1F1B, Narayanan et al. 2021; the Llama 3
  report gives this bubble ratio), plus the send/recv hops of the warm-up and cool-down (one
  per stage boundary each way); steady-state sends overlap compute (asynchronous, as in
  Llama 3);
* DP: ZeRO/FSDP reduce-scatter of the BF16 gradients and all-gather of the BF16 weights of the
  rank's shard (``2 N / (tp pp)`` bytes each) across the DP group; ``overlap`` of it hides
  behind compute (never more than the compute itself);
* EP (``ep > 1``): every layer is taken as a mixture-of-experts layer with top-1 routing: an
  all-to-all dispatch and combine of the rank's tokens forward and again backward, exposed.

Transformer shape from the parameter count alone: ``N = 12 L h^2`` with ``h = 128 L`` (Llama 3
405B: 126 layers of 16,384, ratio 130; GPT-3 175B: 96 of 12,288, ratio 128).  Ranks are
numbered TP fastest, then DP (EP carved out of DP), then PP, as in Megatron-LM, so a TP group
fills a node first and the DP and PP groups stride across nodes.  The figures this model gives
for a Llama 3-like job are in ``docs/collectives.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

from scheduler.hardware.catalog import Accelerator
from scheduler.physics.fabric.collectives import collective, scaleout_link, scaleup_link
from scheduler.workload.jobs import Parallelism, TrainingJob

BYTES_PER_VALUE = 2
"""BF16 activations, gradients and gathered weights."""

SEQUENCE_TOKENS = 8192
"""Tokens of one micro-batch: one 8,192-token sequence (Llama 3 405B pre-training)."""

SEQUENCES_PER_REPLICA = 16
"""Sequences per DP replica per step: Llama 3 report, Table 4 (16,384 GPUs, DP 128, 16M-token
batches), so the default global batch grows with DP: ``dp * 16 * 8192`` tokens."""

HIDDEN_PER_LAYER = 128
"""Width / depth ratio ``h / L`` of the assumed transformer shape."""

TP_ALL_REDUCES_PER_LAYER = 4
"""Megatron-LM TP: attention and MLP outputs forward, their input gradients backward."""

EP_ALL_TO_ALLS_PER_LAYER = 4
"""Dispatch and combine forward, and the same two backward."""


@dataclass(frozen=True)
class StepBreakdown:
    """Seconds of one optimizer step, per GPU; the parts after overlap sum to ``total_s``.

    Parameters
    ----------
    compute_s : float
        Model FLOPs at the job's kernel efficiency, s.
    tp_s, pp_s, dp_s, ep_s : float
        Exposed tensor-parallel, pipeline (bubble included), data-parallel and
        expert-parallel time, s.
    total_s : float
        Step time, s.
    tokens_per_step : float
        Global batch, tokens.
    microbatches : int
        Micro-batches per DP replica per step.
    layers, hidden : float
        The assumed transformer shape (depth, width).
    """

    compute_s: float
    tp_s: float
    pp_s: float
    dp_s: float
    ep_s: float
    total_s: float
    tokens_per_step: float
    microbatches: int
    layers: float
    hidden: float

    @property
    def efficiency_factor(self) -> float:
        """``compute_s / total_s``: multiply by the kernel efficiency for MFU."""
        return self.compute_s / self.total_s


def transformer_shape(params: float) -> tuple[float, float]:
    """Depth and width of a transformer of ``params`` parameters (``12 L h^2``, ``h = 128 L``).

    >>> [round(x) for x in transformer_shape(405e9)]
    [127, 16287]
    """
    layers = (params / (12.0 * HIDDEN_PER_LAYER ** 2)) ** (1.0 / 3.0)
    return layers, HIDDEN_PER_LAYER * layers


def default_parallelism(gpus: int, gpus_per_node: int) -> Parallelism:
    """TP up to 8 within a node (the largest divisor of ``gpus``), PP 1, DP the rest.

    >>> default_parallelism(64, 8)
    Parallelism(tp=8, pp=1, dp=8, ep=1)
    >>> default_parallelism(12, 8)
    Parallelism(tp=6, pp=1, dp=2, ep=1)
    """
    tp = min(8, gpus_per_node, gpus)
    while gpus % tp:
        tp -= 1
    return Parallelism(tp=tp, pp=1, dp=gpus // tp)


def _per_node(size: int, stride: int, k: int) -> int:
    """Members of a group of ``size`` ranks ``stride`` apart that share one node of ``k``."""
    return 1 if stride >= k else min(size, k // stride)


def _check(job, gpus_per_node, nodes, scaleout_share, overlap, global_batch_tokens,
           microbatch_tokens, virtual_stages) -> None:
    for name, value in (("gpus_per_node", gpus_per_node), ("nodes", nodes),
                        ("virtual_stages", virtual_stages)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
    if not job.params_b > 0:
        raise ValueError(f"job {job.name}: params_b must be positive to size its messages")
    least = -(-job.gpus // gpus_per_node)
    if not least <= nodes <= job.gpus:
        raise ValueError(f"job {job.name}: {job.gpus} GPUs at {gpus_per_node} per node need "
                         f"between {least} and {job.gpus} nodes, not {nodes}")
    if not (isinstance(scaleout_share, Real) and 0 < scaleout_share <= 1):
        raise ValueError(f"scaleout_share must be in (0, 1], not {scaleout_share!r}")
    if not (isinstance(overlap, Real) and 0 <= overlap <= 1):
        raise ValueError(f"overlap must be in [0, 1], not {overlap!r}")
    for name, value in (("global_batch_tokens", global_batch_tokens),
                        ("microbatch_tokens", microbatch_tokens)):
        if value is not None and not (isinstance(value, Real) and math.isfinite(value)
                                      and value > 0):
            raise ValueError(f"{name} must be a positive number, not {value!r}")


def step_breakdown(job: TrainingJob, model: Accelerator, *, gpus_per_node: int, nodes: int,
                   scaleout_share: float = 1.0, overlap: float = 0.7,
                   global_batch_tokens: float | None = None, nic_gbps: float = 400.0,
                   microbatch_tokens: float = SEQUENCE_TOKENS,
                   virtual_stages: int = 1) -> StepBreakdown:
    """Price one training step of ``job`` on ``model`` (module docstring for the model).

    Parameters
    ----------
    job : TrainingJob
        Needs ``params_b > 0``; ``job.parallelism`` or, if ``None``,
        :func:`default_parallelism`.
    model : Accelerator
    gpus_per_node : int
        GPUs per scale-up domain (8 for HGX, 72 for NVL72).
    nodes : int
        Domains the job occupies; more than ``ceil(gpus / gpus_per_node)`` spreads it thinner
        (``ceil(gpus / nodes)`` GPUs per node).
    scaleout_share : float, optional
        Share of the scale-out bandwidth the job's traffic gets, (0, 1] (default 1).
    overlap : float, optional
        Fraction of the DP communication hidden behind compute, [0, 1] (default 0.7).
    global_batch_tokens : float, optional
        Tokens per step; default ``dp * SEQUENCES_PER_REPLICA * SEQUENCE_TOKENS``.
    nic_gbps : float, optional
        NIC line rate per GPU, Gb/s (default 400).
    microbatch_tokens : float, optional
        Tokens per micro-batch (default one 8,192-token sequence).
    virtual_stages : int, optional
        Model chunks per pipeline rank (interleaved schedule; default 1, plain 1F1B).

    Returns
    -------
    StepBreakdown

    Raises
    ------
    ValueError
        ``params_b <= 0``, fewer nodes than the GPUs need or more nodes than GPUs, a share,
        overlap or batch out of range; one-line message.

    Examples
    --------
    >>> from scheduler.hardware.catalog import get
    >>> job = TrainingJob(0, "one", "t", 0.0, 1, 1e18, params_b=1.0)
    >>> s = step_breakdown(job, get("H100-SXM"), gpus_per_node=8, nodes=1)
    >>> s.efficiency_factor, s.microbatches
    (1.0, 16)
    """
    _check(job, gpus_per_node, nodes, scaleout_share, overlap, global_batch_tokens,
           microbatch_tokens, virtual_stages)
    par = job.parallelism or default_parallelism(job.gpus, gpus_per_node)
    k = min(gpus_per_node, -(-job.gpus // nodes))
    up, out = scaleup_link(model), scaleout_link(nic_gbps)

    def price(op: str, nbytes: float, gpus: int, per_node: int) -> float:
        if gpus < 2:
            return 0.0
        return collective(op, nbytes, gpus, gpus_per_node=per_node, scaleup=up, scaleout=out,
                          scaleout_share=scaleout_share).time_s

    params = job.params_b * 1e9
    tokens = (global_batch_tokens if global_batch_tokens is not None
              else par.dp * SEQUENCES_PER_REPLICA * SEQUENCE_TOKENS)
    compute = 6.0 * params * tokens / (job.gpus * model.bf16_tflops * 1e12 * job.efficiency)

    per_replica = tokens / par.dp
    m = max(1, round(per_replica / microbatch_tokens))
    layers, hidden = transformer_shape(params)
    stage_layers = layers / par.pp
    activation = per_replica / m * hidden * BYTES_PER_VALUE

    tp = m * stage_layers * TP_ALL_REDUCES_PER_LAYER * price(
        "all_reduce", activation, par.tp, _per_node(par.tp, 1, k))
    ep = 0.0
    if par.ep > 1:
        ep = m * stage_layers * EP_ALL_TO_ALLS_PER_LAYER * price(
            "all_to_all", activation / par.tp, par.ep, _per_node(par.ep, par.tp, k))

    pp = 0.0
    if par.pp > 1:
        bubble = (par.pp - 1) / (m * virtual_stages) * (compute + tp + ep)
        hop = collective("p2p", activation / par.tp, 2,
                         gpus_per_node=2 if par.tp * par.dp < k else 1, scaleup=up,
                         scaleout=out, scaleout_share=scaleout_share).time_s
        pp = bubble + 2 * (par.pp - 1) * hop

    shard = BYTES_PER_VALUE * params / (par.tp * par.pp)
    dp_per_node = _per_node(par.dp, par.tp, k)
    dp_raw = (price("reduce_scatter", shard, par.dp, dp_per_node)
              + price("all_gather", shard, par.dp, dp_per_node))
    dp = dp_raw - min(overlap * dp_raw, compute)

    total = compute + tp + pp + dp + ep
    return StepBreakdown(compute, tp, pp, dp, ep, total, float(tokens), m, layers, hidden)
