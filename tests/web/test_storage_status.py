"""Storage systems marked down, degraded or up: audited, sent to the running engine as its
tier, refused with one message when the factor is bad, and a fresh engine starts from them."""

import math

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from scheduler.live import live_placement
from twin import models as m
from twin.control import edits as services

FACTOR_MESSAGE = "factor must be a number between 0 and 1 (exclusive), not {!r}"


def storage(cluster, name, tier, **kw):
    return m.StorageSystem.objects.create(cluster=cluster, name=name, tier=tier,
                                          capacity_tb=1000.0, read_gb_s=200.0, write_gb_s=100.0,
                                          gpudirect=True, **kw)


@pytest.fixture
def systems(db, settings):
    """Two built clusters with storage; the live engine runs "live" (CLUSTERTWIN_CLUSTER).
    The engine models the first system of each tier: ``pfs-b`` is a second central system."""
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "CLUSTER": "live"}
    for name in ("other", "live"):
        call_command("build_cluster", "--fabric", "fat-tree", "--radix", "8", "--gpus", "64",
                     "--name", name)
    other, live = m.Cluster.objects.get(name="other"), m.Cluster.objects.get(name="live")
    return {"pfs": storage(live, "pfs", "central"), "cache": storage(live, "cache", "nvme"),
            "pfs-b": storage(live, "pfs-b", "central"),
            "theirs": storage(other, "their-pfs", "central")}


@pytest.fixture
def sent(monkeypatch):
    out = []
    monkeypatch.setattr(services, "command_send", lambda cmd, **kw: out.append((cmd, kw)))
    return out


def rows(*systems):
    return m.StorageSystem.objects.filter(pk__in=[s.pk for s in systems])


