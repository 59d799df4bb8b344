"""The live driver's commands: received from the engine group, applied between two steps.

Commands (drills, speed, pause, inventory edits and staff actions) arrive signed on the
``twin.engine`` group (:func:`twin.live.broadcast.command_receive` drops the rest) and wait in
an inbox; drills posted while no engine ran, or whose message was lost, are read from the
database at start and every ``INVENTORY_POLL_S``. Between two steps they are parsed
(:func:`twin.live.engine_commands.command_parse`) and applied: speed and pause to the pacing,
inventory edits, staff actions and drills through the durable log
(:class:`twin.live.driver_log.CommandLog`). A mirror refuses speed, pause and drills.
"""

from __future__ import annotations

import asyncio
import collections
import logging

from channels.db import database_sync_to_async

from twin import app_setting
from twin.live import broadcast, command_log
from twin.live.engine_commands import LOGGED_COMMANDS, Command, CommandError, command_parse

logger = logging.getLogger("twin.live.driver")


class Commands:
    """The inbox of one live engine's commands and their application.

    Parameters
    ----------
    layer : channel layer
    pacer : twin.live.pacing.Pacer
        Takes speed and pause.
    log : twin.live.driver_log.CommandLog
        Applies everything else.
    mirror : twin.mirror.poller.MirrorPoller or None
        A mirror refuses what acts on a simulation.
    """

    def __init__(self, *, layer, pacer, log, mirror=None):
        self.layer, self.pacer, self.log, self.mirror = layer, pacer, log, mirror
        self.inbox: collections.deque = collections.deque()
        self.channel: str | None = None
        self._receiver: asyncio.Task | None = None
        self._last_read: float | None = None

    # ----------------------------------------------------------------- in
    async def listen(self) -> None:
        """Join the engine group and queue what arrives; queue the pending drills now."""
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(broadcast.ENGINE_GROUP, self.channel)
        self._receiver = asyncio.create_task(self._receive_loop())
        await self.pending_read()

    async def close(self) -> None:
        """Stop listening and leave the engine group."""
        if self._receiver is not None:
            self._receiver.cancel()
            self._receiver = None
        if self.channel is not None:
            try:
                await self.layer.group_discard(broadcast.ENGINE_GROUP, self.channel)
            except Exception:
                logger.exception("live engine: could not leave the command group")
            self.channel = None

    async def _receive_loop(self) -> None:
        while True:
            try:
                self.inbox.append(await broadcast.command_receive(self.layer, self.channel))
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("live engine: receiving commands failed; retrying")
                await asyncio.sleep(1.0)

    async def pending_read(self) -> None:
        """Queue the drills still pending in the database (no channel layer, a lost message,
        posted while no engine ran): applied or refused, never left pending."""
        self._last_read = self.pacer.clock()
        self.inbox.extend(await database_sync_to_async(command_log.drills_pending)())

    # ----------------------------------------------------------------- applied
    async def apply_all(self) -> None:
        """Apply what waits (between two steps), reading pending drills when due."""
        if self.pacer.clock() - self._last_read >= app_setting("INVENTORY_POLL_S"):
            await self.pending_read()
        while self.inbox:
            message = self.inbox.popleft()
            try:
                await self.apply(command_parse(message))
            except CommandError as exc:
                logger.warning("live engine: command refused: %s (%r)", exc, message)
            except Exception:
                logger.exception("live engine: command failed: %r", message)

    async def apply(self, cmd: Command) -> None:
        """Apply one parsed command now (between steps)."""
        if self.mirror is not None and cmd.name in ("speed", "pause", "resume", "drill"):
            await self.mirror.refuse(cmd)
        elif cmd.name == "speed":
            self.pacer.speed = cmd.params["factor"]
            logger.info("live engine: speed x%g", self.pacer.speed)
        elif cmd.name in ("pause", "resume"):
            self.pacer.paused = cmd.name == "pause"
        elif cmd.name in LOGGED_COMMANDS:  # inventory edits and staff actions
            try:
                await self.log.apply(cmd.name, cmd.params)
            except ValueError as exc:
                logger.warning("live engine: %s refused: %s", cmd.name, exc)
            except Exception as exc:  # it broke half-way: roll back to before it, run on
                await self.log.recover(exc)
        elif cmd.name == "drill":
            await self.log.drill(cmd)
