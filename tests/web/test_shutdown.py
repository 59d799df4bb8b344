"""Stop in seconds (issue 28): SIGTERM ends a real server within the issue's bound with a final
snapshot that a restart resumes from, leaves no process behind and prints no traceback; from
the moment it begins to stop, commands are refused (503, ``Retry-After``) and none it accepted
is lost; a restart is live again within its bound and never reads "down" meanwhile.

Real processes (``bench.shutdown`` helpers) on a scratch SQLite database: noc-4k where the
bound is at stake, dev-small for the quick behaviours.  The bounds are the behaviour named by
the issue, so they are asserted (the issue's own figures, the most a loaded machine is given),
with the CPU seconds printed beside the wall seconds; every other wait has a deadline that only
guards against a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import http.client
import json
import os
import signal
import threading
import time

import psutil
import pytest
from channels.db import database_sync_to_async

from bench.live_server import manage
from bench.shutdown import (
    RESTART_BOUND_S,
    STOP_BOUND_S,
    cpu_s,
    healthy_after,
    live_row,
    newest_snapshot,
    rows,
    start,
    started_at,
    stop_timed,
    twin_env,
    wait_for,
)
from tests.waiting import wait_until
from twin import app_setting
from twin.config.stopping import RETRY_AFTER_S, stopping_begin, stopping_end
from twin.live.driver import EngineDriver
from twin.live.engine_host import EngineHost
from twin.live.selectors import live_state_get

CSRF = "shutdowntestcsrfsecret0123456789"  # 32 characters: Django's unmasked secret
STAFF = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
user, _ = get_user_model().objects.get_or_create(username="operator-on-call")
user.is_staff = True
user.save()
user.user_permissions.add(Permission.objects.get(codename="run_drill",
                                                 content_type__app_label="twin"))
client = Client()
client.force_login(user)
print(client.cookies["sessionid"].value)
"""


def staff_session(env: dict) -> str:
    manage(env, "migrate", "--noinput")
    return manage(env, "shell", "-c", STAFF).strip().splitlines()[-1]


GONE = "nothing listens"


def post_drill(port: int, session: str | None):
    """``POST /api/drills`` (as staff with ``session``): ``(status, headers, body)``;
    :data:`GONE` once nothing listens; ``None`` when the connection was cut without an answer
    (a request in flight as the server began to stop)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    cookies = f"sessionid={session}; csrftoken={CSRF}" if session else f"csrftoken={CSRF}"
    try:
        conn.request("POST", "/api/drills", json.dumps({"kind": "node", "target": "random"}),
                     {"Content-Type": "application/json", "X-CSRFToken": CSRF,
                      "Cookie": cookies})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    except ConnectionRefusedError:
        return GONE
    except (ConnectionError, http.client.HTTPException, OSError):
        return None
    finally:
        conn.close()


def no_traceback(log) -> None:
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]


def report(what: str, wall: float, cpu: float, bound: float | None = None) -> None:
    print(f"\n{what}: {wall:.1f} s wall, {cpu:.1f} s CPU"
          + (f" (bound {bound:g} s)" if bound else ""))


class HeartbeatWatch(threading.Thread):
    """What every page would read meanwhile: the live state's health and how old it is."""

    def __init__(self, db):
        super().__init__(daemon=True)
        self.db, self.seen, self.done = db, [], threading.Event()

    def run(self):
        while not self.done.is_set():
            row = live_row(self.db)
            if row:
                self.seen.append(row)
            time.sleep(0.05)


