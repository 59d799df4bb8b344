"""Browser: the live dashboard against a real daphne server running the embedded engine
(``server`` in conftest.py). pytest-django's live_server speaks WSGI, not WebSockets; it serves
the one test below that wants no engine.
"""

import json
import shutil

import pytest

from tests.browser.conftest import CHROMIUM, PASSWORD, counter, log_in, shot, wait_live
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]


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
    assert page.locator("#series-chart .scatterlayer .trace").count() == 4
    names = page.evaluate("() => document.getElementById('series-chart').data.map(d => d.name)")
    assert names == ["GPUs allocated %", "MFU since start %", "MFU last hour %", "goodput %"]
    assert page.inner_text("#mfu-window") not in ("", "–")  # the windowed MFU counter
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
        "() => document.querySelector('#drill-rows tr').textContent.includes('applied')",
        timeout=10_000)
    shot(page, "drills")
    page.goto(server + "/")
    wait_live(page)
    page.wait_for_selector("#event-log .event-drill")
    page.fill("#speed-input", "300")
    page.click("#speed-apply")
    page.wait_for_function(
        "() => document.getElementById('control-status').textContent.includes('×300')",
        timeout=5_000)
    page.wait_for_function(
        "() => document.getElementById('engine-health').textContent.includes('×300')",
        timeout=10_000)
    page.click("#pause-toggle")
    page.wait_for_function(
        "() => document.getElementById('paused-value').textContent === 'paused'",
        timeout=10_000)
    page.click("#pause-toggle")
    page.wait_for_function(
        "() => document.getElementById('paused-value').textContent === 'running'",
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
    from twin.config.demo import demo_accounts_seed

    demo_accounts_seed(password=PASSWORD)
    log_in(page, live_server.url, "operator")
    page.wait_for_selector("#stale-banner:not([hidden])", timeout=5_000)
    # issue 27: the banner says why and how old the data is (no live state was ever written)
    assert page.inner_text("#stale-banner").startswith("connection lost, reconnecting")
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
    from twin.config.demo import demo_accounts_seed

    demo_accounts_seed(password=PASSWORD)
    sockets, received = [], []

    def serve(ws):
        sockets.append(ws)
        ws.on_message(lambda text: received.append(json.loads(text)))
        ws.send(_frame(5, 100, kind="snapshot"))

    def pump(seconds):  # Playwright runs the socket handlers above while the page waits
        page.wait_for_timeout(seconds * 1000)

    page.route_web_socket("**/ws/twin/", serve)
    log_in(page, live_server.url, "operator")
    page.wait_for_function("() => document.getElementById('gpus-allocated').textContent === '100'")
    sockets[0].send(_frame(6, 111))
    page.wait_for_function("() => document.getElementById('gpus-allocated').textContent === '111'")
    sockets[0].send(_frame(8, 222))  # seq 7 went missing
    wait_until(lambda: {"type": "resync"} in received, what="the client asking for a resync",
               sleep=pump)
    assert page.inner_text("#gpus-allocated") == "111"  # frames after a gap wait for the snapshot
    sockets[0].send(_frame(8, 222, kind="snapshot"))
    page.wait_for_function("() => document.getElementById('gpus-allocated').textContent === '222'")
    assert page.locator("#stale-banner").is_hidden()
    assert page.inner_text("#engine-health") == "engine ok · ×60"
    sockets[0].close()
    page.wait_for_selector("#stale-banner:not([hidden])", timeout=2_000)
    wait_until(lambda: len(sockets) == 2, what="the client reconnecting", sleep=pump)
    page.wait_for_selector("#stale-banner", state="hidden", timeout=2_000)
