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
    assert got["min"] == [60.0, 70.0, 80.0] and got["max"] == [65.0, 75.0, 85.0]
    assert got["n"] == [2, 2, 2] and got["aggregate"] == "bucket mean, min, max"
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
    ({"metric": "fleet.mfu_pct", "from": "1", "last": "5"}, "give one of 'range', 'last' or"),
    ({"metric": "fleet.mfu_pct", "range": "2w"}, "range must be one of 15m, 1h, 6h, 24h, 7d"),
    ({"metric": "fleet.mfu_pct", "range": "1h", "last": "60"}, "not both 'range' and 'last'"),
    ({"metric": "fleet.mfu_pct", "bucket": "5x"}, "bucket must be a positive duration"),
    ({"metric": "fleet.mfu_pct", "bucket": "-5m"}, "bucket must be a positive duration"),
    ({"metric": "fleet.mfu_pct", "bucket": "400d"}, "at most 366d"),
    ({"metric": "fleet.mfu_pct", "bucket": "5m", "step": "300"}, "not both"),
    ({"metric": "fleet.mfu_pct", "from": "0", "to": "1e6", "bucket": "60"},
     "gives more than 1000 points"),
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


def month(settings, run=RUN, step=STEP):
    """30 simulated days of samples every ``step`` s, allocation a sawtooth 0-99 %, and the
    live state at their end (kept 90 days: no pruning)."""
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "HISTORY_RETENTION_S": 90 * 86400.0}
    n = int(30 * 86400 / step)
    m.HistorySample.objects.bulk_create(
        [m.HistorySample(run=run, t_sim=i * step, values={"fleet.allocated_pct": float(i % 100)})
         for i in range(n)], batch_size=2000)
    publish(n * step)  # the live state: the engine's clock now, and one more sample
    return n + 1


def test_any_range_comes_back_in_at_most_a_thousand_points_with_extremes_kept(login, settings):
    n = month(settings)
    client = login("operator")
    whole = client.get("/api/history", {"metric": "fleet.allocated_pct", "range": "30d"}).json()
    assert len(whole["t"]) <= history.MAX_POINTS < n
    assert whole["aggregate"] == "bucket mean, min, max" and whole["step_s"] in history.BUCKETS_S
    assert sum(whole["n"]) == n  # every sample in exactly one bucket
    # a sawtooth 0-99 in every hour-wide (or wider) bucket: the extremes survive, the mean is
    # between them
    assert min(whole["min"]) == 0.0 and max(whole["max"]) == 99.0
    assert all(lo <= v <= hi for lo, v, hi in zip(whole["min"], whole["v"], whole["max"],
                                                  strict=True))
    hour = client.get("/api/history", {"metric": "fleet.allocated_pct", "range": "1h"}).json()
    assert hour["aggregate"] == "as recorded" and len(hour["t"]) == 61  # 3600 / 60 + the ends
    assert hour["t"][0] == 30 * 86400 - 3600 and hour["t"][-1] == 30 * 86400
    assert hour["min"] == hour["v"] == hour["max"]


def test_every_picker_range_fits_and_a_bucket_can_be_asked_for(login, settings):
    month(settings)
    client = login("operator")
    for name, span in history.RANGES.items():
        got = client.get("/api/history", {"metric": "fleet.allocated_pct", "range": name}).json()
        assert 0 < len(got["t"]) <= history.MAX_POINTS, name
        assert got["t"][0] >= 30 * 86400 - span - got["step_s"], name
    daily = client.get("/api/history", {"metric": "fleet.allocated_pct", "range": "7d",
                                        "bucket": "1d"}).json()
    assert daily["step_s"] == 86400 and len(daily["t"]) == 8  # 7 days cut at day edges + now


def test_a_zoomed_span_is_served_finer_than_the_whole_run(login, settings):
    month(settings)
    client = login("operator")
    whole = client.get("/api/history", {"metric": "fleet.allocated_pct", "range": "all"}).json()
    zoomed = client.get("/api/history", {"metric": "fleet.allocated_pct", "from": 86400,
                                         "to": 86400 + 6 * 3600}).json()
    assert zoomed["step_s"] < whole["step_s"]
    assert zoomed["t"][0] >= 86400 and zoomed["t"][-1] <= 86400 + 6 * 3600


def test_a_mirror_says_its_history_runs_on_the_wall_clock(login):
    services.live_state_write(seq=1, t_sim=0.0, frame={**frame(0.0), "source": "mirror"},
                              health="ok", last_error="", speed=1.0, paused=False,
                              inventory=RUN)
    got = login("operator").get("/api/history", {"metric": "fleet.allocated_pct"}).json()
    assert got["clock"] == "wall clock" and len(got["wall"]) == 1


def test_a_warm_up_backfill_replaces_what_the_run_had_from_its_start():
    for t in (0.0, 60.0, 120.0):  # an earlier engine of the same run
        publish(t, allocated=10)
    kept = history.backfill(run=RUN, samples=[(0.0, {"fleet.allocated_pct": 50.0}),
                                              (60.0, {"fleet.allocated_pct": 60.0})])
    assert kept == 2
    publish(90.0)  # under a step after the backfill's last: no sample
    publish(120.0, allocated=140)
    got = history.series(run=RUN, metric="fleet.allocated_pct")
    assert got["t"] == [0.0, 60.0, 120.0] and got["v"] == [50.0, 60.0, 70.0]
