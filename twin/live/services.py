"""Writes of the live engine's state: the latest frame and health, snapshots, the stored event
log."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from scheduler.frame_schema import Event, LostFrame, StoredFrame
from scheduler.placement_schema import LivePlacement
from twin.alerts import rules as alerts
from twin.alerts.log_windows import EventLog
from twin.live import history
from twin.live.models import Drill, DrillStatus, EngineEvent, EngineSnapshot, LiveState
from twin.live.stored import frame_lost


def live_state_write(*, seq: int, t_sim: float, frame: StoredFrame | LostFrame, health: str,
                     last_error: str, speed: float, paused: bool, inventory: str = "",
                     placement: LivePlacement | None = None) -> None:
    """The engine's latest frame and status, in one UPDATE of the single LiveState row; a
    :class:`~scheduler.frame_schema.LostFrame` (the engine's state lost) is stored as it is
    and leaves no history sample."""
    # adds frame["alerts"] before it is stored and sent
    alerts.evaluate(frame=frame, t_sim=t_sim, log=_alert_log(inventory))
    fields = {"seq": seq, "t_sim": t_sim, "frame": frame, "health": health,
              "last_error": last_error, "speed": speed, "paused": paused,
              "inventory": inventory, "updated_at": timezone.now()}
    if placement is not None:
        fields["placement"] = placement
    if not LiveState.objects.filter(pk=LiveState.SINGLETON_PK).update(**fields):
        LiveState.objects.update_or_create(pk=LiveState.SINGLETON_PK, defaults=fields)
    if inventory and not frame_lost(frame):
        history.record(run=inventory, t_sim=t_sim, frame=frame)


def _alert_log(inventory: str) -> EventLog | None:
    """The run's stored event log as the alert rules read it (rows past a seq, in order)."""
    if not inventory:
        return None

    def read(after: int, t_from: float | None, limit: int) -> list[tuple]:
        rows = EngineEvent.objects.filter(inventory=inventory, seq__gt=after)
        if t_from is not None:
            rows = rows.filter(t_sim__gte=t_from)
        return list(rows.order_by("seq")
                    .values_list("seq", "t_sim", "kind", "component", "text")[:limit])

    def cluster():
        from twin.live.selectors import cluster_current

        return cluster_current()

    return EventLog(key=inventory, read=read, cluster=cluster)


def live_state_health_set(*, health: str, last_error: str | None = None) -> None:
    fields = {"health": health, "updated_at": timezone.now()}
    if last_error is not None:
        fields["last_error"] = last_error
    if not LiveState.objects.filter(pk=LiveState.SINGLETON_PK).update(**fields):
        LiveState.objects.update_or_create(pk=LiveState.SINGLETON_PK, defaults=fields)


def engine_snapshot_save(*, data: bytes, t_sim: float, preset: str, seed: int,
                         inventory: str = "", log_seq: int = 0, keep: int = 3) -> int:
    """Store a pickled engine (``log_seq``: the last logged command in it); only the newest
    ``keep`` snapshots are kept."""
    with transaction.atomic():
        snap = EngineSnapshot.objects.create(data=data, t_sim=t_sim, preset=preset, seed=seed,
                                               inventory=inventory, log_seq=log_seq)
        old = list(EngineSnapshot.objects.order_by("-id")
                   .values_list("id", flat=True)[keep:])
        if old:
            EngineSnapshot.objects.filter(id__in=old).delete()
    return snap.pk


# ----------------------------------------------------------------- the stored event log
def _component(event: Event) -> str:
    if event.get("component"):
        return str(event["component"])[:64]
    for key in ("switch", "link", "node"):
        if event.get(key) is not None:
            return f"{key} {event[key]}"
    return ""


def _jobs(event: Event) -> str:
    names = list(event.get("jobs") or [])
    if event.get("job"):
        names.append(event["job"])
    return "," + ",".join(dict.fromkeys(str(n) for n in names)) + "," if names else ""


def engine_events_store(*, inventory: str, first_seq: int, events: list[Event]) -> int:
    """Keep engine log lines ``first_seq``, ``first_seq + 1``, ...; lines already kept stay."""
    EngineEvent.objects.bulk_create(
        (EngineEvent(inventory=inventory, seq=first_seq + k, t_sim=float(e["t"]),
                       kind=str(e["kind"])[:32], component=_component(e),
                       jobs=_jobs(e), text=str(e["text"]))
         for k, e in enumerate(events)), batch_size=1000, ignore_conflicts=True)
    return len(events)


@transaction.atomic
def engine_events_resume(*, inventory: str, have: int) -> int:
    """The engine (built or restored) holds ``have`` log lines: forget kept lines past them
    (a future the restored engine did not live) and return the first line still to keep."""
    kept = EngineEvent.objects.filter(inventory=inventory)
    kept.filter(seq__gte=have).delete()
    last = kept.order_by("-seq").values_list("seq", flat=True).first()
    return 0 if last is None else min(last + 1, have)


def drill_claim(*, drill_id: int) -> bool:
    """True if the drill exists and is still pending (the engine applies each drill once)."""
    return Drill.objects.filter(pk=drill_id, status=DrillStatus.PENDING).exists()


def drill_outcome_record(*, drill_id: int, applied: bool, outcome: dict,
                         t_sim: float | None) -> int:
    """The engine's verdict on a pending drill: applied (with its effect) or refused."""
    return Drill.objects.filter(pk=drill_id, status=DrillStatus.PENDING).update(
        status=DrillStatus.APPLIED if applied else DrillStatus.REFUSED,
        outcome=outcome, applied_at_sim=t_sim if applied else None)
