"""Reads of the drill history."""

from __future__ import annotations

from twin import models as m


def drills_recent(limit: int = 50) -> list[m.Drill]:
    """The newest drills first, with who asked for them."""
    return list(m.Drill.objects.select_related("requested_by")
                .order_by("-requested_at", "-id")[:limit])
