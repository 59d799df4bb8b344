"""End to end: ``run_engine`` in its own process, daphne serving ``/ws/twin/``, Redis between.

Needs a Redis server at ``REDIS_TEST_URL`` (``.ci/run`` starts one); skipped without it.
"""

import asyncio
import json
import os
import time

import pytest

from bench.live_server import (
    daphne_start,
    database_prepare,
    engine_start,
    free_port,
    live_env,
    redis_reachable,
    stop,
)

REDIS_URL = os.environ.get("REDIS_TEST_URL")
websockets = pytest.importorskip("websockets.asyncio.client")

pytestmark = [
    pytest.mark.redis,
    pytest.mark.asyncio,
    pytest.mark.skipif(not redis_reachable(REDIS_URL),
                       reason="no Redis at REDIS_TEST_URL"),
]


async def frames_until(ws, done, timeout=30):
    """Read messages until ``done(message)``; returns all read."""
    seen = []
    end = time.monotonic() + timeout
    while True:
        text = await asyncio.wait_for(ws.recv(), max(0.1, end - time.monotonic()))
        seen.append(json.loads(text))
        if done(seen[-1]):
            return seen


@pytest.fixture
def twin_processes(tmp_path):
    env = live_env(tmp_path / "db.sqlite3", mode="separate", redis_url=REDIS_URL,
                   speed=3600.0, frame_interval_s=0.2, snapshot_interval_s=600.0)
    cookie = database_prepare(env)
    port = free_port()
    procs = {"engine": engine_start(env, log=tmp_path / "engine.log"),
             "daphne": daphne_start(env, port, log=tmp_path / "daphne.log")}
    yield env, port, cookie, procs
    for proc in procs.values():
        stop(proc, timeout=10)


async def test_frames_cross_from_the_engine_process_and_a_restart_resumes(twin_processes,
                                                                          tmp_path):
    env, port, cookie, procs = twin_processes
    async with websockets.connect(
            f"ws://127.0.0.1:{port}/ws/twin/", origin=f"http://127.0.0.1:{port}",
            additional_headers={"Cookie": f"sessionid={cookie}"}, compression=None,
            max_size=None) as ws:
        first = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert first["type"] == "snapshot"
        seen = await frames_until(ws, lambda m: m["type"] == "frame" and m["t"] > 3600)
        frames = [m for m in seen if m["type"] == "frame"]
        seqs = [m["seq"] for m in frames]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert frames[-1]["health"] == "ok" and frames[-1]["util"]["gpus"] > 0

        assert stop(procs["engine"]) == 0  # SIGTERM: finish the step, snapshot, stop
        last = (await frames_until(ws, lambda m: m.get("health") == "stopped"))[-1]
        assert last["t"] >= frames[-1]["t"]

        procs["engine"] = engine_start(env, log=tmp_path / "engine-2.log")
        resumed = (await frames_until(ws, lambda m: m["type"] == "frame"
                                      and m["health"] == "ok"))[-1]
        assert resumed["seq"] > last["seq"]
        assert resumed["t"] >= last["t"]  # resumed from the snapshot, not from t=0
