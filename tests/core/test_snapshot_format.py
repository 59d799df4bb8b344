"""The snapshot format (:mod:`scheduler.snapshot`): a header readable alone, a versioned body,
format 1 (the bare pickle of release ddaa64d) upgraded on load, unknown formats refused."""

from __future__ import annotations

import collections
import json
import os
import pickle
import struct
import types
import zlib
from pathlib import Path

import numpy as np
import pytest

from scheduler import snapshot
from scheduler.engine import Engine
from scheduler.physics.job_speed import VIRTUAL_STAGES
from scheduler.physics.step_time import step_breakdown
from scheduler.report import WALL_CLOCK_FIELDS, build_report
from scheduler.simulate import Scenario
from scheduler.snapshot import FORMAT, UPGRADES, SnapshotError, dumps, loads, read_header

HOUR = 3600.0
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
V1 = FIXTURES / "v1-dev-small.bin"
V1_STATE = json.loads((FIXTURES / "v1-dev-small.json").read_text())
LAYOUT = FIXTURES / f"layout-v{FORMAT}.json"
RUNS_ON = json.loads((FIXTURES / "runs-on.json").read_text())
SPEED = ("gpu_hours", "achieved_flops")
"""The figures the speed model prices: since issue 29 (format 5: stragglers, recalibrated kernel
efficiencies; format 6: pipeline stage imbalance) no longer what the releases of the fixtures
recorded for the hours after their snapshot, but what this release gives (``runs-on.json``,
``record_runs_on.py``)."""


def report(e: Engine) -> dict:
    r = build_report(e, scenario={}, wall_seconds=0.0)
    for path in WALL_CLOCK_FIELDS:
        d = r
        for k in path[:-1]:
            d = d[k]
        d.pop(path[-1], None)
    return json.loads(json.dumps(r))


def state(e: Engine) -> dict:
    """What the fixture's JSON records (the same figures, read the same way)."""
    led = e.horizon_ledger()
    counters = {k: int(v) for k, v in e.counters.items() if k != "scheduler_wall_s"}
    return {"now": e.now, "running": sorted(r.spec.name for r in e.running.values()),
            "queue": sorted(r.spec.name for r in e.queue.values()), "runs": len(e.runs),
            "counters": counters, "failures": int(sum(e.reliability.failures.values())),
            "gpu_hours": pytest.approx(led.gpu_hours(), rel=1e-9, abs=1e-6),
            "achieved_flops": pytest.approx(led.achieved_flops, rel=1e-9)}


def recorded(key: str) -> dict:
    rec = dict(V1_STATE[key])
    rec["counters"] = {k: v for k, v in rec["counters"].items() if k != "scheduler_wall_s"}
    return {k: rec[k] for k in ("now", "running", "queue", "runs", "counters", "failures",
                                "gpu_hours", "achieved_flops")}


def priced_by_this_release(e: Engine) -> bool:
    """Every step the physics holds priced is what this release's step model gives for it (none
    priced by the model of the release that wrote the snapshot survives), and it priced some."""
    ph = e.physics
    for (idx, model, nodes, share), bd in ph._steps.items():
        m = ph.plan.models[model]
        if bd != step_breakdown(e.runs[idx].spec, m, gpus_per_node=int(m.per_node), nodes=nodes,
                                scaleout_share=max(0.01, share), overlap=ph.overlap,
                                virtual_stages=VIRTUAL_STAGES):
            return False
    return bool(ph._steps)


def runs_on(e: Engine, fixture: str, then: dict) -> int:
    """Six more hours of ``e``, loaded from ``fixture``, against ``then``, what the fixture's
    release recorded for them: the same starts, ends, failures and counters, books over the
    same GPU-hours in all; how those hours split and the FLOPs achieved as this release's speed
    model priced them from the snapshot on (:data:`SPEED`).  Returns how many more scheduling
    passes this engine made (the caller says how many it may)."""
    e.run_until(e.now + 6 * HOUR)
    now = state(e)
    hours = e.horizon_ledger().gpu_hours()  # each category rounded to 1e-6 GPU-hours
    assert sum(hours.values()) == pytest.approx(sum(then["gpu_hours"].values()),
                                                abs=len(hours) * 5e-7)
    assert priced_by_this_release(e)
    here = RUNS_ON[fixture]["after_6h"]
    assert {k: now.pop(k) for k in SPEED} == {k: here[k] for k in SPEED}, (
        f"{fixture} runs on with other figures than this release recorded (runs-on.json): if "
        f"the speed model changed on purpose, rerun tests/fixtures/snapshots/record_runs_on.py")
    then = {k: v for k, v in then.items() if k not in SPEED}
    passes = now["counters"].pop("passes") - then["counters"].pop("passes")
    assert now == then
    return passes


