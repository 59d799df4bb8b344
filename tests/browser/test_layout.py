"""The layout holds from a 390 px phone to a 2560 px wall on the 101,120-GPU hyperscale-100k
twin: every page (overview, topology, jobs, a job, a node, a switch, a tenant, events,
failures, alerts, drills, incidents, an incident, search, what-if, studies, the admin index),
as staff, at 390, 1280, 1440 and 2560 px, has no horizontal overflow: the document is no wider
than the window, and nothing sticks out of it except inside a box that scrolls or clips
sideways (a wide table in its ``.table-scroll`` wrapper).  A page that overflows is
photographed (full page) into the test's tmp dir, to see what sticks out; the others are not
(68 full-page screenshots of 100k tables cost minutes of the suite's time)."""

from __future__ import annotations

import shutil

import pytest

from tests.browser.conftest import CHROMIUM, log_in, twin_server
from tests.browser.test_actions import csrf
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]

VIEWPORTS = ((390, 844), (1280, 900), (1440, 900), (2560, 1440))
PAGES = ("/", "/topology/", "/jobs/", "/failures/", "/drills/", "/events/", "/alerts/",
         "/incidents/", "/search/?q=leaf", "/whatif/", "/studies/", "/admin/")

# An element overflows when its box passes the window's right edge (or its left) and no
# ancestor between it and <body> scrolls or clips sideways; only the outermost such element
# is named (its children stick out with it).
OVERFLOW_JS = """() => {
  const width = document.documentElement.clientWidth;
  const clipped = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const x = getComputedStyle(a).overflowX;
      if (x === 'auto' || x === 'scroll' || x === 'hidden' || x === 'clip') return true;
    }
    return false;
  };
  const out = el => {
    const r = el.getBoundingClientRect();
    // Plotly's text-measuring <svg> sits at -10000 px on purpose: off-screen left is unseen
    return r.width > 0 && r.right > 0 && (r.right > width + 1 || r.left < -1);
  };
  const wide = [...document.querySelectorAll('body *')]
    .filter(el => out(el) && !clipped(el))
    .filter(el => !el.parentElement || el.parentElement === document.body
      || !out(el.parentElement) || clipped(el.parentElement))
    .slice(0, 5).map(el => {
      const r = el.getBoundingClientRect();
      return el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
        (typeof el.className === 'string' && el.className ? '.' + el.className.split(' ')[0] : '')
        + ' [' + Math.round(r.left) + '..' + Math.round(r.right) + ']';
    });
  return {scroll: document.documentElement.scrollWidth, client: width, wide};
}"""


# The overview's storage table (issue 27): its figures fit the card, not scrolled to.
STORAGE_FITS = """() => { const t = document.getElementById('storage-table');
  const card = t.parentElement, pad = getComputedStyle(card);
  return {table: t.scrollWidth, card: card.clientWidth - parseFloat(pad.paddingLeft)
          - parseFloat(pad.paddingRight)}; }"""


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """The largest twin: what overflows anywhere overflows here (dev-small's pages are the
    same templates with shorter tables)."""
    with twin_server(tmp_path_factory.mktemp("hyperscale"), "hyperscale-100k",
                     CLUSTERTWIN_SPEEDUP="60", CLUSTERTWIN_FRAME_INTERVAL_S="1") as url:
        yield "hyperscale-100k", url


def _entity_pages(page, url: str) -> list[str]:
    """A job, node, switch, tenant and incident page of the live twin: the biggest running
    job, and the incident of a leaf-switch drill started here."""
    def running():
        answer = page.request.get(url + "/api/jobs")
        return answer.json().get("running_jobs") if answer.ok else None
    job = wait_until(running, what="a running job", timeout=120)[0]
    page.goto(url + "/drills/")
    answer = page.request.post(url + "/api/drills", data={"kind": "leaf_switch", "target": 0},
                               headers={"X-CSRFToken": csrf(page)})
    assert answer.status == 202, answer.text()
    drill = answer.json()["id"]

    def incident():
        found = page.request.get(url + "/api/incidents").json()["incidents"]
        return [i for i in found if i.get("drill_id") == drill]
    incident_id = wait_until(incident, what="the drill's incident", timeout=120)[0]["id"]
    return [f"/jobs/{job['name']}/", "/nodes/0/", "/switches/0/",
            f"/tenants/{job['tenant']}/", f"/incidents/{incident_id}/"]


