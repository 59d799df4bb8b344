"""Queries of the stored event log (:class:`~twin.live.models.EngineEvent`) the events views
filter and page: kept with the model's owner, so the views above only parse and render."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from twin.live.models import EngineEvent


def kind_logged(*, inventory: str, kind: str) -> bool:
    """Whether the run's log holds an event of ``kind``."""
    return EngineEvent.objects.filter(inventory=inventory, kind=kind).exists()


def kind_counts(*, inventory: str) -> dict[str, int]:
    """How many events of each kind the log holds."""
    return dict(EngineEvent.objects.filter(inventory=inventory).values_list("kind")
                .annotate(n=Count("id")).values_list("kind", "n"))


def events_of(*, inventory: str) -> QuerySet:
    """The run's events, to be filtered and paged."""
    return EngineEvent.objects.filter(inventory=inventory)
