"""Reads of the drill history."""

from __future__ import annotations

from twin.live.models import Drill


def drills_recent(limit: int = 50) -> list[Drill]:
    """The newest drills first, with who asked for them."""
    return list(Drill.objects.select_related("requested_by")
                .order_by("-requested_at", "-id")[:limit])
