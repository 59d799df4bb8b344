"""``GET /api/queue``: the live queue beyond the frame's first 50, sorted by any column and
paged, each row with its pending reason; login required, bad parameters refused (issue 16)."""

import json

import pytest

from scheduler.live import QUEUE_COLUMNS, live_frame, live_placement
from tests import frames
from tests.core.factories import job, run_engine, small_plan, workload
from twin import models as m
from twin.live.services import live_state_write

N_QUEUED = 120


@pytest.fixture(scope="module")
def engine():
    # two 8-GPU nodes held by one gang for 5 h; 120 gangs of various sizes and priorities wait
    jobs = [job(gpus=16, hours=5, priority=1000)]
    jobs += [job(gpus=(1, 4, 8, 16)[k % 4], hours=1 + k % 7, priority=k % 10,
                 tenant=("research", "product", "ads")[k % 3]) for k in range(N_QUEUED)]
    return run_engine(small_plan(2), workload(*jobs), failures=False, until_h=0.5)


@pytest.fixture
def live(db, engine):
    frame = frames.frame(**json.loads(json.dumps(live_frame(engine))))  # + the driver's keys
    live_state_write(seq=1, t_sim=engine.now, frame=frame, health="ok", last_error="",
                     speed=60.0, paused=False,
                     placement=json.loads(json.dumps(live_placement(engine))))
    return m.LiveState.objects.get()


def get(client, **params):
    return client.get("/api/queue", params)


def test_pages_cover_the_whole_queue_in_the_policys_order(login, live):
    client = login("operator")
    seen = []
    first = get(client, per_page=50).json()
    assert first["total"] == N_QUEUED and first["pages"] == 3
    for page in range(1, first["pages"] + 1):
        body = get(client, page=page, per_page=50).json()
        seen += body["rows"]
    assert [r["position"] for r in seen] == list(range(1, N_QUEUED + 1))
    assert len({r["name"] for r in seen}) == N_QUEUED
    # the last pass stopped at a gang that did not fit; the others wait behind it
    assert {r["reason"] for r in seen} == {"Resources", "Priority"}
    assert set(seen[0]) == set(QUEUE_COLUMNS)


@pytest.mark.parametrize("column", ["gpus", "priority", "wait_h", "name", "tenant"])
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_any_column_sorts_either_way_across_pages(login, live, column, order):
    client = login("operator")
    rows = []
    for page in (1, 2, 3):
        rows += get(client, sort=column, order=order, page=page, per_page=50).json()["rows"]
    values = [r[column] for r in rows]
    assert values == sorted(values, reverse=order == "desc")
    assert len(rows) == N_QUEUED


def test_a_page_past_the_end_is_empty_not_an_error(login, live):
    body = get(login("operator"), page=99, per_page=50).json()
    assert body["rows"] == [] and body["total"] == N_QUEUED


@pytest.mark.parametrize("params, message", [
    ({"sort": "colour"}, "sort must be one of"),
    ({"order": "up"}, "order must be asc or desc"),
    ({"page": "0"}, "page must be between 1"),
    ({"page": "two"}, "page must be an integer"),
    ({"per_page": "501"}, "per_page must be between 1 and 500"),
    ({"limit": "5"}, "unknown parameter(s): limit"),
])
def test_bad_parameters_get_one_clear_error(login, live, params, message):
    response = get(login("operator"), **params)
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_before_any_frame_the_queue_is_unavailable(login, db):
    response = get(login("operator"))
    assert response.status_code == 503


def test_anonymous_visitors_are_refused(client, live):
    response = get(client)
    assert response.status_code == 401
