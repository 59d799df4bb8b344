"""The simulation kernel: event order, cancellation, handlers, hooks and named streams."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from scheduler.sim import Kernel, Kind, Streams


def recording_kernel():
    k = Kernel(seed=0)
    seen = []
    for kind in Kind:
        k.on(kind, lambda payload, kind=kind: seen.append((k.now, kind.name, payload)))
    return k, seen


def test_events_of_one_instant_are_handled_in_kind_order_then_in_scheduling_order():
    k, seen = recording_kernel()
    k.schedule(5.0, Kind.FAIL, "fail")
    k.schedule(5.0, Kind.ARRIVE, "second arrival")
    k.schedule(5.0, Kind.FINISH, "finish")
    k.schedule(5.0, Kind.ARRIVE, "third arrival")
    k.schedule(1.0, Kind.TICK, "tick")
    k.run_until(10.0)
    assert seen == [(1.0, "TICK", "tick"), (5.0, "FINISH", "finish"),
                    (5.0, "ARRIVE", "second arrival"), (5.0, "ARRIVE", "third arrival"),
                    (5.0, "FAIL", "fail")]


def test_a_cancelled_event_is_not_handled_and_does_not_make_an_instant():
    k, seen = recording_kernel()
    instants = []
    k.after_instant(lambda: instants.append(k.now))
    h = k.schedule(3.0, Kind.FINISH, "stale")
    k.schedule(7.0, Kind.ARRIVE, "live")
    h.cancel()
    assert k.peek() == 7.0
    assert k.step() and seen == [(7.0, "ARRIVE", "live")]
    assert instants == [7.0]
    assert not k.step()


def test_each_kind_has_one_handler_and_an_event_needs_one():
    k = Kernel()
    k.on(Kind.FAIL, print)
    with pytest.raises(ValueError, match="FAIL events already have a handler"):
        k.on(Kind.FAIL, print)
    with pytest.raises(ValueError, match="no handler for REPAIR"):
        k.schedule(1.0, Kind.REPAIR)


def test_time_cannot_go_back_and_nothing_is_scheduled_in_the_past():
    k, _ = recording_kernel()
    k.run_until(10.0)
    with pytest.raises(ValueError, match="it is 10.0 now"):
        k.schedule(9.0, Kind.ARRIVE)
    with pytest.raises(ValueError, match="cannot go back"):
        k.run_until(5.0)


def test_advance_hooks_see_every_interval_once_and_they_tile_the_run():
    k, _ = recording_kernel()
    spans = []
    k.on_advance(lambda a, b: spans.append((a, b)))
    for t in (2.0, 2.0, 4.5):
        k.schedule(t, Kind.ARRIVE)
    k.run_until(6.0)
    assert spans == [(0.0, 2.0), (2.0, 4.5), (4.5, 6.0)]


def test_the_instant_hook_runs_once_per_instant_after_all_its_events():
    k = Kernel()
    log = []
    k.on(Kind.ARRIVE, lambda p: log.append(p))
    k.after_instant(lambda: log.append("pass"))
    k.schedule(1.0, Kind.ARRIVE, "a")
    k.schedule(1.0, Kind.ARRIVE, "b")
    k.schedule(2.0, Kind.ARRIVE, "c")
    k.run_until(3.0)
    assert log == ["a", "b", "pass", "c", "pass"]


def test_pending_lists_live_events_in_handling_order():
    k, _ = recording_kernel()
    late = k.schedule(9.0, Kind.FAIL, 1)
    k.schedule(2.0, Kind.FAIL, 2).cancel()
    early = k.schedule(1.0, Kind.FAIL, 3)
    assert k.pending(Kind.FAIL) == [early, late]


# ------------------------------------------------------------------ streams
def test_a_named_stream_is_the_same_for_the_same_seed_and_differs_between_names():
    a, b = Streams(4), Streams(4)
    assert a.rng("failures", 3).random(5).tolist() == b.rng("failures", 3).random(5).tolist()
    assert a.rng("placement").random() != Streams(4).rng("drills").random()
    assert Streams(5).rng("placement").random() != Streams(4).rng("placement").random()


def test_opening_another_stream_does_not_shift_a_streams_draws():
    alone = Streams(1).rng("failures", 0).random(4)
    crowded = Streams(1)
    crowded.rng("my-new-process").random(100)
    crowded.rng("workload").random(100)
    assert crowded.rng("failures", 0).random(4).tolist() == alone.tolist()


def test_the_engines_streams_keep_their_pre_kernel_spawn_keys():
    # the placement stream is the first child of SeedSequence(seed).spawn(3), the failure
    # process k the k-th child of SeedSequence(seed, spawn_key=(7,)): seeded runs kept their draws
    seed = 11
    old_placement = np.random.default_rng(np.random.SeedSequence(seed).spawn(3)[0])
    old_mode_5 = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7,)).spawn(9)[5])
    s = Streams(seed)
    assert s.rng("placement").random() == old_placement.random()
    assert s.rng("failures", 5).random() == old_mode_5.random()


def test_reseed_redirects_generators_already_handed_out():
    s = Streams(1)
    held = s.rng("failures", 2)
    held.random(10)
    s.reseed(9)
    assert held.random(3).tolist() == Streams(9).rng("failures", 2).random(3).tolist()


def test_a_bad_seed_is_refused():
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="seed must be an integer"):
            Streams(bad)


def test_a_stream_named_outside_the_table_draws_the_same_in_another_process():
    # names map to spawn keys by CRC-32, not by hash(), which changes from process to process
    code = ("from scheduler.sim import Streams; "
            "print(repr(Streams(3).rng('what-if-arm-7').random()))")
    env = {"PYTHONHASHSEED": "123"}
    import os
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, **env}).stdout.strip()
    assert float(out) == Streams(3).rng("what-if-arm-7").random()
