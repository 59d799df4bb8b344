"""Reads of the drill history and of the staff actions on a job."""

from __future__ import annotations

from twin.control import actions
from twin.live.models import Drill


def drills_recent(limit: int = 50) -> list[Drill]:
    """The newest drills first, with who asked for them."""
    return list(Drill.objects.select_related("requested_by")
                .order_by("-requested_at", "-id")[:limit])


def job_actions_get(*, name: str, job: dict, user) -> dict:
    """What the job page shows of staff actions on job ``name`` (``job``:
    :func:`twin.live.selectors.job_live_get`'s answer): its ``state`` (``cancelled`` when it
    is neither placed, queued nor held and the engine applied a staff cancel), whether
    ``user`` may act (``can_act``), the ``actions`` its state allows and, for staff, the
    ``recent_actions`` the engine applied or refused."""
    recent = actions.job_actions_recent(name=name)
    state = job["state"]
    if job["placed"] is None and job["queued"] is None and job["held"] is None and any(
            a["action"] == "cancel" and a["status"] == "applied" for a in recent):
        state = "cancelled"  # by staff: the engine applied it (the placement lists live jobs)
    staff = actions.can_act(user)
    return {"state": state, "can_act": staff,
            "actions": [a for a, ok in actions.ACTION_STATES.items() if state in ok],
            "recent_actions": recent if staff else []}
