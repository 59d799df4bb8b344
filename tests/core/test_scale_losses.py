"""Losses that grow with scale, the "unoptimised" configuration, and MegaScale's scaling tables.

Fitted: one row, MegaScale's 55.2 % on 12,288 GPUs (``scale_losses.MEGASCALE_JITTER_CV``;
``tests/core/test_step_model.py::test_regression_megascale_*``).  Derived from other published
figures, not fitted to any MFU: the slow-host share and slowdown (MegaScale sec. 6.3) and the
Megatron-LM stack's extra jitter (Table 3's "misc" step).  Everything else here is held out:
the other 15 rows of Table 2, Figure 9 and Table 3's overlap steps.  Tolerances (issue 29):
+-5 MFU points per row, +-3 points for the loss from the smallest to the largest scale.
Summary: docs/physics.md, "Scale losses"; table: ``python -m bench.scaling``.
"""

import math
from dataclasses import replace

import numpy as np
import pytest

from scheduler.hardware.catalog import get
from scheduler.physics.collectives import collective, scaleout_link, scaleup_link
from scheduler.physics.scale_losses import (
    MEGASCALE_CLUSTER,
    NO_STRAGGLERS,
    Stragglers,
    expected_max_normal,
)
from scheduler.physics.scaling_cases import (
    COLUMNS,
    FIGURE9,
    ROW_TOLERANCE,
    TABLE2,
    TREND_TOLERANCE,
    Row,
    step,
)
from scheduler.physics.step_time import no_overlap, step_breakdown
from scheduler.workload.jobs import Parallelism, Recipe, TrainingJob, Transformer

H100 = get("H100-SXM")
HELD_OUT = [(r, c) for r in TABLE2 for c in COLUMNS if not r.fitted(c)]


def gpt(gpus, recipe=None, per_replica=16):
    """70B-class GPT at TP 8 x PP 4, ``per_replica`` sequences of 4,096 per DP replica."""
    dp = gpus // 32
    return TrainingJob(0, "g", "t", 0.0, gpus, 1e21, params_b=70.0,
                       parallelism=Parallelism(8, 4, dp),
                       transformer=Transformer(80, 8192, 4096),
                       recipe=replace(recipe or Recipe(), global_batch=per_replica * dp))


# ------------------------------------------------------------------ the straggler terms


def test_expected_max_of_two_normals_is_close_to_the_exact_one_over_root_pi():
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=0.05)
    assert expected_max_normal(1) == 0.0


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_expected_max_of_normals_matches_sampling(n):
    """Blom's approximation against 4,000 sampled maxima (seeded): within 2 %, and below the
    ``sqrt(2 ln n)`` bound."""
    draws = np.random.default_rng(1).standard_normal((4000, n)).max(axis=1).mean()
    assert expected_max_normal(n) == pytest.approx(draws, rel=0.02)
    assert expected_max_normal(n) < math.sqrt(2 * math.log(n))


