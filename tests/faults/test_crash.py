"""Kill -9 of the live engine at random (seeded) points, snapshots included, with drills in
flight: afterwards no applied drill is lost, no drill is left pending, simulated time never
went back on screen, and no temporary snapshot file is left behind.

Real processes on a SQLite file (``bench.live_server`` helpers, as the lifecycle tests): the
engine alone (``manage.py run_engine``) and the engine inside daphne (``manage.py
serve``: embedded, started with the server; a logged-in dashboard socket waits for its first
frame).  Drills are written as pending rows, as
``POST /api/drills`` leaves them when no channel reaches the engine: the engine reads them from
the database.  Timeouts only guard against a hang.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import threading
import time

import pytest

from bench.live_server import (
    database_prepare,
    engine_start,
    free_port,
    live_env,
    serve_start,
    stop,
)

pytestmark = pytest.mark.faults

ROUNDS = 3


def rows(db, sql, args=()):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # being written: the caller tries again
        return None
    finally:
        con.close()


def post_drill(db, target: int) -> int:
    con = sqlite3.connect(db, timeout=30)
    try:
        with con:
            cur = con.execute(
                "INSERT INTO twin_drill (kind, target, params, requested_at, outcome, status) "
                "VALUES ('node', ?, '{}', datetime('now'), '{}', 'pending')", (str(target),))
            return cur.lastrowid
    finally:
        con.close()


def wait(condition, proc=None, timeout=180.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the engine exited ({proc.returncode})")
        time.sleep(0.05)
    pytest.fail(f"not reached after {timeout:g} s (a guard against a hang)")


class ScreenWatch(threading.Thread):
    """Reads what a dashboard would show (the LiveState row) over and over."""

    def __init__(self, db):
        super().__init__(daemon=True)
        self.db, self.seen, self.stop_now = db, [], False

    def run(self):
        while not self.stop_now:
            got = rows(self.db, "SELECT seq, t_sim, health FROM twin_livestate")
            if got:
                self.seen.append(got[0])
            time.sleep(0.02)


def starter(kind: str, env: dict, cookie: str):
    """A function that starts the engine (alone, or with the server and its first frame seen
    by a dashboard)."""
    def start(log):
        if kind == "run_engine":
            return engine_start(env, log=log)
        from websockets.sync.client import connect

        port = free_port()
        proc = serve_start(env, port, log=log)
        with connect(f"ws://127.0.0.1:{port}/ws/twin/", origin=f"http://127.0.0.1:{port}",
                     additional_headers={"Cookie": f"sessionid={cookie}"},
                     open_timeout=60) as ws:
            ws.recv(timeout=120)  # the first frame: the embedded engine runs
        return proc
    return start


@pytest.mark.parametrize("kind", ["run_engine", "serve"])
def test_kill_9_at_random_points_loses_no_drill_and_never_turns_time_back(tmp_path, kind):
    db = tmp_path / "db.sqlite3"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = live_env(db, mode="off" if kind == "run_engine" else "embedded", speed=3600.0,
                   frame_interval_s=0.1, snapshot_interval_s=1.0)
    env.update(TMPDIR=str(tmp), CLUSTERTWIN_INVENTORY_POLL_S="0.2")
    start = starter(kind, env, database_prepare(env))
    rng = random.Random(20261203)
    watch = ScreenWatch(db)
    watch.start()
    drills, shown_before_kill = [], []
    targets = iter(rng.sample(range(64), 3 * ROUNDS + 1))
    try:
        for round_ in range(ROUNDS):
            proc = start(tmp_path / f"engine-{round_}.log")
            try:
                wait(lambda: (r := rows(db, "SELECT health, seq FROM twin_livestate"))
                     and r[0][0] == "ok", proc)
                for _ in range(2):
                    drills.append(post_drill(db, next(targets)))
                wait(lambda: rows(db, "SELECT count(*) FROM twin_drill WHERE status = "
                                      "'pending'") == [(0,)], proc)
                time.sleep(rng.uniform(0.0, 2.5))  # sleep-ok: kill at a step, snapshot or write
                shown_before_kill.append(rows(db, "SELECT t_sim FROM twin_livestate")[0][0])
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
            finally:
                stop(proc, timeout=10)
            drills.append(post_drill(db, next(targets)))  # posted while no engine runs
        proc = start(tmp_path / "engine-last.log")
        try:
            wait(lambda: rows(db, "SELECT count(*) FROM twin_drill WHERE status = "
                                  "'pending'") == [(0,)], proc)
            first = wait(lambda: (r := rows(db, "SELECT t_sim, health FROM twin_livestate"))
                         and r[0][1] == "ok" and r[0])
            assert stop(proc, timeout=180) == 0  # a clean stop, with its snapshot
        finally:
            stop(proc, timeout=10)
    finally:
        watch.stop_now = True
        watch.join()

    # no drill left pending; every drill applied (the targets are distinct, in range)
    status = dict(rows(db, "SELECT id, status FROM twin_drill"))
    assert sorted(status) == sorted(drills)
    assert set(status.values()) == {"applied"}, status
    # each is in the engine the last process stopped with: its log names each drill once
    run = rows(db, "SELECT inventory FROM twin_livestate")[0][0]
    texts = [t for (t,) in rows(db, "SELECT text FROM twin_engineevent WHERE inventory = ? "
                                    "AND kind = 'drill' ORDER BY seq", (run,))]
    assert len(texts) == len(drills)
    # time on screen never went back, across kills and restarts
    times = [t for _, t, health in watch.seen if health in ("ok", "stopped")]
    assert times == sorted(times)
    assert first[0] >= max(shown_before_kill)
    # no temporary snapshot file leaked (the last start cleaned the killed ones' files)
    assert [p.name for p in tmp.iterdir()] == []
