"""Who may command the live engine."""

from __future__ import annotations

DRILLS_DENIED = "drills are for staff with the twin.run_drill permission"


def can_run_drills(user) -> bool:
    """The one rule for drills: the page, its nav link, ``POST /api/drills`` and the engine's
    speed and pause controls are for staff with the ``twin.run_drill`` permission."""
    return user.is_staff and user.has_perm("twin.run_drill")