# ----------------------------------------------------------------- noc-4k: the bounds
def test_noc_4k_stops_within_its_bound_with_a_final_snapshot_and_restarts_from_it(tmp_path):
    db, log = tmp_path / "db.sqlite3", tmp_path / "serve.log"
    env = twin_env(db, kind="serve", preset="noc-4k")
    manage(env, "migrate", "--noinput")
    proc = start(env, kind="serve", log=log)
    try:
        wait_for(healthy_after(db, 0), proc=proc, timeout=1200, what="the first frame")
        # built afresh, the engine snapshots at once (a crash would not rebuild it)
        first = wait_for(lambda: newest_snapshot(db), proc=proc, what="the first snapshot")

        stopped = stop_timed(proc)
        report("noc-4k SIGTERM -> exit", stopped.wall_s, stopped.cpu_s, STOP_BOUND_S["noc-4k"])
        assert stopped.returncode == 0
        assert stopped.wall_s < STOP_BOUND_S["noc-4k"]
        assert stopped.children_left == []
        no_traceback(log)
        snap, row = newest_snapshot(db), live_row(db)
        assert snap[0] > first[0] and row[0] == "stopped"
        assert snap[1] == pytest.approx(row[2])  # the final snapshot is where it stopped
        assert list(tmp_path.glob("clustertwin-snapshot-*")) == []

        watch = HeartbeatWatch(db)
        watch.start()
        began = time.monotonic()
        proc = start(env, kind="serve", log=log)
        cpu0 = cpu_s(proc.pid)
        wait_for(healthy_after(db, row[1]), proc=proc, timeout=600, what="a healthy frame")
        wall, cpu = time.monotonic() - began, cpu_s(proc.pid) - cpu0
        watch.done.set()
        watch.join()
        report("noc-4k restart -> healthy frame", wall, cpu, RESTART_BOUND_S["noc-4k"])
        assert wall < RESTART_BOUND_S["noc-4k"]
        assert started_at(log) == pytest.approx(snap[1], abs=1)  # resumed, not rebuilt
        # it said it was starting, then ok: no page read "down" meanwhile
        assert "starting" in {health for health, *_ in watch.seen}
        heartbeat = app_setting("HEARTBEAT_S")  # the processes' too: twin_env sets none
        stale = [r for r in watch.seen if r[0] in ("starting", "ok") and r[3] > heartbeat]
        assert stale == []
    finally:
        stopped = stop_timed(proc) if proc.poll() is None else None
    assert stopped is None or stopped.returncode == 0
    no_traceback(log)


# ----------------------------------------------------------------- dev-small: behaviours
def test_commands_while_stopping_get_503_with_retry_after_and_none_accepted_is_lost(tmp_path):
    db, log = tmp_path / "db.sqlite3", tmp_path / "serve.log"
    env = twin_env(db, kind="serve", preset="dev-small")
    session = staff_session(env)
    proc = start(env, kind="serve", log=log)
    try:
        wait_for(healthy_after(db, 0), proc=proc, timeout=600, what="the first frame")
        accepted = post_drill(proc.port, session)
        proc.send_signal(signal.SIGTERM)  # at once: the engine may not have applied it yet
        # daphne says when its shutdown began (it cuts the requests in flight then): from
        # that moment on, commands are refused
        wait_for(lambda: "pending application instances" in log.read_text(errors="replace"),
                 timeout=60, what="the start of the shutdown")
        answers, end = [], time.monotonic() + 300  # a guard against a server that goes on
        while (answer := post_drill(proc.port, session)) is not GONE and time.monotonic() < end:
            answers.append(answer)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            stop_timed(proc)
    assert accepted[0] == 202
    while answers and answers[-1] is None:  # cut as the server closed its connections
        answers.pop()
    assert answers, "the server was gone before a command could be refused"
    for status, headers, body in answers:  # every command while stopping, none accepted
        assert status == 503
        assert headers["retry-after"] == str(RETRY_AFTER_S)
        assert headers["content-type"] == "application/json"
        assert body.count(b"\n") == 0 and "stopping" in json.loads(body)["error"]
    # the drill it accepted was applied before it stopped; none it refused was recorded
    assert rows(db, "SELECT id, status FROM twin_drill") == [(json.loads(accepted[2])["id"],
                                                             "applied")]
    assert proc.returncode == 0
    no_traceback(log)


@pytest.mark.parametrize("kind", ["serve", "run_engine"])
def test_sigterm_to_the_process_group_mid_snapshot_stops_quietly_and_leaves_nothing(tmp_path,
                                                                                      kind):
    """systemd signals the whole group: the snapshot's child is left to its parent, which
    gives a periodic one up for its final snapshot."""
    db, log = tmp_path / "db.sqlite3", tmp_path / f"{kind}.log"
    env = twin_env(db, kind=kind, preset="dev-small", CLUSTERTWIN_SNAPSHOT_INTERVAL_S="1",
                   CLUSTERTWIN_FRAME_INTERVAL_S="0.2")
    manage(env, "migrate", "--noinput")
    proc = start(env, kind=kind, log=log)
    try:
        wait_for(healthy_after(db, 0), proc=proc, timeout=600, what="the first frame")
        wait_for(lambda: psutil_children(proc.pid), proc=proc, timeout=120,
                 what="a periodic snapshot's child")
        stopped = stop_timed(proc, group=True)
    finally:
        if proc.poll() is None:
            stop_timed(proc)
    report(f"dev-small {kind} SIGTERM to the group -> exit", stopped.wall_s, stopped.cpu_s)
    assert stopped.returncode == 0
    assert stopped.children_left == []
    no_traceback(log)
    assert "snapshot not taken" not in log.read_text()  # the signal did not kill the child
    assert newest_snapshot(db)[1] == pytest.approx(live_row(db)[2])
    assert live_row(db)[0] == "stopped"
    assert list(tmp_path.glob("clustertwin-snapshot-*")) == []


PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


@pytest.fixture
def adopting():
    """This test process adopts its children's orphans (Linux's child subreaper), so it can
    see how a killed server's snapshot child ended."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    if prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        pytest.skip("no child subreaper here (Linux only)")
    yield
    prctl(PR_SET_CHILD_SUBREAPER, 0)


def orphan_end(pid: int, timeout: float = 60.0) -> int | None:
    """The wait status of adopted orphan ``pid`` once it ended; ``None`` if it was not ours to
    wait for (it had ended, and its parent reaped it, before the parent died)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        time.sleep(0.01)
    raise TimeoutError(f"process {pid} still runs {timeout:g} s after its parent was killed")


def held_mid_write(pid: int, seen: set[int], held: list) -> psutil.Process | None:
    """A child of ``pid`` not in ``seen``, stopped (SIGSTOP) before it finished; ``None`` while
    there is none yet.  One that had already written and exited when the signal came (a
    zombie, or reaped) is passed over for the next snapshot's.  Each child is looked at once;
    every one signalled is added to ``held``."""
    for child in psutil_children(pid):
        if child.pid in seen:
            continue
        seen.add(child.pid)
        try:
            child.suspend()
        except psutil.NoSuchProcess:
            continue
        held.append(child)
        state = wait_until(lambda c=child: (s := child_state(c)) in ENDED_OR_STOPPED and s,
                           what=f"child {child.pid} stopped or ended")
        if state == psutil.STATUS_STOPPED:
            return child
    return None


ENDED_OR_STOPPED = (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, "gone")


def child_state(child: psutil.Process) -> str:
    try:
        return child.status()
    except psutil.NoSuchProcess:
        return "gone"


def test_a_killed_servers_snapshot_child_dies_with_it_and_a_restart_takes_over(tmp_path,
                                                                             adopting):
    db, log = tmp_path / "db.sqlite3", tmp_path / "serve.log"
    env = twin_env(db, kind="serve", preset="dev-small", CLUSTERTWIN_SNAPSHOT_INTERVAL_S="1",
                   CLUSTERTWIN_FRAME_INTERVAL_S="0.2")
    manage(env, "migrate", "--noinput")
    proc, held = start(env, kind="serve", log=log), []
    try:
        wait_for(healthy_after(db, 0), proc=proc, timeout=600, what="the first frame")
        # a snapshot's child held mid-write: still running when its parent is killed, however
        # late the kill lands on a loaded machine (it writes for about a second at dev-small)
        seen = {c.pid for c in psutil_children(proc.pid)}
        child = wait_for(lambda: held_mid_write(proc.pid, seen, held), proc=proc, timeout=120,
                         what="a snapshot's child held while it writes")
        killed = stop_timed(proc, sig=signal.SIGKILL)
        assert killed.children_left == []
        # killed with its parent (SIGKILL, its PDEATHSIG), not left writing (for minutes at
        # noc-4k, before); without it the held child stays stopped and is left over
        assert orphan_end(child.pid) == signal.SIGKILL
        seq = live_row(db)[1]
        proc = start(env, kind="serve", log=log)
        wait_for(healthy_after(db, seq), proc=proc, timeout=600, what="a healthy frame")
    finally:
        stopped = stop_timed(proc) if proc.poll() is None else None
        for child in held:  # one the kernel did not kill must not stay stopped
            with contextlib.suppress(psutil.Error):
                child.kill()
    assert stopped is not None and stopped.returncode == 0
    no_traceback(log)


