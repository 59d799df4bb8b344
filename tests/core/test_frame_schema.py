"""The live frame, the placement and the heatmap zoom match their one schema.

Real frames (every preset, every drill, a mirror, physics off, a Dragonfly+ fabric) are
validated against the JSON Schema generated from :mod:`scheduler.frame_schema`, after the
JSON round trip the web side sees.  Objects with fixed keys refuse unknown keys and require
their required ones, so a producer that adds or drops a field fails here until the schema
(and ``docs/frame.schema.json``) says so.
"""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from scheduler.control.commands import apply_command
from scheduler.control.drills import KINDS, run_drill
from scheduler.control.mirror import Observation, ObservedJob, mirror_hold, observe
from scheduler.engine import Engine
from scheduler.frame_schema import LiveFrame
from scheduler.frames import RACK_ZOOMS, heat_zoom
from scheduler.live import QUEUE_COLUMNS, live_frame, live_placement
from scheduler.model.ledger import CATEGORIES
from scheduler.placement_schema import LivePlacement
from scheduler.presets import PRESETS, get_preset
from scheduler.schema_json import json_schema, keys_of, schema_text
from scheduler.simulate import Scenario
from scheduler.workload.jobs import Workload

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "frame.schema.json"
SCHEMA = json_schema()
SMALL_GPUS = 2048
"""Presets larger than this run scaled down to it (their shape kept, their frames as big as
the test needs)."""


def validator(message: str) -> Draft202012Validator:
    return Draft202012Validator({**SCHEMA, "$ref": f"#/$defs/{message}"})


FRAME, PLACEMENT, ZOOM = validator("LiveFrame"), validator("LivePlacement"), validator("HeatZoom")


def wire(obj):
    """What the web receives: the JSON round trip (tuples become arrays, numpy scalars plain)."""
    return json.loads(json.dumps(obj))


def errors(v: Draft202012Validator, obj) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in v.iter_errors(wire(obj))]


def check_engine(engine) -> dict:
    """Validate the frame, the placement and every zoom the placement offers."""
    frame, placement = live_frame(engine), live_placement(engine)
    assert errors(FRAME, frame) == []
    assert errors(PLACEMENT, placement) == []
    heat = placement["heat"]
    for tier in heat["links"]:  # the switches of the map's first cell row
        first, last = next(h["rows"][0] for h in frame["heatmaps"]["links"]
                           if h.get("tier") == tier)
        assert errors(ZOOM, heat_zoom(heat, tier=tier, first=first, last=last)) == []
    for tier in RACK_ZOOMS:
        if tier in heat["racks"]:
            assert errors(ZOOM, heat_zoom(heat, tier=tier, hall=0)) == []
    return frame


def test_the_checked_in_json_schema_is_the_generated_one():
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), (
        "docs/frame.schema.json is stale: python -m scheduler.schema_json > "
        "docs/frame.schema.json")
    Draft202012Validator.check_schema(SCHEMA)


def test_the_ledger_figures_name_the_ledgers_categories():
    hours = SCHEMA["$defs"]["LedgerHours"]
    assert hours["required"] == list(CATEGORIES)
    assert set(SCHEMA["$defs"]["MfuLoss"]["properties"]) == (
        set(CATEGORIES) - {"productive", "inference"} | {"kernel_efficiency"})
    queue = SCHEMA["$defs"]["LivePlacement"]["properties"]["queue"]  # null: not reported
    row = next(b for b in queue["anyOf"] if b.get("type") == "array")["items"]
    assert len(row["prefixItems"]) == len(QUEUE_COLUMNS)
    assert set(QUEUE_COLUMNS) <= SCHEMA["$defs"]["QueuedJob"]["properties"].keys()


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_frames_of_every_preset_match_the_schema(preset):
    size = 8 * sum(g.nodes for g in get_preset(preset).groups)  # GPUs, about
    engine, _ = Scenario(preset=preset, days=2, seed=1,
                         gpus=SMALL_GPUS if size > SMALL_GPUS else None).engine()
    engine.run_until(30 * 3600.0)
    check_engine(engine)


def test_a_frame_without_the_physics_model_matches_the_schema():
    engine, _ = Scenario(preset="dev-small", days=1, seed=2, physics=False).engine()
    engine.run_until(12 * 3600.0)
    frame = check_engine(engine)
    assert frame["power"] is None and set(frame["heatmaps"]) == {"racks", "halls"}
    assert all("power_kw" not in h and "outlet_c_max" not in h for h in frame["heatmaps"]["halls"])


