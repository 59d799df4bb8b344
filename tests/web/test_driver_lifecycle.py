"""The live engine's life: started with the server (``manage.py serve``) or, served any other
way, by the first dashboard; stopped by SIGTERM with a snapshot that the next start resumes
from.

* In process: ``twin.config.asgi.application`` with ``ENGINE_MODE=embedded`` and no server
  that started the engine (plain daphne, the tests' communicator); a logged-in WebSocket
  connection starts the driver as a task of the server's own event loop (once), frames flow,
  and stopping it stores a snapshot.
* As real processes (``bench.live_server``, as ``test_run_engine_redis.py``): ``manage.py
  run_engine`` and ``manage.py serve`` with the embedded engine, each stopped with SIGTERM;
  the snapshot row (``twin.live.snapshots``) is read back from the processes' SQLite file and
  loaded.

Timeouts below only guard against a hang; nothing asserts how fast a machine is.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import urllib.request

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from bench.live_server import (
    database_prepare,
    engine_start,
    free_port,
    live_env,
    manage,
    serve_start,
    stop,
)
from scheduler.live import live_frame
from scheduler.snapshot import loads
from twin import models as m
from twin.config.asgi import application
from twin.live import broadcast
from twin.live.driver import EngineDriver
from twin.live.embedded import embedded_driver

DRIVER_FIELDS = ("speed", "paused", "health", "lag_ticks", "source", "sources", "alerts")
"""What the driver (and the alerts hook in ``live_state_write``) adds to the core's live frame
before it stores and publishes it."""


def as_json(value):
    return json.loads(json.dumps(value))


def core_frame(frame: dict) -> dict:
    return {k: v for k, v in frame.items() if k not in DRIVER_FIELDS}


# ----------------------------------------------------------------- in process
@pytest.fixture
def embedded(settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ENGINE_MODE": "embedded",
                            "DEFAULT_PRESET": "dev-small", "SEED": 1, "SPEEDUP": 3600.0,
                            "FRAME_INTERVAL_S": 0.1, "SNAPSHOT_INTERVAL_S": 3600.0}


@pytest_asyncio.fixture
async def stop_embedded():
    """Stop an embedded driver the test left running; clean the in-memory layer."""
    yield
    running = embedded_driver()
    if running is not None:
        running.request_stop()
        await wait_for(lambda: embedded_driver() is None)
    await get_channel_layer().flush()
    broadcast._local_listeners.clear()


async def wait_for(condition, timeout: float = 120.0):
    """Poll ``condition()`` until it is true (a guard against a hang, not a speed check)."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"gave up waiting after {timeout:g} s")
        await asyncio.sleep(0.05)