def live_engine(gpus: int = 64) -> Engine:
    """dev-small, small, a few hours in with a drill running and a storage tier degraded."""
    e, _ = Scenario(preset="dev-small", gpus=gpus, days=2, seed=5, failures=True,
                    physics=True).engine()
    e.run_until(3 * HOUR)
    e.command("drill", kind="node", target="random", drill_id=1)
    e.command("storage_degraded", tier="central", factor=0.5)
    e.run_until(5 * HOUR)
    return e


def v1_bytes(engine: Engine) -> bytes:
    """``engine`` as the release before the format wrote it (a bare zlib pickle)."""
    return zlib.compress(pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL), 1)


# ------------------------------------------------------------------ format 1: the old release
def test_the_old_releases_snapshot_loads_with_the_state_it_was_taken_with():
    assert len(V1.read_bytes()) == V1_STATE["size_bytes"] < 1 << 20
    assert read_header(V1.read_bytes()).format == 1
    e = loads(V1.read_bytes())
    at = V1_STATE["at_snapshot"]
    assert state(e) == recorded("at_snapshot")
    assert sorted(e.active_drills) == at["active_drills"]
    assert e.reliability.storage_fraction("central") == at["storage_central"]
    assert e.kernel.logged == at["logged"]
    assert e.lineage == "fixture:1" and e.keys is None and e.mirror is None


def test_the_old_releases_snapshot_runs_on_as_the_old_release_ran_it():
    """The same starts, ends, failures and counters as the old release, its GPU-hours priced
    by this release's speed model (:func:`runs_on`); one more scheduling pass: since issue 25
    a gang preempted in an instant may preempt in turn only 30 s later, and the pass woken then
    starts nothing here."""
    e = loads(V1.read_bytes())
    assert e.physics._steps == {}  # no step priced by the old model is reused
    assert e.scheduler.no_victims == {}  # nor a failed attempt that lacks the sets it tried
    state(e)  # booked at the same instant as the old engine was
    assert runs_on(e, V1.stem, recorded("after_6h")) == 1


def _v2_upgraded(e) -> bool:
    """Format 2 lacked the scheduler's mechanics and the runs' restart books."""
    return (e.lineage == "fixture:2" and e.scheduler.mechanics is None
            and all(r.last_start == r.first_start and not r.fresh and r.rank == ()
                    for r in e.jobs.runs)
            and e.jobs._queue_watchers == [e.scheduler])


def _v3_upgraded(e) -> bool:
    """Format 3 lacked reservations, the incident book and the queue's backfill estimates."""
    return (e.lineage == "fixture:3" and e.reliability.incidents.open_incidents == {}
            and all(vars(r.spec)["reservation"] == "" for r in e.jobs.runs)
            and (e.jobs.index.estimator is not None) == bool(e.scheduler.policy.backfill))


def _v4_upgraded(e) -> bool:
    """Format 4 held steps priced without the stragglers (none kept, as for every format:
    :func:`test_a_format_4_snapshots_steps_of_the_old_speed_model_are_dropped`)."""
    return e.lineage == "fixture:4"


def _v5_upgraded(e) -> bool:
    """Format 5 held steps priced with the logit layer spread over the pipeline stages and
    recipes without ``pp_edge_layers_off`` (the recipes' part:
    :func:`test_a_format_5_snapshots_recipes_keep_the_even_split_and_lose_their_old_steps`)."""
    return e.lineage == "fixture:5"


