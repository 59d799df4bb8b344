"""A node's and a rack's history charts in a real browser: the live engine records every
entity's figures as it runs, the pages draw them from ``/api/history?kind=&id=`` with the
utilisation axis from zero to 100 %, and power and temperature beside them (dev-small runs the
physics model)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in, wait_live

pytestmark = pytest.mark.browser

DRAWN = ("() => { const n = document.getElementById('entity-charts-note');"
         " return n && n.textContent.includes('stored points'); }")


def y_axis(page, chart: str) -> dict:
    return page.evaluate(f"() => document.getElementById('entity-chart-{chart}')"
                         f"._fullLayout.yaxis.range")


def traces(page, chart: str) -> list[str]:
    return page.evaluate(f"() => document.getElementById('entity-chart-{chart}')"
                         f".data.map(t => t.name)")


def test_node_and_rack_pages_chart_their_stored_figures(server, page):
    log_in(page, server, "operator")
    wait_live(page)
    for path in ("/nodes/0/", "/racks/0/"):
        page.goto(server + path)
        page.wait_for_function(DRAWN, timeout=60_000)  # a function: the CSP forbids eval
        low, high = y_axis(page, "util")
        assert low == 0 and high >= 100
        assert {"compute utilisation", "GPUs allocated"} <= set(traces(page, "util"))
        assert "power draw" in traces(page, "power")
        assert y_axis(page, "power")[0] == 0
    assert page.locator("#entity-no-power").count() == 0
    page.select_option("#entity-range", "15m")  # every chart shows the last 15 minutes
    page.wait_for_function(
        "() => ['util', 'power', 'temp'].every(k => { const r = document.getElementById("
        "'entity-chart-' + k)._fullLayout.xaxis.range;"
        " return Math.abs((r[1] - r[0]) - 0.25) < 1e-6; })", timeout=30_000)
