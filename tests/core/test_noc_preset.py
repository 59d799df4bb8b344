"""The default live twin (``noc-4k``) is busy and instructive from its first frame (issue 16).

The live driver builds the preset's scenario, runs it for the preset's warm-up and then serves
frames at the default speed-up; these tests run the same scenario headless over the simulated
time of the first five wall minutes and check what an operator would see then.
"""

import numpy as np
import pytest

from scheduler.presets import LIVE_SPEEDUP, get_preset
from scheduler.report import utilisation
from scheduler.simulate import Scenario

FIRST_WALL_S = 300.0
SAMPLES = 6


@pytest.fixture(scope="module")
def first_minutes():
    """Samples of the live twin over its first five wall minutes (seed 0, the default)."""
    preset = get_preset("noc-4k")
    engine, _ = Scenario(preset="noc-4k", days=366, seed=0, failures=True,
                         physics=True).engine()
    engine.run_until(preset.warmup_s)
    samples = []
    for t in np.linspace(preset.warmup_s, preset.warmup_s + FIRST_WALL_S * LIVE_SPEEDUP,
                         SAMPLES):
        engine.run_until(float(t))
        u = utilisation(engine)
        samples.append({"t": engine.now, "allocated": u["allocated"] / u["gpus"],
                        "queued": len(engine.queue),
                        "tenants": {r.spec.tenant for r in engine.running.values()},
                        "serving": int(engine.fleet.serving_by_model.sum()),
                        "failures": sum(engine.reliability.failures.values())})
    return engine, samples


def test_noc_preset_has_at_least_4096_gpus_and_warms_up():
    preset = get_preset("noc-4k")
    assert int(preset.plan().node_gpus.sum()) >= 4096
    assert preset.warmup_s > 0
    assert get_preset("dev-small").warmup_s == 0


def test_allocation_stays_between_85_and_95_percent_with_a_queue(first_minutes):
    _, samples = first_minutes
    for s in samples:
        assert 0.85 <= s["allocated"] <= 0.95, s
        assert s["queued"] > 0, s


def test_several_training_tenants_and_inference_run(first_minutes):
    _, samples = first_minutes
    for s in samples:
        assert len(s["tenants"]) >= 3, s
        assert s["serving"] > 0, s


def test_failures_are_in_the_log_by_the_first_frames(first_minutes):
    engine, samples = first_minutes
    assert samples[-1]["failures"] >= 1
    assert any(line["kind"] == "failure" for line in engine.events)
