"""Browser: the live dashboard against a real daphne server running the embedded engine.

The server is the production path (`make run`): its own SQLite file, `migrate`, `build_cluster
--preset dev-small`, `seed_demo`, then daphne with CLUSTERTWIN_ENGINE=embedded and a high
speed-up, so the twin moves visibly within seconds. (pytest-django's live_server speaks WSGI,
not WebSockets; it serves the one test below that wants no engine.)
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("CLUSTERTWIN_ARTIFACTS", "test-artifacts"))
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "browser-pass"
SPEEDUP = "900"  # simulated seconds per wall second: a 4 h repair takes 16 s

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]


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


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("twin-server")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
           "CLUSTERTWIN_ENGINE": "embedded", "CLUSTERTWIN_SPEEDUP": SPEEDUP,
           "CLUSTERTWIN_FRAME_INTERVAL_S": "0.5", "CLUSTERTWIN_SNAPSHOT_INTERVAL_S": "600",
           "CLUSTERTWIN_DEMO_PASSWORD": PASSWORD, "DJANGO_SETTINGS_MODULE": "twin.settings"}
    env.pop("REDIS_URL", None)
    for args in (["migrate", "--noinput"], ["build_cluster", "--preset", "dev-small"],
                 ["seed_demo"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                       capture_output=True)
    port = _free_port()
    log = tmp / "daphne.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "daphne"), "-b", "127.0.0.1", "-p", str(port),
             "twin.asgi:application"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def browser():
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
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
    page.goto(url + path)
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(url + path)


def wait_live(page, timeout_ms: int = 60_000) -> None:
    """Until the first frame is drawn (the first connection starts the engine)."""
    page.wait_for_function(
        "document.getElementById('gpus-allocated').textContent !== '–'", timeout=timeout_ms)


def counter(page, element_id: str) -> float:
    text = page.inner_text(f"#{element_id}").replace(",", "").replace("%", "").strip()
    return float(text)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"), full_page=True)


def test_operator_sees_the_twin_move_and_no_drills(server, page):
    log_in(page, server, "operator")
    wait_live(page)
    assert page.locator("#stale-banner").is_hidden()
    assert page.locator("a[href='/drills/']").count() == 0
    assert page.locator("#engine-controls").count() == 0
    before = {i: page.inner_text(f"#{i}") for i in ("sim-time", "gpus-allocated", "mfu")}
    page.wait_for_function(
        """(before) => document.getElementById('sim-time').textContent !== before['sim-time'] &&
             (document.getElementById('gpus-allocated').textContent !== before['gpus-allocated']
              || document.getElementById('mfu').textContent !== before['mfu'])""",
        arg=before, timeout=20_000)
    assert page.locator("#series-chart .scatterlayer .trace").count() == 3
    assert page.locator("#mfu-waterfall .waterfalllayer .point").count() >= 2
    assert page.locator("#event-log li").count() >= 1  # events, or "No events yet."
    shot(page, "overview")


def test_operator_pages_fill_from_the_stream(server, page):
    log_in(page, server, "operator", "/jobs/")
    page.wait_for_selector("#running-rows tr td:nth-child(6)", timeout=60_000)
    assert "pod" in page.inner_text("#running-rows")
    assert page.locator("#tenant-rows tr").count() >= 1
    shot(page, "jobs")
    page.goto(server + "/failures/")
    page.wait_for_selector("#mttf-rows tr td:nth-child(4)", timeout=20_000)
    assert page.inner_text("#spares-free") != "–"
    shot(page, "failures")
    page.goto(server + "/topology/")
    page.wait_for_selector("#rack-status .nsewdrag", timeout=20_000)
    page.wait_for_selector("#rack-power .nsewdrag", timeout=20_000)
    box = page.locator("#rack-status .nsewdrag").bounding_box()
    page.mouse.click(box["x"] + 5, box["y"] + box["height"] / 2)
    page.wait_for_selector("#rack-detail:not([hidden])", timeout=10_000)
    assert "dev-small-rack-" in page.inner_text("#rack-name")
    assert page.locator("#rack-nodes tr").count() >= 1
    shot(page, "topology")


def test_staff_run_a_node_drill_and_see_it_hit(server, page):
    log_in(page, server, "staff", "/drills/")
    wait_live(page)
    down, allocated = counter(page, "gpus-down"), counter(page, "gpus-allocated")
    page.select_option("#id_kind", "node")
    assert page.locator("[data-param=factor]").is_hidden()
    page.fill("#id_target", "random")
    page.click("#drill-form button[type=submit]")
    page.wait_for_selector(".message.success")
    assert "sent to the live engine" in page.inner_text(".messages")
    page.wait_for_function(
        """() => [...document.querySelectorAll('#event-log .event-drill')]
                 .some(li => li.textContent.includes('drill node'))""", timeout=10_000)
    page.wait_for_function(
        """([down, allocated]) => {
             const n = id => Number(document.getElementById(id).textContent.replace(/,/g, ''));
             return n('gpus-down') > down || n('gpus-allocated') < allocated;
           }""", arg=[down, allocated], timeout=10_000)
    page.wait_for_function(
        "document.querySelector('#drill-rows tr').textContent.includes('applied')",
        timeout=10_000)
    shot(page, "drills")
    page.goto(server + "/")
    wait_live(page)
    page.wait_for_selector("#event-log .event-drill")
    page.fill("#speed-input", "300")
    page.click("#speed-apply")
    page.wait_for_function(
        "document.getElementById('control-status').textContent.includes('×300')",
        timeout=5_000)
    page.wait_for_function(
        "document.getElementById('engine-health').textContent.includes('×300')",
        timeout=10_000)
    page.click("#pause-toggle")
    page.wait_for_function("document.getElementById('paused-value').textContent === 'paused'",
                           timeout=10_000)
    page.click("#pause-toggle")
    page.wait_for_function("document.getElementById('paused-value').textContent === 'running'",
                           timeout=10_000)
    shot(page, "overview-staff")


def test_operator_gets_403_on_the_drills_page(server, page):
    log_in(page, server, "operator")
    response = page.goto(server + "/drills/")
    assert response.status == 403
    assert "twin.run_drill" in page.inner_text("main")


@pytest.mark.django_db(transaction=True)
def test_without_a_websocket_the_stale_banner_shows(live_server, page):
    """pytest-django's live server has no /ws/twin/: the client keeps retrying, shows stale."""
    from twin.services import demo_accounts_seed

    demo_accounts_seed(password=PASSWORD)
    log_in(page, live_server.url, "operator")
    page.wait_for_selector("#stale-banner:not([hidden])", timeout=5_000)
    assert page.inner_text("#stale-banner") == "Live data stale — reconnecting…"
    assert page.inner_text("#gpus-allocated") == "–"
    page.errors.clear()  # Chromium reports the refused WebSocket handshakes, as it should