def _settle(page, path: str) -> None:
    page.wait_for_load_state("load")
    if path == "/topology/":  # the heatmaps are the widest things drawn
        page.wait_for_selector("#rack-status .nsewdrag", timeout=60_000)
    elif path == "/":
        page.wait_for_selector("#series-chart .main-svg", timeout=60_000)
    # fonts loaded and the layout still: the page's width the same over two animation frames
    page.wait_for_function(
        """() => new Promise(done => { const w = document.documentElement.scrollWidth;
             requestAnimationFrame(() => requestAnimationFrame(() =>
               done(document.fonts.status === 'loaded'
                    && document.documentElement.scrollWidth === w))); })""",
        timeout=60_000)


def test_no_page_overflows_horizontally_from_390_to_2560_px(twin, browser, tmp_path):
    preset, url = twin
    problems = []
    entities: list[str] = []
    for width, height in VIEWPORTS:
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        log_in(page, url, "staff")
        entities = entities or _entity_pages(page, url)
        for path in (*PAGES, *entities):
            response = page.goto(url + path)
            assert response.ok, f"{path}: {response.status}"
            _settle(page, path)
            seen = page.evaluate(OVERFLOW_JS)
            if seen["scroll"] > seen["client"] + 1 or seen["wide"]:
                name = path.strip("/").replace("/", "-").replace("?", "-") or "overview"
                page.screenshot(path=str(tmp_path / f"{preset}-{width}-{name}.png"),
                                full_page=True)
                problems.append(f"{width}px {path}: page {seen['scroll']} px wide in "
                                f"{seen['client']} px; sticking out: {seen['wide']}")
            if path == "/":  # the storage figures fit their card: nothing to scroll to
                fit = page.evaluate(STORAGE_FITS)
                if fit["table"] > fit["card"] + 1:
                    problems.append(f"{width}px /: the storage table is {fit['table']} px in "
                                    f"a {fit['card']} px card")
        assert errors == [], errors
        context.close()
    assert problems == [], "\n".join(problems)


CLICK_FIRST_OUT = """id => { const d = document.getElementById(id);
  const z = d.data[0].z;
  for (let y = 0; y < z.length; y++) for (let x = 0; x < z[y].length; x++)
    if (z[y][x] > 0) { d.emit('plotly_click', {points: [{x: x, y: y}]}); return [x, y]; }
  return null; }"""


def test_one_node_out_at_100k_is_crossed_counted_by_hall_and_drills_to_its_rack(twin, browser):
    """A node drill on the 100k floor, whose rack maps merge three floor rows a cell: a cell
    with a node out is crossed, its hall's line counts it, clicking the cell opens the hall
    unmerged, and clicking a crossed rack there lists its nodes, one of them down."""
    _, url = twin
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, url, "staff", "/drills/")
    answer = page.request.post(url + "/api/drills", data={"kind": "node", "target": 5000},
                               headers={"X-CSRFToken": csrf(page)})
    assert answer.status == 202, answer.text()
    status = page.request.get(url + "/api/state").json()["frame"]["heatmaps"]["racks"]["status"]
    assert status["rows_per_cell"] > 1  # merged: the case this guards
    page.goto(url + "/topology/")
    page.wait_for_selector("#rack-status .nsewdrag", timeout=60_000)
    page.wait_for_function(
        """() => [...document.querySelectorAll('#hall-summary tr')].some(
             tr => tr.cells[2] && tr.cells[2].textContent.trim() !== '0')""", timeout=60_000)
    assert page.evaluate("() => document.getElementById('rack-status').data[1].x.length") >= 1
    assert page.evaluate(CLICK_FIRST_OUT, "rack-status") is not None
    page.wait_for_function(
        "() => /unmerged/.test(document.getElementById('zoom-status').textContent)",
        timeout=30_000)
    assert "racks in that cell" in page.inner_text("#rack-message")
    assert page.evaluate(CLICK_FIRST_OUT, "zoom-chart") is not None
    page.wait_for_selector("#rack-detail:not([hidden])", timeout=30_000)
    assert "down" in page.inner_text("#rack-nodes")
    assert errors == [], errors
    page.close()
