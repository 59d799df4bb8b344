"""The GPU-second ledger's MFU, loss waterfall and goodput on hand-built books.

Every expected figure is worked by hand in the docstrings from the bookings, not from the
ledger's own formulas; ``achieved + sum(losses) = 100`` alone would hold for any split.
"""

import numpy as np
import pytest

from scheduler.model.ledger import Ledger
from scheduler.report import build_report
from tests.core.factories import job, run_engine, small_plan, workload

H100, B200 = 989e12, 2250e12  # peak BF16 FLOP/s


def books() -> Ledger:
    """Two models, H100 (0) and B200 (1); GPU-hours booked:

    H100: productive 10 at half of peak, idle 6, recovery 2, inference 8;
    B200: productive 5 at 0.4 of peak, lost work 1.
    """
    led = Ledger(peak_flops=np.array([H100, B200]))
    led.book("productive", 0, 10 * 3600.0, achieved_flops=10 * 3600 * H100 * 0.5)
    led.book("productive", 1, 5 * 3600.0, achieved_flops=5 * 3600 * B200 * 0.4)
    led.book("idle", 0, 6 * 3600.0)
    led.book("recovery", 0, 2 * 3600.0)
    led.book("lost_work", 1, 1 * 3600.0)
    led.book("inference", 0, 8 * 3600.0)
    return led


def test_mfu_of_hand_built_books():
    """Peak FLOPs of the GPU-time that could train (inference left out), in 1e18 FLOP:
    H100 18 h x 3,600 x 989e12 = 64.0872; B200 6 h x 3,600 x 2,250e12 = 48.6; basis 112.6872.
    Achieved: 36,000 x 989e12 x 0.5 = 17.802 plus 18,000 x 2,250e12 x 0.4 = 16.2: 34.002.
    MFU = 34.002 / 112.6872 = 0.301738."""
    assert books().mfu()["achieved"] == pytest.approx(0.301738, abs=1e-6)


def test_loss_waterfall_of_hand_built_books():
    """Each loss is its peak FLOPs over the basis (112.6872e18): idle 21.6 ks x 989e12 =
    21.3624 -> 18.9573 pp; recovery 7.1208 -> 6.3191 pp; lost work 3.6 ks x 2,250e12 = 8.1
    -> 7.1880 pp; kernel efficiency = productive peak (35.604 + 40.5) less achieved (34.002)
    = 42.102 -> 37.3618 pp.  Inference has no line: it is not in the basis."""
    loss = books().mfu()["loss_pp"]
    assert loss["idle"] == pytest.approx(18.9573, abs=1e-3)
    assert loss["recovery"] == pytest.approx(6.3191, abs=1e-3)
    assert loss["lost_work"] == pytest.approx(7.1880, abs=1e-3)
    assert loss["kernel_efficiency"] == pytest.approx(37.3618, abs=1e-3)
    assert "inference" not in loss
    assert all(v == 0 for k, v in loss.items()
               if k not in ("idle", "recovery", "lost_work", "kernel_efficiency"))


def test_serving_gpu_time_does_not_change_mfu():
    led = books()
    before = led.mfu()["achieved"]
    led.book("inference", 1, 1000 * 3600.0)
    assert led.mfu()["achieved"] == before


def test_goodput_and_gpu_hours_of_hand_built_books():
    """Goodput counts GPU-time, not FLOPs: 15 productive of 24 training-eligible GPU-hours
    (32 booked less 8 serving) = 0.625."""
    led = books()
    assert led.goodput() == pytest.approx(0.625)
    hours = led.gpu_hours()
    assert (hours["productive"], hours["idle"], hours["inference"]) == (15.0, 6.0, 8.0)
    assert sum(hours.values()) == pytest.approx(32.0)


def test_an_empty_ledger_has_no_mfu():
    led = Ledger(peak_flops=np.array([H100]))
    assert led.mfu()["achieved"] == 0.0 and led.goodput() == 0.0
    with pytest.raises(ValueError, match="negative"):
        led.book("idle", 0, -10.0)


def test_the_engine_books_a_hand_worked_run():
    """32 H100 (4 nodes); one 8-GPU job computing exactly 1 h at kernel efficiency 0.5, no
    failures, no checkpoint state, physics off; run for 2 h.

    By hand: 8 GPU-h productive; the other 64 - 8 = 56 GPU-h free (idle or fragmented);
    MFU = 8 h x 0.5 / 64 h = 0.0625; goodput 8 / 64 = 0.125; kernel efficiency loses
    8 x 0.5 / 64 = 6.25 pp and the free GPUs 87.5 pp.
    """
    e = run_engine(small_plan(4), workload(job(gpus=8, hours=1.0, efficiency=0.5)),
                   until_h=2.0)
    r = build_report(e, scenario={}, wall_seconds=0.0)
    hours = r["ledger_gpu_hours"]
    assert hours["productive"] == pytest.approx(8.0)
    assert hours["idle"] + hours["fragmented"] == pytest.approx(56.0)
    assert r["mfu"]["achieved"] == pytest.approx(0.0625)
    assert r["goodput"] == pytest.approx(0.125)
    loss = r["mfu"]["loss_pp"]
    assert loss["kernel_efficiency"] == pytest.approx(6.25, abs=1e-3)
    assert loss["idle"] + loss["fragmented"] == pytest.approx(87.5, abs=1e-3)
    assert r["jobs"]["completed"] == 1


def test_a_negative_booking_beyond_rounding_is_refused_and_rounding_noise_books_zero():
    led = Ledger(np.array([1e15]))
    with pytest.raises(ValueError, match="negative booking"):
        led.book("idle", 0, -0.5)
    led.book("idle", 0, -1e-9)  # float noise of a closed segment
    assert led.gpu_s.sum() == 0.0


def test_fresh_books_are_empty_and_their_mfu_says_there_was_no_training_time():
    led = Ledger(np.array([1e15, 2e15]))
    assert led.total_gpu_s() == 0.0 and led.achieved_flops == 0.0
    assert led.mfu() == {"achieved": 0.0, "loss_pp": {}, "basis": "no training GPU-time"}
    assert led.goodput() == 0.0
