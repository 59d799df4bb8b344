"""The windowed MFU: the last simulated hour read off the cumulative ledger, carried in the
frame beside the MFU since start, at a cost that does not grow with the cluster or the run."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from scheduler.live import live_frame
from scheduler.model.ledger import MFU_WINDOW_S, Ledger, LedgerWindow
from tests.core.factories import HOUR, job, run_engine, small_plan, workload

FRAME_S = 300.0  # a frame every five simulated minutes, as a slow live twin publishes


def frames_until(engine, t_end: float, at: dict[float, object] | None = None) -> dict:
    """Step ``engine`` to ``t_end`` s, building a frame every :data:`FRAME_S`; at the times in
    ``at`` keep a copy of the engine's horizon ledger there. Returns the last frame."""
    frame = live_frame(engine)
    while engine.now < t_end - 1e-9:
        engine.run_until(min(t_end, engine.now + FRAME_S))
        frame = live_frame(engine)
        if at is not None and engine.now in at:
            at[engine.now] = engine.horizon_ledger()
    return frame


def mfu_between(earlier: Ledger, later: Ledger) -> float:
    """The ledger's own MFU of the books kept between two snapshots of it."""
    span = Ledger(later.peak)
    span.gpu_s = later.gpu_s - earlier.gpu_s
    span.achieved_flops = later.achieved_flops - earlier.achieved_flops
    return span.mfu()["achieved"]


def test_a_window_that_leaves_out_an_early_idle_period_reads_higher_than_since_start():
    # 32 GPUs idle for three hours, then one gang on all of them
    engine = run_engine(small_plan(4), workload(job(gpus=32, hours=6, submit_h=3.0)))
    frame = frames_until(engine, 4.5 * HOUR)
    assert frame["mfu"] > 0
    assert frame["mfu_window"] > frame["mfu"]
    assert MFU_WINDOW_S <= frame["mfu_window_s"] <= MFU_WINDOW_S + FRAME_S


def test_the_window_after_n_hours_is_the_ledgers_mfu_over_that_hour():
    jobs = [job(gpus=8, hours=1.5), job(gpus=16, hours=2.5, submit_h=0.5),
            job(gpus=8, hours=0.7, submit_h=1.2), job(gpus=24, hours=3, submit_h=2.1)]
    engine = run_engine(small_plan(4), workload(*jobs))
    snapshots = {2 * HOUR: None, 3 * HOUR: None}
    frame = frames_until(engine, 3 * HOUR, at=snapshots)
    expected = mfu_between(snapshots[2 * HOUR], snapshots[3 * HOUR])
    assert frame["mfu_window_s"] == MFU_WINDOW_S
    assert frame["mfu_window"] == pytest.approx(expected, rel=1e-9)
    assert frame["mfu_window"] != pytest.approx(frame["mfu"], rel=1e-3)  # a different period


def test_a_window_with_no_training_time_yet_has_no_figure_rather_than_zero():
    engine = run_engine(small_plan(2), workload(job(gpus=8, hours=1)))
    frame = live_frame(engine)
    assert frame["mfu_window"] is None and frame["mfu_window_s"] == 0.0


def test_a_window_keeps_a_bounded_ring_of_ledger_copies_however_long_it_runs():
    led = Ledger(peak_flops=np.array([1e15]))
    win = LedgerWindow(3600.0, 60.0)
    for minute in range(24 * 60):
        led.book("productive", 0, 60.0, achieved_flops=0.3e15 * 60)
        win.observe(60.0 * (minute + 1), led)
    assert len(win) <= 3600 / 60 + 2
    assert win.mfu(24 * 3600.0, led) == {"achieved": pytest.approx(0.3), "span_s": 3600.0}


@pytest.mark.parametrize("window_s, resolution_s", [(0.0, 0.0), (3600.0, 0.0),
                                                    (60.0, 3600.0), (float("inf"), 60.0),
                                                    (float("nan"), 60.0)])
def test_a_window_refuses_lengths_it_cannot_keep(window_s, resolution_s):
    with pytest.raises(ValueError, match="resolution_s"):
        LedgerWindow(window_s, resolution_s)


def test_an_observation_back_in_time_is_refused_and_changes_nothing():
    led = Ledger(peak_flops=np.array([1e15]))
    win = LedgerWindow(3600.0, 60.0)
    led.book("productive", 0, 600.0, achieved_flops=0.5e15 * 600)
    win.observe(600.0, led)
    before = win.mfu(600.0, led)
    with pytest.raises(ValueError, match="time went back"):
        win.observe(300.0, led)
    assert win.mfu(600.0, led) == before and len(win) == 1


def test_a_restored_or_forked_engine_keeps_its_window():
    engine = run_engine(small_plan(4), workload(job(gpus=32, hours=6, submit_h=1.0)))
    frames_until(engine, 2.5 * HOUR)
    restored = pickle.loads(pickle.dumps(engine))  # as the live engine's snapshots are kept
    fork = engine.fork()
    for e in (engine, restored, fork):
        e.run_until(3 * HOUR)
    windows = [(f["mfu_window"], f["mfu_window_s"]) for f in map(live_frame,
                                                                  (engine, restored, fork))]
    assert windows[0][1] >= MFU_WINDOW_S and windows == [windows[0]] * 3
