"""The live driver's durable command log: logged application, replay, and taking back.

A mixin of :class:`twin.live.driver.EngineDriver`.  Every inventory command and drill is written to
the log (:mod:`twin.live.command_log`) before it is applied; the driver notes the last row applied
(in the engine's thread, so a snapshot knows exactly which rows it holds) and the rows not yet
proven by a step.  When a step fails, those rows are taken back (refused, with the reason), the
last snapshot is restored and the log after it replayed up to the last good instant.
"""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async

from scheduler.live import live_frame
from twin.control import services as control_services
from twin.live import command_log
from twin.live import services as live_services
from twin.live.engine_commands import Command, json_safe

logger = logging.getLogger("twin.live.driver")


class CommandLogging:
    """Needs ``self.engine``, ``self._in_engine``, ``self._load_or_build``, ``self.log_key``,
    ``self._snapshot_blob`` and the log fields the driver initialises."""

    async def _replay(self, *, after: int, until: float) -> int:
        """Apply the logged commands after row ``after`` at their simulated times, then run
        to ``until``; returns how many were replayed."""
        rows = await database_sync_to_async(command_log.commands_to_replay)(
            run=self.log_key, after=after)

        def replay():
            engine = self.engine
            for row_id, name, params, t_sim, _drill in rows:
                if t_sim > engine.now:
                    engine.run_until(t_sim)
                try:
                    engine.command(name, **params)
                except ValueError as exc:  # it applied once: a changed rule refuses it now
                    logger.warning("live engine: replaying %s (row %d) refused: %s", name,
                                   row_id, exc)
                self._log_seq = row_id
            if until > engine.now:
                engine.run_until(until)
        await self._in_engine(replay)
        if rows:
            logger.info("live engine: replayed %d logged command(s); now at t=%.0f s",
                        len(rows), self.engine.now)
        return len(rows)

    async def _engine_failed(self, exc: BaseException) -> dict:
        """Log, report ``health=error``, take back the commands applied since the last good
        step (one of them poisoned the state: they are refused, with the reason), restore the
        last snapshot, replay the log after it and carry on from the last good instant."""
        logger.exception("live engine step failed at t=%s; restoring the last snapshot",
                         getattr(self.engine, "now", None), exc_info=exc)
        self.health = "error"
        self.last_error = f"{type(exc).__name__}: {exc}"
        suspects, self._unproven = self._unproven, []
        try:
            if suspects:
                await database_sync_to_async(command_log.commands_refuse)(
                    ids=suspects, reason=f"the engine failed after applying it "
                                         f"({type(exc).__name__}: {exc}); taken back")
            self.engine = await self._in_engine(self._load_or_build, self._snapshot_blob)
            self._log_seq = self._snapshot_log_seq if self._snapshot_blob is not None else 0
            if self._snapshot_blob is not None:
                await self._replay(after=self._snapshot_log_seq, until=self._good_t)
            self._events_saved = await database_sync_to_async(live_services.engine_events_resume)(
                inventory=self.log_key, have=self.engine.kernel.logged)
            return await self._in_engine(live_frame, self.engine)
        except Exception:
            logger.exception("live engine: restoring failed too")
            return {"t": getattr(self.engine, "now", 0.0)}

    async def _apply_logged(self, name: str, params: dict, drill_id: int | None = None):
        """Log the command (durably), apply it, close its row; ``ValueError`` if refused."""
        row = await database_sync_to_async(command_log.command_open)(
            run=self.log_key, name=name, params=params, t_sim=float(self.engine.now),
            drill_id=drill_id)

        def apply():
            result = self.engine.command(name, **params)
            self._log_seq = row
            return result
        try:
            result = await self._in_engine(apply)
        except ValueError as exc:
            await database_sync_to_async(command_log.command_close)(
                row_id=row, applied=False, error=str(exc))
            raise
        except Exception as exc:
            await database_sync_to_async(command_log.command_close)(
                row_id=row, applied=False, error=f"the engine failed: {exc}")
            raise
        await database_sync_to_async(command_log.command_close)(row_id=row, applied=True)
        self._unproven.append(row)
        return result

    async def _drill(self, cmd: Command) -> None:
        if not await database_sync_to_async(control_services.drill_claim)(drill_id=cmd.drill_id):
            logger.warning("live engine: drill %s is not pending; ignored", cmd.drill_id)
            return
        applied, outcome = True, {}
        try:
            outcome = json_safe(await self._apply_logged("drill", cmd.params, cmd.drill_id))
        except ValueError as exc:
            applied, outcome = False, {"error": str(exc)}
        except Exception as exc:
            applied, outcome = False, {"error": f"the engine failed: {exc}"}
            await self._engine_failed(exc)
        await database_sync_to_async(control_services.drill_outcome_record)(
            drill_id=cmd.drill_id, applied=applied, outcome=outcome,
            t_sim=float(self.engine.now))