@pytest.mark.parametrize("fmt, upgraded", [(2, _v2_upgraded), (3, _v3_upgraded),
                                           (4, _v4_upgraded), (5, _v5_upgraded)],
                         ids=["format-2-by-f1f57e4", "format-3-by-f44fa85",
                              "format-4-by-32f2488", "format-5-by-630d9f2"])
def test_an_older_formats_snapshot_loads_and_runs_on_as_its_release_ran_it(fmt, upgraded):
    """Written by the release named in the id (``make_fixture.py``): upgraded on load
    with the fields that format lacked filled in and no step of the old speed model kept, the
    state at the snapshot as recorded, then six more hours as that release ran them, priced by
    this release's speed model (:func:`runs_on`; one more pass at most, as above), and written
    back in the current format."""
    path = FIXTURES / f"v{fmt}-dev-small.bin"
    blob = path.read_bytes()
    recorded = json.loads((FIXTURES / f"v{fmt}-dev-small.json").read_text())
    assert read_header(blob).format == fmt
    e = loads(blob)
    assert upgraded(e) and e.physics._steps == {}
    assert fmt >= 5 or e.scheduler.no_victims == {}  # format 5 kept the victim sets tried
    rec = {k: dict(recorded[k]) for k in ("at_snapshot", "after_6h")}
    for r in rec.values():
        r["counters"] = {k: v for k, v in r["counters"].items() if k != "scheduler_wall_s"}
    keys = ("now", "running", "queue", "runs", "counters", "failures", "gpu_hours",
            "achieved_flops")
    assert state(e) == {k: rec["at_snapshot"][k] for k in keys}
    assert runs_on(e, path.stem, {k: rec["after_6h"][k] for k in keys}) in (0, 1)
    assert read_header(dumps(e)).format == FORMAT and loads(dumps(e)).now == e.now


def test_a_format_4_snapshots_steps_of_the_old_speed_model_are_dropped():
    """32f2488 memoised its priced steps, without the stragglers of issue 29, and its failed
    preemption attempts without the victim sets tried: the upgrade empties both memos (and
    passes an engine without physics as it is)."""
    from scheduler.snapshot import _split, _unpickle, header_of, replace_format, upgrade_v4_to_v5
    header, body = _split((FIXTURES / "v4-dev-small.bin").read_bytes())
    old = _unpickle(body)
    steps = old.physics._steps
    assert steps and not any("straggler_s" in vars(bd) for bd in steps.values())
    assert [len(memo) for memo in old.scheduler.no_victims.values()] == [4]
    header, body = upgrade_v4_to_v5(header, body)
    new = _unpickle(body)
    assert header.format == 5 and new.physics._steps == {} and new.scheduler.no_victims == {}
    bare, _ = Scenario(preset="dev-small", gpus=64, days=1, seed=5, physics=False).engine()
    bare.run_until(2 * HOUR)
    header, body = upgrade_v4_to_v5(replace_format(header_of(bare), 4),
                                    zlib.compress(pickle.dumps(bare)))
    assert header.format == 5 and _unpickle(body).physics is None


def test_a_format_5_snapshots_recipes_keep_the_even_split_and_lose_their_old_steps():
    """630d9f2 priced a pipeline with the logit layer spread over its stages and had no
    ``Recipe.pp_edge_layers_off``: the upgrade empties the memo of priced steps and gives every
    recipe the even split it was priced with (0), also on a recipe the preset of today would
    build otherwise (``LLAMA3_RECIPE`` takes one layer off each edge)."""
    from scheduler.snapshot import _split, _unpickle, header_of, replace_format, upgrade_v5_to_v6
    from scheduler.workload.jobs import Recipe
    header, body = _split((FIXTURES / "v5-dev-small.bin").read_bytes())
    assert _unpickle(body).physics._steps
    header, body = upgrade_v5_to_v6(header, body)
    assert header.format == 6 and _unpickle(body).physics._steps == {}
    e = live_engine()
    recipe = Recipe(global_batch=64, pp_edge_layers_off=1)
    spec = e.jobs.runs[0].spec
    object.__setattr__(spec, "recipe", recipe)
    del recipe.__dict__["pp_edge_layers_off"]  # as a format-5 pickle holds it
    header, body = upgrade_v5_to_v6(replace_format(header_of(e), 5),
                                    zlib.compress(pickle.dumps(e)))
    upgraded = _unpickle(body).jobs.runs[0].spec.recipe
    assert header.format == 6 and vars(upgraded)["pp_edge_layers_off"] == 0
    assert upgraded == Recipe(global_batch=64) and _unpickle(body).physics._steps == {}


