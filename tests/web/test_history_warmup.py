"""A fresh engine's warm-up leaves history: the days it runs before its first frame are
sampled as the live driver would have sampled them, and stored once the run is known."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from scheduler.live import live_frame
from scheduler.simulate import Scenario
from twin import models as m
from twin.live import history
from twin.live.history_warmup import figures, warm_up
from twin.live.publishing import Publisher

STEP = 1800.0
UNTIL = 12 * 3600.0


@pytest.fixture(autouse=True)
def _fresh_process_cache():
    yield
    history.forget_process_cache()


def engine():
    return Scenario(preset="dev-small", days=2, seed=3, failures=True, physics=True).engine()[0]


def test_the_warm_up_is_sampled_every_step_from_its_start_and_ends_where_it_should():
    samples = warm_up(engine(), until=UNTIL, step=STEP)
    assert [t for t, _ in samples] == [STEP * k for k in range(int(UNTIL / STEP) + 1)]
    assert all("fleet.allocated_pct" in v and "jobs.queued" in v for _, v in samples)


def test_striding_the_warm_up_changes_nothing_the_engine_does():
    whole, strided = engine(), engine()
    whole.run_until(UNTIL)
    warm_up(strided, until=UNTIL, step=STEP)
    assert live_frame(strided) == live_frame(whole)


def test_the_warm_up_figures_are_the_frames_figures():
    e = engine()
    for t in (3600.0, 6 * 3600.0, UNTIL):
        e.run_until(t)
        framed = history.sample(live_frame(e))
        framed.pop("fleet.mfu_window_pct", None)  # the frame's window, not kept in a warm-up
        assert history.sample(figures(e)) == framed


class _Host:
    def __init__(self, samples):
        self.warm_history = samples
        self.log_key = "warm-run"
        self.engine = type("E", (), {"kernel": type("K", (), {"logged": 0})()})()


@pytest.mark.django_db(transaction=True)
def test_the_driver_stores_the_warm_up_once_the_run_is_known():
    host = _Host([(0.0, {"fleet.allocated_pct": 10.0}), (STEP, {"fleet.allocated_pct": 20.0})])
    publisher = Publisher(host=host, pacer=None, layer=None)
    async_to_sync(publisher.events_resume)()
    assert host.warm_history == []
    assert list(m.HistorySample.objects.filter(run="warm-run").values_list("t_sim", flat=True)
                ) == [0.0, STEP]
    async_to_sync(publisher.events_resume)()  # nothing left to store: nothing doubled
    assert m.HistorySample.objects.filter(run="warm-run").count() == 2
