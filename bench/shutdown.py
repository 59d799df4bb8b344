"""Stop and restart times of the live twin (issue 28: SIGTERM to exit under 10 s at noc-4k and
30 s at hyperscale-100k, with a final snapshot; a restart to a healthy live frame under 15 s at
noc-4k).

Run: .venv/bin/python -m bench.shutdown [--presets noc-4k hyperscale-100k] [--kind serve]
     [--run-s 20]

For each preset, on a scratch SQLite database holding the preset's cluster (``build_cluster``,
as ``make run``; ``--no-inventory``: none, the preset runs): ``manage.py serve`` (the embedded
engine; or ``run_engine`` with ``--kind run_engine``) builds its engine afresh and runs until its
first frame and first snapshot, then ``--run-s`` seconds more; SIGTERM (timed: wall and CPU
seconds of the process and its children, the snapshot's child included, from the signal to the
exit); a restart (timed: from the process's start to the first healthy frame, which must
continue from the final snapshot); SIGTERM again.  Prints one line per measurement.

The helpers (starting, waiting, timing a stop) are shared with ``tests/web/test_shutdown.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil

from bench.live_server import MANAGE, ROOT, free_port, live_env, manage, wait_port

STOP_BOUND_S = {"noc-4k": 10.0, "hyperscale-100k": 30.0}
RESTART_BOUND_S = {"noc-4k": 15.0}
STARTED_AT = re.compile(r"live engine: .* at t=(\d+) s")


# ----------------------------------------------------------------- reading the database
def rows(db: Path, sql: str, args=()) -> list | None:
    """Rows of a read-only query (``None`` while the database is busy being written)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.OperationalError:
        return None
    finally:
        con.close()


def live_row(db: Path) -> tuple | None:
    """``(health, seq, t_sim, age_s)`` of the live state, ``age_s`` since it was written."""
    got = rows(db, "SELECT health, seq, t_sim, updated_at FROM twin_livestate")
    if not got:
        return None
    health, seq, t_sim, updated = got[0]
    written = datetime.fromisoformat(updated).replace(tzinfo=UTC)
    return health, seq, t_sim, (datetime.now(UTC) - written).total_seconds()


def newest_snapshot(db: Path) -> tuple | None:
    """``(id, t_sim)`` of the newest stored engine snapshot."""
    got = rows(db, "SELECT id, t_sim FROM twin_enginesnapshot ORDER BY id DESC LIMIT 1")
    return got[0] if got else None


def wait_for(condition, *, proc: subprocess.Popen | None = None, timeout: float = 600.0,
             what: str = "the condition"):
    """``condition()``'s first true value, polled; a guard against a hang, not a timing."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process exited ({proc.returncode}) before {what}")
        time.sleep(0.05)
    raise TimeoutError(f"{what}: not reached after {timeout:g} s")


# ----------------------------------------------------------------- processes
def cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid`` and its reaped children so far."""
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system + t.children_user + t.children_system


