"""Structural inventory edits reach the running engine: a revision counter and the re-plan.

Every save or delete of a row that shapes the cluster (sites, halls, racks, feeds, nodes,
accelerators, switches, cables, storage, cloud pools) bumps ``Cluster.revision`` through the
signal receivers below, whatever made the edit: the admin, an import, a shell.  Status-only
saves (``update_fields`` within the status fields) do not: statuses reach the engine as
commands.  The live driver polls the revision; when it moved and the inventory's plan
fingerprint differs from the one the engine runs, it re-plans the engine between two steps
(:func:`scheduler.control.replan.replan`) with the node map built here from primary keys, so
a renamed node stays the same node and a removed one is known to be gone.
"""

from __future__ import annotations

import logging

import numpy as np
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import F
from django.db.models.signals import post_delete, post_save

from scheduler.snapshot import plan_digest
from twin.inventory.adapter import EngineIds, cluster_plan_read, inventory_status_commands
from twin.inventory.models import (
    Accelerator,
    CloudPool,
    Cluster,
    CoolingLoop,
    DataHall,
    Link,
    Node,
    PowerFeed,
    Rack,
    Site,
    StorageSystem,
    Switch,
)

logger = logging.getLogger(__name__)

STATUS_FIELDS = frozenset({"status", "status_reason", "degraded_factor"})

_CLUSTER_OF = {
    Site: lambda o: o.cluster_id,
    DataHall: lambda o: o.site.cluster_id,
    PowerFeed: lambda o: o.hall.site.cluster_id,
    CoolingLoop: lambda o: o.hall.site.cluster_id,
    Rack: lambda o: o.hall.site.cluster_id,
    Node: lambda o: o.rack.hall.site.cluster_id,
    Accelerator: lambda o: o.node.rack.hall.site.cluster_id,
    Switch: lambda o: o.cluster_id,
    Link: lambda o: o.cluster_id,
    StorageSystem: lambda o: o.cluster_id,
    CloudPool: lambda o: o.cluster_id,
}
"""The models whose rows shape the plan, and how a row finds its cluster."""


def inventory_touched(*, cluster_id: int) -> None:
    """A structural edit of ``cluster_id``'s inventory: the live engine re-plans."""
    Cluster.objects.filter(pk=cluster_id).update(revision=F("revision") + 1)


def _on_change(sender, instance, **kwargs) -> None:
    if kwargs.get("raw"):
        return
    fields = kwargs.get("update_fields")
    if fields and set(fields) <= STATUS_FIELDS:
        return
    try:
        cluster_id = _CLUSTER_OF[sender](instance)
    except ObjectDoesNotExist:  # its parents went first (a cascade of the cluster itself)
        return
    if cluster_id is not None:
        inventory_touched(cluster_id=cluster_id)


def receivers_connect() -> None:
    """Called once from the app's ``ready()``."""
    for model in _CLUSTER_OF:
        post_save.connect(_on_change, sender=model, dispatch_uid=f"replan-{model.__name__}")
        post_delete.connect(_on_change, sender=model, dispatch_uid=f"replan-del-{model.__name__}")


def inventory_revision(*, cluster_id: int) -> int | None:
    """The cluster's revision (``None``: the cluster is gone)."""
    return Cluster.objects.filter(pk=cluster_id).values_list("revision", flat=True).first()


class Inventory:
    """What the live engine runs, read from the database through the one adapter."""

    def __init__(self, cluster: Cluster):
        self.cluster_id = cluster.pk
        self.revision = cluster.revision
        self.plan = cluster_plan_read(cluster=cluster)
        self.fingerprint = plan_digest(self.plan)
        self.statuses = inventory_status_commands(cluster=cluster)
        self.node_keys = EngineIds(cluster).node_keys()

    @property
    def keys(self) -> dict:
        """What the engine carries to be mapped later (:attr:`scheduler.engine.Engine.keys`)."""
        return {"cluster": self.cluster_id, "nodes": self.node_keys}

    def node_map(self, keys: dict | None) -> np.ndarray | None:
        """For each node of an engine built with ``keys``, its id in this inventory (-1:
        removed); ``None`` when those keys are of another cluster (or unknown)."""
        if not keys or keys.get("cluster") != self.cluster_id:
            return None
        old = np.asarray(keys["nodes"], dtype=np.int64)
        pos = np.searchsorted(self.node_keys, old)
        pos = np.minimum(pos, max(self.node_keys.size - 1, 0))
        found = (self.node_keys.size > 0) & (self.node_keys[pos] == old)
        return np.where(found, pos, -1).astype(np.int64)
