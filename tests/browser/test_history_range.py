"""The overview chart comes from stored history: it survives a reload, the range picker shows
the chosen span of simulated time, a drag zooms in (asked again of the server) and a reset
returns to the picked range; utilisation starts at zero."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in, wait_live
from tests.waiting import wait_until

pytestmark = pytest.mark.browser

POINTS = "() => document.getElementById('series-chart').data?.[0]?.x?.length || 0"
SPAN = ("() => { const r = document.getElementById('series-chart').layout.xaxis.range;"
        " return r ? r[1] - r[0] : null; }")


def test_the_chart_survives_a_reload_and_follows_the_chosen_range(server, page):
    log_in(page, server, "operator")
    wait_live(page)
    page.wait_for_function(f"() => ({POINTS})() >= 5", timeout=60_000)
    page.reload()
    # straight from the stored history, before enough live frames could have drawn it again
    page.wait_for_function("() => document.getElementById('series-range-status')"
                           ".textContent.includes('stored points')", timeout=30_000)
    assert page.evaluate(POINTS) >= 5
    assert page.evaluate("document.getElementById('series-chart').layout.yaxis.rangemode"
                         ) == "tozero"
    assert "simulated time" in page.inner_text("#series-range-status")

    page.select_option("#series-range", "all")  # the whole run
    page.wait_for_function("() => document.getElementById('series-chart').data[0].x[0] < 0.5",
                           timeout=30_000)
    page.select_option("#series-range", "1h")  # the last simulated hour
    page.wait_for_function(f"() => Math.abs(({SPAN})() - 1) < 0.01", timeout=30_000)


def test_a_drag_zooms_in_and_reset_returns_to_the_picked_range(server, page):
    log_in(page, server, "operator")
    wait_live(page)
    page.wait_for_function(f"() => ({POINTS})() >= 5", timeout=60_000)
    page.select_option("#series-range", "all")
    page.wait_for_function("() => document.getElementById('series-chart').data[0].x[0] < 0.5",
                           timeout=30_000)
    # what Plotly's box zoom emits: the x range dragged across (simulated hours)
    page.evaluate("() => { const d = document.getElementById('series-chart');"
                  " const x = d.data[0].x; Plotly.relayout(d, {'xaxis.range[0]': x[1],"
                  " 'xaxis.range[1]': x[3]}); }")
    page.wait_for_function("() => document.getElementById('series-range-status')"
                           ".textContent.includes('zoomed')", timeout=30_000)
    assert page.is_visible("#series-reset")
    page.click("#series-reset")
    page.wait_for_function("() => document.getElementById('series-reset').hidden",
                           timeout=30_000)
    assert "zoomed" not in page.inner_text("#series-range-status")


def test_a_tenants_chart_starts_at_zero_and_has_the_range_picker(server, page):
    log_in(page, server, "operator")
    wait_live(page)
    # the first frames may come before any tenant holds GPUs
    tenants = wait_until(lambda: page.evaluate("() => fetch('/api/jobs').then(r => r.json())"
                                               ".then(b => b.tenants.map(t => t.tenant))"),
                         timeout=120, what="a tenant in the live frame")
    page.goto(f"{server}/tenants/{tenants[0]}/")
    page.wait_for_function("() => document.getElementById('tenant-history').data",
                           timeout=30_000)
    assert page.evaluate("document.getElementById('tenant-history').layout.yaxis.rangemode"
                         ) == "tozero"
    page.select_option("#tenant-range", "15m")
    page.wait_for_function(
        "() => { const r = document.getElementById('tenant-history').layout.xaxis.range;"
        " return r && Math.abs((r[1] - r[0]) - 0.25) < 0.01; }", timeout=30_000)
