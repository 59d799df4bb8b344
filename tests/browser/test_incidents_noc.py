"""Browser: incidents first on the busy default twin (issue 27's "done when").

noc-4k (``make run``'s preset: 4,096 GPUs, opened warm on a fleet 87-93 % allocated), served
as in production.  A staff member runs a leaf-switch drill from the drills page, on the leaf
above the largest running job; the overview, open in another tab and never navigated, shows
the incident: the switch by the name the UI gives it, the cause, since when, the jobs hit.
The worst-hit job's page is at most two clicks from the overview.  The staff speed the engine
up from the overview; once the repair has passed the incident is resolved on the overview, on
/incidents/ and in ``GET /api/incidents``.

One test: the noc-4k engine's warm start (three simulated days) costs about 30 s of CPU before
the first frame.  The module prints its wall and CPU seconds; every wait has a deadline.
"""

from __future__ import annotations

import re
import shutil
import time

import pytest

from bench.twin_browser import busy_leaf, cpu_s, until
from tests.browser.conftest import CHROMIUM, log_in, shot, twin_server, wait_live

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]

expect = pytest.importorskip("playwright.sync_api").expect
PRESET = "noc-4k"
FAST = 3600  # simulated seconds per wall second once the incident is seen: a 4 h repair in 4 s
FIRST_FRAME_MS = 300_000  # the warm start on a loaded 2-core machine, a ceiling


@pytest.fixture(scope="module")
def noc(tmp_path_factory):
    wall, cpu = time.perf_counter(), cpu_s()
    with twin_server(tmp_path_factory.mktemp(PRESET), PRESET) as url:
        yield url
    # the server (and the browser's processes) count once they have ended
    print(f"\n{PRESET} incidents browser test: {time.perf_counter() - wall:.1f} s wall, "
          f"{cpu_s() - cpu:.1f} s CPU (pytest, the served twin, Chromium)")


def resolved_so_far(page) -> int:
    text = page.inner_text("#incidents-summary")
    found = re.search(r"([\d,]+) resolved so far", text)
    assert found, text
    return int(found.group(1).replace(",", ""))


def test_a_leaf_drill_on_noc_4k_is_an_incident_on_the_untouched_overview_until_repaired(
        noc, browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    overview, work = context.new_page(), context.new_page()
    errors: list[str] = []
    for p in (overview, work):
        p.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(overview, noc, "staff")
    wait_live(overview, timeout_ms=FIRST_FRAME_MS)
    overview.evaluate("() => { window.untouched = true; }")  # a navigation or reload drops it
    home = overview.url

    def api(path: str) -> dict:
        answer = work.request.get(noc + path)
        assert answer.ok, f"{path}: {answer.status}"
        return answer.json()

    util = api("/api/state")["frame"]["util"]
    assert util["allocated"] > util["gpus"] // 2, util  # warm: a busy fleet from the start
    resolved_before = resolved_so_far(overview)

    # the drill, from the staff's drills page
    leaf = busy_leaf(work, noc, PRESET)
    work.goto(noc + "/drills/")
    work.select_option("#id_kind", "leaf_switch")
    work.fill("#id_target", str(leaf))
    work.click("#drill-form button[type=submit]")
    sent = work.locator(".messages")
    expect(sent).to_contain_text("sent to the live engine")
    said = re.search(r"Drill #(\d+): leaf_switch on (\S+) sent", sent.inner_text())
    assert said, sent.inner_text()
    drill_id, switch = int(said.group(1)), said.group(2)  # the switch as the UI names it
    drill = next(d for d in api("/api/drills")["drills"] if d["id"] == drill_id)
    assert drill["target"] == str(leaf) and drill["target_named"]["name"] == switch, drill

    def drilled():
        return next((i for i in api("/api/incidents?state=open")["incidents"]
                     if i["drill_id"] == drill_id), None)
    incident = until(drilled, f"drill #{drill_id}'s incident")
    assert incident["component"]["kind"] == "switch" and incident["jobs"], incident
    assert incident["component"]["name"] == switch, (incident["component"], switch)
    worst = max(incident["jobs"], key=lambda j: j["gpus"])["name"]

    # the overview, untouched since it loaded, shows it: name, cause, since, jobs hit
    row = overview.locator(f"#incidents-now tr[data-id='{incident['id']}']")
    expect(row).to_be_visible(timeout=30_000)
    expect(row.locator(".incident-component")).to_contain_text(switch)
    expect(row.locator(".incident-cause")).to_contain_text("drill_leaf_switch")
    expect(row.locator(".incident-since time.wall")).to_have_count(1)
    expect(row.locator(".incident-jobs")).to_contain_text(worst)
    shot(overview, "noc-4k-leaf-drill", prefix="incidents")
    work.goto(noc + incident["component"]["url"])  # the link leads to that switch's own page
    expect(work.locator("h1")).to_contain_text(switch)

    # the worst-hit job's page, clicked through from the overview (in a second tab)
    clicker = context.new_page()
    clicker.on("pageerror", lambda exc: errors.append(str(exc)))
    clicker.goto(noc + "/")
    job_url = f"{noc}/jobs/{worst}/"
    row2 = clicker.locator(f"#incidents-now tr[data-id='{incident['id']}']")
    expect(row2).to_be_visible(timeout=60_000)
    clicks = 0
    direct = row2.locator(".incident-jobs a", has_text=re.compile(f"^{re.escape(worst)}$"))
    if direct.count():
        direct.first.click()
        clicks += 1
    else:  # through the incident's own page
        row2.locator(f".incident-component a[href$='/incidents/{incident['id']}/']").click()
        clicks += 1
        clicker.locator(f"a[href='/jobs/{worst}/']").first.click()
        clicks += 1
    clicker.wait_for_url(job_url)
    expect(clicker.locator("h1")).to_contain_text(worst)
    assert clicks <= 2, clicks
    clicker.close()

    # speed the engine up from the overview (staff), then the repair resolves it everywhere
    overview.fill("#speed-input", str(FAST))
    overview.click("#speed-apply")
    expect(overview.locator("#speed-value")).to_have_text(f"×{FAST}", timeout=30_000)

    def resolved():
        return next((i for i in api("/api/incidents?state=resolved")["incidents"]
                     if i["id"] == incident["id"]), None)
    done = until(resolved, "the repair", timeout=180.0)
    assert done["duration_s"] > 0 and done["resolved_at"]["t_sim"] >= incident["since"]["t_sim"]
    assert incident["id"] not in [i["id"] for i in api("/api/incidents?state=open")["incidents"]]
    expect(row).to_have_count(0, timeout=30_000)
    overview.wait_for_function(
        "n => /([\\d,]+) resolved so far/.test(document.getElementById('incidents-summary')"
        ".textContent) && Number(document.getElementById('incidents-summary').textContent"
        ".match(/([\\d,]+) resolved so far/)[1].replace(/,/g, '')) > n",
        arg=resolved_before, timeout=30_000)
    assert overview.url == home and overview.evaluate("() => window.untouched === true")
    shot(overview, "noc-4k-resolved", prefix="incidents")

    work.goto(f"{noc}/incidents/?state=resolved")
    resolved_row = work.locator(f"#incident-rows tr[data-id='{incident['id']}']")
    expect(resolved_row).to_have_count(1)
    expect(resolved_row).to_contain_text(switch)
    expect(resolved_row).to_contain_text("resolved")
    assert errors == [], errors
    context.close()
