"""An alert fires on the live twin and is acknowledged: staff narrow the rules in the admin to
one on GPUs down (threshold 0, no wait), a node drill takes a node down, the nav badge and the
alerts page follow the frame, and the acknowledgement shows who made it."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import log_in, shot, wait_live

pytestmark = pytest.mark.browser

BADGE = "() => document.getElementById('alert-badge').textContent"


def test_an_alert_fires_on_a_drill_and_staff_acknowledge_it(server, page):
    log_in(page, server, "staff")
    wait_live(page)
    page.wait_for_function(f"() => ({BADGE})() !== '–'", timeout=30_000)  # live from frames

    page.goto(server + "/admin/twin/alertrule/")  # every shipped rule off: a quiet badge
    page.check("#action-toggle")
    page.select_option("select[name=action]", "disable")
    page.click("button[name=index]")
    page.wait_for_selector(".messagelist .success")
    page.goto(server + "/admin/twin/alertrule/add/")
    page.fill("#id_name", "drill-down")
    page.fill("#id_figure", "util.down")
    page.select_option("#id_comparison", ">")
    page.fill("#id_threshold", "0")
    page.fill("#id_for_s", "0")
    page.select_option("#id_severity", "critical")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")

    page.goto(server + "/alerts/")
    page.wait_for_function(f"() => ({BADGE})() === '0'", timeout=30_000)
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    drill = page.request.post(server + "/api/drills", data=json.dumps({"kind": "node"}),
                              headers={"Content-Type": "application/json",
                                       "X-CSRFToken": token})
    assert drill.status == 202, drill.text()
    page.wait_for_function(f"() => Number(({BADGE})()) >= 1", timeout=30_000)
    row = page.locator("#alert-rows tr", has_text="drill-down").first
    row.wait_for(timeout=15_000)  # redrawn by alerts.js from the frame's count, no reload
    assert "critical" in row.inner_text()
    shot(page, "firing", prefix="alerts")

    page.reload()  # the server-rendered form, as a person who opens the page sees it
    page.locator("#alert-rows tr", has_text="drill-down").first.locator(".ack button").click()
    page.wait_for_selector(".message.success")
    assert "acknowledged" in page.inner_text(".messages")
    acked = page.request.get(server + "/api/alerts?state=acknowledged").json()["alerts"]
    assert [(a["rule"], a["acknowledged_by"]) for a in acked] == [("drill-down", "staff")]
    assert "staff at" in page.inner_text("#alert-rows")
    shot(page, "acknowledged", prefix="alerts")
