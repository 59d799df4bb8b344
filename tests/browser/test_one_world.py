"""Browser: one world. Every page that shows the live twin shows the same state.

On the dev-small cluster (``server`` in conftest.py: the inventory built by ``build_cluster``,
run by the embedded engine) an admin applies, the way a person does, a node drill (the drill
form) and admin edits: a node, a leaf switch and a spine switch marked failed, a fabric link
marked down and a rack's power feed marked failed. After each, the test reads what the pages
show (the overview's counters and event log, the home inventory card, the topology page's rack
drill-down of every rack and its heatmaps, the events page) and holds them against each other
and against the engine's state from the JSON API (``/api/state``, ``/api/nodes/<id>``,
``/api/events``).

The engine is paused with the overview's own control while the pages are read, so they all
show one frame. Edits are made while it is paused (an operator's edit takes effect in that
instant); it runs on only until a drill's failure is detected and its jobs leave the node.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.conftest import CHROMIUM, SPEEDUP, counter, log_in, shot, wait_live

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]

INTERRUPTIBLE = ("running", "draining")
"""Job states a failure interrupts (a job already hung on a failure is not hit again)."""

FAST = "5000"
"""Simulated seconds per wall second while the test waits for the first job across leaves."""

DETECTED_AFTER_S = 200.0
"""Simulated seconds after which a drilled failure has been detected (drills detect in 120 s)."""

LEAF, SPINE = "leaf-00003", "spine-00017"  # leaf 3 cables every node of the first SU
LINK_SPINE, LINK_LEAF = "spine-00020", "leaf-00010"  # one link between them goes down
FEED_RACK = 12  # its power feed is dev-small-pdu-00012
DRILL_RACKS, EDIT_RACKS = range(8, 12), range(13, 15)  # second SU, away from the leaf and feed

RACK_HEATMAPS = ("rack-status", "rack-power", "rack-temp")  # each opens the rack clicked
RACK_CELL_JS = """([id, y, x]) => {
  const gd = document.getElementById(id);
  const box = gd.querySelector('.nsewdrag').getBoundingClientRect();
  return [box.left + gd._fullLayout.xaxis.c2p(x), box.top + gd._fullLayout.yaxis.c2p(y)];
}"""

LINK_HEATMAPS_JS = """() => [...document.querySelectorAll('#link-heatmaps > div')].map(gd => ({
  title: (gd.querySelector('.gtitle') || {}).textContent || '',
  marks: gd.data.length > 1 ? gd.data[1].y.map((y, i) => [y, gd.data[1].x[i]]) : [],
  points: gd.querySelectorAll('.scatterlayer .point').length,
}))"""

T_EPS = 0.01
"""Seconds: events keep their time to the millisecond, /api/state its full float."""

FOLLOW_JS = "() => TwinLive.on('data', msg => { window.twinSeq = msg.seq; })"


def until(fn, what, timeout: float = 20.0, every: float = 0.2):
    """``fn()``'s first truthy value, polled; fails after ``timeout`` s saying ``what`` (a
    string, or a function that says it then)."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for "
                                 f"{what() if callable(what) else what}")
        time.sleep(every)


@dataclass
class Twin:
    """The engine's state at one paused frame, read from the JSON API."""

    seq: int
    t: float
    frame: dict
    nodes: dict[int, dict]  # engine id -> /api/nodes/<id>

    def ids(self, *live: str) -> set[int]:
        return {i for i, n in self.nodes.items() if n["live_status"] in live}

    def host(self, hostname: str) -> int:
        return next(i for i, n in self.nodes.items() if n["hostname"] == hostname)

    def gpus(self, ids) -> int:
        return sum(self.nodes[i]["gpus"] for i in ids)


@dataclass
class Pages:
    """What the pages show at that frame."""

    gpus_down: int  # the overview's counter
    event_log: list[str]  # the overview's event log, newest first
    card: dict[str, int]  # the home inventory card: row label -> count
    racks: dict[int, list[dict]]  # rack id -> the drill-down's rows
    rack_status: dict[int, float]  # rack id -> the rack status heatmap's value
    rack_live: dict[int, str]  # rack id -> the drill-down's live line
    links: list[dict]  # link heatmaps as drawn: title, marked cells, marker points


