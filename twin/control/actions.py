"""Staff actions on the live twin: a job's hold, release, cancel, requeue and priority; a node's
drain and resume; ending a running drill.

Each service checks who asks (staff with ``twin.run_drill``, the rule of every way of steering
the live engine), then what is asked against what the twin last published (the job's state, the
node's status, the drill's row), refusing with one ``ValidationError`` before anything changes;
then it writes one audit entry and sends the command to the live engine, which applies it
through its durable command log (``twin.live.command_log``: it survives a restart) and checks
it once more (``scheduler.control.job_actions``, ``scheduler.control.drills.end_drill``).
Its effect is
in the next frame and its event-log line names the user.
"""

from __future__ import annotations

import logging

from django.core.exceptions import ObjectDoesNotExist, PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet

from scheduler.control.drills import ENDLESS
from scheduler.control.job_actions import ACTION_STATES, action_refusal
from scheduler.limits.bounds import JOB_PRIORITY
from twin import app_setting
from twin.audit.services import audit_record
from twin.control.edits import nodes_drain, nodes_undrain
from twin.inventory.models import NodeStatus
from twin.live import selectors
from twin.live.broadcast import command_send
from twin.live.engine_commands import JOB_NAME_MAX
from twin.live.models import Drill, DrillStatus, EngineCommand, EngineEvent

logger = logging.getLogger(__name__)

ACTIONS = tuple(ACTION_STATES)  # ACTION_STATES: which states each applies to
"""``hold``, ``release``, ``cancel``, ``requeue``, ``priority``."""
ACTIONS_DENIED = "actions on the live twin are for staff with the twin.run_drill permission"


class EngineUnreachable(RuntimeError):
    """The command could not be handed to the live engine; nothing was changed."""


def can_act(user) -> bool:
    """Staff with ``twin.run_drill``: the drills' rule, for every action on the live twin."""
    return bool(user is not None and user.is_authenticated and user.is_staff
                and user.has_perm("twin.run_drill"))


def _require_staff(user) -> None:
    if not can_act(user):
        raise PermissionDenied(ACTIONS_DENIED)


def _refuse_if_mirroring(what: str) -> None:
    if app_setting("SOURCE") == "mirror":
        raise ValidationError(f"the live twin mirrors a real cluster, so {what} cannot be done "
                              "on it")


def _send(command: str, **params) -> None:
    try:
        command_send(command, **params)
    except Exception as exc:  # the audit entry rolls back with the transaction
        logger.warning("could not send %s to the live engine", command, exc_info=True)
        raise EngineUnreachable(f"the live engine could not be reached ({type(exc).__name__}); "
                                "nothing was changed, try again") from None


def _username(user) -> str:
    return user.get_username()


# ----------------------------------------------------------------- jobs
def job_state_get(*, name: str) -> str | None:
    """The job's state as the live engine last published it: ``running`` (or draining,
    detecting), ``held``, ``queued``, or ``None`` when the twin cannot tell (not among them:
    done, never seen, or queued beyond the queue rows a frame carries)."""
    live = selectors.live_state_get()
    if live is None:
        return None
    placement, frame = live.placement, live.frame  # each None when there is none
    placed = placement["jobs"].get(name) if placement is not None else None
    if placed is not None:
        return placed["state"]
    if placement is not None and any(h["name"] == name for h in placement["held"]):
        return "held"
    if frame is not None and any(q["name"] == name for q in frame["queue"]):
        return "queued"
    # the placement's queue: the first QUEUE_ROWS_MAX rows of scheduler.live.queue_rows
    if placement is not None and any(row[1] == name for row in placement["queue"] or ()):
        return "queued"
    return None


def _queue_shown_whole(live) -> bool:
    placement, frame = live.placement, live.frame  # each None when there is none
    if placement is not None and placement["queue"] is not None:
        return len(placement["queue"]) >= placement["queue_total"]
    if frame is not None:  # an older engine's placement: the frame's first rows
        return len(frame["queue"]) >= frame["jobs"]["queued"]
    return False


def job_action_request(*, user, job, action, priority=None) -> dict:
    """Validate, audit and send one action on a job of the live twin.

    Raises ``PermissionDenied`` (not staff), ``ObjectDoesNotExist`` (no such job in the live
    twin), ``ValidationError`` (an unknown action, a bad priority, or a state the action does
    not apply to) and :class:`EngineUnreachable`; nothing is written or sent then.
    """
    _require_staff(user)
    _refuse_if_mirroring("job actions")
    if action not in ACTIONS:
        raise ValidationError(f"unknown action {action!r}; choose one of: {', '.join(ACTIONS)}")
    if not isinstance(job, str) or not 0 < len(job) <= JOB_NAME_MAX:
        raise ValidationError(f"a job is named by at most {JOB_NAME_MAX} characters")
    params = {"job": job, "by": _username(user)}
    if action == "priority":
        try:
            params["priority"] = JOB_PRIORITY.check("priority", priority)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None
    elif priority is not None:
        raise ValidationError(f"only the priority action takes a priority, not {action}")
    live = selectors.live_state_get()
    if live is None:
        raise ValidationError("the live engine has not published a frame yet: try again in a "
                              "moment")
    state = job_state_get(name=job)
    if state is None:
        known = EngineEvent.objects.filter(inventory=live.inventory,
                                             jobs__contains=f",{job},").exists()
        if not known:
            raise ObjectDoesNotExist(f"no job {job!r} in the live twin")
        if _queue_shown_whole(live):
            raise ValidationError(f"job {job} is not queued, held or running in the live twin "
                                  "(it has ended)")
        # queued beyond the rows the frame carries: the engine checks its state itself
    else:
        why = action_refusal(action, job, state)
        if why is not None:
            raise ValidationError(why)
    with transaction.atomic():
        audit_record(user, f"job {action}", [job],
               **({"priority": params["priority"]} if action == "priority" else {}))
        _send(f"job_{action}", **params)
    return {"job": job, "action": action, "state_before": state, **(
        {"priority": params["priority"]} if action == "priority" else {})}


