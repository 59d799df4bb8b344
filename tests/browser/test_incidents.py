"""Browser: incidents first.  After a leaf-switch drill the overview shows the incident (the
switch's name, the cause, since when, the jobs hit) without navigation; the worst-hit job's
page is one click away; after the repair the incident is resolved everywhere (the overview's
panel, the incidents list, the incident's page, the API) and the drill's row says it ended.

On dev-small (``server`` in conftest.py) at x900: a drill's repair (hours) passes in seconds of
wall time; every wait has a deadline."""

from __future__ import annotations

import shutil

import pytest

from bench.twin_browser import csrf_token, until
from tests.browser.conftest import CHROMIUM, log_in, shot, wait_live

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]


def test_a_leaf_drill_is_an_incident_on_the_overview_until_repaired(server, browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    overview, work = context.new_page(), context.new_page()
    errors: list[str] = []
    for p in (overview, work):
        p.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(overview, server, "staff")
    wait_live(overview)

    def api(path: str) -> dict:
        answer = work.request.get(server + path)
        assert answer.ok, f"{path}: {answer.status}"
        return answer.json()

    def busy():
        util = api("/api/state")["frame"]["util"]
        return util["allocated"] > util["gpus"] // 2
    until(busy, "half the GPUs allocated")

    work.goto(server + "/drills/")
    answer = work.request.post(server + "/api/drills", data={"kind": "leaf_switch",
                                                             "target": 0},
                               headers={"X-CSRFToken": csrf_token(work)})
    assert answer.status == 202, answer.text()
    drill_id = answer.json()["id"]

    def drilled():
        found = [i for i in api("/api/incidents?state=open")["incidents"]
                 if i["drill_id"] == drill_id]
        return found[0] if found else None
    incident = until(drilled, f"drill #{drill_id}'s incident")
    assert incident["component"]["kind"] == "switch" and incident["jobs"], incident

    # the overview, untouched since it loaded, shows it: name, cause, since, jobs hit
    row = overview.locator(f"#incidents-now tr[data-id='{incident['id']}']")
    row.wait_for(timeout=30_000)
    assert overview.url == server + "/"
    text = row.inner_text()
    assert incident["component"]["name"] in text and "drill_leaf_switch" in text
    assert row.locator(".incident-since time.wall").count() == 1
    worst = incident["jobs"][0]["name"]  # most GPUs first
    assert worst in row.locator(".incident-jobs").inner_text()
    assert row.locator(f".incident-component a[href='{incident['component']['url']}']").count()
    shot(overview, "leaf-drill", prefix="incidents")

    # the worst-hit job's page: one click
    row.locator(".incident-jobs a").first.click()
    overview.wait_for_url(f"{server}/jobs/{worst}/")
    overview.go_back()
    wait_live(overview)

    # the repair resolves it everywhere
    def resolved():
        found = [i for i in api("/api/incidents?state=resolved")["incidents"]
                 if i["id"] == incident["id"]]
        return found[0] if found else None
    done = until(resolved, "the repair", timeout=120.0)
    assert done["duration_s"] > 0 and done["resolved_at"]["t_sim"] >= incident["since"]["t_sim"]
    assert incident["id"] not in [i["id"] for i in api("/api/incidents?state=open")["incidents"]]
    overview.locator(f"#incidents-now tr[data-id='{incident['id']}']").wait_for(
        state="detached", timeout=30_000)
    work.goto(f"{server}/incidents/?state=resolved")
    assert work.locator(f"#incident-rows tr[data-id='{incident['id']}']").count() == 1
    work.goto(f"{server}/incidents/{incident['id']}/")
    assert work.inner_text("#incident-state").startswith("resolved")
    assert "drill leaf_switch on 0" in work.inner_text("#incident-timeline")
    shot(work, "resolved", prefix="incidents")
    work.goto(f"{server}/drills/")  # the drill ended with its repair, visibly
    drill_row = work.locator("#drill-rows tr", has=work.locator(f"td:text-is('{drill_id}')"))
    assert "(ran out)" in drill_row.inner_text()
    assert errors == [], errors
    context.close()
