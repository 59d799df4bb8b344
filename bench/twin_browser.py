"""A logged-in Chromium on a served twin: what the browser tests (``tests/browser/``) and the
screenshot and first-paint benchmarks share, written once.

Debian's Chromium, headless, through Playwright's sync API; every wait has a deadline.  The
server itself is started elsewhere (``bench/live_server.py``, ``tests/browser/conftest.py``).
"""

from __future__ import annotations

import os
import time

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking")

LIVE = "() => document.getElementById('gpus-allocated').textContent !== '–'"
"""True once the overview's counters show a frame (a function: the CSP forbids eval)."""


def chromium_launch(playwright):
    """Debian's Chromium, headless, from a started ``sync_playwright()``."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))


def log_in(page, url: str, username: str, password: str, path: str = "/") -> None:
    """Log ``username`` in through the login form and land on ``path``."""
    page.goto(url + path)
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(url + path)


def wait_live(page, timeout_ms: int = 60_000) -> None:
    """Until the overview shows the live engine's first frame (a warm noc-4k engine runs its
    three simulated days first)."""
    page.wait_for_function(LIVE, timeout=timeout_ms)


def csrf_token(page) -> str:
    """The CSRF cookie of ``page``'s browser context (for ``page.request`` posts)."""
    return next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")


def until(fn, what: str, timeout: float = 60.0, every: float = 0.5):
    """Poll ``fn`` until it returns something truthy and return that; ``TimeoutError`` naming
    ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def busy_leaf(page, url: str, preset: str) -> int:
    """The leaf switch (engine id) above the first node of the largest running job, so that a
    drill on it hits work: the preset's plan maps nodes to leaves as the served twin's does."""
    from scheduler.presets import get_preset

    job = page.request.get(url + "/api/jobs").json()["running_jobs"][0]["name"]
    node = page.request.get(url + f"/api/jobs/{job}").json()["node_ids"][0]
    plan = get_preset(preset).plan()
    return int(plan.fabric.endpoint_leaf[plan.node_first_gpu[node]])


def cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (a served twin counts
    once it is stopped and waited for)."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system
