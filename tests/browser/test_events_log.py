"""Browser: the overview's event log colours events by severity, dates them by the wall clock
(simulated time on hover) and hides routine scheduling until asked; the Events page offers its
kinds with counts and answers a bad filter with a 400 and its message."""

import re
import shutil

import pytest

from tests.browser.conftest import CHROMIUM, log_in, wait_live

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]

ROUTINE_JS = """() => {
  const table = JSON.parse(document.getElementById('event-kinds').textContent);
  return [...document.querySelectorAll('#event-log li.event')]
    .map(li => li.querySelector('.kind').textContent)
    .filter(k => (table[k] || {}).routine);
}"""


def test_a_drill_shows_in_the_log_by_severity_with_its_wall_time(server, page):
    log_in(page, server, "staff", "/drills/")
    wait_live(page)
    page.select_option("#id_kind", "node")
    page.fill("#id_target", "random")
    page.click("#drill-form button[type=submit]")
    page.wait_for_selector(".message.success")
    page.goto(server + "/")
    wait_live(page)
    drill = page.wait_for_selector("#event-log li.event-drill")
    assert "sev-warning" in drill.get_attribute("class")
    when = drill.query_selector("time.wall")
    assert re.fullmatch(r"\d\d:\d\d:\d\d|\d\d-\d\d \d\d:\d\d", when.inner_text())
    assert re.search(r"Z · simulated day \d+, \d\d:\d\d$", when.get_attribute("title"))
    assert not page.is_checked("#event-log-routine")
    assert page.evaluate(ROUTINE_JS) == []
    hidden = page.evaluate("() => document.querySelectorAll('#event-log li.event').length")
    page.check("#event-log-routine")
    page.wait_for_function(
        "n => document.querySelectorAll('#event-log li.event').length >= n", arg=hidden)


def test_the_events_page_lists_kinds_with_counts_and_refuses_a_bad_kind(server, page):
    log_in(page, server, "operator", "/events/")
    options = page.locator("#event-kind option").all_inner_texts()
    assert options[0] == "all kinds" and all(re.search(r"\(\d[\d,]*\)", o) for o in options[1:])
    response = page.goto(server + "/events/?kind=bogus")
    assert response.status == 400
    assert "unknown event kind 'bogus'" in page.inner_text("#event-error")
    response = page.goto(server + "/events/?page=99999")
    assert response.status == 200 and "There is no page 99,999" in page.inner_text("main")
