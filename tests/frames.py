"""Schema-valid live frames and placements for tests that write their own.

:func:`frame` builds a :class:`~scheduler.frame_schema.StoredFrame`, :func:`placement` a
:class:`~scheduler.placement_schema.LivePlacement`, :func:`lost_frame` a
:class:`~scheduler.frame_schema.LostFrame`: a quiet default of every key the schema requires,
with the test's ``overrides`` laid over it.  An override of a record (a type with fixed keys:
``util``, ``jobs``, ``mirror``, a running job, a placed job ...) fills in the keys it leaves
out from that type's default, in lists and maps too, so a test states only what it is about::

    frame(t=60.0, util={"down": 8}, tenants=[{"tenant": "a", "used_gpus": 40}],
          mirror={"telemetry": {"temp_max_c": 91.0}})
    placement(jobs={"llm": {"gpus": 16, "nodes": [[0, 1]], "gpu_runs": [[0, 15]]}})

``None`` sets a nullable key to null (a frame without the power model, a placement an older
engine wrote).  A placed job has no default ``gpus``, ``nodes`` or ``gpu_runs``: which GPUs a
gang holds is the test's to say, never guessed.  Every object built is validated against the
checked-in ``docs/frame.schema.json`` (after the JSON round trip the web side sees): an
override the schema refuses, or a default that drifted from the schema, fails the test here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from jsonschema import Draft202012Validator

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "docs" / "frame.schema.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
DEFS = SCHEMA["$defs"]


def _scale(**kw) -> dict:
    return {"zmin": 0.0, "zmax": 1.0, "unit": "", "title": "", **kw}


_HEATMAP = {"title": "", "x": "", "y": "", "rows_per_cell": 1, "cols_per_cell": 1,
            "shape": [1, 1], "z": [[0.0]], "rows": [[0, 0]], "scale": _scale()}

DEFAULTS: dict[str, dict] = {
    # the frame's records
    "VendorUse": {"gpus": 0, "allocated": 0},
    "Utilisation": {"gpus": 96, "allocated": 0, "idle": 96, "spare": 0, "down": 0,
                    "by_vendor": {}},
    "LedgerHours": dict.fromkeys(DEFS["LedgerHours"]["required"], 0.0),
    "JobCounts": {"queued": 0, "running": 0, "recovering": 0, "in_cloud": 0, "done": 0,
                  "preemptions": 0},
    "QueuedJob": {"position": 1, "tenant": "default", "gpus": 8, "priority": 0, "wait_h": 0.0,
                  "reserved_start_h": None, "reason": ""},  # name: the test's
    "Span": {"pods": 1, "leaves": 1},
    "RunningJob": {"tenant": "default", "gpus": 8, "state": "running", "model": "H100-SXM",
                   "span": {"pods": 1, "leaves": 1}, "mfu": 0.0, "running_h": 0.0},  # name
    "TenantUse": {"used_gpus": 0, "quota_gpus": 0},  # tenant: the test's
    "Inference": {"serving_gpus": 0, "slo_attainment": None},
    "Interruptions": {"unplanned": 0, "planned": 0, "by_cause": {}},
    "MttfBucket": {"jobs": 0, "interruptions": 0, "mttf_hours": None,
                   "predicted_mttf_hours": None},  # gpus: the test's
    "Failures": {"total": 0, "spares_free": 0, "repairs_pending": 0, "lemon_nodes": [],
                 "mttf_by_size": []},
    "Power": {"it_mw": 0.0, "facility_mw": 0.0, "rack_peak_kw": 0.0, "throttled_gpus": 0},
    "Event": {"t": 0.0, "kind": "info", "text": ""},
    "Scale": _scale(),
    "LinkHeatmap": {**_HEATMAP, "down": [[0.0]], "links_down": 0},
    "RackHeatmap": {**_HEATMAP, "rows_per_hall": 1, "empty": -1},
    "RackHeatmaps": {"status": {**_HEATMAP, "rows_per_hall": 1, "empty": -1}},
    "StorageTier": {"demand_gb_s": 0.0, "supply_gb_s": 0.0, "capacity_gb_s": 0.0},  # tier
    "HallSummary": {"racks": 1, "racks_out": 0, "nodes_out": 0, "worst": 0.0},  # hall
    "Heatmaps": {"racks": {"status": {**_HEATMAP, "rows_per_hall": 1, "empty": -1}}},
    "MirrorTelemetry": {"gpus_reporting": 0, "gpus": 0, "util_mean_pct": None,
                        "power_kw": None, "temp_max_c": None, "tensor_active_mean": None},
    "MirrorSummary": {"polls": 0, "pending_reasons": {}, "ended": {}, "rejected": {},
                      "rejected_count": 0, "xid": {}, "suspended": 0, "jobs": {},
                      "reservations": [],
                      "failures_measured": {"nodes_down": 0, "node_hours": 0.0,
                                            "profile": None, "fitted": False},
                      "telemetry": {"gpus_reporting": 0, "gpus": 0, "util_mean_pct": None,
                                    "power_kw": None, "temp_max_c": None,
                                    "tensor_active_mean": None}},
    "SourceProblem": {"count": 0, "names": []},
    "SourceStatus": {"state": "ok", "last_ok": None, "last_try": None, "age_s": None,
                     "error": "", "read_s": None, "problems": {}},
    "AlertCount": {"firing": 0},
    "IncidentJob": {"gpus": 8, "lost_gpu_h": 0.0},  # name: the test's
    "IncidentRecord": {"component": "host", "unit": 0, "target_kind": "node", "target_id": 0,
                       "cause": "faulty_gpu", "source": "drill", "drill": True,
                       "drill_id": None, "since": 0.0, "expected_repair": None,
                       "resolved_at": None, "duration_s": None, "nodes": [],
                       "nodes_count": 0, "gpus_down": 0, "jobs": [], "jobs_count": 0,
                       "gpus_hit": 0, "lost_work_gpu_h": 0.0, "down_gpu_h": 0.0,
                       "gpu_hours_lost": 0.0},  # id: the test's
    "IncidentCounts": {"open": 0, "open_drills": 0, "resolved": 0, "resolved_kept": 0,
                       "open_by_kind": {}},
    "Incidents": {"open": [], "resolved": [],
                  "counts": {"open": 0, "open_drills": 0, "resolved": 0, "resolved_kept": 0,
                             "open_by_kind": {}}},
    # the placement's records
    "PlacedJob": {"state": "running", "tenant": "default", "model": "H100-SXM"},
    "HeldJob": {"tenant": "default", "gpus": 8, "priority": 0, "reason": "JobHeldUser",
                "wait_h": 0.0},  # name: the test's
    "HeatDetail": {"links": {}, "racks": {}},
}
"""Each record's default: quiet (nothing running, nothing down, nothing reported that may be
null).  Keys left out are the test's to give (names; a placed job's GPUs and runs)."""
_DRIVER = {"speed": 60.0, "paused": False, "health": "ok", "lag_ticks": 0,
           "source": "simulate", "sources": None}
DEFAULTS["StoredFrame"] = {
    "t": 0.0, "util": DEFAULTS["Utilisation"], "mfu": 0.0, "loss_pp": {}, "goodput": 0.0,
    "mfu_window": None, "mfu_window_s": 3600.0, "ettr": None,
    "ledger_gpu_hours": DEFAULTS["LedgerHours"], "jobs": DEFAULTS["JobCounts"], "queue": [],
    "running_jobs": [], "tenants": [], "inference": DEFAULTS["Inference"],
    "interruptions": DEFAULTS["Interruptions"], "failures": DEFAULTS["Failures"],
    "power": None, "events": [], "heatmaps": DEFAULTS["Heatmaps"], "mirror": None,
    "incidents": DEFAULTS["Incidents"], **_DRIVER}
DEFAULTS["LostFrame"] = {"t": 0.0, "lost": True, **_DRIVER, "health": "error"}
DEFAULTS["LivePlacement"] = {
    "t": 0.0, "jobs": {}, "down": [], "drained": [], "spare": [], "gpus_down": [],
    "switches_down": [], "links_down": [], "storage": {}, "heat": DEFAULTS["HeatDetail"],
    "held": [], "queue": [], "queue_total": 0, "serving": {}}


def _fill(schema: dict, value):
    """``value`` with every record in it completed from :data:`DEFAULTS`, as ``schema`` types
    it (records, nullable records, lists and maps of records)."""
    if value is None:
        return None
    ref = schema.get("$ref")
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        if name not in DEFAULTS or not isinstance(value, dict):
            return copy.deepcopy(value)
        props = DEFS[name]["properties"]
        out = copy.deepcopy(DEFAULTS[name])
        for key, v in value.items():
            out[key] = _fill(props[key], v) if key in props else copy.deepcopy(v)
        return out
    if "anyOf" in schema:  # a nullable value (None handled above) or a union of records
        branches = [b for b in schema["anyOf"] if b.get("type") != "null"]
        return _fill(branches[0], value) if len(branches) == 1 else copy.deepcopy(value)
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict) \
            and isinstance(value, list):
        return [_fill(schema["items"], v) for v in value]
    if schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict) \
            and isinstance(value, dict):
        return {k: _fill(schema["additionalProperties"], v) for k, v in value.items()}
    return copy.deepcopy(value)


def validate(message: str, obj) -> None:
    """Fail unless ``obj`` (after the JSON round trip) is a valid ``message`` of the schema."""
    validator = Draft202012Validator({**SCHEMA, "$ref": f"#/$defs/{message}"})
    errors = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
              for e in validator.iter_errors(json.loads(json.dumps(obj)))]
    assert not errors, f"not a valid {message}:\n  " + "\n  ".join(errors)


def build(message: str, **overrides) -> dict:
    """A valid ``message`` (a ``$defs`` name with a default): its default with ``overrides``."""
    obj = _fill({"$ref": f"#/$defs/{message}"}, overrides)
    validate(message, obj)
    return obj


def frame(**overrides) -> dict:
    """A :class:`~scheduler.frame_schema.StoredFrame` (what the driver hands
    ``live_state_write``): the quiet default with ``overrides``."""
    return build("StoredFrame", **overrides)


def lost_frame(**overrides) -> dict:
    """A :class:`~scheduler.frame_schema.LostFrame`: the driver lost the engine's state."""
    return build("LostFrame", **overrides)


def placement(**overrides) -> dict:
    """A :class:`~scheduler.placement_schema.LivePlacement`: nothing placed, down or queued, with
    ``overrides`` (each job in ``jobs`` a partial :class:`PlacedJob` with its GPUs, nodes and
    GPU runs)."""
    return build("LivePlacement", **overrides)


def gpu_runs(*runs: tuple[int, int], per_node: int = 8) -> list[list[int]]:
    """GPU runs ``[first, last]`` (engine GPU ids) of ``(node, count)`` pairs: ``count``
    lowest-index GPUs of each node, nodes holding ``per_node`` GPUs each."""
    return [[node * per_node, node * per_node + count - 1] for node, count in runs]