class World:
    """An admin's browser: the overview, the topology page and a tab for forms and admin."""

    def __init__(self, server: str, context):
        self.server = server
        self.overview, self.topology, self.work = (context.new_page() for _ in range(3))
        self.errors: list[str] = []
        for page in (self.overview, self.topology, self.work):
            page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.gaps: list[str] = []

    def api(self, path: str) -> dict:
        response = self.work.request.get(self.server + path)
        assert response.ok, f"{path}: {response.status} {response.text()[:200]}"
        return response.json()

    # ------------------------------------------------------------- the engine
    def set_speed(self, factor: str) -> None:
        """With the overview's speed control."""
        self.overview.fill("#speed-input", factor)
        self.overview.click("#speed-apply")
        until(lambda: self.api("/api/state")["speed"] == float(factor), f"speed ×{factor}")

    def set_paused(self, paused: bool) -> None:
        """With the overview's pause button; returns once the engine says so."""
        if self.api("/api/state")["paused"] == paused:
            return
        self.overview.wait_for_function(
            "want => document.getElementById('pause-toggle').dataset.paused === String(!want)",
            arg=paused)
        self.overview.bring_to_front()
        self.overview.click("#pause-toggle")
        until(lambda: self.api("/api/state")["paused"] == paused,
              "the engine to " + ("pause" if paused else "resume"))

    def read(self) -> Twin:
        state = self.api("/api/state")
        assert state["paused"], "the twin is read while the engine is paused"
        n = self.api("/api/inventory")["nodes"]
        nodes = {i: self.api(f"/api/nodes/{i}") for i in range(n)}
        again = self.api("/api/state")
        assert again["t"] == state["t"], "the paused engine moved while it was read"
        return Twin(seq=again["seq"], t=state["t"], frame=state["frame"], nodes=nodes)

    def settle(self) -> Twin:
        """The twin, paused, once no job still holds a down node (a failure not yet
        detected): runs the engine on briefly until then."""
        for _ in range(4):
            twin = self.read()
            if not any(twin.nodes[i]["jobs"] for i in twin.ids("down")):
                return twin
            self.set_paused(False)
            due = twin.t + DETECTED_AFTER_S
            until(lambda due=due: self.api("/api/state")["t"] >= due,
                  "the engine to run past the failures' detection")
            self.set_paused(True)
        raise AssertionError("jobs still hold down nodes after the engine ran on")

    def event_wait(self, kind: str, t: float, pattern: str) -> dict:
        """The engine's event of ``kind`` at ``t`` whose text matches ``pattern``, once it is
        kept and the frame of that step is published."""
        found = {}

        def look():
            body = self.api(f"/api/events?kind={kind}&per_page=50")
            hits = [e for e in body["events"]
                    if e["t"] >= t - T_EPS and re.search(pattern, e["text"])]
            found.update(hits[0] if hits else {}, seq=body["seq"])
            return hits
        until(look, lambda: f"a {kind} event matching {pattern!r} at t >= {t} (the newest: "
                            f"{self.api('/api/events?per_page=3')['events']}; drills: "
                            f"{self.api('/api/drills?limit=1')['drills']})")
        until(lambda: self.api("/api/state")["seq"] > found["seq"], "the next frame")
        return found

    def jobs_hit(self, before: Twin, ids) -> set[str]:
        """The jobs a failure of nodes ``ids`` interrupts, from the placement before it."""
        names = {j for i in ids for j in before.nodes[i]["jobs"]}
        return {j for j in names if self.api(f"/api/jobs/{j}")["state"] in INTERRUPTIBLE}

    # ------------------------------------------------------------- the pages
    def pages(self, twin: Twin) -> Pages:
        ov = self.overview
        ov.reload()
        wait_live(ov)
        ov.evaluate(FOLLOW_JS)
        ov.wait_for_function("seq => window.twinSeq >= seq", arg=twin.seq)
        assert ov.inner_text("#sim-time") == ov.evaluate("t => TwinPanels.simTime(t)", twin.t)
        card = {}
        for title in ("Nodes by operator status", "Fabric", "Power and cooling"):
            for label, n in ov.locator(f"section.card:has(h3:text-is('{title}')) tr") \
                    .evaluate_all("trs => trs.map(tr => [...tr.cells].map(c => c.textContent))"):
                card[f"{title}: {label}"] = int(n.replace(",", ""))  # thousands separators

        topo = self.topology
        topo.bring_to_front()  # a background tab does not lay out Plotly's click layer
        topo.wait_for_function("seq => window.twinSeq >= seq", arg=twin.seq)
        rack_map = topo.evaluate("JSON.parse(document.getElementById('rack-map').textContent)")
        heatmap = topo.evaluate("document.getElementById('rack-status').data[0].z")
        racks, status, live = {}, {}, {}
        clicked = dict.fromkeys(RACK_HEATMAPS, 0.0)
        for rack, (y, x) in enumerate(rack_map["racks"]):
            self.rack_open(rack, y, x, clicked)
            rows = topo.locator("#rack-nodes tr").evaluate_all(
                "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))")
            racks[rack] = [{"host": r[0], "gpus": int(r[3]), "live": r[4],
                            "status": r[5].split(" (")[0],
                            "jobs": [j for j in r[6].split(", ") if j]} for r in rows]
            status[rack] = heatmap[y][x]
            live[rack] = topo.inner_text("#rack-live")
        return Pages(gpus_down=int(counter(ov, "gpus-down")),
                     event_log=ov.locator("#event-log li .text").all_inner_texts(),
                     card=card, racks=racks, rack_status=status, rack_live=live,
                     links=topo.evaluate(LINK_HEATMAPS_JS))

    def rack_open(self, rack: int, y: int, x: int, clicked: dict[str, float]) -> None:
        """Click rack ``rack`` (heatmap cell ``y``, ``x``) until its drill-down shows.

        Plotly clicks the point last hovered (hover is throttled, and each frame redraws the
        heatmap), and takes a second click within 300 ms for a double-click: the three rack
        heatmaps take turns, and a click that opened nothing (or the rack hovered before) is
        made again, as a person would.
        """
        topo = self.topology
        for attempt in range(3):
            topo.evaluate("document.getElementById('rack-name').textContent = ''")
            heatmap_id = RACK_HEATMAPS[(rack + attempt) % len(RACK_HEATMAPS)]
            topo.locator(f"#{heatmap_id}").scroll_into_view_if_needed()
            at = topo.evaluate(RACK_CELL_JS, [heatmap_id, y, x])
            topo.mouse.move(*at)
            time.sleep(max(0.08, clicked[heatmap_id] + 0.32 - time.monotonic()))
            topo.mouse.click(*at)
            clicked[heatmap_id] = time.monotonic()
            try:
                topo.wait_for_function(
                    "id => document.getElementById('rack-name').textContent.includes("
                    "'(rack id ' + id + ',')", arg=rack, timeout=2_000)
                return
            except PlaywrightTimeout:
                continue
        raise AssertionError(f"rack {rack}'s drill-down did not open: {topo.inner_text('main')}")

    def events_page(self, **filters) -> list[list[str]]:
        query = "&".join(f"{k}={v.replace(' ', '+')}" for k, v in filters.items())
        self.work.goto(f"{self.server}/events/?{query}")
        return self.work.locator("#event-table tbody tr").evaluate_all(
            "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))")

    def admin_action(self, model: str, query: str, action: str, row_has: str = "") -> str:
        """Tick one row of the admin changelist searched for ``query`` and run ``action``."""
        page = self.work
        page.goto(f"{self.server}/admin/twin/{model}/?q={query}")
        rows = page.locator("#result_list tbody tr")
        row = (rows.filter(has_text=row_has) if row_has else rows).first
        row.locator("input.action-select").check()
        page.select_option("select[name=action]", action)
        page.click("button[name=index]")
        return page.inner_text(".messagelist .success")

    def admin_column(self, model: str, query: str, column: str) -> list[str]:
        self.work.goto(f"{self.server}/admin/twin/{model}/?q={query}")
        return self.work.locator(f"#result_list tbody .field-{column}").all_inner_texts()

    def known_gap(self, ok: bool, known: bool, message: str) -> None:
        """A check that a bug outside the web layer breaks: a mismatch of exactly the known
        shape is recorded (the test xfails at its end), any other fails now."""
        if ok:
            return
        assert known, message
        self.gaps.append(message)


