"""Step time of a training job from its shape and parallelism, priced per layer.

One optimizer step of a transformer trained with TP x CP x PP x DP (x EP), per GPU, from the
per-layer costs of :mod:`scheduler.physics.step_model` and the collectives of
:mod:`scheduler.physics.collectives`:

* compute: each layer's GEMMs, attention (it grows with the sequence length) and element-wise
  kernels at the accelerator generation's kernel efficiencies, forward, backward and any
  recomputation, for ``m`` micro-batches per DP replica;
* TP: Megatron-LM's two all-reduces per layer forward and two backward (with sequence
  parallelism an all-gather and a reduce-scatter each, the same bytes), of which
  ``recipe.tp_overlap`` hides behind the layer's GEMMs (never more than the GEMMs);
* CP: ring attention passes ``cp - 1`` key/value blocks per layer forward and twice backward,
  hidden behind the attention kernel it feeds;
* PP: the steady state runs at the slowest stage: the last, which also computes the whole
  logit layer (``6 V h`` FLOPs per token forward and backward, ``V / 12h`` of a layer), unless
  ``recipe.pp_edge_layers_off`` moved enough layers off the first and last stages
  (``step_model.stage_layers``); the priced parts (kernels, TP, CP, EP, DP) are that stage's.
  The bubble of the schedule (1F1B, interleaved, zero-bubble: ``step_model``) is the other
  stages' busy time while the pipeline fills and drains; then the warm-up and cool-down hops,
  and every steady-state send unless ``recipe.pp_overlap``;
* DP: ZeRO-0 all-reduces the BF16 gradients of the slowest stage's weights over TP (about
  ``N/(tp pp)``, the last stage's with the logit layer's); ZeRO-1/2
  reduce-scatter them and all-gather the updated weights; ZeRO-3 also gathers the weights
  forward and backward every micro-batch.  Bucketed, the gradient traffic hides behind the
  last micro-batch's backward and the weight gather behind the first forward, each for at
  most ``overlap`` of its traffic;
* EP (``ep > 1``): top-1 all-to-all dispatch and combine forward and backward, exposed;
* stragglers: the slowest of the job's ranks (synchronisation jitter and slow hosts,
  :mod:`scheduler.physics.scale_losses`) stretches the kernels by ``straggler_s``, booked
  inside ``compute_s``.

``compute_s`` is the kernels' time; the rest of ``total_s`` is the bubble and exposed
communication.  ``mfu`` is model FLOPs (``6 N`` plus attention) over ``total_s`` and peak.
A job without ``transformer`` takes ``N = 12 L h^2`` with ``h = 128 L`` and one sequence of
``microbatch_tokens`` per micro-batch; without ``recipe`` it trains as :class:`Recipe`'s
defaults with the caller's ``virtual_stages``.  Validation against published runs:
``docs/physics.md`` ("Step time: validation").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from numbers import Integral, Real

from scheduler.hardware.catalog import Accelerator
from scheduler.physics.collectives import collective, scaleout_link, scaleup_link
from scheduler.physics.scale_losses import SLOW_HOSTS, Stragglers
from scheduler.physics.step_model import (
    BYTES_PER_VALUE,
    KERNELS,
    bubble_fraction,
    generation,
    layer_cost,
    model_flops_per_token,
    stage_layers,
)
from scheduler.workload.jobs import Parallelism, Recipe, TrainingJob, Transformer

DEFAULT_RECIPE = Recipe()

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

DEFAULT_STRAGGLERS = SLOW_HOSTS
"""Straggler profile of a job whose caller names none (``scale_losses.SLOW_HOSTS``)."""


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
        The transformer shape (depth, width).
    cp_s : float
        Exposed context-parallel time, s (also inside ``total_s``).
    bubble_s : float
        The pipeline bubble, s (part of ``pp_s``).
    model_flops : float
        Model FLOPs of the step, all GPUs (``6 N T`` plus attention), FLOP.
    mfu : float
        ``model_flops / (total_s * gpus * peak)``.
    straggler_s : float
        What the slowest rank adds to the kernels (jitter and slow hosts,
        :mod:`scheduler.physics.scale_losses`), s; part of ``compute_s``.
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
    cp_s: float = 0.0
    bubble_s: float = 0.0
    model_flops: float = 0.0
    mfu: float = 0.0
    straggler_s: float = 0.0

    @property
    def efficiency_factor(self) -> float:
        """``compute_s / total_s``: the share of the step the GPU computes."""
        return self.compute_s / self.total_s


def no_overlap(recipe: Recipe) -> Recipe:
    """``recipe`` with no communication hidden behind compute: TP, PP and DP all exposed.

    The "unoptimised" configuration (MegaScale's baseline lacks its 3D-parallel overlap, sec.
    3.2): the step is longer by exactly the communication the overlap hid, compute unchanged.

    >>> no_overlap(Recipe(tp_overlap=1.0, dp_overlap=1.0))
    Recipe(micro_batch=1, global_batch=0, schedule='interleaved', virtual_stages=0, \
zero_stage=1, sequence_parallel=True, tp_overlap=0.0, pp_overlap=False, dp_overlap=0.0, \
recompute='none', flash_attention=True, pp_edge_layers_off=0)
    """
    return replace(recipe, tp_overlap=0.0, pp_overlap=False, dp_overlap=0.0)


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
    Parallelism(tp=8, pp=1, dp=8, ep=1, cp=1)
    >>> default_parallelism(12, 8)
    Parallelism(tp=6, pp=1, dp=2, ep=1, cp=1)
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


def _shape(job: TrainingJob, microbatch_tokens: float) -> Transformer:
    if job.transformer is not None:
        return job.transformer
    layers, hidden = transformer_shape(job.params_b * 1e9)
    return Transformer(layers=max(1, round(layers)), hidden=max(1, round(hidden)),
                       seq_len=max(1, round(microbatch_tokens)))


@dataclass(frozen=True)
class _Stage:
    """``count`` pipeline stages alike: their layers, kernel seconds per micro-batch and the
    weights they hold beyond their layers' (the logit layer's on the last)."""

    count: int
    layers: float
    kernel_s: float
    extra_weights: float


def _stages(layers: float, pp: int, edge_off: int, layer_s: float, logits_s: float,
            logit_weights: float) -> list[_Stage]:
    """The first, middle and last stages (one stage when ``pp`` is 1).  The first stage's
    embedding (a gather forward, a scatter-add backward: under 1 % of a layer's time) is not
    priced, so it never outweighs the last stage's logit layer."""
    middle, edge = stage_layers(layers, pp, edge_off)
    last = _Stage(1, edge, edge * layer_s + logits_s, logit_weights)
    if pp == 1:
        return [last]
    first = _Stage(1, edge, edge * layer_s, 0.0)
    if pp == 2:
        return [first, last]
    return [first, _Stage(pp - 2, middle, middle * layer_s, 0.0), last]


def step_breakdown(job: TrainingJob, model: Accelerator, *, gpus_per_node: int, nodes: int,
                   scaleout_share: float = 1.0, overlap: float = 0.7,
                   global_batch_tokens: float | None = None, nic_gbps: float = 400.0,
                   microbatch_tokens: float = SEQUENCE_TOKENS,
                   virtual_stages: int = 1,
                   stragglers: Stragglers | None = None,
                   grad_bytes: float = BYTES_PER_VALUE) -> StepBreakdown:
    """Price one training step of ``job`` on ``model`` (module docstring for the model).

    Parameters
    ----------
    job : TrainingJob
        Needs ``params_b > 0``; ``job.parallelism`` or, if ``None``,
        :func:`default_parallelism`; ``job.transformer`` and ``job.recipe`` if set.
    model : Accelerator
        Its name picks the kernel efficiencies (:func:`scheduler.physics.step_model.generation`).
    gpus_per_node : int
        GPUs per scale-up domain (8 for HGX, 72 for NVL72).
    nodes : int
        Domains the job occupies; more than ``ceil(gpus / gpus_per_node)`` spreads it thinner
        (``ceil(gpus / nodes)`` GPUs per node).
    scaleout_share : float, optional
        Share of the scale-out bandwidth the job's traffic gets, (0, 1] (default 1).
    overlap : float, optional
        Share of the DP traffic that may hide behind compute, [0, 1] (default 0.7), unless
        ``job.recipe.dp_overlap`` says otherwise.
    global_batch_tokens : float, optional
        Tokens per step; default ``job.recipe.global_batch`` sequences, else 16 sequences per
        DP replica.
    nic_gbps : float, optional
        NIC line rate per GPU, Gb/s (default 400).
    microbatch_tokens : float, optional
        Sequence length of a job without ``transformer`` (default 8,192).
    virtual_stages : int, optional
        Chunks per pipeline rank when ``job.recipe`` does not set them (default 1).
    stragglers : Stragglers, optional
        The cluster's straggler profile (default :data:`DEFAULT_STRAGGLERS`);
        ``scale_losses.NO_STRAGGLERS`` prices every rank at the mean pace.
    grad_bytes : float, optional
        Bytes per gradient value in the DP reduction (default 2, BF16; 4 where gradients are
        accumulated and reduced in FP32, as Megatron-LM did for BF16 in 2023).

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
    rec = job.recipe or DEFAULT_RECIPE
    shape = _shape(job, microbatch_tokens)
    k = min(gpus_per_node, -(-job.gpus // nodes))
    up, out = scaleup_link(model), scaleout_link(nic_gbps)

    def price(op: str, nbytes: float, gpus: int, per_node: int) -> float:
        if gpus < 2 or nbytes <= 0:
            return 0.0
        return collective(op, nbytes, gpus, gpus_per_node=per_node, scaleup=up, scaleout=out,
                          scaleout_share=scaleout_share).time_s

    params = job.params_b * 1e9
    s_len, h, layers = float(shape.seq_len), float(shape.hidden), float(shape.layers)
    heads = float(shape.heads or max(1, round(h / HIDDEN_PER_LAYER)))
    kv_share = (shape.kv_heads or heads) / heads
    ffn = float(shape.ffn or 4 * shape.hidden)
    weights = max(params - shape.vocab * h, 0.0) / layers

    if global_batch_tokens is not None:
        tokens = float(global_batch_tokens)
    elif rec.global_batch:
        tokens = float(rec.global_batch * shape.seq_len)
    else:
        tokens = float(par.dp * SEQUENCES_PER_REPLICA * shape.seq_len)
    mb_tokens = rec.micro_batch * s_len
    m = max(1, round(tokens / par.dp / mb_tokens))
    v = rec.virtual_stages or virtual_stages
    v = v if (rec.schedule == "interleaved" and par.pp > 1) else 1

    eff = KERNELS[generation(model.name)]
    peak = model.bf16_tflops * 1e12
    hbm = (model.hbm_tb_s or eff.hbm_tb_s) * 1e12
    lc = layer_cost(tokens=mb_tokens, seq_len=s_len, hidden=h, heads=heads, ffn=ffn,
                    weights=weights, tp=par.tp, cp=par.cp, peak_flops=peak, hbm_bytes_s=hbm,
                    eff=eff, sequence_parallel=rec.sequence_parallel,
                    flash_attention=rec.flash_attention, recompute=rec.recompute)
    # the logit layer (and its weights) on the last stage, forward and backward
    logits = 6.0 * mb_tokens / par.cp * shape.vocab * h / par.tp / (peak * eff.gemm)
    stages = _stages(layers, par.pp, rec.pp_edge_layers_off, lc.total_s, logits,
                     shape.vocab * h)
    # the slowest stage by its kernels (fabric-independent, so compute_s is too)
    crit = max(stages, key=lambda st: st.kernel_s)
    crit_layers, per_mb = crit.layers, crit.kernel_s
    strag = stragglers if stragglers is not None else DEFAULT_STRAGGLERS
    share = strag.share(job.gpus, nodes, m)
    straggler = m * per_mb * share
    compute = m * per_mb + straggler

    # TP: 4 collectives per layer per micro-batch (6 with full recomputation)
    activation = mb_tokens / par.cp * h * BYTES_PER_VALUE
    tp_per_layer = (6 if rec.recompute == "full" else 4) * price(
        "all_reduce", activation, par.tp, _per_node(par.tp, 1, k))
    tp_exposed = tp_per_layer - min(rec.tp_overlap * tp_per_layer, lc.gemm_s)

    cp_per_layer = 0.0
    if par.cp > 1:
        kv_block = 2.0 * activation * kv_share / par.tp
        ring = 3.0 * (par.cp - 1) * collective(
            "p2p", kv_block, 2, gpus_per_node=2 if par.tp * par.cp <= k else 1, scaleup=up,
            scaleout=out, scaleout_share=scaleout_share).time_s
        cp_per_layer = max(0.0, ring - 3.0 * lc.attention_fwd_s)

    ep_per_layer = 0.0
    if par.ep > 1:
        ep_per_layer = EP_ALL_TO_ALLS_PER_LAYER * price(
            "all_to_all", activation / par.tp, par.ep, _per_node(par.ep, par.tp * par.cp, k))
    comm_per_layer = tp_exposed + cp_per_layer + ep_per_layer
    tp, cp, ep = (m * crit_layers * x for x in (tp_exposed, cp_per_layer, ep_per_layer))

    pp = bubble = 0.0
    if par.pp > 1:
        # fill and drain: the other stages' busy time (all of it for equal stages)
        def busy(st: _Stage) -> float:
            return (1.0 + share) * st.kernel_s + st.layers * comm_per_layer
        others = (sum(st.count * busy(st) for st in stages) - busy(crit)) / (par.pp - 1)
        bubble = bubble_fraction(rec.schedule, par.pp, m, v) * m * others
        hop = collective("p2p", activation / par.tp, 2,
                         gpus_per_node=2 if par.tp * par.cp * par.dp < k else 1, scaleup=up,
                         scaleout=out, scaleout_share=scaleout_share).time_s
        hops = 2 * (par.pp - 1) + (0 if rec.pp_overlap else 2 * m * v)
        pp = bubble + hops * hop

    dp_overlap = overlap if rec.dp_overlap is None else rec.dp_overlap
    shard = BYTES_PER_VALUE * (crit_layers * weights + crit.extra_weights) / par.tp
    grad_shard = grad_bytes * (crit_layers * weights + crit.extra_weights) / par.tp
    dp_group = par.dp * par.cp
    dp_per_node = _per_node(dp_group, par.tp, k)
    if rec.zero_stage == 0:
        grads, gather = price("all_reduce", grad_shard, dp_group, dp_per_node), 0.0
    else:
        grads = price("reduce_scatter", grad_shard, dp_group, dp_per_node)
        gather = price("all_gather", shard, dp_group, dp_per_node)
    backward = per_mb * 2.0 / 3.0
    forward = crit_layers * lc.forward_s + (crit.kernel_s - crit_layers * lc.total_s) / 3.0
    dp = (grads - min(dp_overlap * grads, backward)) + (gather - min(dp_overlap * gather,
                                                                        forward))
    if rec.zero_stage == 3 and crit_layers > 0:
        per_layer_gather = 2.0 * gather / crit_layers
        dp += m * crit_layers * max(0.0, per_layer_gather - dp_overlap * lc.total_s)

    total = compute + tp + cp + pp + dp + ep
    flops = model_flops_per_token(params, layers, h, s_len) * tokens
    mfu = flops / (total * job.gpus * peak)
    return StepBreakdown(compute, tp, pp, dp, ep, total, tokens, m, layers, h, cp, bubble,
                         flops, mfu, straggler)
