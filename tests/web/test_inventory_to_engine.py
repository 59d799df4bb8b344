"""Admin edits of the inventory reach the running twin as engine commands."""

import pytest

from twin import models as m
from twin import services


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