# ----------------------------------------------------------------- what must agree
def agree(world: World, twin: Twin, pages: Pages, step: str) -> None:
    """Every page against the engine's state and each other, at one frame."""
    # the rack drill-down lists every node once, with the engine's live status and jobs and
    # the operator's status
    shown = {row["host"]: (rack, row) for rack, rows in pages.racks.items() for row in rows}
    assert len(shown) == sum(len(rows) for rows in pages.racks.values()) == len(twin.nodes)
    for i, node in twin.nodes.items():
        rack, row = shown[node["hostname"]]
        assert rack == node["rack"], (step, node["hostname"])
        assert (row["live"], row["status"], row["jobs"], row["gpus"]) == (
            node["live_status"], node["status"], node["jobs"], node["gpus"]), (
            f"{step}: node {i} in the rack drill-down {row} but /api/nodes/{i} says {node}")

    # GPUs down: the overview's counter, the rack drill-down and the engine's nodes
    down = twin.ids("down")
    on_down = twin.gpus(down)
    shown_down = sum(r["gpus"] for rows in pages.racks.values() for r in rows
                     if r["live"] == "down")
    assert shown_down == on_down == 8 * len(down), step
    util = twin.frame["util"]
    assert pages.gpus_down == util["down"], f"{step}: the overview shows another frame"
    assert util["allocated"] + util["idle"] + util["spare"] + util["down"] == util["gpus"]
    drained = twin.gpus(twin.ids("drained"))  # free GPUs of drained nodes count as down too
    serving = twin.frame["inference"]["serving_gpus"]
    world.known_gap(
        on_down <= pages.gpus_down <= on_down + drained,
        0 < on_down - pages.gpus_down <= serving,
        f"{step}: the overview says {pages.gpus_down} GPUs down, the rack drill-down shows "
        f"{len(down)} nodes down ({on_down} GPUs): inference replicas (serving {serving} GPUs) "
        "keep the GPUs of a node that goes down (the failure engine's interrupt_nodes stops "
        "training gangs only), so scheduler.report.utilisation counts them allocated")

    # the rack status heatmap and the drill-down's live line: the share of each rack's nodes out
    for rack, rows in pages.racks.items():
        out = sum(r["live"] in ("down", "drained") for r in rows) / len(rows)
        assert pages.rack_status[rack] == pytest.approx(out, abs=1e-3), (step, rack)
        assert pages.rack_live[rack].startswith(f"status {out:.2f} out"), (step, rack)

    # link heatmaps: every failed link (itself, or through a failed switch) marked, as counted
    truth = twin.frame["heatmaps"]["links"]
    assert len(pages.links) == len(truth)
    for drawn, heatmap in zip(pages.links, truth, strict=True):
        cells = {(y, x) for y, row in enumerate(heatmap["down"])
                 for x, share in enumerate(row) if share > 0}
        assert {tuple(c) for c in drawn["marks"]} == cells, step
        assert drawn["points"] == len(cells), step
        if heatmap["links_down"]:
            assert drawn["title"].endswith(f" — {heatmap['links_down']} link(s) out"), step
        else:
            assert "out" not in drawn["title"], step

    # the home inventory card: the operator's statuses
    statuses = [n["status"] for n in twin.nodes.values()]
    for status in ("ready", "drained", "failed"):
        assert pages.card[f"Nodes by operator status: {status}"] == statuses.count(status)


