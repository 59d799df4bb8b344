"""The one adapter: rows written from a plan read back as the same arrays."""

import numpy as np

from twin import models as m
from twin.control import edits as services
from twin.inventory.adapter import cluster_arrays_read


def test_rows_read_back_as_the_plans_arrays(small_cluster, small_plan):
    arrays = cluster_arrays_read(cluster=small_cluster)
    assert (arrays["node_gpus"] == small_plan.node_gpus).all()
    assert (arrays["node_spare"] == small_plan.node_spare).all()
    assert (arrays["gpu_node"] == small_plan.gpu_node()).all()
    assert (arrays["node_rack"] == small_plan.node_rack).all()
    assert arrays["gpu_ok"].all() and (arrays["node_status"] == 0).all()


def test_admin_edits_show_in_the_arrays(small_cluster):
    first = m.Node.objects.order_by("id")[:1]
    services.nodes_drain(nodes=m.Node.objects.filter(pk__in=first))
    gpu = m.Accelerator.objects.order_by("node_id", "index")[3]
    services.accelerators_set_status(accelerators=m.Accelerator.objects.filter(pk=gpu.pk),
                                     status="failed")
    arrays = cluster_arrays_read(cluster=small_cluster)
    assert arrays["node_status"][0] == 1 and (arrays["node_status"][1:] == 0).all()
    assert np.flatnonzero(~arrays["gpu_ok"]).tolist() == [3]
