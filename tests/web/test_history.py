"""History: the live engine's figures are kept, downsampled, and served by ``/api/history``
for any time range; they survive reloads and restarts (they are rows, not browser memory)."""

from __future__ import annotations

import pytest

from tests import frames
from twin import models as m
from twin.live import history, services

pytestmark = pytest.mark.django_db
RUN = "run-a"
STEP = 60.0


@pytest.fixture(autouse=True)
def step(settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "HISTORY_STEP_S": STEP,
                            "HISTORY_RETENTION_S": 7200.0}
    history.forget_process_cache()
    yield
    history.forget_process_cache()


def frame(t, allocated=100, tenants=(("a", 40),)):
    return frames.frame(
        t=t, util={"gpus": 200, "allocated": allocated, "idle": 192 - allocated, "down": 8},
        mfu=0.41, goodput=0.9, jobs={"queued": 3, "running": 5}, failures={"total": 2},
        inference={"slo_attainment": 0.99, "serving_gpus": 16},
        power={"it_mw": 0.3, "facility_mw": 0.36, "throttled_gpus": 0},
        tenants=[{"tenant": n, "used_gpus": g, "quota_gpus": 100} for n, g in tenants])


def publish(t, **kw):
    services.live_state_write(seq=int(t), t_sim=t, frame=frame(t, **kw), health="ok",
                              last_error="", speed=60.0, paused=False, inventory=RUN)


def test_a_sample_is_kept_every_step_of_simulated_time_not_every_frame():
    for t in range(0, 600, 10):  # a frame every 10 simulated seconds
        publish(float(t))
    assert list(m.HistorySample.objects.values_list("t_sim", flat=True)) == [
        0.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 420.0, 480.0, 540.0]


def test_a_resumed_engine_drops_the_history_of_a_future_that_did_not_happen():
    for t in (0.0, 60.0, 120.0, 180.0):
        publish(t)
    history.forget_process_cache()  # a new process: the engine resumed from t=70
    publish(70.0, allocated=150)
    publish(130.0, allocated=150)
    got = history.series(run=RUN, metric="fleet.allocated_pct")
    assert got["t"] == [0.0, 60.0, 130.0]
    assert got["v"] == [50.0, 50.0, 75.0]


def test_samples_older_than_the_retention_are_dropped():
    for t in range(0, 100 * 60 * 3, 60):  # 5 h at one sample a minute, retention 2 h
        publish(float(t))
    oldest = m.HistorySample.objects.order_by("t_sim").first().t_sim
    assert oldest >= 17940.0 - 7200.0 - 100 * STEP  # pruned every 100 samples
    assert m.HistorySample.objects.count() < 300


def test_the_api_serves_a_range_in_buckets_with_both_clocks(login):
    for t in range(0, 600, 60):
        publish(float(t), allocated=100 + t // 6)
    client = login("operator")
    got = client.get("/api/history", {"metric": "fleet.allocated_pct", "from": 120,
                                      "to": 420, "step": 120}).json()
    assert got["clock"] == "simulated seconds" and got["unit"] == "%"
    assert got["t"] == [120.0, 240.0, 360.0]
    # 120-239: samples at 120 and 180 (allocated 120, 130 of 200) -> 62.5 %; 240-359: 140,
    # 150 -> 72.5 %; 360-420: 160, 170 -> 82.5 %
    assert got["v"] == pytest.approx([62.5, 72.5, 82.5])
    assert len(got["wall"]) == 3
    last = client.get("/api/history", {"metric": "fleet.allocated_pct", "last": 120}).json()
    assert last["t"] == [420.0, 480.0, 540.0]


def test_tenants_have_their_own_series(login):
    publish(0.0, tenants=(("a", 40), ("b", 7)))
    client = login("operator")
    metrics = client.get("/api/history").json()["metrics"]
    assert metrics["tenant.b.gpus"] == {"label": "GPUs used by b", "unit": "GPUs"}
    assert client.get("/api/history", {"metric": "tenant.b.gpus"}).json()["v"] == [7.0]


@pytest.mark.parametrize(("query", "message"), [
    ({"metric": "fleet.nope"}, "unknown metric"),
    ({"metric": "fleet.mfu_pct", "from": "soon"}, "from must be a number"),
    ({"metric": "fleet.mfu_pct", "step": "0"}, "step must be a positive"),
    ({"metric": "fleet.mfu_pct", "from": "10", "to": "5"}, "is before"),
    ({"metric": "fleet.mfu_pct", "to": "inf"}, "finite"),
    ({"metric": "fleet.mfu_pct", "from": "1", "last": "5"}, "not both"),
])
def test_bad_queries_get_one_clear_error(login, query, message):
    publish(0.0)
    response = login("operator").get("/api/history", query)
    assert response.status_code == 400 and message in response.json()["error"]


def test_history_needs_a_login(client):
    publish(0.0)
    response = client.get("/api/history", {"metric": "fleet.mfu_pct"})
    assert response.status_code in (302, 401, 403)


def test_figures_the_frame_reports_as_null_are_left_out_never_zero():
    quiet = frames.frame(t=0.0, power=None, mfu_window=None,
                         inference={"slo_attainment": None, "serving_gpus": 0})
    got = history.sample(quiet)
    assert not {"fleet.mfu_window_pct", "inference.slo_pct", "power.it_mw",
                "power.facility_mw", "power.throttled_gpus"} & set(got)
    assert got["fleet.mfu_pct"] == 0.0 and got["inference.serving_gpus"] == 0.0
    assert history.sample(frames.frame(mfu_window=0.25))["fleet.mfu_window_pct"] == 25.0


def test_a_lost_frame_is_stored_without_a_history_sample():
    services.live_state_write(seq=1, t_sim=90.0, frame=frames.lost_frame(t=90.0),
                              health="error", last_error="boom", speed=60.0, paused=False,
                              inventory=RUN)
    assert m.LiveState.objects.get().frame["lost"] is True
    assert not m.HistorySample.objects.exists()