def test_mfu_falls_with_the_number_of_gpus_through_the_straggler_term():
    """Same per-replica work, more replicas: the slowest rank adds a growing share; with no
    stragglers that share is zero and the MFU higher at every size."""
    shares, gaps = [], []
    for gpus in (64, 512, 4096, 16384):
        kw = dict(gpus_per_node=8, nodes=gpus // 8, stragglers=MEGASCALE_CLUSTER)
        s = step_breakdown(gpt(gpus), H100, **kw)
        ideal = step_breakdown(gpt(gpus), H100, **kw | {"stragglers": NO_STRAGGLERS})
        assert ideal.straggler_s == 0.0 < s.straggler_s
        shares.append(s.straggler_s / (s.compute_s - s.straggler_s))
        gaps.append(ideal.mfu - s.mfu)
    assert all(a < b for a, b in zip(shares, shares[1:], strict=False))
    assert all(a < b for a, b in zip(gaps, gaps[1:], strict=False))


def test_the_default_profile_grows_with_hosts_and_needs_no_jitter():
    """The default (slow hosts only, MegaScale sec. 6.3) still costs more on more hosts."""
    small = step_breakdown(gpt(256), H100, gpus_per_node=8, nodes=32)
    large = step_breakdown(gpt(16384), H100, gpus_per_node=8, nodes=2048)
    assert 0 < small.straggler_s / small.compute_s < large.straggler_s / large.compute_s < 0.05


def test_more_micro_batches_average_the_jitter_out():
    """Jitter is independent per micro-batch, so a replica's step varies less, relative to its
    length, the more micro-batches it runs."""
    shares = []
    for per_replica in (8, 32, 128):
        s = step_breakdown(gpt(4096, per_replica=per_replica), H100, gpus_per_node=8,
                           nodes=512, stragglers=Stragglers(0.1, 0.0, 0.0))
        shares.append(s.straggler_s / s.compute_s)
    assert shares[0] > shares[1] > shares[2] > 0


def test_stragglers_do_not_depend_on_the_fabric_share():
    """The engine sets kernel efficiency once per placement from ``compute_s`` (job_speed):
    the straggler term inside it must not move with the routed share."""
    full = step_breakdown(gpt(4096), H100, gpus_per_node=8, nodes=512,
                          stragglers=MEGASCALE_CLUSTER)
    squeezed = step_breakdown(gpt(4096), H100, gpus_per_node=8, nodes=512,
                              stragglers=MEGASCALE_CLUSTER, scaleout_share=0.2)
    assert squeezed.compute_s == full.compute_s and squeezed.straggler_s == full.straggler_s
    assert squeezed.total_s > full.total_s


@pytest.mark.parametrize("kw, message", [
    ({"jitter_cv": -0.1}, "jitter_cv"), ({"slow_share": 1.5}, "slow_share"),
    ({"slow_by": float("nan")}, "slow_by"),
])
def test_a_bad_straggler_profile_is_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        Stragglers(**({"jitter_cv": 0.0, "slow_share": 0.0, "slow_by": 0.0} | kw))


# ------------------------------------------------------------------ the unoptimised step


def test_the_unoptimised_step_is_slower_by_exactly_the_exposed_communication():
    """``no_overlap`` changes no kernel: same compute, and the extra step time is the TP, PP
    and DP communication the overlap had hidden."""
    opt = Recipe(tp_overlap=1.0, dp_overlap=1.0, pp_overlap=True, virtual_stages=4)
    kw = dict(gpus_per_node=8, nodes=512)
    fast = step_breakdown(gpt(4096, opt), H100, **kw)
    slow = step_breakdown(gpt(4096, no_overlap(opt)), H100, **kw)
    assert slow.compute_s == fast.compute_s
    exposed = (slow.tp_s - fast.tp_s) + (slow.pp_s - fast.pp_s) + (slow.dp_s - fast.dp_s)
    assert fast.tp_s == 0.0 < slow.tp_s and slow.dp_s > fast.dp_s and slow.pp_s > fast.pp_s
    assert slow.total_s - fast.total_s == pytest.approx(exposed, rel=1e-9)


def test_fp32_gradients_expose_more_data_parallel_time_without_overlap():
    job = gpt(4096, no_overlap(Recipe()))
    bf16 = step_breakdown(job, H100, gpus_per_node=8, nodes=512)
    fp32 = step_breakdown(job, H100, gpus_per_node=8, nodes=512, grad_bytes=4)
    assert fp32.dp_s > 1.4 * bf16.dp_s and fp32.compute_s == bf16.compute_s


def test_table3_overlap_steps_gain_about_what_megascale_measured():
    """Held out: MegaScale Table 3 (175B, 256 GPUs, batch 256): TP, PP and DP overlap add
    2.2 + 2.5 + 1.5 = 6.2 MFU points.  Tolerance +-2 points (three steps of a 0.1-point
    table; the twin's TP step is larger because it keeps 4 TP collectives per layer where the
    parallel block of the published run has 2)."""
    row = Row("Table 3", "175B", 256, 256, {})
    col = COLUMNS["megascale"]
    gain = step(row, col).mfu - step(row, replace(col, recipe=no_overlap(col.recipe))).mfu
    assert gain == pytest.approx(0.062, abs=0.02)


def test_table3_tripling_the_batch_on_256_gpus_gains_about_three_points():
    """Held out: MegaScale Table 3, last step: batch 256 -> 768 (LAMB) on 256 GPUs adds 3.0
    MFU points (62.3 -> 65.3 %): more micro-batches shrink the bubble and the per-step costs.
    Tolerance +-2 points."""
    gain = step(TABLE2[0], "megascale").mfu - step(Row("Table 3", "175B", 256, 256, {}),
                                                     "megascale").mfu
    assert gain == pytest.approx(0.030, abs=0.02)


def test_table3_megatron_baseline_at_batch_256():
    """Held out: MegaScale Table 3, first row: Megatron-LM on 256 GPUs at batch 256, 47.7 %
    MFU (with MegaScale's network tuning, which the twin does not distinguish).  Tolerance
    +-5 points."""
    row = Row("Table 3", "175B", 256, 256, {})
    assert step(row, "megatron").mfu == pytest.approx(0.477, abs=ROW_TOLERANCE)


# ------------------------------------------------------------------ MegaScale, held out


@pytest.mark.parametrize("row, column", HELD_OUT,
                         ids=[f"{r.gpus}-{c}" for r, c in HELD_OUT])
def test_validation_megascale_table2_row(row, column):
    """Held out: MegaScale Table 2 (175B, strong scaling, batch 768 up to 1,024 GPUs and 6,144
    above), both columns; the Megatron-LM column is the unoptimised configuration
    (``scaling_cases.MEGATRON_RECIPE``).  Tolerance +-5 MFU points."""
    assert step(row, column).mfu == pytest.approx(row.mfu[column], abs=ROW_TOLERANCE)


@pytest.mark.parametrize("column", list(COLUMNS))
def test_validation_megascale_table2_loss_from_256_to_12288_gpus(column):
    """Held out: published loss 11.8 (Megatron-LM) and 10.1 (MegaScale) points from 256 to
    12,288 GPUs; the model before issue 29 lost 5.7-5.8.  Tolerance +-3 points."""
    first, last = TABLE2[0], TABLE2[-1]
    twin = step(first, column).mfu - step(last, column).mfu
    assert twin == pytest.approx(first.mfu[column] - last.mfu[column], abs=TREND_TOLERANCE)


@pytest.mark.parametrize("column", list(COLUMNS))
def test_validation_megascale_figure9_weak_scaling_loss(column):
    """Held out: MegaScale Figure 9 (530B, batch = GPUs, 2,240 -> 11,200): Megatron-LM loses
    1.0 point, MegaScale none.  Tolerance +-3 points."""
    first, last = FIGURE9[0], FIGURE9[-1]
    twin = step(first, column).mfu - step(last, column).mfu
    assert twin == pytest.approx(first.mfu[column] - last.mfu[column], abs=TREND_TOLERANCE)


@pytest.mark.parametrize("column", [
    "megatron",
    pytest.param("megascale", marks=pytest.mark.xfail(strict=True, reason=(
        "MegaScale's 530B runs of Figure 9 are 5.4-6.2 points slower than the twin (54 % "
        "against 60 %) although its 175B rows of Table 2 hold within 3.7: the recomputation and "
        "memory settings of the 530B runs are not published (8.2 points before the last "
        "pipeline stage carried the logit layer)"))),
])
def test_validation_megascale_figure9_levels(column):
    """Held out: each Figure 9 row within +-5 MFU points.  With 3 layers per stage at PP 35
    the last stage's logit layer (0.26 of a layer) makes it 8.7 % slower than the others,
    which the step runs at (``step_model.stage_layers``); the Megatron-LM column comes within
    3.9-4.2 points (it was 5.4-5.7 fast when the logit layer was spread over the stages)."""
    for row in FIGURE9:
        assert step(row, column).mfu == pytest.approx(row.mfu[column], abs=ROW_TOLERANCE)


# ------------------------------------------------------------------ collectives at scale


def test_ring_latency_grows_with_ranks_and_tree_takes_over_at_thousands():
    """Ring all-reduce pays ``2(n-1)`` steps, the tree ``2 log2`` of the nodes: at 12,288 ranks
    a 4 MB all-reduce runs as a tree and the ring would take over 10x longer; even 4 GB goes
    to the tree there (about 50 ms of ring latency), while on 64 ranks 4 GB stays on the ring
    (bandwidth-bound, the tree's 0.92 efficiency loses)."""
    up, out = scaleup_link(H100), scaleout_link(400)
    small = collective("all_reduce", 4e6, 12288, gpus_per_node=8, scaleup=up, scaleout=out)
    ring = collective("all_reduce", 4e6, 12288, gpus_per_node=8, scaleup=up, scaleout=out,
                      algorithm="ring")
    assert small.algorithm == "tree" and ring.time_s > 10 * small.time_s
    assert collective("all_reduce", 4e9, 12288, gpus_per_node=8, scaleup=up,
                      scaleout=out).algorithm == "tree"
    assert collective("all_reduce", 4e9, 64, gpus_per_node=8, scaleup=up,
                      scaleout=out).algorithm == "ring"
    times = [collective("all_reduce", 4e6, n, gpus_per_node=8, scaleup=up, scaleout=out,
                        algorithm="ring").time_s for n in (64, 512, 4096)]
    assert times[0] < times[1] < times[2]