def test_a_dragonfly_plus_frame_with_its_group_by_group_map_matches_the_schema():
    engine, _ = Scenario(preset="mixed-vendor", days=2, seed=1, fabric="dragonfly+").engine()
    engine.run_until(30 * 3600.0)
    frame = check_engine(engine)
    assert any("tier" not in h for h in frame["heatmaps"]["links"])


@pytest.fixture(scope="module")
def busy_engine_blob():
    """mixed-vendor (three vendors, a cloud pool, physics) a day in, pickled: each drill
    starts from its own copy."""
    engine, _ = Scenario(preset="mixed-vendor", days=3, seed=4, load=2.0).engine()
    engine.run_until(24 * 3600.0)
    return pickle.dumps(engine)


@pytest.mark.parametrize("kind", KINDS)
def test_frames_after_each_kind_of_drill_match_the_schema(busy_engine_blob, kind):
    engine = pickle.loads(busy_engine_blob)
    if kind == "cloud_region_loss":  # a pool with gangs in it to lose
        engine.run_until(engine.now + 6 * 3600.0)
    run_drill(engine, kind, drill_id=1)
    frame = check_engine(engine)
    assert any(e["kind"] == "drill" for e in frame["events"])
    engine.run_until(engine.now + 1800.0)
    check_engine(engine)


OPERATOR_COMMANDS = (("drain_node", {"node": 3}), ("node_down", {"node": 4}),
                     ("switch_down", {"switch": 0}), ("link_down", {"link": 5}),
                     ("gpu_down", {"gpu": 9}), ("gpu_down", {"gpu": 17, "nic": True}),
                     ("feed_down", {"rack": 2}), ("cooling_down", {"loop": 0}),
                     ("storage_degraded", {"tier": "central", "factor": 0.5}))


def test_frames_after_operator_commands_match_the_schema(busy_engine_blob):
    engine = pickle.loads(busy_engine_blob)
    for command, params in OPERATOR_COMMANDS:
        apply_command(engine, command, **params)
        check_engine(engine)
    engine.run_until(engine.now + 1800.0)
    frame = check_engine(engine)
    assert {"switch", "link", "gpu", "node"} <= {k for e in frame["events"] for k in e}


def test_a_mirror_frame_matches_the_schema():
    engine = Engine(get_preset("dev-small").plan(), Workload(jobs=()), seed=3)
    mirror_hold(engine)
    n = engine.state.n_gpus
    xid, power = np.zeros(n), np.full(n, np.nan)
    xid[9], power[:16] = 79, 600.0
    observe(engine, Observation(
        jobs=[ObservedJob(key="1", state="running", gpus=16, nodes=(0, 1), elapsed_s=600.0),
              ObservedJob(key="2", state="pending", gpus=8, reason="Resources"),
              ObservedJob(key="3", state="running", gpus=8, nodes=(0,)),
              ObservedJob(key="4", state="ended", gpus=8, reason="COMPLETED")],
        nodes={5: {"drained": True}, 6: {"up": False}},
        telemetry={"xid": xid, "power_w": power, "util": np.where(np.isnan(power), np.nan, 80.0),
                   "temp_c": np.where(np.isnan(power), np.nan, 70.0)}))
    frame = check_engine(engine)
    mirror = frame["mirror"]
    assert mirror["rejected_count"] == 1 and mirror["xid"] == {"79": 1}
    assert mirror["telemetry"]["gpus_reporting"] == 16 and frame["queue"][0]["reason"]


# ----------------------------------------------------------------- the schema is strict
@pytest.fixture(scope="module")
def frame():
    engine, _ = Scenario(preset="dev-small", days=1, seed=1).engine()
    engine.run_until(20 * 3600.0)
    return wire(live_frame(engine))


@pytest.mark.parametrize("path", [("ettr",), ("util", "spare"), ("heatmaps", "racks", "status",
                                                                  "scale", "unit")])
def test_a_frame_that_drops_a_field_does_not_match(frame, path):
    broken = json.loads(json.dumps(frame))
    *parents, last = path
    node = broken
    for p in parents:
        node = node[p]
    del node[last]
    assert errors(FRAME, broken)


@pytest.mark.parametrize("path", [("unknown",), ("jobs", "unknown"),
                                  ("heatmaps", "racks", "unknown")])
def test_a_frame_that_adds_a_field_does_not_match(frame, path):
    broken = json.loads(json.dumps(frame))
    *parents, last = path
    node = broken
    for p in parents:
        node = node[p]
    node[last] = 1
    assert errors(FRAME, broken)


def test_the_frame_and_placement_keys_are_what_the_schema_names():
    assert {"t", "util", "heatmaps", "by_vendor", "rows_per_hall", "links_down"} <= (
        keys_of(LiveFrame))
    assert {"gpu_runs", "serving", "queue_total", "hall"} <= keys_of(LivePlacement)
