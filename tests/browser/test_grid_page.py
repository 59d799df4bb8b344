"""Browser: the grid page (issue 30) on a real server with a running ``run_grid``: a site's row
and the totals row are shown, a site link leads to its page whose figures agree with the
grid's, and a staff drill of a region loss shows that place down once the running grid has
applied it (the page polls /api/grids/eu/; every wait has a deadline)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.browser.conftest import CHROMIUM, ROOT, log_in, shot, twin_server

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]

MAKE_GRID = ("from tests.web.test_grid_inventory import grid_plans, grid_spec\n"
             "from twin.inventory.grid import grid_write\n"
             "p = grid_plans(); grid_write(grid_spec(p), p)")
KEYS = ("gpus", "allocated", "down", "queued_jobs", "queued_gpus")


@pytest.fixture(scope="module")
def grid_server(tmp_path_factory):
    """The twin (dev-small, embedded engine) with grid ``eu`` in its inventory and its
    ``run_grid`` running."""
    tmp = tmp_path_factory.mktemp("grid-server")
    with twin_server(tmp, CLUSTERTWIN_CLUSTER="dev-small") as url:
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
               "DJANGO_SETTINGS_MODULE": "twin.config.settings", "CLUSTERTWIN_ENGINE": "off",
               "CLUSTERTWIN_CLUSTER": "dev-small", "CLUSTERTWIN_FRAME_INTERVAL_S": "0.5",
               "CLUSTERTWIN_GRID_DIR": str(tmp / "grids"), "CLUSTERTWIN_INSECURE_DEMO": "1"}
        env.pop("REDIS_URL", None)
        subprocess.run([sys.executable, "manage.py", "shell", "-c", MAKE_GRID], cwd=ROOT,
                       env=env, check=True, capture_output=True)
        log = (tmp / "run_grid.log").open("w")
        proc = subprocess.Popen([sys.executable, "manage.py", "run_grid", "--grid", "eu",
                                 "--speed", "1800", "--seed", "1"], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            yield url
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def row_of(page, source: str, place: str) -> dict:
    """``{data-key: number}`` of a place's row (``total``: the totals row)."""
    sel = (f'section[data-source="{source}"] table.grid-places tr'
           + ("[data-total]" if place == "total" else f'[data-place="{place}"]'))
    cells = page.eval_on_selector_all(
        f"{sel} td[data-key]", "tds => tds.map(td => [td.dataset.key, td.textContent.trim()])")
    return {k: v for k, v in cells}


def numbers(cells: dict) -> dict:
    return {k: int(cells[k].replace(",", "")) for k in KEYS}


def test_grid_page_site_link_and_a_region_loss_drill(page, grid_server):
    url = grid_server
    log_in(page, url, "staff", "/grids/")
    page.click('a[href="/grids/eu/"]')
    page.wait_for_selector('section[data-source="simulated"] tr[data-place="paris"]',
                           timeout=60_000)
    paris = row_of(page, "simulated", "paris")
    assert paris["place"] == "paris" and paris["health"] == "ok"
    assert int(paris["gpus"]) == 32  # 4 H100 nodes of 8 (tests/web/test_grid_inventory.py)
    total = numbers(row_of(page, "simulated", "total"))
    assert total["gpus"] == 32 + 24 + 64 + 32
    # the page refreshes itself from /api/grids/eu/
    page.wait_for_function("document.getElementById('grid-sources')"
                           ".getAttribute('data-refreshed') !== null", timeout=30_000)
    shot(page, "grid", prefix="grid")

    page.click('section[data-source="simulated"] tr[data-place="oslo"] a')
    page.wait_for_url(f"{url}/grids/eu/sites/oslo/")
    oslo = row_of(page, "simulated", "oslo")
    assert int(oslo["gpus"]) == 24 and row_of(page, "simulated", "total")["gpus"] == "24"
    assert page.locator("#site-admin").count() == 1
    # the sites' pages sum to the grid's totals: read through the API until all five
    # answers come from one frame (the same updated_at), then compare every figure
    api = page.evaluate("""async () => {
        const one = async (q) => (await (await fetch('/api/grids/eu/' + q)).json()).sources[0];
        for (let i = 0; i < 200; i++) {
            const grid = await one('');
            const parts = [];
            for (const p of ['paris', 'oslo', 'aws/eu-central-1', 'gcp/us-east4']) {
                parts.push(await one('?place=' + encodeURIComponent(p)));
            }
            if (parts.every(v => v.updated_at === grid.updated_at)) { return {grid, parts}; }
        }
        return null;
    }""")
    assert api is not None, "no five answers from one frame"
    for key in KEYS:
        assert sum(p["totals"][key] for p in api["parts"]) == api["grid"]["totals"][key], key
    assert sum(p["totals"]["wan_in_gb"] for p in api["parts"]) == pytest.approx(
        api["grid"]["totals"]["wan_in_gb"], abs=0.2)

    page.goto(f"{url}/grids/eu/")
    page.select_option("#drill-kind", "grid_region_loss")
    page.select_option("#drill-place", "oslo")
    page.click("#drill-submit")
    page.wait_for_selector(".message.success", timeout=30_000)
    # the running grid applies it; the polling page shows oslo down
    page.wait_for_function(
        """() => {
            const td = document.querySelector(
                'section[data-source="simulated"] tr[data-place="oslo"] td[data-key="health"]');
            return td && td.textContent.trim() === 'down';
        }""", timeout=60_000)
    oslo = numbers(row_of(page, "simulated", "oslo"))
    assert oslo["down"] == oslo["gpus"] == 24
    assert row_of(page, "simulated", "paris")["health"] == "ok"
    total = numbers(row_of(page, "simulated", "total"))
    assert total["down"] >= 24
    # the poller redraws the incidents: the region loss is an open incident naming oslo
    page.wait_for_selector('table.grid-incidents[data-source="simulated"] '
                           'tr[data-incident="region_loss"][data-target="oslo"]'
                           '[data-state="open"]', timeout=30_000)
    shot(page, "grid-drill", prefix="grid")