def _frame(seq: int, allocated: int, kind: str = "frame") -> str:
    return json.dumps({
        "type": kind, "seq": seq, "t": 3600.0 * seq, "health": "ok", "speed": 60, "paused": False,
        "util": {"gpus": 512, "allocated": allocated, "idle": 512 - allocated, "spare": 0,
                 "down": 0},
        "mfu": 0.3, "goodput": 0.4, "loss_pp": {"idle": 50.0, "recovery": 20.0},
        "jobs": {"queued": 1, "running": 2}, "interruptions": {"unplanned": 1, "planned": 0},
        "power": {"it_mw": 1.5}, "events": [{"t": 60.0, "kind": "drill", "text": "a drill"}]})


@pytest.mark.django_db(transaction=True)
def test_the_client_resyncs_after_a_gap_and_reconnects_after_a_close(live_server, page):
    """twin-live.js against a scripted WebSocket (Playwright routes /ws/twin/)."""
    from twin.services import demo_accounts_seed

    demo_accounts_seed(password=PASSWORD)
    sockets, received = [], []

    def serve(ws):
        sockets.append(ws)
        ws.on_message(lambda text: received.append(json.loads(text)))
        ws.send(_frame(5, 100, kind="snapshot"))

    page.route_web_socket("**/ws/twin/", serve)
    log_in(page, live_server.url, "operator")
    page.wait_for_function("document.getElementById('gpus-allocated').textContent === '100'")
    sockets[0].send(_frame(6, 111))
    page.wait_for_function("document.getElementById('gpus-allocated').textContent === '111'")
    sockets[0].send(_frame(8, 222))  # seq 7 went missing
    for _ in range(50):
        if {"type": "resync"} in received:
            break
        page.wait_for_timeout(100)
    assert {"type": "resync"} in received
    assert page.inner_text("#gpus-allocated") == "111"  # frames after a gap wait for the snapshot
    sockets[0].send(_frame(8, 222, kind="snapshot"))
    page.wait_for_function("document.getElementById('gpus-allocated').textContent === '222'")
    assert page.locator("#stale-banner").is_hidden()
    assert page.inner_text("#engine-health") == "engine ok · ×60"
    sockets[0].close()
    page.wait_for_selector("#stale-banner:not([hidden])", timeout=2_000)
    for _ in range(50):  # the first retry comes after 1 s
        if len(sockets) == 2:
            break
        page.wait_for_timeout(100)
    assert len(sockets) == 2
    page.wait_for_selector("#stale-banner", state="hidden", timeout=2_000)
