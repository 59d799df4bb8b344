"""Browser: the tables the browser draws link every entity name to its page — the Jobs page's
queue, running jobs and tenants (job and tenant names), and the overview's event log, which
shows a drilled leaf switch by the name the switch page shows, not by its engine id."""

import shutil

import pytest

from tests.browser.conftest import CHROMIUM, log_in, wait_live

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]

# cells of a column (0-based) of a tbody: [text, href of its links...]
CELLS_JS = """([tbody, col]) => [...document.querySelectorAll('#' + tbody + ' tr')]
  .filter(tr => tr.children.length > col && !tr.querySelector('td.muted'))
  .map(tr => [tr.children[col].textContent,
              ...[...tr.children[col].querySelectorAll('a')].map(a => a.getAttribute('href'))])"""


def cells(page, tbody: str, col: int) -> list[list[str]]:
    return page.evaluate(CELLS_JS, [tbody, col])


def test_every_job_and_tenant_name_on_the_jobs_page_is_a_link(server, page):
    log_in(page, server, "operator", "/jobs/")
    page.wait_for_selector("#running-rows tr td a", timeout=60_000)  # the first frame
    page.wait_for_function("() => document.getElementById('queue-page').textContent !== '–'")
    for tbody, col, prefix in (("running-rows", 0, "/jobs/"), ("running-rows", 1, "/tenants/"),
                               ("queue-rows", 1, "/jobs/"), ("queue-rows", 2, "/tenants/"),
                               ("tenant-rows", 0, "/tenants/")):
        got = cells(page, tbody, col)
        assert got or tbody == "queue-rows", tbody  # the queue may be empty
        for text, *hrefs in got:
            assert hrefs and all(h.startswith(prefix) for h in hrefs), (tbody, col, text)


def test_a_leaf_drill_shows_in_the_log_by_the_switch_s_name(server, page):
    log_in(page, server, "staff", "/drills/")
    wait_live(page)
    page.select_option("#id_kind", "leaf_switch")
    target = page.evaluate(
        "() => [...document.querySelectorAll('#drill-targets option')].map(o => o.value)")
    assert "random" in target and any(t.startswith("leaf-") for t in target)
    leaf = next(t for t in target if t.startswith("leaf-"))
    page.fill("#id_target", leaf)
    page.click("#drill-form button[type=submit]")
    page.wait_for_selector(".message.success")
    assert leaf in page.inner_text(".message.success")
    page.goto(server + "/")
    wait_live(page)
    link = page.wait_for_selector(f"#event-log li.event-failure a:text-is('{leaf}')",
                                  timeout=30_000)
    assert link.get_attribute("href").startswith("/switches/")
