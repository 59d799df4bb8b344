"""The live frame: JSON-safe, bounded, and an engine restored from a pickle runs on identically."""

import json
import pickle

from scheduler.live import live_frame
from scheduler.report import WALL_CLOCK_FIELDS, build_report
from scheduler.simulate import Scenario, run_scenario


def _strip(report):
    report.pop("wall_seconds")
    for path in WALL_CLOCK_FIELDS[1:]:
        report[path[0]].pop(path[1])
    return report


def test_a_live_frame_is_json_and_small():
    engine, _ = run_scenario(Scenario(preset="dev-small", days=0.2, seed=1))
    frame = live_frame(engine)
    text = json.dumps(frame)
    assert len(text) < 100_000
    assert frame["util"]["gpus"] == 512
    assert frame["util"]["allocated"] + frame["util"]["idle"] + frame["util"]["spare"] \
        + frame["util"]["down"] == 512
    assert len(frame["queue"]) <= 50 and len(frame["events"]) <= 50


def test_an_engine_restored_from_its_pickle_continues_exactly_as_the_original():
    engine, _ = run_scenario(Scenario(preset="dev-small", days=0.2, seed=3))
    copy = pickle.loads(pickle.dumps(engine))
    engine.run_until(engine.now + 6 * 3600)
    copy.run_until(copy.now + 6 * 3600)
    a = _strip(build_report(engine, scenario={}, wall_seconds=0.0))
    b = _strip(build_report(copy, scenario={}, wall_seconds=0.0))
    assert a == b
