"""A planner's study in the browser: staff launch one from the form, watch its runs finish on
the Dask workers, read the verdicts; an operator reads the same study and has no form."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in, shot, twin_server

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def study_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("study-server")
    with twin_server(tmp, CLUSTERTWIN_STUDY_DIR=str(tmp / "studies"),
                     CLUSTERTWIN_STUDY_WORKERS="1") as url:
        yield url


def test_staff_launch_a_study_watch_it_run_and_everyone_reads_the_verdicts(study_server,
                                                                            page, browser):
    log_in(page, study_server, "staff", "/studies/")
    page.fill("#id_name", "policy-check")
    page.select_option("#id_preset", "dev-small")
    page.fill("#id_days", "0.25")
    page.fill("#id_seeds", "3")
    page.select_option("#id_vary", "policy")
    page.fill("#id_values", "default, fifo")
    page.click("#study-form button[type=submit]")
    page.wait_for_url("**/studies/*/")
    assert page.locator("#study-progress").count() == 1
    # studies.js polls the API and reloads the page when the study ends
    page.wait_for_selector("#study-paired", timeout=240_000)
    assert page.get_attribute("#study-status", "data-status") == "done"
    assert "6 of 6 runs done" in page.inner_text("#study-count")
    table = page.inner_text("#study-paired")
    assert "policy=fifo" in table and "MFU" in table
    assert any(v in table for v in ("better", "worse", "not distinguishable"))
    assert page.locator("#study-runs tbody tr").count() == 6
    shot(page, "study-done", prefix="studies")
    url = page.url

    other = browser.new_page(viewport={"width": 1440, "height": 900})
    try:
        log_in(other, study_server, "operator", "/studies/")
        assert other.locator("#study-form").count() == 0
        assert "policy-check" in other.inner_text("#study-list")
        other.goto(url)
        assert "policy=fifo" in other.inner_text("#study-paired")
        report = other.request.get(url + "report.html")
        assert report.status == 200 and "Plotly" in report.text()
    finally:
        other.close()
