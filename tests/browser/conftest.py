"""Browser tests' shared fixtures: a real daphne server running the embedded engine, Chromium
through Playwright, and helpers to log in and read the live counters.

The server is the production path (`make run`): its own SQLite file, `migrate`, `build_cluster
--preset dev-small`, `seed_demo`, then `manage.py serve` (daphne, the embedded engine
started with it) with CLUSTERTWIN_ENGINE=embedded and a high speed-up, so the twin moves
visibly within seconds. It is module-scoped: each test module gets a fresh cluster and
engine, so one module's failures and drills do not leak into another's.
"""

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import twin_browser

CHROMIUM = twin_browser.CHROMIUM
wait_live = twin_browser.wait_live  # the browser tests' own name for the shared wait
ARTIFACTS = Path(os.environ.get("CLUSTERTWIN_ARTIFACTS", "test-artifacts"))
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "browser-pass"
SPEEDUP = "900"  # simulated seconds per wall second: a 4 h repair takes 16 s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daphne exited with {proc.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"daphne did not listen on {port} within {timeout} s:\n{log.read_text()}")


@contextlib.contextmanager
def twin_server(tmp: Path, preset: str = "dev-small", **extra_env: str):
    """A migrated twin of ``preset`` with the demo accounts, served by ``manage.py serve`` with
    the embedded engine (``extra_env`` added to its environment); yields its URL, stops it
    after (hyperscale-100k builds in about 15 s)."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
           "CLUSTERTWIN_ENGINE": "embedded", "CLUSTERTWIN_SPEEDUP": SPEEDUP,
           "CLUSTERTWIN_FRAME_INTERVAL_S": "0.5", "CLUSTERTWIN_SNAPSHOT_INTERVAL_S": "600",
           "CLUSTERTWIN_DEMO_PASSWORD": PASSWORD, "DJANGO_SETTINGS_MODULE": "twin.config.settings",
           **extra_env}
    env.pop("REDIS_URL", None)
    for args in (["migrate", "--noinput"], ["build_cluster", "--preset", preset],
                 ["seed_demo"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                       capture_output=True)
    port = _free_port()
    log = tmp / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--bind", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, proc, log, timeout=120)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with twin_server(tmp_path_factory.mktemp("twin-server")) as url:
        yield url


@pytest.fixture
def browser():
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = twin_browser.chromium_launch(p)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    yield page
    assert page.errors == [], page.errors


def log_in(page, url: str, username: str, path: str = "/") -> None:
    """A demo account's login (the server's ``PASSWORD``)."""
    twin_browser.log_in(page, url, username, PASSWORD, path)


def counter(page, element_id: str) -> float:
    text = page.inner_text(f"#{element_id}").replace(",", "").replace("%", "").strip()
    return float(text)


def shot(page, name: str, prefix: str = "dashboard") -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{prefix}-{name}.png"), full_page=True)
