"""The stale banner says why no live data comes and how old the data shown is: "connection
lost, reconnecting" while the server is gone; "engine stopped" when a server answers again and
the engine's last word was that it stopped; "engine off" on a page served by a server without an
engine (CLUSTERTWIN_ENGINE=off); each with the wall-clock time of the state shown.

A real daphne with the embedded engine on dev-small, stopped under an open page, then the same
database served again on the same port with no engine.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from urllib.parse import urlparse

import pytest

from tests.browser.conftest import PASSWORD, ROOT, _wait_for_port, log_in, twin_server, wait_live

pytestmark = pytest.mark.browser

SHOWN = re.compile(r"showing the state of (\d\d):(\d\d):(\d\d) \((\d+) s ago\)")


def banner_says(page, words: str, timeout_ms: int = 60_000) -> str:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    try:
        page.wait_for_function(
            "(words) => { const b = document.getElementById('stale-banner');"
            " return !b.hidden && b.textContent.includes(words); }", arg=words,
            timeout=timeout_ms)
    except PlaywrightTimeout:
        banner = page.locator("#stale-banner")
        shown = banner.evaluate("(b) => (b.hidden ? 'hidden: ' : '') + b.textContent")
        pytest.fail(f"the banner never said {words!r}; it says {shown!r}")
    return page.locator("#stale-banner").inner_text()


def seconds(match: re.Match) -> int:
    h, m, s = (int(g) for g in match.groups()[:3])
    return h * 3600 + m * 60 + s


def clock(moment: datetime) -> int:
    return moment.hour * 3600 + moment.minute * 60 + moment.second


def within(second: int, low: int, high: int) -> bool:
    """``low <= second <= high`` on a 24-hour dial (a window may span midnight)."""
    return (second - low) % 86400 <= (high - low) % 86400


def test_the_banner_says_reconnecting_then_engine_off_with_the_age_of_the_state(
        tmp_path, page):
    with twin_server(tmp_path) as url:
        log_in(page, url, "operator")
        wait_live(page)
        assert page.locator("#stale-banner").is_hidden()
        live_at = datetime.now().astimezone()  # a live frame was on the page by then
    # the server (and its engine) stopped under the open page
    lost = banner_says(page, "connection lost, reconnecting: showing the state of ")
    lost_at = datetime.now().astimezone()
    first = SHOWN.search(lost)
    assert first, lost
    # the state shown is the last frame the page got: after it was live, before the loss was
    # seen (the page's and the test's clocks are the same machine's)
    assert within(seconds(first), clock(live_at) - 1, clock(lost_at) + 1), (lost, live_at, lost_at)

    port = urlparse(url).port
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           "CLUSTERTWIN_ENGINE": "off", "CLUSTERTWIN_DEMO_PASSWORD": PASSWORD,
           "DJANGO_SETTINGS_MODULE": "twin.config.settings"}
    env.pop("REDIS_URL", None)
    log = tmp_path / "serve-off.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--bind", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, proc, log, timeout=120)
        banner_says(page, "engine stopped: showing the state of ")
        page.reload()  # a fresh page learns the state's age from the server, not a frame
        fresh = banner_says(page, "engine off (CLUSTERTWIN_ENGINE=off): showing the state of ")
        shown = SHOWN.search(fresh)
        assert shown, fresh
        # the state shown is the engine's last write (its "stopped" at shutdown), to the
        # second, however long the shutdown took: read from the database itself
        with sqlite3.connect(tmp_path / "db.sqlite3") as db:
            (written,) = db.execute("SELECT updated_at FROM twin_livestate").fetchone()
        last = datetime.fromisoformat(written).replace(tzinfo=UTC).astimezone()
        assert within(seconds(shown), clock(last) - 1, clock(last) + 1), (fresh, last)
    finally:  # how fast a server stops is tests/web/test_shutdown.py's business, not this one's
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