def test_storage_edits_are_audited_and_reach_the_engine_as_its_tier(
        systems, sent, admin_user, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.storage_systems_set_status(systems=rows(systems["pfs"]), status="degraded",
                                            factor=0.25, user=admin_user)
        services.storage_systems_set_status(
            systems=rows(systems["cache"], systems["pfs-b"], systems["theirs"]), status="down",
            user=admin_user)
        services.storage_systems_set_status(systems=rows(systems["pfs"]), status="up",
                                            user=admin_user)
    # the second central system and the other cluster's are audited, not sent
    assert sent == [("storage_degraded", {"tier": "central", "factor": 0.25}),
                    ("storage_down", {"tier": "nvme"}), ("storage_up", {"tier": "central"})]
    assert list(m.AuditEntry.objects.order_by("id").values_list(
        "username", "action", "target", "detail")) == [
        ("admin", "storage degraded", "pfs", {"factor": 0.25}),
        ("admin", "storage down", "cache", {}), ("admin", "storage down", "pfs-b", {}),
        ("admin", "storage down", "their-pfs", {}), ("admin", "storage up", "pfs", {})]
    pfs = m.StorageSystem.objects.get(pk=systems["pfs"].pk)
    assert (pfs.status, pfs.degraded_factor) == ("up", 0.25)


def test_degrading_again_with_the_same_factor_changes_nothing(systems, sent):
    services.storage_systems_set_status(systems=rows(systems["pfs"]), status="degraded",
                                        factor=0.5)
    assert services.storage_systems_set_status(systems=rows(systems["pfs"]),
                                               status="degraded", factor=0.5) == 0
    assert m.AuditEntry.objects.count() == 1


@pytest.mark.parametrize("factor", [0, 1, 1.5, -0.2, math.nan, "half", True])
def test_a_bad_factor_is_refused_with_one_message_and_nothing_changes(
        systems, sent, factor, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), \
            pytest.raises(ValueError) as refused:
        services.storage_systems_set_status(systems=rows(systems["pfs"]), status="degraded",
                                            factor=factor)
    assert str(refused.value) == FACTOR_MESSAGE.format(factor)
    pfs = m.StorageSystem.objects.get(pk=systems["pfs"].pk)
    assert (pfs.status, pfs.degraded_factor) == ("up", 0.5)
    assert not m.AuditEntry.objects.exists() and sent == []


def test_a_factor_for_a_status_other_than_degraded_or_an_unknown_status_is_refused(systems):
    with pytest.raises(ValueError, match="degraded storage only"):
        services.storage_systems_set_status(systems=rows(systems["pfs"]), status="down",
                                            factor=0.5)
    with pytest.raises(ValueError, match="unknown storage status 'broken'"):
        services.storage_systems_set_status(systems=rows(systems["pfs"]), status="broken")
    assert m.StorageSystem.objects.get(pk=systems["pfs"].pk).status == "up"


def test_the_form_refuses_a_degraded_factor_outside_0_to_1(systems):
    pfs = systems["pfs"]
    pfs.degraded_factor = 1.0
    with pytest.raises(ValidationError) as refused:
        pfs.full_clean()
    assert refused.value.message_dict == {"degraded_factor": [
        "bandwidth left when degraded must be a number between 0 and 1 (exclusive), not 1.0"]}


def test_the_engine_command_is_checked_again_at_the_driver():
    from twin.live.engine_commands import CommandError, command_parse
    ok = command_parse({"command": "storage_degraded",
                        "params": {"tier": "nvme", "factor": 0.3}})
    assert (ok.name, ok.params) == ("storage_degraded", {"tier": "nvme", "factor": 0.3})
    with pytest.raises(CommandError, match=r"factor must be a number between 0 and 1"):
        command_parse({"command": "storage_degraded", "params": {"tier": "nvme", "factor": 2}})
    with pytest.raises(CommandError, match="tier must be one of central, nvme"):
        command_parse({"command": "storage_down", "params": {"tier": "tape"}})
    with pytest.raises(CommandError, match="takes no factor"):
        command_parse({"command": "storage_up", "params": {"tier": "central", "factor": 0.5}})


def test_a_fresh_engine_starts_from_the_storage_statuses(systems):
    from scheduler.simulate import Scenario
    from twin.inventory.adapter import cluster_plan_read, inventory_status_commands
    m.StorageSystem.objects.filter(pk=systems["pfs"].pk).update(status="degraded",
                                                                degraded_factor=0.25)
    m.StorageSystem.objects.filter(pk__in=[systems["cache"].pk, systems["pfs-b"].pk]).update(
        status="down")
    live = m.Cluster.objects.get(name="live")
    commands = inventory_status_commands(cluster=live)
    assert commands == [("storage_degraded", {"tier": "central", "factor": 0.25}),
                        ("storage_down", {"tier": "nvme"})]
    engine, _ = Scenario(preset="dev-small", days=1).engine(plan=cluster_plan_read(cluster=live))
    for command, params in commands:
        engine.command(command, **params)
    assert live_placement(engine)["storage"] == {"central": 0.25, "nvme": 0.0}
    assert [e["text"] for e in engine.events if e["kind"] == "storage"] == [
        "storage pfs (central tier) marked degraded: 25% of its bandwidth left; 0 job(s) "
        "re-rated",
        "storage cache (nvme tier) marked down: reads fall through to the central tier; 0 job(s) "
        "re-rated"]


def test_admin_actions_mark_storage_and_are_audited_under_the_admin(systems, admin_client, sent):
    pfs, cache = systems["pfs"], systems["cache"]
    m.StorageSystem.objects.filter(pk=cache.pk).update(degraded_factor=0.3)
    for action, selected in (("storage_down", pfs), ("storage_degraded", cache),
                             ("storage_up", pfs)):
        response = admin_client.post("/admin/twin/storagesystem/", {
            "action": action, "_selected_action": [selected.pk]})
        assert response.status_code == 302
    assert list(m.AuditEntry.objects.order_by("id").values_list(
        "username", "action", "target", "detail")) == [
        ("admin", "storage down", "pfs", {}), ("admin", "storage degraded", "cache",
                                               {"factor": 0.3}),
        ("admin", "storage up", "pfs", {})]
    assert dict(m.StorageSystem.objects.filter(pk__in=[pfs.pk, cache.pk])
                .values_list("name", "status")) == {"pfs": "up", "cache": "degraded"}


def test_status_and_a_degraded_systems_factor_are_read_only_in_the_form(systems, admin_client):
    pfs = systems["pfs"]
    page = admin_client.get(f"/admin/twin/storagesystem/{pfs.pk}/change/").content.decode()
    assert 'name="status"' not in page and 'name="degraded_factor"' in page
    services.storage_systems_set_status(systems=rows(pfs), status="degraded")
    page = admin_client.get(f"/admin/twin/storagesystem/{pfs.pk}/change/").content.decode()
    assert 'name="degraded_factor"' not in page