def marked(pages: Pages) -> set[tuple[int, int]]:
    return {tuple(c) for c in pages.links[0]["marks"]}


def links_out(twin: Twin) -> int:
    return twin.frame["heatmaps"]["links"][0]["links_down"]


def one_event(world: World, t: float, component: str, kind: str) -> tuple[dict, list[str]]:
    """The one event since ``t`` that names ``component`` (in the API and on the events
    page), and its row on the page."""
    at_step = [e for e in world.api("/api/events?per_page=500")["events"] if e["t"] >= t - T_EPS]
    naming = [e for e in at_step if e["component"] == component
              or re.search(rf"\b{component}\b", e["text"])]
    assert len(naming) == 1, f"one event names {component}, not {naming}"
    rows = world.events_page(component=component)
    assert len(rows) == 1, rows
    event, row = naming[0], rows[0]
    # issue 27: the page shows the component by its name, and names what the text names by id
    shown = world.api("/api/names?" + urlencode({"c": component}))["names"][component]
    assert (row[2], row[3]) == (kind, shown["name"] if shown else component)
    assert row[5] == event["text"] or as_named(event["text"]).fullmatch(row[5]), row[5]
    listed, _, more = row[4].rpartition(" and ")  # "a, b and 4 more" (each name a link)
    if more.endswith(" more") and listed:
        assert event["jobs"][:len(listed.split(", "))] == listed.split(", ")
        assert len(event["jobs"]) == len(listed.split(", ")) + int(more.split()[0])
    else:
        assert ", ".join(event["jobs"]).startswith(row[4].rstrip("…"))
    return event, row


def as_named(text: str) -> re.Pattern:
    """``text`` with each component it names by engine id ("node 52", "switch 3") matching
    any name in its place (issue 27: pages show components by name)."""
    ids = r"\b(?:node|host|switch|leaf|spine|rack|link|gpu) \d+\b"
    return re.compile(r".+?".join(map(re.escape, re.split(ids, text))))


