"""Staff actions in a real browser: staff cancel a running job from its page (after confirming)
and the audit trail and the event log name them; an operator sees no button and a forged POST
is refused; the drills form carries the engine's bounds, refuses a value out of them, and a
running drill is ended from the drills page."""

from __future__ import annotations

import json
import time

import pytest

from tests.browser.conftest import log_in, shot, wait_live
from tests.browser.test_search import a_running_job

pytestmark = pytest.mark.browser


def csrf(page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")


def test_a_staff_action_and_its_audit(server, page, browser):
    log_in(page, server, "staff")
    wait_live(page)
    asked = []
    page.on("dialog", lambda d: (asked.append(d.message), d.accept()))
    for _ in range(5):  # the twin runs at x900: a job may end before the engine cancels it
        name = a_running_job(page)["name"]
        page.goto(f"{server}/jobs/{name}/")
        if page.locator("#action-cancel").count() == 0:
            continue  # it ended between the two requests
        page.click("#action-cancel")
        page.wait_for_selector(".message.success")
        assert f"cancel of {name} sent to the live engine by staff" in page.inner_text(
            ".messages")
        log, deadline = "", time.monotonic() + 90  # the engine applies it at its next tick
        while time.monotonic() < deadline:
            page.reload()
            log = page.inner_text("#job-action-log") if page.locator(
                "#job-action-log").count() else ""
            if "applied" in log or "refused" in log:
                break
            page.wait_for_timeout(500)
        if "applied" in log:
            break
    else:
        raise AssertionError("no running job could be cancelled in five tries")
    assert asked and asked[-1].startswith(f"Cancel {name} for good?")
    assert "cancel\tstaff\tapplied" in log
    # the command log says "applied" as the engine applies it; the timeline and the state come
    # from the next published frame (the events are kept before "applied" is written)
    deadline = time.monotonic() + 90
    while True:
        timeline, state = page.inner_text("#job-timeline"), page.inner_text("#job-state")
        if (f"{name} cancelled (running) by staff" in timeline and state == "cancelled"
                or time.monotonic() > deadline):
            break
        page.wait_for_timeout(250)
        page.reload()
    assert f"{name} cancelled (running) by staff" in timeline
    assert state == "cancelled"
    shot(page, "job-cancelled", prefix="actions")

    admin = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(admin, server, "admin")
    admin.goto(server + "/admin/twin/auditentry/")
    rows = admin.inner_text("#result_list")
    assert "staff" in rows and "job cancel" in rows and name in rows
    admin.close()


def test_an_operator_is_refused(server, page):
    log_in(page, server, "operator")
    wait_live(page)
    name = a_running_job(page)["name"]
    page.goto(f"{server}/jobs/{name}/")
    assert page.locator("#job-actions").count() == 0
    page.goto(f"{server}/nodes/0/")
    assert page.locator("#node-actions").count() == 0
    headers = {"X-CSRFToken": csrf(page)}
    api = page.request.post(f"{server}/api/jobs/{name}/actions",
                            data=json.dumps({"action": "cancel"}),
                            headers={**headers, "Content-Type": "application/json"})
    assert api.status == 403 and "staff" in api.json()["error"]
    form = page.request.post(f"{server}/jobs/{name}/actions", form={"action": "cancel"},
                             headers=headers)
    assert form.status == 403
    drain = page.request.post(f"{server}/nodes/0/drain", headers=headers)
    assert drain.status == 403


def test_drill_bounds_and_ending_a_drill(server, page):
    log_in(page, server, "staff", "/drills/")
    factor = page.locator("#id_factor")
    page.select_option("#id_kind", "inference_surge")
    assert (factor.get_attribute("min"), factor.get_attribute("max")) == ("0", "100")
    assert "Demand multiplier, (0, 100] (default 2)." in page.inner_text(
        "[data-param=factor] .help")
    page.select_option("#id_kind", "storage_slowdown")
    assert (factor.get_attribute("min"), factor.get_attribute("max")) == ("0.0001", "1")
    assert "[0.0001, 1]" in page.inner_text("[data-param=factor] .help")
    page.select_option("#id_kind", "inference_surge")
    page.fill("#id_factor", "500")
    page.click("#drill-form button[type=submit]")
    assert "factor must be at most 100, not 500.0" in page.inner_text("#drill-form")
    assert page.request.get(f"{server}/api/drills").json()["drills"] == []

    page.select_option("#id_kind", "node")
    page.fill("#id_target", "3")
    page.click("#drill-form button[type=submit]")
    page.wait_for_selector(".message.success")
    page.wait_for_selector("#drill-rows button.drill-end", timeout=30_000)  # once applied
    page.on("dialog", lambda d: d.accept())
    page.click("#drill-rows button.drill-end")
    page.wait_for_selector(".message.success")
    assert "ended by staff: the engine reverts it now" in page.inner_text(".messages")
    assert "ended by staff" in page.inner_text("#drill-rows")
    page.wait_for_function(
        "() => document.body.innerText.includes('drill node on 3 ended early by staff')",
        timeout=30_000)  # the event log, from the next frames
    page.wait_for_function(
        "() => fetch('/api/nodes/3').then(r => r.json()).then(n => n.live_status === 'up')",
        timeout=15_000)
    shot(page, "drill-ended", prefix="actions")
