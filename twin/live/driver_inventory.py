"""The live driver follows the inventory: the cluster it runs, its statuses, and re-plans.

What the engine runs is read from the database through the one adapter
(:class:`twin.inventory.replanning.Inventory`); a fresh or re-planned engine is given the
inventory's operator statuses (:func:`statuses_apply`); every ``INVENTORY_POLL_S``
:class:`InventoryFollower` reads the revision, and a structural edit re-plans the engine between
two steps.
"""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async

from scheduler.control.replan import replan
from scheduler.presets import PRESETS
from twin import app_setting
from twin.inventory.models import Cluster
from twin.inventory.replanning import Inventory, inventory_revision
from twin.live import selectors as live_selectors

logger = logging.getLogger("twin.live.driver")


def statuses_apply(engine, inv: Inventory | None) -> None:
    """Give an engine new to this inventory (fresh or re-planned) its operator statuses."""
    if inv is None:
        return
    engine.keys = inv.keys
    for command, params in inv.statuses:
        try:
            engine.command(command, **params)
        except ValueError as exc:
            logger.warning("live engine: inventory status %s %s not applied: %s", command,
                           params, exc)


class InventoryFollower:
    """Keeps the engine on the inventory in the database.

    Parameters
    ----------
    host : twin.live.engine_host.EngineHost
    clock : callable
        Wall clock in seconds (the pacing's).
    on_new_run : coroutine function
        ``await on_new_run(rebuilt=...)`` after the engine was re-planned (``False``) or
        rebuilt afresh (``True``): the last snapshot is of the old inventory.
    """

    def __init__(self, *, host, clock, on_new_run):
        self.host, self.clock, self.on_new_run = host, clock, on_new_run
        self.replan_summary: dict | None = None  # what the last re-plan moved
        self._last_poll: float | None = None  # when the inventory's revision was read

    def onto_inventory(self, engine):
        """``engine`` (another inventory's) re-planned onto this one when it ran this cluster,
        else a fresh engine (in the engine's thread)."""
        host = self.host
        node_map = None if host.inv is None else host.inv.node_map(engine.keys)
        if node_map is None:
            logger.warning("live engine: the snapshot ran another cluster (or none): "
                           "building the engine afresh")
            return host.load_or_build(None)
        try:
            new, self.replan_summary = replan(engine, host.plan, node_map)
        except ValueError as exc:
            logger.warning("live engine: the snapshot cannot be re-planned (%s): building "
                           "the engine afresh", exc)
            return host.load_or_build(None)
        statuses_apply(new, host.inv)
        logger.info("live engine: re-planned onto inventory %s at t=%.0f s: %s",
                    host.inventory, new.now, self.replan_summary)
        return new

    async def follow(self) -> None:
        """Every ``INVENTORY_POLL_S``: if the inventory's revision moved and its plan differs
        from the one running, re-plan the engine now (between two steps: a safe point)."""
        now = self.clock()
        if self._last_poll is not None and now - self._last_poll < app_setting("INVENTORY_POLL_S"):
            return
        self._last_poll = now
        host = self.host
        if host.inv is None:
            return
        revision = await database_sync_to_async(inventory_revision)(
            cluster_id=host.inv.cluster_id)
        if revision is None or revision == host.inv.revision:
            return
        fresh = await database_sync_to_async(inventory_read)(host.inv.cluster_id)
        if fresh is None:
            return
        if fresh.fingerprint == host.inv.fingerprint:  # nothing the engine sees moved
            host.inv = fresh
            host.engine.keys = fresh.keys
            return
        old_keys = host.engine.keys
        host.inv = fresh
        node_map = fresh.node_map(old_keys)
        try:
            if node_map is None:
                raise ValueError("the engine's nodes are not this cluster's")
            host.engine, self.replan_summary = await host.call(
                replan, host.engine, fresh.plan, node_map)
            await host.call(statuses_apply, host.engine, fresh)
            logger.info("live engine: inventory revision %d, re-planned at t=%.0f s: %s",
                        revision, host.engine.now, self.replan_summary)
            rebuilt = False
        except Exception:
            logger.exception("live engine: re-plan failed; rebuilding from the inventory")
            host.engine = await host.call(host.load_or_build, None)
            rebuilt = True
        await self.on_new_run(rebuilt=rebuilt)


def inventory_read(cluster_id: int | None = None) -> Inventory | None:
    """The selected cluster (or ``cluster_id``) read through the one adapter; ``None`` when
    the database holds no cluster or it cannot run (logged), so the preset (or the running
    plan) stays."""
    if cluster_id is None:
        cluster = live_selectors.cluster_current()
    else:
        cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        logger.warning("live engine: no cluster in the inventory; running the preset %s",
                       app_setting("DEFAULT_PRESET"))
        return None
    try:
        return Inventory(cluster)
    except ValueError as exc:
        logger.error("live engine: the inventory of %s cannot run (%s)", cluster.name, exc)
        return None


def cluster_preset() -> str:
    """The selected cluster's preset, else the default one."""
    cluster = live_selectors.cluster_current()
    preset = cluster.preset if cluster is not None else ""
    if preset in PRESETS:
        return preset
    if preset:
        logger.warning("cluster preset %r has no scenario; the live engine runs %s", preset,
                       app_setting("DEFAULT_PRESET"))
    return app_setting("DEFAULT_PRESET")
