"""The layout holds from 1280 px to 2560 px wide on the 101,120-GPU hyperscale-100k twin:
every page, as staff, at 1280x900 and 2560x1440, has no horizontal overflow (wide tables
scroll inside their own box).  Screenshots go to the test's tmp dir."""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import log_in, twin_server

pytestmark = pytest.mark.browser

VIEWPORTS = ((1280, 900), (2560, 1440))
PAGES = ("/", "/topology/", "/jobs/", "/failures/", "/drills/", "/events/", "/alerts/",
         "/search/?q=a", "/whatif/", "/studies/")

OVERFLOW_JS = """() => {
  const width = window.innerWidth;
  const wide = [...document.querySelectorAll('body *')]
    .filter(el => el.getBoundingClientRect().right > width + 0.5)
    .filter(el => !el.parentElement
      || el.parentElement.getBoundingClientRect().right <= width + 0.5)
    .slice(0, 5).map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      (el.className && el.className.baseVal === undefined ? '.' + el.className : ''));
  return {scroll: document.documentElement.scrollWidth, inner: width, wide};
}"""


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """The largest twin: what overflows anywhere overflows here (dev-small's pages are the
    same templates with shorter tables)."""
    with twin_server(tmp_path_factory.mktemp("hyperscale"), "hyperscale-100k",
                     CLUSTERTWIN_SPEEDUP="60", CLUSTERTWIN_FRAME_INTERVAL_S="1") as url:
        yield "hyperscale-100k", url


def _entity_pages(page, url: str) -> list[str]:
    """A job, node, switch and tenant page of the live twin (the biggest running job)."""
    deadline = time.monotonic() + 120
    while True:
        answer = page.request.get(url + "/api/jobs")
        running = answer.json().get("running_jobs") if answer.ok else None
        if running:
            break
        assert time.monotonic() < deadline, "no job ran within 120 s"
        time.sleep(0.5)
    job = running[0]
    return [f"/jobs/{job['name']}/", "/nodes/0/", "/switches/0/", f"/tenants/{job['tenant']}/"]


def _settle(page, path: str) -> None:
    page.wait_for_load_state("load")
    if path == "/topology/":  # the heatmaps are the widest things drawn
        page.wait_for_selector("#rack-status .nsewdrag", timeout=60_000)
    elif path == "/":
        page.wait_for_selector("#series-chart .main-svg", timeout=60_000)
    page.wait_for_timeout(300)


def test_no_page_overflows_horizontally_from_1280_to_2560_px(twin, browser, tmp_path):
    preset, url = twin
    problems = []
    for width, height in VIEWPORTS:
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        log_in(page, url, "staff")
        for path in (*PAGES, *_entity_pages(page, url)):
            response = page.goto(url + path)
            assert response.ok, f"{path}: {response.status}"
            _settle(page, path)
            seen = page.evaluate(OVERFLOW_JS)
            name = path.strip("/").replace("/", "-").replace("?", "-") or "overview"
            page.screenshot(path=str(tmp_path / f"{preset}-{width}-{name}.png"), full_page=True)
            if seen["scroll"] > seen["inner"]:
                problems.append(f"{preset} {width}px {path}: page {seen['scroll']} px wide, "
                                f"window {seen['inner']} px; sticking out: {seen['wide']}")
        assert errors == [], errors
        context.close()
    assert problems == [], "\n".join(problems)
