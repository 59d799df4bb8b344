"""The frame's incidents stay within a fixed number of bytes however many incidents are open and
however long their names: the worst open ones first, then the newest resolved ones, and the
counts of all (:func:`scheduler.reliability.incidents.incidents_view`)."""

from __future__ import annotations

import json

import numpy as np

from scheduler.control.drills import run_drill
from scheduler.live import live_frame
from scheduler.reliability.incidents import (
    FRAME_BYTES_MAX,
    JOBS_SHOWN,
    RECORD_BYTES_MAX,
    RESOLVED_SHOWN,
    TEXT_SHOWN,
    IncidentBook,
    incidents_view,
    worst_first,
)
from scheduler.simulate import Scenario
from tests.frames import validate

NOW = 86_400.0


def size(obj) -> int:
    return len(json.dumps(obj, separators=(",", ":")))


def flooded(n_open: int, n_resolved: int, *, jobs: int, name_chars: int,
            cause_chars: int) -> IncidentBook:
    """A book of ``n_open`` open and ``n_resolved`` resolved incidents, each hitting ``jobs``
    jobs with names of ``name_chars`` characters, its cause ``cause_chars`` long (a mirror's
    scheduler reason is free text)."""
    rng = np.random.default_rng(11)
    book = IncidentBook()
    for k in range(n_open + n_resolved):
        nodes = rng.choice(20_000, size=int(rng.integers(1, 40)), replace=False)
        hit = {f"{k:06d}-{j:03d}-".ljust(name_chars, "x"): [int(rng.integers(8, 4096)),
                                                          float(rng.uniform(0, 1e6))]
               for j in range(jobs)}
        book.open(component="leaf", unit=k, target=("switch", k),
                  cause="reason ".ljust(cause_chars, "r"), source="mirror",
                  now=float(rng.uniform(0, NOW)), due=None, nodes=nodes,
                  gpus_down=8 * nodes.size, jobs=hit, repair=k)
    for k in range(n_open, n_open + n_resolved):
        book.repaired(k, now=NOW)
    return book


def test_a_storm_of_incidents_fits_the_frames_bound_worst_first_with_every_count():
    book = flooded(3000, 400, jobs=40, name_chars=300, cause_chars=1000)
    view = incidents_view(book, NOW)
    assert size(view) <= FRAME_BYTES_MAX
    counts = view["counts"]
    assert counts["open"] == 3000 and counts["resolved"] == 400
    assert counts["open_by_kind"] == {"switch": 3000}
    assert view["open"], "the worst incidents are listed"
    # what is left out is the least severe: the list is the head of the worst-first order
    worst = worst_first(book.open_incidents.values(), NOW)
    assert [r["id"] for r in view["open"]] == [i.id for i in worst[:len(view["open"])]]
    for record in view["open"] + view["resolved"]:
        assert size(record) <= RECORD_BYTES_MAX
        assert record["jobs_count"] == 40 and len(record["jobs"]) < JOBS_SHOWN
        assert len(record["cause"]) <= TEXT_SHOWN and record["cause"].startswith("reason ")
    validate("Incidents", view)


def test_the_bound_holds_for_any_number_of_incidents():
    sizes = [size(incidents_view(flooded(n, n // 4, jobs=12, name_chars=60, cause_chars=40),
                                 NOW)) for n in (10, 100, 1000)]
    assert max(sizes) <= FRAME_BYTES_MAX
    assert sizes[0] < sizes[1]  # a few incidents are all listed: the bound is not a floor


def test_incidents_that_fit_are_all_listed_whole():
    book = flooded(5, 3, jobs=3, name_chars=20, cause_chars=20)
    view = incidents_view(book, NOW)
    assert len(view["open"]) == 5 and len(view["resolved"]) == 3
    assert all(len(r["jobs"]) == r["jobs_count"] == 3 for r in view["open"] + view["resolved"])
    assert view["open"][0]["cause"] == "reason ".ljust(20, "r")
    assert [r["id"] for r in view["resolved"]] == [8, 7, 6]  # newest first
    assert len(incidents_view(flooded(2, RESOLVED_SHOWN + 5, jobs=1, name_chars=10,
                                      cause_chars=10), NOW)["resolved"]) == RESOLVED_SHOWN


def test_a_live_frame_flooded_by_drills_keeps_its_incidents_within_the_bound():
    engine, _ = Scenario(preset="dev-small", days=1, seed=3, failures=True).engine()
    engine.run_until(6 * 3600.0)
    kinds = ("node", "accelerator", "nic", "leaf_switch", "rack_power", "optical_link")
    for k in range(240):
        run_drill(engine, kinds[k % len(kinds)], drill_id=k)
    frame = live_frame(engine)
    shown = frame["incidents"]
    assert shown["counts"]["open"] == len(engine.reliability.incidents.open_incidents) > 50
    assert size(shown) <= FRAME_BYTES_MAX and shown["open"]
    validate("LiveFrame", frame)
