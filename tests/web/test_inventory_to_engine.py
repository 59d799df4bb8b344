"""Admin edits of the inventory reach the running twin as engine commands."""

import pytest

from tests import frames
from twin import models as m
from twin.control import edits as services


@pytest.mark.django_db
def test_draining_and_failing_nodes_and_switches_are_sent_to_the_engine(
        monkeypatch, django_capture_on_commit_callbacks):
    from django.core.management import call_command
    call_command("build_cluster", "--fabric", "fat-tree", "--radix", "8", "--gpus", "64",
                 "--name", "t")
    sent = []
    monkeypatch.setattr(services, "command_send", lambda cmd, **kw: sent.append((cmd, kw)))
    node = m.Node.objects.order_by("id")[3]
    with django_capture_on_commit_callbacks(execute=True):
        services.nodes_drain(nodes=m.Node.objects.filter(pk=node.pk))
    with django_capture_on_commit_callbacks(execute=True):
        services.nodes_mark_failed(nodes=m.Node.objects.filter(pk=node.pk))
    spine = m.Switch.objects.filter(tier="spine").order_by("index").first()
    with django_capture_on_commit_callbacks(execute=True):
        services.switches_set_status(switches=m.Switch.objects.filter(pk=spine.pk),
                                     status=m.LinkStatus.DOWN)
    index = int(node.hostname.rpartition("-n")[2])
    assert sent == [("drain_node", {"node": index}), ("node_down", {"node": index}),
                    ("switch_down", {"switch": spine.index})]


@pytest.fixture
def two_clusters(db, settings):
    """Two built clusters; the live engine runs the second ("live", CLUSTERTWIN_CLUSTER)."""
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "CLUSTER": "live"}
    from django.core.management import call_command
    for name in ("other", "live"):
        call_command("build_cluster", "--fabric", "fat-tree", "--radix", "8", "--gpus", "64",
                     "--name", name)
    return m.Cluster.objects.get(name="other"), m.Cluster.objects.get(name="live")


def nodes_of(cluster):
    return m.Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")


@pytest.mark.django_db
def test_accelerator_and_link_edits_reach_the_engine_with_its_ids_and_are_audited(
        two_clusters, admin_user, monkeypatch, django_capture_on_commit_callbacks):
    other, live = two_clusters
    sent = []
    monkeypatch.setattr(services, "command_send", lambda cmd, **kw: sent.append((cmd, kw)))
    node = nodes_of(live)[2]  # engine node 2: GPUs 16-23
    gpu = m.Accelerator.objects.get(node=node, index=5)
    uplinks = m.Link.objects.filter(cluster=live, peer_switch__isnull=False).order_by("id")
    nic = m.Link.objects.get(cluster=live, node=node, node_port=1)
    with django_capture_on_commit_callbacks(execute=True):
        services.accelerators_set_status(accelerators=m.Accelerator.objects.filter(pk=gpu.pk),
                                         status=m.AcceleratorStatus.FAILED, user=admin_user)
        services.links_set_status(links=m.Link.objects.filter(pk__in=[uplinks[4].pk, nic.pk]),
                                  status=m.LinkStatus.DOWN, user=admin_user)
        # a node of the cluster the engine does not run: audited, not sent
        services.nodes_drain(nodes=m.Node.objects.filter(pk=nodes_of(other)[0].pk),
                             user=admin_user)
    assert sent == [("gpu_down", {"gpu": 21}), ("link_down", {"link": 4}),
                    ("gpu_down", {"gpu": 17, "nic": True})]
    entries = list(m.AuditEntry.objects.order_by("id").values_list("username", "action",
                                                                    "target"))
    assert entries == [
        ("admin", "accelerator failed", gpu.serial),
        ("admin", "link down", f"{uplinks[4].switch.name} - {uplinks[4].peer_switch.name}"),
        ("admin", "link down", f"{nic.switch.name} - {node.hostname}:1"),
        ("admin", "node drained", nodes_of(other)[0].hostname),
    ]
    assert all(e.user_id == admin_user.pk for e in m.AuditEntry.objects.all())


@pytest.mark.django_db
def test_an_admin_action_is_audited_under_the_signed_in_user(two_clusters, admin_client):
    _, live = two_clusters
    node = nodes_of(live)[0]
    response = admin_client.post("/admin/twin/node/", {
        "action": "node_failed", "_selected_action": [node.pk]})
    assert response.status_code == 302
    entry = m.AuditEntry.objects.get()
    assert (entry.username, entry.action, entry.target) == ("admin", "node failed",
                                                           node.hostname)
    assert m.Node.objects.get(pk=node.pk).status == m.NodeStatus.FAILED


@pytest.mark.django_db
def test_status_is_not_editable_in_the_forms(two_clusters, admin_client):
    _, live = two_clusters
    node = nodes_of(live)[0]
    page = admin_client.get(f"/admin/twin/node/{node.pk}/change/").content.decode()
    assert 'name="status"' not in page


