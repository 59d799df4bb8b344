"""Validation: the twin against published figures that were NOT used to calibrate it.

Each test states the published figure, its source, the tolerance and why that tolerance.
Figures a constant was fitted to are checked elsewhere as ``test_regression_*`` (they cannot
validate anything).  A validation the twin fails is marked ``xfail(strict=True)`` with the
measured value: the disagreement is a finding, not something to tune away here.  Summary
table: docs/validation.md.  Sources are listed in ../shared/reference/figures.md unless the
docstring says otherwise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler.engine import Engine
from scheduler.fabric import fat_tree
from scheduler.fabric.routing import Router
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.hardware.power import PowerModel
from scheduler.physics.collectives import LinkClass, collective, scaleout_link, scaleup_link
from scheduler.physics.step_time import step_breakdown
from scheduler.reliability.checkpoint import RESTART_FIXED_S
from scheduler.report import build_report
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, Parallelism, TrainingJob, Workload
from scheduler.workload.scenarios import scaled_preset, scenario_workload

H100 = get("H100-SXM")
MONTH_H = 8760 / 12  # 730 h


def _llama3_engine(days: float, seed: int, gpus: int | None = None, **kw) -> Engine:
    preset, f = scaled_preset("llama3-16k", gpus)
    plan = preset.plan()
    wl = scenario_workload("llama3-16k", plan, days=days, rng=np.random.default_rng(seed),
                           scale=f)
    kw.setdefault("checkpoint_interval", "auto")
    e = Engine(plan, wl, seed=seed, failures=True, **kw)
    e.run_until(days * 86400.0)
    return e


def _report(e: Engine) -> dict:
    return build_report(e, scenario={}, wall_seconds=0.0)


@pytest.fixture(scope="module")
def llama3_54d() -> Engine:
    return _llama3_engine(54, seed=3)


# ------------------------------------------------------------------------- failures


@pytest.mark.xfail(strict=True, reason=(
    "the twin's NIC-ToR link and ToR rates, set from Llama 3's 35 switch/cable interruptions, "
    "are about 2x HPN's monthly shares: 40 failures in 54 days on the Llama cluster (seed 3) "
    "where HPN's shares predict 17.6 (twin 0.117 %/month per link against HPN's 0.057 %)"))
def test_validation_failures_hpn_link_and_tor_rates(llama3_54d):
    """Failure model vs Alibaba HPN (SIGCOMM 2024): per month 0.057 % of NIC-ToR links and
    0.051 % of ToRs fail.

    Not fitted: the twin takes its switch/cable rate from Llama 3 Table 5 (35 in 54 days);
    HPN's shares were used only to split those 35 between links and leaves, never for their
    level.  HPN's shares on the twin's Llama cluster over 1,296 h (1.775 months):
    16,896 links x 0.057 % x 1.775 = 17.1 plus the leaves x 0.051 % x 1.775 = 0.5.

    Tolerance: the Poisson noise of the twin's own count, 1.96 sqrt(count) (95 %): HPN's
    expectation must fall inside the twin count's 95 % interval.  Fleet differences (HPN's
    Ethernet optics against Meta's RoCE fabric) are not budgeted: they are the question.
    """
    e = llama3_54d
    plan = e.state.plan
    months = 1296 / MONTH_H
    leaves = int(np.count_nonzero(plan.fabric.switch_tier == 0))
    hpn = (plan.n_gpus * 0.00057 + leaves * 0.00051) * months
    twin = e.reliability.failures.get("network_cable", 0) + e.reliability.failures.get(
        "leaf_switch", 0)
    assert abs(twin - hpn) <= 1.96 * math.sqrt(twin)


# ------------------------------------------------------- checkpointing and recovery


def test_validation_recovery_llama3_effective_training_time_above_90_percent(llama3_54d):
    """Recovery model vs Llama 3 (sec. 3.3.4): "effective training time above 90 %" over the
    54-day snapshot with 466 interruptions.

    Not fitted: the interruption rates come from Table 5, but nothing in the recovery path
    (detection delays, the 180 s relaunch, the checkpoint write and restore times from the
    2 TB/s Tectonic figure, the Daly interval) was tuned to the 90 %.
    Tolerance: none beyond the published bound itself (ETTR > 0.90).
    """
    r = _report(llama3_54d)
    job = r["largest_job"]
    assert job["gpus"] == 16384 and job["interruptions"] > 400
    assert 0.90 < job["ettr"] < 1.0


def test_validation_recovery_megascale_over_100_restarts_and_above_90_percent():
    """Recovery model vs MegaScale (NSDI 2024): a production run on 12,288 GPUs with over 100
    restarts kept more than 90 % effective training time.

    Not fitted: MegaScale's figures were not used anywhere in the twin.  The twin runs a
    12,288-GPU dense job on the Llama-calibrated failure rates for three weeks (the paper
    says "several weeks").  Tolerance: the published bounds themselves (> 100 restarts,
    ETTR > 0.90).
    """
    e = _llama3_engine(21, seed=4, gpus=12672)  # 1,584 nodes less 48 spares: 12,288 GPUs
    job = _report(e)["largest_job"]
    assert job["gpus"] == 12288
    assert job["interruptions"] > 100
    assert job["ettr"] > 0.90


def test_validation_checkpoint_llama3_state_per_gpu_is_1mb_to_4gb():
    """Checkpoint size vs Llama 3 (sec. 3.3.4): each GPU saves 1 MB to 4 GB of model state.

    Not fitted: the twin's 14 bytes per parameter come from mixed-precision Adam (ZeRO's
    accounting, figures.md), not from Llama 3.  405B x 14 B over 16,384 GPUs = 346 MB.
    Tolerance: the published range itself.
    """
    preset, _ = scaled_preset("llama3-16k", None)
    plan = preset.plan()
    job = scenario_workload("llama3-16k", plan, days=1, rng=np.random.default_rng(0)).jobs[0]
    per_gpu_gb = job.checkpoint_gb / job.gpus
    assert per_gpu_gb == pytest.approx(0.346, rel=0.01)
    assert 1e-3 <= per_gpu_gb <= 4.0


def test_validation_recovery_gemini_in_memory_recovery_over_13x_faster():
    """In-memory recovery vs Gemini (SOSP 2023): failure recovery more than 13x faster than
    from remote persistent storage.

    Gemini's measure is the time wasted per failure: progress lost since the last checkpoint
    plus the time to retrieve the checkpoint (its detection and relaunch costs are the same for
    both and left out).  The twin, same seed and failures, auto (Daly) intervals: lost work
    per interruption from the ledger, retrieval = restart time less the fixed relaunch.
    Not fitted: Gemini's figures were not used; only its design (peer replicas, per-step
    checkpoints) was.  Tolerance: the published bound itself (> 13x).  Counting detection and
    relaunch as well, the twin's ratio is far lower (docs/validation.md).

    Was an xfail at 12.8x (seed 5) until issue 29's rates per up-hour and scale losses; now
    16.6x at seed 5 (108.9 s vs 6.6 s), 15.2x at seed 6 and 13.4x at seed 7: above the bound,
    though not by much at every seed.
    """
    wasted = {}
    for mode in ("disk", "memory"):
        e = _llama3_engine(10, seed=5, recovery=mode)
        r = _report(e)
        job = r["largest_job"]
        lost_s = r["ledger_gpu_hours"]["lost_work"] * 3600 / job["gpus"] / job["interruptions"]
        wasted[mode] = lost_s + (job["restart_s"] - RESTART_FIXED_S)
    assert wasted["disk"] / wasted["memory"] > 13


# ------------------------------------------------------------------------- storage


@pytest.mark.xfail(strict=True, reason=(
    "at the hyperscale-100k sizing (0.5 GB/s of write per GPU, the vendors' rule at the RA's "
    "2:1) the twin writes 30 GB per GPU in 60 s, HPN's production needs about 100 s "
    "(0.3 GB/s per GPU)"))
def test_validation_storage_hpn_checkpoint_of_30gb_per_gpu_in_about_100s():
    """Storage and checkpoint path vs Alibaba HPN (SIGCOMM 2024): about 30 GB per GPU per
    checkpoint, written in about 100 s.

    Not fitted: the hyperscale-100k preset sizes its central tier by the storage vendors' rule
    (1 GB/s read per GPU, half for writes), not by HPN.  A 1,024-GPU job with 30 GB per GPU on
    that preset (scaled down, per-GPU bandwidth kept).
    Tolerance: +-25 %: "about 100 s" is a rounded production figure; HPN's job sizes and
    storage are not published, so only the per-GPU rate can be compared.
    """
    preset, _ = scaled_preset("hyperscale-100k", 2048)
    plan = preset.plan()
    gpus = 1024
    job = TrainingJob(0, "hpn", "t", 0.0, gpus, gpus * 989e12 * 0.4 * 3600 * 4,
                      checkpoint_gb=30.0 * gpus, checkpoint_interval_s=7200.0)
    e = Engine(plan, Workload(jobs=(job,)), seed=0)
    e.run_until(600.0)
    write_s = _report(e)["largest_job"]["checkpoint_write_s"]
    assert write_s == pytest.approx(100.0, rel=0.25)


# --------------------------------------------------------------------- collectives


def test_validation_collectives_a100_hdr_all_reduce_192_gb_s():
    """Collective model vs a maintainer's measurement not used in the fit: "On an Nvidia
    DGX-A100 system we have 8x200Gbit/s IB cards and we measure 192GB/s AllReduce BusBW"
    (AddyLaddy, NVIDIA/nccl #812, quoted in NVIDIA/nccl #1576).

    Not fitted: the link efficiencies were fitted on H100 NVLink and NDR figures (nccl-tests
    #212, #290); here they are applied to HDR 200G and A100 NVLink3 (600 GB/s both ways;
    A100 is not in the catalog, so the link is built by hand).  8 GiB, 16 nodes.
    Tolerance +-4 %: the maintainers' own per-NIC figures span 46-49 GB/s of 50 (92-98 %,
    +-3 % around their middle), plus 1 % for the unpublished node count (the twin gives
    185.8-187.7 GB/s over 4-32 nodes).
    """
    up = LinkClass("A100 NVLink3", 300.0 * 370.0 / 450.0, scaleup_link(H100).alpha_s)
    r = collective("all_reduce", 8 * 2 ** 30, 128, gpus_per_node=8, scaleup=up,
                   scaleout=scaleout_link(200))
    assert r.algorithm == "ring"
    assert r.busbw_GB_s == pytest.approx(192.0, rel=0.04)


def test_validation_collectives_all_to_all_across_16_nodes_is_one_nic():
    """All-to-all model vs S. Jeaugey's rule (nccl-tests #130): across N nodes all-to-all
    busbw is N/(N-1) times one GPU's network bandwidth, "the performance of a single NIC"
    (nccl-tests #267).  With 46-48 GB/s per NDR NIC (#290): 16/15 x 46-48 = 49.1-51.2 GB/s.

    Partly circular: the per-NIC 47 GB/s is the fitted NIC efficiency; what this validates is
    the all-to-all structure (one NIC per GPU, no spreading over the node's NICs), which was
    not fitted.  Tolerance: the published range.
    """
    r = collective("all_to_all", 8 * 2 ** 30, 128, gpus_per_node=8, scaleup=scaleup_link(H100),
                   scaleout=scaleout_link(400))
    assert 16 / 15 * 46 <= r.busbw_GB_s <= 16 / 15 * 48


# ---------------------------------------------------------------------- step time


def test_validation_step_time_llama3_8192_gpus_at_43_percent_mfu():
    """Step-time model vs Llama 3 Table 4, first row: 405B on 8,192 H100, TP 8 x PP 16 x
    DP 64, 16M-token batches (32 sequences of 8,192 per replica): 430 TFLOPS per GPU, 43 %
    BF16 MFU (430 / 989 = 43.5 %).  (The report's table; figures.md gives the 38-43 % range.)

    Not fitted: DEFAULT_EFFICIENCY was fitted on the 16,384-GPU row (400 TFLOPS); at 8,192
    GPUs each replica has twice the micro-batches, so the bubble shrinks.  Same assumption as
    the fit: 4 virtual stages.  Tolerance +-2 points of MFU: the fit itself sits 1.6 points
    below its own 400 TFLOPS target, and the report rounds MFU to whole percent.
    """
    job = TrainingJob(0, "llama3-405b", "t", 0.0, 8192, 1e21, params_b=405.0,
                      parallelism=Parallelism(8, 16, 64))
    s = step_breakdown(job, H100, gpus_per_node=8, nodes=1024, global_batch_tokens=2 ** 24,
                       virtual_stages=4)
    assert s.microbatches == 32
    assert s.efficiency_factor * DEFAULT_EFFICIENCY == pytest.approx(430 / 989, abs=0.02)


@pytest.mark.xfail(strict=True, reason=(
    "the twin's MFU can never exceed its kernel efficiency, DEFAULT_EFFICIENCY = 0.54 (fitted "
    "to Llama 3); MegaScale's end-to-end 55.2 % is above it.  The twin gives 42.9 % for a "
    "MegaScale-like job (175B, 12,288 GPUs, TP 8 x PP 8 x DP 192, v = 4)"))
def test_validation_step_time_megascale_55_percent_mfu_on_12288_gpus():
    """Step-time model vs MegaScale (NSDI 2024): 55.2 % MFU training a 175B model on 12,288
    GPUs.

    Not fitted: MegaScale was not used anywhere.  Job: 175B, 2,048-token sequences, 6,144
    sequences per batch, TP 8 x PP 8 x DP 192 (the paper's setup as we read it), 4 virtual
    stages as in the Llama fit, H100 links standing in for MegaScale's GPUs; whatever the
    setup, the twin's MFU is at most 0.54 times an efficiency factor below 1.
    Tolerance +-3 points of MFU (the setup is partly assumed).
    """
    job = TrainingJob(0, "megascale-175b", "t", 0.0, 12288, 1e21, params_b=175.0,
                      parallelism=Parallelism(8, 8, 192))
    s = step_breakdown(job, H100, gpus_per_node=8, nodes=1536,
                       global_batch_tokens=6144 * 2048, microbatch_tokens=2048,
                       virtual_stages=4)
    assert s.efficiency_factor * DEFAULT_EFFICIENCY == pytest.approx(0.552, abs=0.03)


# -------------------------------------------------------------------------- power


@pytest.mark.xfail(strict=True, reason=(
    "15,360 H100 at full load draw 19.6 MW in their racks (10.2 kW per node), 21.6 MW of IT "
    "with the fabric and 25.9 MW at PUE 1.2: above HPN's 18 MW even at PUE 1"))
def test_validation_power_hpn_18mw_for_15k_gpus():
    """Power model vs Alibaba HPN (SIGCOMM 2024): a pod of about 15,000 GPUs (15,360:
    15 segments of 1,024) fits the 18 MW of one building.

    Not fitted: the host share comes from the DGX H100's 10.2 kW, the PUE from the published
    1.1-1.6 range; HPN's figure was not used.  Read as the building's (facility) power at full
    load, default PUE; a rail-optimised fabric as HPN's.
    Tolerance +-10 %: "18 MW" and "15K GPUs" are rounded to two figures (about 3 % each),
    and HPN's hosts are not DGX H100s.
    """
    plan = plan_cluster("hpn-pod", (NodeGroup("H100-SXM", 1920, nodes_per_rack=2),),
                        fabric_kind="rail")
    assert plan.n_gpus == 15360
    r = PowerModel(plan).step(1.0)
    assert r.facility_mw == pytest.approx(18.0, rel=0.10)


# -------------------------------------------------------------- fabric and routing


def test_validation_fabric_al_fares_48_port_fat_tree():
    """Fat-tree builder vs Al-Fares, Loukissas, Vahdat (SIGCOMM 2008): a fat-tree of 48-port
    switches supports 27,648 hosts, with 5k^2/4 = 2,880 switches.

    Not fitted: the builder implements the paper's construction; it never reads these
    counts.  Tolerance: exact (counts).
    """
    f = fat_tree(48)
    assert f.n_endpoints == 27_648
    assert f.n_switches() == 2_880


def test_validation_fabric_llama3_preset_pods_of_3072_gpus():
    """Zone builder vs Meta's RoCE cluster (Llama 3 report; SIGCOMM 2024): 3,072-GPU pods
    (192 racks of 16 GPUs) with 1:7 oversubscription above them, the 16K job spanning them.

    Fitted: all of it.  The 1:7 ratio and the 3,072-GPU, 16-per-rack zone are the preset's
    inputs from these sources (built as ``meta-24k`` builds them), so this checks that the
    preset builds them, it predicts nothing: 192 leaves of 16 GPUs per zone, 192 : 27
    uplinks per spine (7.1 : 1), and the 16,384-GPU job on 16,384 / 3,072 = 5 1/3 zones (five
    full, 1,024 GPUs of the sixth), as Meta's did.  Tolerance: exact (counts); the built
    ratio within 2 %.
    """
    preset, _ = scaled_preset("llama3-16k", None)
    plan = preset.plan()
    params = plan.fabric.params
    assert params["oversubscription"] == 7.0
    assert params["island_endpoints"] == 3072
    assert (params["island_leaves"], params["gpus_per_leaf"]) == (192, 16)
    assert params["measured_oversubscription"] == pytest.approx(7.0, rel=0.02)
    wl = scenario_workload("llama3-16k", plan, days=1, rng=np.random.default_rng(0))
    e = Engine(plan, wl, seed=0)
    e.run_until(3600.0)
    run = max(e.runs, key=lambda r: r.gpus)
    per_zone = np.bincount(plan.fabric.switch_pod[plan.fabric.endpoint_leaf[run.gids]])
    assert sorted(per_zone[per_zone > 0].tolist(), reverse=True) == [3072] * 5 + [1024]


def test_validation_routing_full_fat_tree_carries_any_permutation_at_line_rate():
    """Routing (ECMP, max-min) vs Al-Fares et al. (SIGCOMM 2008): a k-ary fat-tree has full
    bisection bandwidth, so with ideal load balancing every host can send at line rate to
    any other, whatever the permutation; at 1:3 oversubscription the worst case gives each
    host a third of its bandwidth.

    Not fitted: the router was not tuned to any figure.  The twin's ECMP is fluid (ideal
    splitting); real hash-based ECMP does worse, which the paper shows and the twin does not
    model.  Tolerance: exact shares (1 and 1/3) to 1e-9.
    """
    f = fat_tree(8)
    n = f.n_endpoints
    for seed in range(5):
        p = np.random.default_rng(seed).permutation(n)
        jobs = [np.sort(p[2 * i:2 * i + 2]) for i in range(n // 2)]
        res = Router(f, gpus_per_node=1).update(jobs, f.port_gbps)
        assert res.job_share == pytest.approx(1.0, abs=1e-9)
    over = fat_tree(8, oversubscription=3.0)
    n = over.n_endpoints
    jobs = [np.array([i, i + n // 2]) for i in range(n // 2)]   # every pair crosses pods
    res = Router(over, gpus_per_node=1).update(jobs, over.port_gbps)
    assert res.job_share == pytest.approx(1 / 3, abs=1e-9)
