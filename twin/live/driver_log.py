"""The live driver's durable command log: logged application, replay, and taking back.

Every inventory command and drill is written to the log (:mod:`twin.live.command_log`) before
it is applied; :class:`CommandLog` notes the last row applied (in the engine's thread, so a
snapshot knows exactly which rows it holds) and the rows not yet proven by a step. When a step
fails, those rows are taken back (refused, with the reason), the restore point (the last
snapshot) is loaded and the log after it replayed up to the last good instant.
"""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async

from scheduler.live import live_frame
from twin.live import command_log
from twin.live import services as live_services
from twin.live.engine_commands import Command, json_safe

logger = logging.getLogger("twin.live.driver")


class CommandLog:
    """Applies logged commands durably and restores the engine when one poisons it.

    Parameters
    ----------
    host : twin.live.engine_host.EngineHost
    publisher : twin.live.publishing.Publisher
        Told when the engine failed; its history count follows a restore.
    """

    def __init__(self, *, host, publisher):
        self.host, self.publisher = host, publisher
        self.log_seq = 0  # the last logged command applied to the engine (engine thread)
        self.unproven: list[int] = []  # logged commands applied since the last good step
        self.good_t = 0.0  # simulated time at the end of the last good step
        self.restore_blob: bytes | None = None  # the snapshot a failure restores
        self.restore_log_seq = 0  # the last logged command in that snapshot

    def restore_point(self, blob: bytes | None, log_seq: int = 0) -> None:
        """What a failure restores: ``blob`` (``None``: a fresh engine) holding the log up to
        row ``log_seq``."""
        self.restore_blob, self.restore_log_seq = blob, log_seq

    def proven(self) -> None:
        """A step went well: the commands so far survived it."""
        self.unproven.clear()
        self.good_t = self.host.engine.now

    async def last_row(self) -> int:
        """The log's last row: a new run replays nothing logged before it."""
        return await database_sync_to_async(command_log.last_command_id)()

    async def abandoned_refuse(self) -> None:
        """Refuse the rows a crash left ``applying``."""
        await database_sync_to_async(command_log.commands_abandoned_refuse)(
            run=self.host.log_key)

    async def replay(self, *, after: int, until: float) -> int:
        """Apply the logged commands after row ``after`` at their simulated times, then run
        to ``until``; returns how many were replayed."""
        host = self.host
        rows = await database_sync_to_async(command_log.commands_to_replay)(
            run=host.log_key, after=after)

        def replay():
            engine = host.engine
            for row_id, name, params, t_sim, _drill in rows:
                if t_sim > engine.now:
                    engine.run_until(t_sim)
                try:
                    engine.command(name, **params)
                except ValueError as exc:  # it applied once: a changed rule refuses it now
                    logger.warning("live engine: replaying %s (row %d) refused: %s", name,
                                   row_id, exc)
                self.log_seq = row_id
            if until > engine.now:
                engine.run_until(until)
        await host.call(replay)
        if rows:
            logger.info("live engine: replayed %d logged command(s); now at t=%.0f s",
                        len(rows), host.engine.now)
        return len(rows)

    async def recover(self, exc: BaseException) -> dict:
        """Log, report ``health=error``, take back the commands applied since the last good
        step (one of them poisoned the state: they are refused, with the reason), restore the
        last snapshot, replay the log after it and carry on from the last good instant;
        returns the restored engine's frame."""
        host = self.host
        logger.exception("live engine step failed at t=%s; restoring the last snapshot",
                         getattr(host.engine, "now", None), exc_info=exc)
        self.publisher.failed(exc)
        suspects, self.unproven = self.unproven, []
        try:
            if suspects:
                await database_sync_to_async(command_log.commands_refuse)(
                    ids=suspects, reason=f"the engine failed after applying it "
                                         f"({type(exc).__name__}: {exc}); taken back")
            host.engine = await host.call(host.load_or_build, self.restore_blob)
            self.log_seq = self.restore_log_seq if self.restore_blob is not None else 0
            if self.restore_blob is not None:
                await self.replay(after=self.restore_log_seq, until=self.good_t)
            await self.publisher.events_resume()
            return await host.call(live_frame, host.engine)
        except Exception:
            logger.exception("live engine: restoring failed too")
            # a LostFrame (scheduler.frame_schema): no live state, readers say so
            return {"t": float(getattr(host.engine, "now", 0.0)), "lost": True}

    async def apply(self, name: str, params: dict, drill_id: int | None = None):
        """Log the command (durably), apply it, close its row; ``ValueError`` if refused."""
        host = self.host
        row = await database_sync_to_async(command_log.command_open)(
            run=host.log_key, name=name, params=params, t_sim=float(host.engine.now),
            drill_id=drill_id)

        def apply():
            result = host.engine.command(name, **params)
            self.log_seq = row
            return result
        try:
            result = await host.call(apply)
        except ValueError as exc:
            await database_sync_to_async(command_log.command_close)(
                row_id=row, applied=False, error=str(exc))
            raise
        except Exception as exc:
            await database_sync_to_async(command_log.command_close)(
                row_id=row, applied=False, error=f"the engine failed: {exc}")
            raise
        # the events it logged are kept first: "applied" never shows without them
        await self.publisher.events_flush()
        await database_sync_to_async(command_log.command_close)(row_id=row, applied=True)
        self.unproven.append(row)
        return result

    async def drill(self, cmd: Command) -> None:
        """Claim a pending drill, apply it through the log and record its outcome."""
        if not await database_sync_to_async(live_services.drill_claim)(drill_id=cmd.drill_id):
            logger.warning("live engine: drill %s is not pending; ignored", cmd.drill_id)
            return
        applied, outcome = True, {}
        try:
            outcome = json_safe(await self.apply("drill", cmd.params, cmd.drill_id))
        except ValueError as exc:
            applied, outcome = False, {"error": str(exc)}
        except Exception as exc:
            applied, outcome = False, {"error": f"the engine failed: {exc}"}
            await self.recover(exc)
        await database_sync_to_async(live_services.drill_outcome_record)(
            drill_id=cmd.drill_id, applied=applied, outcome=outcome,
            t_sim=float(self.host.engine.now))