@pytest.mark.django_db
def test_a_fresh_engine_starts_from_the_inventory_statuses(two_clusters):
    from scheduler.simulate import Scenario
    from twin.inventory.adapter import cluster_plan_read, inventory_status_commands
    _, live = two_clusters
    nodes = nodes_of(live)
    m.Node.objects.filter(pk=nodes[1].pk).update(status=m.NodeStatus.FAILED)
    m.Node.objects.filter(pk=nodes[2].pk).update(status=m.NodeStatus.DRAINED)
    m.Accelerator.objects.filter(node=nodes[4], index=0).update(
        status=m.AcceleratorStatus.FAILED)
    spine = m.Switch.objects.filter(cluster=live, tier="spine").order_by("index").first()
    m.Switch.objects.filter(pk=spine.pk).update(status=m.LinkStatus.DOWN)
    commands = inventory_status_commands(cluster=live)
    assert sorted(commands, key=str) == sorted([
        ("node_down", {"node": 1}), ("drain_node", {"node": 2}), ("gpu_down", {"gpu": 32}),
        ("switch_down", {"switch": spine.index})], key=str)
    engine, _ = Scenario(preset="dev-small", days=1).engine(
        plan=cluster_plan_read(cluster=live))
    for command, params in commands:
        engine.command(command, **params)
    s = engine.state
    assert not s.node_up[1] and s.node_drained[2] and not s.node_up[4]
    assert engine.reliability.failed_switches[spine.index] == 1


@pytest.mark.django_db
def test_a_node_in_service_cannot_be_removed_until_drained(two_clusters, admin_client):
    _, live = two_clusters
    node = nodes_of(live)[0]
    response = admin_client.post(f"/admin/twin/node/{node.pk}/delete/", {"post": "yes"},
                                 follow=True)
    assert "drain it first" in response.content.decode()
    assert m.Node.objects.filter(pk=node.pk).exists()
    services.nodes_drain(nodes=m.Node.objects.filter(pk=node.pk))
    admin_client.post(f"/admin/twin/node/{node.pk}/delete/", {"post": "yes"})
    assert not m.Node.objects.filter(pk=node.pk).exists()


@pytest.mark.django_db
def test_a_drained_node_the_engine_still_runs_a_job_on_is_kept(two_clusters, admin_client):
    from twin.live.services import live_state_write
    _, live = two_clusters
    node = nodes_of(live)[3]
    services.nodes_drain(nodes=m.Node.objects.filter(pk=node.pk))
    live_state_write(seq=1, t_sim=0.0, frame=frames.frame(), health="ok", last_error="",
                     speed=1.0, paused=False, placement=frames.placement(jobs={"llm": {
                         "gpus": 16, "nodes": [[2, 3]], "gpu_runs": [[16, 31]]}}))
    response = admin_client.post("/admin/twin/node/", {
        "action": "delete_selected", "_selected_action": [node.pk], "post": "yes"}, follow=True)
    assert "still runs llm" in response.content.decode()
    assert m.Node.objects.filter(pk=node.pk).exists()


@pytest.mark.django_db
def test_a_link_to_a_switch_of_another_cluster_is_refused(two_clusters):
    from django.core.exceptions import ValidationError
    other, live = two_clusters
    mine = m.Switch.objects.filter(cluster=live, tier="spine").first()
    theirs = m.Switch.objects.filter(cluster=other, tier="leaf").first()
    link = m.Link(cluster=live, switch=mine, peer_switch=theirs, speed_gbps=400.0)
    with pytest.raises(ValidationError, match="another cluster"):
        link.full_clean()


@pytest.mark.django_db
def test_power_feed_and_cooling_loop_edits_reach_the_engine_and_a_fresh_build(
        two_clusters, admin_user, monkeypatch, django_capture_on_commit_callbacks):
    from twin.inventory.adapter import inventory_status_commands
    _, live = two_clusters
    sent = []
    monkeypatch.setattr(services, "command_send", lambda cmd, **kw: sent.append((cmd, kw)))
    racks = list(m.Rack.objects.filter(hall__site__cluster=live).order_by("id"))
    loops = list(m.CoolingLoop.objects.filter(hall__site__cluster=live).order_by("id"))
    with django_capture_on_commit_callbacks(execute=True):
        services.power_feeds_set_status(
            feeds=m.PowerFeed.objects.filter(pk=racks[1].power_feed_id), status="down",
            user=admin_user)
        services.cooling_loops_set_status(
            loops=m.CoolingLoop.objects.filter(pk=loops[-1].pk), status="down", user=admin_user)
    assert sent == [("feed_down", {"rack": 1}), ("cooling_down", {"loop": len(loops) - 1})]
    assert list(m.AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "power feed down", "cooling loop down"]
    commands = inventory_status_commands(cluster=live)
    assert ("feed_down", {"rack": 1}) in commands
    assert ("cooling_down", {"loop": len(loops) - 1}) in commands
