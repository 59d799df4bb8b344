"""Start the live twin's processes for end-to-end tests and benchmarks.

A throw-away SQLite database, daphne workers, ``manage.py run_engine`` and a session cookie of a
logged-in user, all as real processes joined by the environment (``REDIS_URL`` for the
separate engine). Used by ``tests/web/test_run_engine_redis.py`` and ``bench/websocket.py``.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANAGE = str(ROOT / "manage.py")

_LOGIN = """
from django.contrib.auth import get_user_model
from django.test import Client
user, _ = get_user_model().objects.get_or_create(username={username!r})
user.set_unusable_password()
user.save()
client = Client()
client.force_login(user)
print(client.cookies["sessionid"].value)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_reachable(url: str | None) -> bool:
    if not url:
        return False
    try:
        import redis
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except Exception:
        return False


def live_env(db_path: Path, *, mode: str, redis_url: str | None = None, preset: str = "dev-small",
             speed: float = 60.0, frame_interval_s: float = 1.0,
             snapshot_interval_s: float = 60.0) -> dict[str, str]:
    """The environment every process of one live twin shares."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("REDIS_URL", "DATABASE_URL") and not k.startswith("CLUSTERTWIN_")}
    env.update(DJANGO_SETTINGS_MODULE="twin.config.settings", DATABASE_URL=f"sqlite:///{db_path}",
               CLUSTERTWIN_ENGINE=mode, CLUSTERTWIN_PRESET=preset,
               CLUSTERTWIN_SPEEDUP=str(speed), CLUSTERTWIN_FRAME_INTERVAL_S=str(frame_interval_s),
               CLUSTERTWIN_SNAPSHOT_INTERVAL_S=str(snapshot_interval_s),
               PYTHONUNBUFFERED="1", LOG_LEVEL=os.environ.get("LOG_LEVEL", "WARNING"),
               # a local twin over plain HTTP with the development key, and says so
               CLUSTERTWIN_INSECURE_DEMO="1")
    if redis_url:
        # the published key is refused with Redis (anyone reaching it could sign frames): one
        # key of this twin's own, shared by its processes
        env["REDIS_URL"] = redis_url
        env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    return env


def manage(env: dict, *args: str, timeout: float = 120) -> str:
    done = subprocess.run([sys.executable, MANAGE, *args], env=env, cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def database_prepare(env: dict, *, username: str = "bench") -> str:
    """Migrate the database and log a user in; returns the session cookie's value."""
    manage(env, "migrate", "--noinput")
    return manage(env, "shell", "-c", _LOGIN.format(username=username)).strip().splitlines()[-1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited ({proc.returncode}) before port {port} opened")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port} after {timeout:g} s")


def daphne_start(env: dict, port: int, log: Path | None = None) -> subprocess.Popen:
    proc = _spawn([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                   "twin.config.asgi:application"], env, log)
    wait_port(port, proc)
    return proc


def serve_start(env: dict, port: int, log: Path | None = None) -> subprocess.Popen:
    """``manage.py serve``: daphne with the embedded engine started with the server."""
    proc = _spawn([sys.executable, MANAGE, "serve", "--bind", "127.0.0.1", "--port", str(port),
                   "--no-access-log"], env, log)
    wait_port(port, proc)
    return proc


def engine_start(env: dict, *args: str, log: Path | None = None) -> subprocess.Popen:
    return _spawn([sys.executable, MANAGE, "run_engine", *args], env, log)


def _spawn(cmd: list[str], env: dict, log: Path | None) -> subprocess.Popen:
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (lives with the process)
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen, *, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    """Signal ``proc`` and wait; kill it if it does not exit in time. Returns its exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
