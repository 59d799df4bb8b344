"""The live driver follows the inventory: the cluster it runs, its statuses, and re-plans.

A mixin of :class:`twin.live.driver.EngineDriver` (which owns the engine, its thread and its clock):
what the engine runs is read from the database through the one adapter
(:class:`twin.inventory.replanning.Inventory`); a fresh or re-planned engine is given the inventory's
operator statuses; every ``INVENTORY_POLL_S`` the revision is read and a structural edit
re-plans the engine between two steps; drills whose message was lost are picked up then too.
"""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async

from scheduler.control.replan import replan
from scheduler.presets import PRESETS
from twin import models as m
from twin.config.conf import app_setting
from twin.inventory import selectors
from twin.inventory.replanning import Inventory, inventory_revision
from twin.live import command_log, services

logger = logging.getLogger("twin.live.driver")


class InventoryFollowing:
    """Needs ``self.engine``, ``self.inv``, ``self.clock``, ``self._in_engine``,
    ``self._load_or_build`` and the log fields of the driver."""

    def _statuses_apply(self, engine) -> None:
        """Give an engine new to this inventory (fresh or re-planned) its operator statuses."""
        if self.inv is None:
            return
        engine.keys = self.inv.keys
        for command, params in self.inv.statuses:
            try:
                engine.command(command, **params)
            except ValueError as exc:
                logger.warning("live engine: inventory status %s %s not applied: %s", command,
                               params, exc)

    def _onto_inventory(self, engine):
        """``engine`` (another inventory's) re-planned onto this one when it ran this cluster,
        else a fresh engine."""
        node_map = None if self.inv is None else self.inv.node_map(engine.keys)
        if node_map is None:
            logger.warning("live engine: the snapshot ran another cluster (or none): "
                           "building the engine afresh")
            return self._load_or_build(None)
        try:
            new, self.replan_summary = replan(engine, self.plan, node_map)
        except ValueError as exc:
            logger.warning("live engine: the snapshot cannot be re-planned (%s): building "
                           "the engine afresh", exc)
            return self._load_or_build(None)
        self._statuses_apply(new)
        logger.info("live engine: re-planned onto inventory %s at t=%.0f s: %s",
                    self.inventory, new.now, self.replan_summary)
        return new

    @property
    def plan(self):
        """The inventory's ClusterPlan (None: no cluster, the preset runs)."""
        return None if self.inv is None else self.inv.plan

    @property
    def inventory(self) -> str:
        """The inventory's fingerprint, stored with every snapshot ('' for the preset)."""
        return "" if self.inv is None else self.inv.fingerprint

    async def _inventory_follow(self) -> None:
        """Every ``INVENTORY_POLL_S``: if the inventory's revision moved and its plan differs
        from the one running, re-plan the engine now (between two steps: a safe point)."""
        now = self.clock()
        if self._last_poll_wall is not None and (now - self._last_poll_wall
                                                 < app_setting("INVENTORY_POLL_S")):
            return
        self._last_poll_wall = now
        # drills whose message was lost (no channel layer, another process) are read here
        self._inbox.extend(await database_sync_to_async(command_log.drills_pending)())
        if self.inv is None:
            return
        revision = await database_sync_to_async(inventory_revision)(
            cluster_id=self.inv.cluster_id)
        if revision is None or revision == self.inv.revision:
            return
        fresh = await database_sync_to_async(_inventory_read)(self.inv.cluster_id)
        if fresh is None:
            return
        if fresh.fingerprint == self.inv.fingerprint:  # nothing the engine sees moved
            self.inv = fresh
            self.engine.keys = fresh.keys
            return
        old_keys = self.engine.keys
        self.inv = fresh
        node_map = fresh.node_map(old_keys)
        try:
            if node_map is None:
                raise ValueError("the engine's nodes are not this cluster's")
            self.engine, self.replan_summary = await self._in_engine(
                replan, self.engine, fresh.plan, node_map)
            await self._in_engine(self._statuses_apply, self.engine)
            logger.info("live engine: inventory revision %d, re-planned at t=%.0f s: %s",
                        revision, self.engine.now, self.replan_summary)
        except Exception:
            logger.exception("live engine: re-plan failed; rebuilding from the inventory")
            self.engine = await self._in_engine(self._load_or_build, None)
            self._events_saved = await database_sync_to_async(services.engine_events_resume)(
                inventory=self.log_key, have=self.engine.kernel.logged)
        self._snapshot_blob = None  # the old run's snapshot is of the old inventory
        self._last_snapshot_wall = -float("inf")  # snapshot the new one soon


def _inventory_read(cluster_id: int | None = None) -> Inventory | None:
    """The selected cluster (or ``cluster_id``) read through the one adapter; ``None`` when
    the database holds no cluster or it cannot run (logged), so the preset (or the running
    plan) stays."""
    if cluster_id is None:
        cluster = selectors.cluster_current()
    else:
        cluster = m.Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        logger.warning("live engine: no cluster in the inventory; running the preset %s",
                       app_setting("DEFAULT_PRESET"))
        return None
    try:
        return Inventory(cluster)
    except ValueError as exc:
        logger.error("live engine: the inventory of %s cannot run (%s)", cluster.name, exc)
        return None


def _cluster_preset() -> str:
    cluster = selectors.cluster_current()
    preset = cluster.preset if cluster is not None else ""
    if preset in PRESETS:
        return preset
    if preset:
        logger.warning("cluster preset %r has no scenario; the live engine runs %s", preset,
                       app_setting("DEFAULT_PRESET"))
    return app_setting("DEFAULT_PRESET")
