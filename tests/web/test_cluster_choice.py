"""Which cluster is the twin: explicit (the setting, or the only one), never switched silently
when another cluster is built beside it."""

import dataclasses

import pytest
from channels.db import database_sync_to_async

from tests.web.test_driver import FakeClock
from twin import models as m
from twin.inventory.adapter import cluster_plan_write
from twin.live import selectors as live_selectors
from twin.live.driver import EngineDriver, EngineStartError


@pytest.fixture
def two_clusters(db, small_plan):
    first = cluster_plan_write(small_plan)
    second = cluster_plan_write(dataclasses.replace(small_plan, name="second"))
    return first, second


def test_the_only_cluster_is_the_twin(db, small_plan):
    only = cluster_plan_write(small_plan)
    assert live_selectors.cluster_current() == only
    assert live_selectors.cluster_choice_problem() is None


def test_with_several_clusters_and_no_choice_none_is_guessed(two_clusters):
    assert live_selectors.cluster_current() is None
    problem = live_selectors.cluster_choice_problem()
    assert "several clusters" in problem and "CLUSTERTWIN_CLUSTER" in problem
    assert "tiny" in problem and "second" in problem


def test_the_setting_chooses_and_a_wrong_name_is_said(two_clusters, settings):
    first, _ = two_clusters
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "CLUSTER": first.name}
    assert live_selectors.cluster_current() == first
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "CLUSTER": "nope"}
    assert live_selectors.cluster_current() is None
    assert "'nope' names no cluster" in live_selectors.cluster_choice_problem()


def test_a_cluster_built_beside_the_running_one_does_not_take_its_place(two_clusters):
    first, second = two_clusters
    m.LiveState.objects.create(pk=1, inventory=f"0123456789abcdef:{first.pk}")
    assert live_selectors.cluster_current() == first  # not the newer one
    m.LiveState.objects.filter(pk=1).update(inventory=f"0123456789abcdef:{second.pk}")
    assert live_selectors.cluster_current() == second


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_engine_refuses_to_start_on_an_ambiguous_inventory_and_says_why(small_plan):
    await database_sync_to_async(cluster_plan_write)(small_plan)
    await database_sync_to_async(cluster_plan_write)(dataclasses.replace(small_plan,
                                                                         name="second"))
    driver = EngineDriver(clock=FakeClock())
    with pytest.raises(EngineStartError, match="several clusters"):
        await driver.start()
    live = await database_sync_to_async(live_selectors.live_state_get)()
    assert live.health == "error" and "CLUSTERTWIN_CLUSTER" in live.last_error
    assert driver.engine is None