def test_a_running_what_if_does_not_hold_the_stop(tmp_path):
    """A month-long what-if runs for minutes in a worker process: the stop ends it (its row
    says it failed) instead of waiting for it."""
    db, log = tmp_path / "db.sqlite3", tmp_path / "serve.log"
    env = twin_env(db, kind="serve", preset="dev-small")
    session = staff_session(env)
    proc = start(env, kind="serve", log=log)
    try:
        wait_for(healthy_after(db, 0), proc=proc, timeout=600, what="the first frame")
        wait_for(lambda: newest_snapshot(db), proc=proc, what="a snapshot to fork")
        conn = http.client.HTTPConnection("127.0.0.1", proc.port, timeout=60)
        conn.request("POST", "/api/whatif", json.dumps(
            {"action": {"kind": "node", "target": 1}, "hours": 24 * 30, "seeds": 4}),
            {"Content-Type": "application/json", "X-CSRFToken": CSRF,
             "Cookie": f"sessionid={session}; csrftoken={CSRF}"})
        assert conn.getresponse().status == 202
        # the pool's spawned worker, not a snapshot child that happens to be running
        wait_for(lambda: whatif_workers(proc.pid), proc=proc, what="the what-if's worker")
        stopped = stop_timed(proc)
    finally:
        if proc.poll() is None:
            stop_timed(proc)
    report("dev-small SIGTERM with a what-if running -> exit", stopped.wall_s, stopped.cpu_s)
    assert stopped.returncode == 0
    assert stopped.children_left == []
    # ended, not run to its end: marked failed now, or abandoned by the next reader
    assert rows(db, "SELECT status FROM twin_whatif") in ([("error",)], [("running",)])
    no_traceback(log)


def psutil_children(pid: int) -> list:
    return psutil.Process(pid).children()


def whatif_workers(pid: int) -> list:
    """The server's spawned pool workers (``multiprocessing.spawn``), what-ifs run in them."""
    found = []
    for child in psutil_children(pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            if "spawn_main" in " ".join(child.cmdline()):
                found.append(child)
    return found


# ----------------------------------------------------------------- in-process: the rule
@pytest.fixture
def stopping_process():
    stopping_begin()
    yield
    stopping_end()


def test_while_stopping_every_command_is_refused_and_reads_are_served(login, small_cluster,
                                                                     stopping_process):
    staff = login("staff")
    for path, body in [("/api/drills", {"kind": "node", "target": "random"}),
                       ("/api/jobs/pretrain-70b/actions", {"action": "hold"}),
                       ("/api/whatif", {"action": {"kind": "drain", "target": 1}})]:
        answer = staff.post(path, body, content_type="application/json")
        assert answer.status_code == 503, path
        assert answer["Retry-After"] == str(RETRY_AFTER_S)
        assert "stopping" in answer.json()["error"]
    assert staff.get("/api/drills").status_code == 200
    from twin.live.models import Drill

    assert not Drill.objects.exists()


def test_a_server_not_stopping_accepts_commands(login, small_cluster):
    answer = login("staff").post("/api/drills", {"kind": "node", "target": "random"},
                                 content_type="application/json")
    assert answer.status_code == 202


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_engine_slower_to_start_than_the_heartbeat_reads_starting_not_down(settings,
                                                                                   monkeypatch):
    """A restart that loads a large snapshot outlasts the heartbeat: its live state says
    ``starting`` (renewed meanwhile), which pages show, never ``down``."""
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "HEARTBEAT_S": 1.0}
    loading, loaded = threading.Event(), threading.Event()
    build = EngineHost.load_or_build

    def slow_build(host, data):  # in the engine's thread, as a long load would be
        loading.set()
        loaded.wait(60)
        return build(host, data)

    monkeypatch.setattr(EngineHost, "load_or_build", slow_build)
    driver = EngineDriver(preset="dev-small")
    starting = asyncio.create_task(driver.start())
    try:
        await asyncio.to_thread(loading.wait, 60)
        seen, end = [], time.monotonic() + 3 * settings.CLUSTERTWIN["HEARTBEAT_S"]
        while time.monotonic() < end:  # three heartbeats long, as every page reads it
            seen.append((await database_sync_to_async(live_state_get)()).health)
            await asyncio.sleep(0.05)
    finally:
        loaded.set()
        await starting
        await driver.close(snapshot=False)
    assert set(seen) == {"starting"}