class TreeWatch(threading.Thread):
    """Every process id under ``pid`` seen while it runs (a snapshot's child is short-lived)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root, self.seen, self.done = psutil.Process(pid), {}, threading.Event()

    def run(self):
        while not self.done.is_set():
            with contextlib.suppress(psutil.Error):
                for child in self.root.children(recursive=True):
                    self.seen.setdefault(child.pid, child)
            time.sleep(0.02)

    def left(self) -> list[int]:
        """The ids of those still running (zombies reaped or not, they hold nothing)."""
        alive = []
        for pid, proc in self.seen.items():
            with contextlib.suppress(psutil.Error):
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
        return alive


@dataclass
class Stopped:
    returncode: int
    wall_s: float
    cpu_s: float  # the process and its children, from the signal to the exit
    children_left: list[int] = field(default_factory=list)
    children_seen: int = 0


def stop_timed(proc: subprocess.Popen, *, sig: int = signal.SIGTERM, group: bool = False,
               timeout: float = 600.0) -> Stopped:
    """Signal ``proc`` (its whole process group with ``group``) and wait for it; the time and
    CPU it took and which of its children outlived it."""
    watch = TreeWatch(proc.pid)
    watch.start()
    before = cpu_s(proc.pid)
    began = time.monotonic()
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    end = began + timeout
    while True:  # wait4: the exit status and the CPU of the process and its waited children
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > end:
            proc.kill()
            raise TimeoutError(f"no exit {timeout:g} s after the signal")
        time.sleep(0.01)
    wall = time.monotonic() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    watch.done.set()
    watch.join()
    left = wait_gone(watch)
    return Stopped(proc.returncode, wall, usage.ru_utime + usage.ru_stime - before, left,
                   len(watch.seen))


def wait_gone(watch: TreeWatch, timeout: float = 5.0) -> list[int]:
    """The children still running once the kernel had ``timeout`` s to deliver their parent's
    death."""
    end = time.monotonic() + timeout
    while (left := watch.left()) and time.monotonic() < end:
        time.sleep(0.02)
    return left


def twin_env(db: Path, *, kind: str, preset: str, **settings: str) -> dict:
    """The environment of a twin on ``db`` (INFO logs: the start line says where it resumed)."""
    env = live_env(db, mode="embedded" if kind == "serve" else "off", preset=preset)
    env.update(LOG_LEVEL="INFO", TMPDIR=str(db.parent))
    env.update(settings)
    return env


def start(env: dict, *, kind: str, log: Path) -> subprocess.Popen:
    """``manage.py serve`` (listening, on a free port: ``proc.port``) or ``run_engine``, in a
    process group of its own (as a service manager starts it), output appended to ``log``."""
    port = free_port()
    args = ["serve", "--port", str(port), "--no-access-log"] if kind == "serve" else ["run_engine"]
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, MANAGE, *args], env=env, cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    proc.port = port
    if kind == "serve":
        wait_port(port, proc, timeout=120)
    return proc


def healthy_after(db: Path, seq: int):
    """A condition: the live state is ``ok`` with a frame newer than ``seq``."""
    def check():
        row = live_row(db)
        return row if row and row[0] == "ok" and row[1] > seq else None
    return check


def started_at(log: Path) -> float | None:
    """The simulated time the engine said it started at (its last start in ``log``)."""
    found = STARTED_AT.findall(log.read_text(errors="replace"))
    return float(found[-1]) if found else None


# ----------------------------------------------------------------- the bench
def bench_preset(preset: str, *, kind: str, run_s: float, tmp: Path, inventory: bool) -> None:
    db = tmp / f"{preset}.sqlite3"
    env = twin_env(db, kind=kind, preset=preset)
    manage(env, "migrate", "--noinput")
    if inventory:  # as `make run` does: the engine runs the cluster in the database
        manage(env, "build_cluster", "--preset", preset, timeout=1800)
    log = tmp / f"{preset}.log"
    began = time.monotonic()
    proc = start(env, kind=kind, log=log)
    wait_for(healthy_after(db, 0), proc=proc, timeout=1800, what="the first frame")
    wait_for(lambda: newest_snapshot(db), proc=proc, timeout=600, what="the first snapshot")
    print(f"{preset}: built afresh and first frame in {time.monotonic() - began:.1f} s wall",
          flush=True)
    time.sleep(run_s)
    for round_ in (1, 2):
        stopped = stop_timed(proc)
        snap, row = newest_snapshot(db), live_row(db)
        bound = STOP_BOUND_S.get(preset)
        print(f"{preset}: SIGTERM -> exit {stopped.wall_s:.1f} s wall, {stopped.cpu_s:.1f} s CPU"
              f" (bound {bound or '-'} s; rc {stopped.returncode}; final snapshot t="
              f"{snap[1]:.0f} s, live state {row[0]} at t={row[2]:.0f} s; "
              f"{len(stopped.children_left)} child(ren) left)", flush=True)
        if round_ == 2:
            break
        began = time.monotonic()
        proc = start(env, kind=kind, log=log)
        cpu0 = cpu_s(proc.pid)
        wait_for(healthy_after(db, row[1]), proc=proc, timeout=600, what="a healthy frame")
        wall, cpu = time.monotonic() - began, cpu_s(proc.pid) - cpu0
        bound = RESTART_BOUND_S.get(preset)
        print(f"{preset}: restart -> healthy frame {wall:.1f} s wall, {cpu:.1f} s CPU (bound "
              f"{bound or '-'} s; resumed at t={started_at(log):.0f} s)", flush=True)
        time.sleep(run_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", nargs="+", default=["noc-4k", "hyperscale-100k"])
    ap.add_argument("--kind", choices=["serve", "run_engine"], default="serve")
    ap.add_argument("--run-s", type=float, default=20.0,
                    help="wall seconds the twin runs before each stop")
    ap.add_argument("--no-inventory", action="store_true",
                    help="run the preset without building its cluster into the database")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets:
            bench_preset(preset, kind=args.kind, run_s=args.run_s, tmp=Path(tmp),
                         inventory=not args.no_inventory)


if __name__ == "__main__":
    main()
