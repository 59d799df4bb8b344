"""The overview chart comes from stored history: it survives a reload, and the range picker
shows the chosen span of simulated time."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in, wait_live

pytestmark = pytest.mark.browser

POINTS = "() => document.getElementById('series-chart').data?.[0]?.x?.length || 0"


def test_the_chart_survives_a_reload_and_follows_the_chosen_range(server, page):
    log_in(page, server, "operator")
    wait_live(page)
    page.wait_for_function(f"() => ({POINTS})() >= 5", timeout=60_000)
    page.reload()
    # straight from the stored history, before enough live frames could have drawn it again
    page.wait_for_function("() => document.getElementById('series-range-status')"
                           ".textContent.includes('stored points')", timeout=30_000)
    assert page.evaluate(POINTS) >= 5

    page.select_option("#series-range", "")  # the whole run
    page.wait_for_function("() => document.getElementById('series-chart').data[0].x[0] < 0.5",
                           timeout=30_000)
    page.select_option("#series-range", "3600")  # the last simulated hour
    page.wait_for_function(
        "() => { const r = document.getElementById('series-chart').layout.xaxis.range;"
        " return r && Math.abs((r[1] - r[0]) - 1) < 0.01; }", timeout=30_000)