def test_a_format_3_snapshot_of_a_slurm_policy_engine_is_refused_in_one_line():
    """The slurm policy's books changed shape in format 4: refused, not rebuilt by a guess
    (a format-3 engine on that policy holds its mechanics on the scheduler)."""
    from scheduler.snapshot import header_of, replace_format, upgrade_v3_to_v4
    engine = live_engine()
    engine.scheduler.mechanics = ("format-3 slurm books",)
    body = zlib.compress(pickle.dumps(engine))
    with pytest.raises(SnapshotError, match="slurm policy cannot be upgraded to format 4"):
        upgrade_v3_to_v4(replace_format(header_of(engine), 3), body)


def test_the_old_releases_snapshot_steps_on_deterministically():
    a, b = loads(V1.read_bytes()), loads(V1.read_bytes())
    for e in (a, b):
        e.command("drill", kind="leaf_switch", target="random", drill_id=8)
        e.run_until(e.now + 12 * HOUR)
    assert report(a) == report(b)
    assert json.dumps(a.snapshot(), sort_keys=True) == json.dumps(b.snapshot(), sort_keys=True)


def test_an_upgraded_snapshot_is_written_back_in_the_current_format():
    e = loads(V1.read_bytes())
    data = dumps(e)
    header = read_header(data)
    assert (header.format, header.t_sim, header.gpus, header.lineage) == (
        FORMAT, V1_STATE["at_snapshot"]["now"], V1_STATE["gpus"], "fixture:1")
    again = loads(data)
    e.run_until(e.now + 2 * HOUR)
    again.run_until(again.now + 2 * HOUR)
    assert report(again) == report(e)


def test_fields_older_releases_lacked_are_filled_in_by_the_upgrade():
    e = live_engine()
    ends = e.jobs._ends._ends
    moved = e.jobs._moved
    for obj, name in ((e, "settings"), (e, "replans"), (e, "keys"), (e, "lineage"),
                      (e, "mirror"), (e, "active_drills"), (e, "_mfu_window"),
                      (e.kernel, "logged"), (e.jobs.pricing, "modes"),
                      (e.scheduler, "reasons"), (e.scheduler, "partition_reasons"),
                      (e.reliability, "storage_left"), (e.reliability, "_node_watchers"),
                      (e.reliability, "while_down")):
        del vars(obj)[name]
    e.jobs._ends = ends  # the lifecycle's indexes as plain fields, as before they were objects
    e.jobs._moved, e.jobs._moved_base = moved._moved, moved._base
    up = loads(v1_bytes(e))
    assert up.settings is None and up.replans == 0 and up.active_drills == {}
    assert up.kernel.logged == len(up.kernel.events)
    assert up.jobs.pricing.modes == up.reliability.modes
    assert up.reliability.storage_fraction("central") == 1.0  # before storage status: all up
    assert up.reliability._node_watchers == [up.fleet]
    assert "_moved_base" not in vars(up.jobs)
    up.run_until(up.now + 6 * HOUR)  # the physics reads the storage status on its ticks
    up.command("storage_degraded", tier="central", factor=0.5)
    assert up.reliability.storage_fraction("central") == 0.5
    assert up.snapshot()["t"] == up.now


# ------------------------------------------------------------------ the current format
def test_a_round_trip_changes_nothing_the_engine_does_next():
    e = live_engine()
    copy = loads(dumps(e))
    for x in (e, copy):
        x.run_until(x.now + 12 * HOUR)
    assert report(copy) == report(e)
    assert json.dumps(copy.snapshot(), sort_keys=True) == json.dumps(e.snapshot(),
                                                                     sort_keys=True)