def in_log(pages: Pages, event: dict) -> None:
    """The event is in the overview's log once: as logged, or with the components it names
    by engine id shown by name (the log asks /api/names)."""
    text = event["text"]
    named = as_named(text)
    hits = [line for line in pages.event_log if line == text or named.fullmatch(line)]
    assert len(hits) == 1, (text, pages.event_log[:5])


# ----------------------------------------------------------------- the test
def test_every_page_shows_one_world_after_drills_and_admin_edits(server, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    world = World(server, context)
    page = world.overview
    log_in(page, server, "admin")
    wait_live(page)
    world.set_speed(FAST)  # until a job crosses leaves and the link heatmaps have load
    world.topology.goto(server + "/topology/")
    world.topology.evaluate(FOLLOW_JS)
    world.topology.wait_for_selector("#link-heatmap-0 .nsewdrag", timeout=60_000)
    world.topology.wait_for_selector("#rack-status .nsewdrag")
    world.set_speed(SPEEDUP)  # a drilled node is repaired hours later: many frames from now
    world.set_paused(True)
    before = world.settle()
    pages = world.pages(before)
    agree(world, before, pages, "at the start")

    # a node drill, from the drill form, on a node of the second SU that runs a job
    candidates = sorted(i for i in before.ids("up") if before.nodes[i]["rack"] in DRILL_RACKS)
    node = next((i for i in candidates if before.nodes[i]["jobs"]), candidates[0])
    hit = world.jobs_hit(before, [node])
    world.work.goto(server + "/drills/")
    world.work.select_option("#id_kind", "node")
    world.work.fill("#id_target", str(node))
    world.work.click("#drill-form button[type=submit]")
    world.work.wait_for_selector(".message.success")
    world.event_wait("drill", before.t, rf"^drill node on {node}:")
    twin = world.settle()
    pages = world.pages(twin)
    agree(world, twin, pages, "node drill")
    assert twin.nodes[node]["live_status"] == "down"
    assert twin.nodes[node]["status"] == "ready"  # a drill is the engine's, not the inventory's
    rows = world.events_page(component=f"node {node}")
    # issue 27: the node's component filter finds the drill and the failure it logged as
    # "host N" alike (one naming)
    assert [r[2] for r in rows] == ["drill", "failure"]
    assert rows[0][5].startswith(f"drill node on {node}: {len(hit)} job(s)")
    drill = world.api(f"/api/events?component=node+{node}")["events"][0]
    assert set(drill["jobs"]) == hit
    in_log(pages, drill)
    world.work.goto(server + "/drills/")
    assert "applied" in world.work.inner_text("#drill-rows tr:first-child")
    shot(world.topology, "node-drill", prefix="one-world")

    # an admin marks a node of the second SU failed
    before = twin
    candidates = sorted(i for i in before.ids("up") if before.nodes[i]["rack"] in EDIT_RACKS)
    node = next((i for i in candidates if before.nodes[i]["jobs"]), candidates[0])
    hit = world.jobs_hit(before, [node])
    host = before.nodes[node]["hostname"]
    assert world.admin_action("node", host, "node_failed") == "1 nodes marked failed."
    event = world.event_wait("inventory", before.t, rf"^node {node} marked failed:")
    twin = world.settle()
    pages = world.pages(twin)
    agree(world, twin, pages, "node marked failed")
    assert (twin.nodes[node]["live_status"], twin.nodes[node]["status"]) == ("down", "failed")
    assert pages.card["Nodes by operator status: failed"] == 1
    assert event["text"].startswith(f"node {node} marked failed: {len(hit)} job(s) interrupted")
    in_log(pages, event)
    world.known_gap(
        (event["component"], set(event["jobs"])) == (f"node {node}", hit),
        event["component"] == "" and event["jobs"] == [],
        f"node marked failed: its event has component {event['component']!r} and jobs "
        f"{event['jobs']} (want 'node {node}' and {sorted(hit)}): node_down in "
        "scheduler/control/commands.py logs neither, so /events/?component= and ?job= miss it")

    # an admin marks leaf 3 failed: every node cabled to it goes down, in one event
    before, was = twin, pages
    leaf = int(LEAF.split("-")[1])
    hosts = {h for h in world.admin_column("link", LEAF, "node") if h != "-"}
    cabled = {before.host(h) for h in hosts}
    assert len(cabled) == 32
    hit = world.jobs_hit(before, cabled)
    assert world.admin_action("switch", LEAF, "switch_failed") == "1 switches marked failed."
    world.event_wait("switch", before.t, rf"^leaf switch {leaf} marked failed")
    twin = world.settle()
    pages = world.pages(twin)
    agree(world, twin, pages, "leaf switch failed")
    assert cabled <= twin.ids("down")
    assert {twin.nodes[i]["status"] for i in cabled - {node}} == {"ready"}  # live, not inventory
    event, row = one_event(world, before.t, f"switch {leaf}", "switch")
    gpus = sum(r["gpus"] for rows in pages.racks.values() for r in rows if r["host"] in hosts)
    assert f"marked failed: {len(hosts)} nodes, {gpus} GPUs out; {len(hit)} job(s) " \
           "interrupted" in row[5]
    assert set(event["jobs"]) == hit
    in_log(pages, event)
    width = len(twin.frame["heatmaps"]["links"][0]["down"][0])
    assert {(leaf, x) for x in range(width)} <= marked(pages)  # a failed leaf's uplinks
    assert marked(pages) - marked(was) <= {(leaf, x) for x in range(width)}
    assert pages.card["Fabric: switches down"] == 1
    shot(world.topology, "leaf-failed", prefix="one-world")

    # an admin marks spine 17 failed: its links are out (ECMP reroutes), no node goes down
    before, was = twin, pages
    spine = int(SPINE.split("-")[1])
    peers = world.admin_column("link", SPINE, "peer_switch")
    assert world.admin_action("switch", SPINE, "switch_failed") == "1 switches marked failed."
    world.event_wait("switch", before.t, rf"^spine switch {spine} marked failed")
    twin = world.settle()
    pages = world.pages(twin)
    agree(world, twin, pages, "spine switch failed")
    assert twin.ids("down") == before.ids("down")
    assert pages.gpus_down == was.gpus_down
    assert links_out(twin) == links_out(before) + sum(p != LEAF for p in peers)
    rows = len(twin.frame["heatmaps"]["links"][0]["down"])
    assert {y for y, _ in marked(pages) - marked(was)} == set(range(rows)) - {leaf}  # every leaf
    event, row = one_event(world, before.t, f"switch {spine}", "switch")
    assert as_named(f"spine switch {spine} marked failed: its links are out, "
                    f"{len(event['jobs'])} job(s) re-rated").fullmatch(row[5]), row[5]
    in_log(pages, event)
    assert pages.card["Fabric: switches down"] == 2

    # an admin marks one link between leaf 10 and spine 20 down: one more cell marked
    before, was = twin, pages
    assert world.admin_action("link", LINK_SPINE, "link_down", row_has=LINK_LEAF) == \
        "1 links marked down."
    event = world.event_wait("link", before.t, r"^link \d+ marked down")
    twin = world.settle()
    pages = world.pages(twin)
    agree(world, twin, pages, "link down")
    assert links_out(twin) == links_out(before) + 1
    assert [y for y, _ in marked(pages) - marked(was)] == [int(LINK_LEAF.split("-")[1])]
    one_event(world, before.t, event["component"], "link")
    in_log(pages, event)
    assert pages.card["Fabric: links down"] == 1

    # an admin marks rack 12's power feed failed: its nodes go down, in one event
    before = twin
    rack_nodes = {i for i, n in before.nodes.items() if n["rack"] == FEED_RACK}
    hit = world.jobs_hit(before, rack_nodes)
    feed = f"dev-small-pdu-{FEED_RACK:05d}"
    assert world.admin_action("powerfeed", feed, "feed_failed") == \
        "1 power feeds marked failed."
    world.event_wait("power", before.t, rf"^power feed of rack {FEED_RACK} marked failed")
    twin = world.settle()
    pages = world.pages(twin)
    agree(world, twin, pages, "rack power feed failed")
    assert {r["live"] for r in pages.racks[FEED_RACK]} == {"down"}
    assert pages.rack_status[FEED_RACK] == 1.0
    event, row = one_event(world, before.t, f"rack {FEED_RACK}", "power")
    assert f"{len(rack_nodes)} nodes, {8 * len(rack_nodes)} GPUs out; {len(hit)} job(s) " \
           "interrupted" in row[5]
    assert set(event["jobs"]) == hit
    in_log(pages, event)
    assert pages.card["Power and cooling: power feeds down"] == 1
    shot(world.topology, "feed-failed", prefix="one-world")

    assert world.errors == []
    context.close()
    if world.gaps:
        pytest.xfail("pages agree except where the engine is wrong: " + " | ".join(world.gaps))
