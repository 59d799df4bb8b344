"""A cold start of the 100,000-GPU preset shows power, temperatures and link load from its first
frame: the physics prices the cluster when it starts, and again once the first gangs are
placed, not one tick (30 simulated minutes) later (:meth:`scheduler.physics.job_speed.Physics.
start`)."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.live import live_frame
from scheduler.simulate import Scenario
from tests.frames import validate

PRESET = "hyperscale-100k"
FIRST_STEP_S = 60.0
"""Simulated seconds of a live driver's first step at its default pace (well under a tick)."""


@pytest.fixture
def cold():
    """A fresh hyperscale-100k engine as the live driver builds it (no warm-up), and its first
    frame, taken before any event was handled."""
    engine, _ = Scenario(preset=PRESET, days=30, seed=0, failures=True,
                         physics=True).engine()
    return engine, live_frame(engine)


def power_shown(frame) -> bool:
    maps = frame["heatmaps"]
    return (frame["power"] is not None and frame["power"]["it_mw"] > 0
            and {"power_kw", "power_share", "outlet_c"} <= set(maps["racks"])
            and all("power_kw" in h and "outlet_c_max" in h for h in maps["halls"]))


def test_the_frame_of_a_fresh_engine_has_power_and_temperatures_before_any_step(cold):
    engine, frame = cold
    assert engine.now == 0.0 and not engine.running and engine.physics.ticks == 0
    assert power_shown(frame)
    outlet = np.array(frame["heatmaps"]["racks"]["outlet_c"]["z"])
    assert (outlet[outlet >= 0] >= frame["heatmaps"]["racks"]["outlet_c"]["scale"]["zmin"]).all()
    validate("LiveFrame", frame)


def test_the_first_step_s_frame_prices_the_gangs_it_placed_and_routes_their_load(cold):
    engine, before = cold
    engine.run_until(FIRST_STEP_S)
    assert engine.running and engine.physics.ticks == 0  # gangs run; no tick has come yet
    frame = live_frame(engine)
    assert power_shown(frame)
    assert frame["power"]["it_mw"] > before["power"]["it_mw"]  # an idle floor no longer
    # current, not stale: pricing the same cluster again gives the same figures (to the
    # re-rating that pricing does: each refresh powers the speeds the last one set)
    shown = frame["power"]
    engine.physics.refresh()
    again = engine.physics.last_power
    assert shown["it_mw"] == pytest.approx(again.it_mw, rel=1e-3)
    # a gang spans leaves, so its traffic is on the link heatmaps (not "No link load yet")
    assert any(r["span"]["leaves"] > 1 for r in frame["running_jobs"])
    links = frame["heatmaps"]["links"]
    assert links and max(max(max(row) for row in h["z"]) for h in links) > 0
    validate("LiveFrame", frame)
