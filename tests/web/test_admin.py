"""The admin: validation with clear messages, bulk actions, fast changelists."""

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from twin import models as m


@pytest.fixture
def admin_client_(login, small_cluster):
    return login("admin")


def test_a_node_cannot_hold_more_accelerators_than_its_model_allows(small_cluster):
    node = m.Node.objects.filter(accelerator_model__name="H100-SXM").first()
    node.accelerator_count = 9
    with pytest.raises(ValidationError, match="at most 8 accelerators"):
        node.full_clean()


def test_a_link_cannot_join_a_switch_to_itself(small_cluster):
    sw = m.Switch.objects.first()
    link = m.Link(cluster=small_cluster, switch=sw, peer_switch=sw, speed_gbps=400)
    with pytest.raises(ValidationError, match="itself"):
        link.full_clean()


def test_capacities_must_be_positive(small_cluster):
    rack = m.Rack.objects.first()
    rack.power_capacity_kw = 0
    with pytest.raises(ValidationError, match="positive"):
        rack.full_clean()


def test_admin_form_shows_the_validation_message_and_saves_nothing(admin_client_):
    node = m.Node.objects.filter(accelerator_model__name="H100-SXM").first()
    url = f"/admin/twin/node/{node.pk}/change/"
    page = admin_client_.get(url)
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None}
    data.update({"accelerator_model": node.accelerator_model_id, "rack": node.rack_id,
                 "accelerator_count": 12, "accelerators-TOTAL_FORMS": 0,
                 "accelerators-INITIAL_FORMS": 0})
    response = admin_client_.post(url, data)
    assert response.status_code == 200
    assert b"holds at most 8 accelerators" in response.content
    node.refresh_from_db()
    assert node.accelerator_count == 8


def test_drain_and_undrain_actions(admin_client_):
    ids = list(m.Node.objects.values_list("pk", flat=True)[:3])
    admin_client_.post("/admin/twin/node/", {"action": "drain", "_selected_action": ids})
    assert m.Node.objects.filter(status="drained").count() == 3
    admin_client_.post("/admin/twin/node/", {"action": "undrain", "_selected_action": ids})
    assert m.Node.objects.filter(status="ready").count() == m.Node.objects.count()


def test_mark_failed_then_repaired_restores_accelerators(admin_client_):
    node = m.Node.objects.first()
    admin_client_.post("/admin/twin/node/", {"action": "node_failed",
                                              "_selected_action": [node.pk]})
    gpu = node.accelerators.first()
    admin_client_.post("/admin/twin/accelerator/", {"action": "accelerator_failed",
                                                     "_selected_action": [gpu.pk]})
    node.refresh_from_db()
    gpu.refresh_from_db()
    assert node.status == "failed" and gpu.status == "failed"
    admin_client_.post("/admin/twin/node/", {"action": "node_repaired",
                                              "_selected_action": [node.pk]})
    node.refresh_from_db()
    gpu.refresh_from_db()
    assert node.status == "ready" and gpu.status == "ok"


@pytest.mark.parametrize("path", ["accelerator", "node", "link", "switch", "rack"])
def test_changelist_queries_do_not_grow_with_rows(admin_client_, small_plan, path, settings):
    """Same number of queries for a page of 96 GPUs as for a page over twice as many."""
    # the live cluster named, as with several clusters it must be (engine ids are its own)
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "CLUSTER": small_plan.name}
    with CaptureQueriesContext(connection) as small:
        assert admin_client_.get(f"/admin/twin/{path}/").status_code == 200
    from dataclasses import replace

    from twin.inventory.adapter import cluster_plan_write
    cluster_plan_write(replace(small_plan, name="tiny2"))
    with CaptureQueriesContext(connection) as bigger:
        assert admin_client_.get(f"/admin/twin/{path}/").status_code == 200
    assert len(bigger) == len(small)
    assert len(small) <= 12


def test_changelist_search_finds_by_serial(admin_client_):
    serial = m.Accelerator.objects.order_by("pk").first().serial
    page = admin_client_.get("/admin/twin/accelerator/", {"q": serial})
    assert serial.encode() in page.content
    assert page.context["cl"].result_count == 1