def test_the_header_says_which_cluster_and_when_without_the_body():
    e = live_engine()
    e.lineage = "inv:7"
    data = dumps(e)
    header = read_header(data[:-100] + b"\0" * 100)  # a damaged body: the header still reads
    assert header == snapshot.Header(
        format=FORMAT, cluster=e.plan.name, preset="dev-small", gpus=64,
        plan=snapshot.plan_digest(e.plan), lineage="inv:7", seed=5, t_sim=5 * HOUR,
        body=snapshot.BODY)
    assert data.startswith(snapshot.MAGIC)


def test_the_plan_digest_follows_the_structure():
    a = live_engine().plan
    b, _ = Scenario(preset="dev-small", gpus=128, days=1, seed=5).engine()
    assert snapshot.plan_digest(a) == snapshot.plan_digest(live_engine().plan)
    assert snapshot.plan_digest(a) != snapshot.plan_digest(b.plan)


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and text
    return text


def test_a_snapshot_of_a_newer_format_is_refused_in_one_line():
    data = bytearray(dumps(live_engine()))
    struct.pack_into(">H", data, len(snapshot.MAGIC), FORMAT + 1)
    with pytest.raises(SnapshotError) as exc:
        loads(bytes(data))
    assert f"format {FORMAT + 1} is newer" in one_line(exc)
    with pytest.raises(SnapshotError):
        read_header(bytes(data))


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:10], "truncated header"),
    (lambda d: d[:14] + b"{not json" + d[23:], "unreadable header"),
    (lambda d: b"PK\x03\x04" + d, "not a ClusterTwin snapshot"),
    (lambda d: b"", "not a ClusterTwin snapshot"),
    (lambda d: d[:-200] + b"\0" * 200, "does not decompress"),
    (lambda d: zlib.compress(b"not a pickle"), "cannot be unpickled"),
])
def test_corrupt_snapshots_are_refused(damage, message):
    data = damage(dumps(live_engine()))
    with pytest.raises(SnapshotError) as exc:
        loads(data)
    assert message in one_line(exc)


def test_every_older_format_has_an_upgrade():
    assert set(UPGRADES) == set(range(1, FORMAT))


# ------------------------------------------------------------------ the body's layout
def layout(root) -> dict:
    """Module, class and fields of every object of ``scheduler`` the engine's pickle holds,
    and the methods it names (bound handlers): what a format-``FORMAT`` body is made of."""
    classes: dict[str, set] = collections.defaultdict(set)
    methods: set[str] = set()
    seen, stack = set(), [root]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, str | bytes | int | float | np.ndarray | np.generic
                                       | type(None)):
            continue
        seen.add(id(o))
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset | collections.deque):
            stack.extend(o)
        elif isinstance(o, types.MethodType):
            methods.add(f"{type(o.__self__).__module__}.{type(o.__self__).__qualname__}."
                        f"{o.__func__.__name__}")
            stack.append(o.__self__)
        elif not isinstance(o, type | types.FunctionType):
            fields = set(getattr(o, "__dict__", {}))
            for cls in type(o).__mro__:
                fields |= {s for s in cls.__dict__.get("__slots__", ()) if hasattr(o, s)}
            if type(o).__module__.startswith("scheduler."):
                classes[f"{type(o).__module__}.{type(o).__qualname__}"] |= fields
            stack.extend(getattr(o, f) for f in fields)
    return {"classes": {k: sorted(v) for k, v in sorted(classes.items())},
            "methods": sorted(methods)}


def test_the_body_layout_is_the_one_of_this_format():
    """A changed field, class or module changes what old snapshots hold: bump ``FORMAT`` and
    add an upgrade to ``UPGRADES`` (then rewrite the layout with CLUSTERTWIN_WRITE_LAYOUT=1)."""
    e = live_engine()
    e.snapshot()
    now = layout(e)
    if os.environ.get("CLUSTERTWIN_WRITE_LAYOUT"):
        LAYOUT.write_text(json.dumps(now, indent=1) + "\n")
    assert now == json.loads(LAYOUT.read_text()), (
        f"the engine's fields moved since snapshot format {FORMAT}: add an upgrade "
        f"(scheduler/snapshot.py) and a new format")