async def connect(user) -> WebsocketCommunicator:
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    headers = [(b"host", b"testserver"), (b"origin", b"http://testserver"),
               (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]
    comm = WebsocketCommunicator(application, "/ws/twin/", headers=headers)
    connected, _ = await comm.connect()
    assert connected
    return comm


async def frames_until(comm, done, timeout: float = 120.0) -> list[dict]:
    seen = []
    end = time.monotonic() + timeout
    while True:
        seen.append(await comm.receive_json_from(timeout=max(0.1, end - time.monotonic())))
        if done(seen[-1]):
            return seen


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_first_dashboard_starts_the_engine_inside_the_asgi_app_once(
        embedded, stop_embedded, demo_users):
    assert embedded_driver() is None
    comm = await connect(demo_users["operator"])
    first = await comm.receive_json_from(timeout=10)
    assert first["type"] == "snapshot" and first.get("pending") is True  # nothing ran yet
    running = embedded_driver()
    assert isinstance(running, EngineDriver)
    # a task of this very event loop, the one serving the ASGI application
    assert "twin-engine" in {t.get_name() for t in asyncio.all_tasks()}
    seen = await frames_until(comm, lambda msg: msg["type"] == "frame" and msg["t"] >= 3600.0)
    frames = [msg for msg in seen if msg["type"] == "frame"]
    assert [f["seq"] for f in frames] == sorted({f["seq"] for f in frames})
    assert all(f["health"] == "ok" and f["speed"] == 3600.0 for f in frames)
    assert frames[-1]["util"]["gpus"] == 512  # dev-small, the default preset
    assert running.preset == "dev-small" and running.seed == 1
    assert frames[-1]["t"] <= running.engine.now
    # another dashboard joins the same engine: no second driver
    other = await connect(demo_users["staff"])
    snapshot = await other.receive_json_from(timeout=10)
    assert snapshot["type"] == "snapshot" and snapshot["seq"] >= frames[-1]["seq"]
    assert embedded_driver() is running
    # stopping it (what daphne's shutdown hook does on SIGTERM) stores a snapshot
    running.request_stop()
    await wait_for(lambda: embedded_driver() is None)
    state = await database_sync_to_async(m.LiveState.objects.get)()
    snaps = await database_sync_to_async(list)(m.EngineSnapshot.objects.order_by("t_sim"))
    assert state.health == "stopped"
    # the final one; before it, at most the first one a fresh engine takes at once (when its
    # child finished before the stop; else the stop ended it)
    *first, final = snaps
    assert len(first) <= 1 and all(s.t_sim < final.t_sim for s in first)
    assert (final.preset, final.seed) == ("dev-small", 1)
    restored = loads(bytes(final.data))
    assert restored.now == final.t_sim == state.t_sim == running.engine.now
    assert as_json(live_frame(restored)) == core_frame(state.frame)
    for c in (comm, other):
        await c.disconnect()


# ----------------------------------------------------------------- real processes
def db_rows(db, sql: str) -> list[sqlite3.Row]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    con.row_factory = sqlite3.Row
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError:  # the table is being written: try again later
        return []
    finally:
        con.close()


def live_row(db) -> dict | None:
    rows = db_rows(db, "SELECT seq, t_sim, health, frame FROM twin_livestate")
    return dict(rows[0]) if rows else None


def snapshot_rows(db) -> list[dict]:
    return [dict(r) for r in db_rows(
        db, "SELECT t_sim, preset, seed, data FROM twin_enginesnapshot ORDER BY id")]


def wait_row(db, proc, done, timeout: float = 180.0) -> dict:
    """The LiveState row once ``done(row)``; fails if the process dies first."""
    end = time.monotonic() + timeout
    while True:
        row = live_row(db)
        if row is not None and done(row):
            return row
        if proc.poll() is not None:
            pytest.fail(f"the process exited ({proc.returncode}) before the frame came")
        if time.monotonic() > end:
            pytest.fail(f"no such frame after {timeout:g} s (a guard against a hang)")
        time.sleep(0.1)


def check_stopped_with_snapshot(db, preset="dev-small", seed=0) -> dict:
    """The last frame says stopped and the newest snapshot is the engine of that frame."""
    row = live_row(db)
    snap = snapshot_rows(db)[-1]
    assert row["health"] == "stopped"
    assert (snap["preset"], snap["seed"]) == (preset, seed)
    engine = loads(snap["data"])
    assert engine.now == snap["t_sim"] == row["t_sim"] > 0
    assert as_json(live_frame(engine)) == core_frame(json.loads(row["frame"]))
    return row


def test_run_engine_stores_a_snapshot_on_sigterm_and_the_next_start_resumes_it(tmp_path):
    db = tmp_path / "db.sqlite3"
    # "off": no engine inside web processes (there are none here); without REDIS_URL the
    # frames stay in the engine's process, and LiveState in the database is what we read
    env = live_env(db, mode="off", speed=3600.0, frame_interval_s=0.2,
                   snapshot_interval_s=3600.0)
    manage(env, "migrate", "--noinput")
    log = tmp_path / "engine.log"
    proc = engine_start(env, log=log)
    try:
        wait_row(db, proc, lambda r: r["health"] == "ok" and r["seq"] >= 3)
        assert snapshot_rows(db) == []  # none yet: the interval is an hour of wall time
        # the timeout guards against a hang (a loaded machine can take a while to pickle)
        assert stop(proc, timeout=180) == 0  # SIGTERM: finish the step, snapshot, stop
    finally:
        stop(proc, timeout=10)
    assert "snapshot stored" in log.read_text()
    last = check_stopped_with_snapshot(db)
    assert len(snapshot_rows(db)) == 1

    proc = engine_start(env, log=tmp_path / "engine-2.log")
    try:
        resumed = wait_row(db, proc, lambda r: r["health"] == "ok" and r["seq"] > last["seq"])
        assert resumed["t_sim"] >= last["t_sim"]  # from the snapshot, not from t=0
        assert stop(proc, timeout=180) == 0
    finally:
        stop(proc, timeout=10)
    check_stopped_with_snapshot(db)
    assert len(snapshot_rows(db)) == 2


def api_state(port: int, cookie: str) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/state",
                                     headers={"Cookie": f"sessionid={cookie}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


@pytest.mark.asyncio
async def test_serve_starts_the_embedded_engine_with_itself_and_snapshots_it_on_sigterm(tmp_path):
    websockets = pytest.importorskip("websockets.asyncio.client")
    db = tmp_path / "db.sqlite3"
    env = live_env(db, mode="embedded", speed=3600.0, frame_interval_s=0.2,
                   snapshot_interval_s=3600.0)
    cookie = database_prepare(env)
    port = free_port()
    proc = serve_start(env, port, log=tmp_path / "serve.log")
    try:
        # the engine starts with the server: frames before any page or dashboard connects
        wait_row(db, proc, lambda r: r["health"] == "ok" and r["seq"] >= 2)
        state = await asyncio.to_thread(api_state, port, cookie)
        assert state["health"] == "ok" and state["seq"] >= 2 and state["t"] > 0
        async with websockets.connect(
                f"ws://127.0.0.1:{port}/ws/twin/", origin=f"http://127.0.0.1:{port}",
                additional_headers={"Cookie": f"sessionid={cookie}"}, compression=None,
                max_size=None) as ws:
            first = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert first["type"] == "snapshot"
            while True:  # frames come from the engine inside daphne: no run_engine runs
                msg = json.loads(await asyncio.wait_for(ws.recv(), 120))
                if msg["type"] == "frame" and msg["health"] == "ok" and msg["t"] > 0:
                    break
            assert msg["util"]["gpus"] == 512
        assert stop(proc, timeout=180) == 0  # SIGTERM: the reactor shutdown hook stops the driver
    finally:
        stop(proc, timeout=10)
    row = check_stopped_with_snapshot(db)
    assert row["t_sim"] >= msg["t"]
    assert len(snapshot_rows(db)) == 1