def job_actions_recent(*, name: str, limit: int = 20) -> list[dict]:
    """The actions on job ``name`` the live engine applied or refused, newest first."""
    rows = (EngineCommand.objects.filter(name__startswith="job_", params__job=name)
            .order_by("-pk").values("name", "params", "t_sim", "status", "error")[:limit])
    return [{"action": r["name"].removeprefix("job_"), "by": r["params"].get("by", ""),
             "priority": r["params"].get("priority"), "t_sim": r["t_sim"],
             "status": r["status"], "error": r["error"]} for r in rows]


# ----------------------------------------------------------------- nodes
def node_drain_request(*, user, nodes: QuerySet) -> int:
    """Drain a node in service (``ValidationError`` for one that is drained or failed)."""
    _require_staff(user)
    node = nodes.first()
    if node is None:
        raise ObjectDoesNotExist("no such node")
    if node.status != NodeStatus.READY:
        raise ValidationError(f"{node.hostname} is {node.status}: only a node in service can be "
                              "drained")
    return nodes_drain(nodes=nodes, reason=f"drained by {_username(user)}", user=user)


def node_resume_request(*, user, nodes: QuerySet) -> int:
    """Resume a drained node (``ValidationError`` for one that is not drained)."""
    _require_staff(user)
    node = nodes.first()
    if node is None:
        raise ObjectDoesNotExist("no such node")
    if node.status != NodeStatus.DRAINED:
        raise ValidationError(f"{node.hostname} is {node.status}, not drained: only a drained "
                              "node can be resumed")
    return nodes_undrain(nodes=nodes, user=user)


# ----------------------------------------------------------------- drills
def _drill_end_s(drill: Drill) -> float | None:
    """When the drill would end by itself (simulated s), ``None`` if it has no duration."""
    o, start = drill.outcome or {}, drill.applied_at_sim
    if "until" in o:
        return float(o["until"])
    if start is None:
        return None
    if "repair_s" in o:
        return start + float(o["repair_s"])
    if "duration_s" in o:
        return start + float(o["duration_s"])
    return None


def drill_endable(drill: Drill, t_sim: float | None) -> str | None:
    """Why ``drill`` cannot be ended now (``None`` if it can)."""
    label = f"drill #{drill.pk} ({drill.kind.replace('_', ' ')})"
    if drill.status != DrillStatus.APPLIED:
        return f"{label} is {drill.status}: only an applied drill can be ended"
    if drill.kind in ENDLESS:
        return f"{label} has no end: a supply cut lasts the run"
    ended = (drill.outcome or {}).get("ended")
    if ended:
        return f"{label} was already ended by {ended.get('by') or 'an operator'}"
    end = _drill_end_s(drill)
    if end is not None and t_sim is not None and t_sim >= end:
        return f"{label} is already over (it ran out at t = {end:,.0f} s)"
    return None


def drill_ran_out_at(drill: Drill, t_sim: float | None) -> float | None:
    """When an applied drill ran out by itself (its repair or duration ended; simulated s),
    ``None`` while it runs, when it was ended early or never applied, or has no end."""
    end = _drill_end_s(drill)
    if (drill.status != DrillStatus.APPLIED or (drill.outcome or {}).get("ended")
            or end is None or t_sim is None or t_sim < end):
        return None
    return end


def drills_endable(*, drills: list[Drill]) -> set[int]:
    """The ids of ``drills`` that can be ended now (the drills page shows them an End
    button)."""
    live = selectors.live_state_get()
    t_sim = live.t_sim if live is not None else None
    return {d.pk for d in drills if drill_endable(d, t_sim) is None}


def drill_end_request(*, user, drill_id: int) -> Drill:
    """End a running drill early: audited, marked on the drill's row, sent to the engine, which
    reverts it as if its duration had run out and logs who ended it."""
    _require_staff(user)
    _refuse_if_mirroring("ending drills")
    with transaction.atomic():
        drill = Drill.objects.select_for_update().filter(pk=drill_id).first()
        if drill is None:
            raise ObjectDoesNotExist(f"no drill #{drill_id}")
        live = selectors.live_state_get()
        why = drill_endable(drill, live.t_sim if live is not None else None)
        if why is not None:
            raise ValidationError(why)
        by = _username(user)
        drill.outcome = {**drill.outcome,
                         "ended": {"by": by, "t_sim": live.t_sim if live else None}}
        drill.save(update_fields=["outcome"])
        audit_record(user, "drill end", [f"drill #{drill.pk} {drill.kind}"])
        _send("end_drill", drill_id=drill.pk, by=by)
    return drill
