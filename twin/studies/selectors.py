"""Reads of studies and what-ifs for the studies pages and API (``twin.studies.views``).

They answer rows (a template shows a study's status text, and the store's services take the
study or what-if they act on); writes are in ``twin.studies.store``."""

from __future__ import annotations

from twin.studies.models import Study, StudyRun, WhatIf


def studies_recent(*, limit: int) -> list[Study]:
    """The newest ``limit`` studies, with who asked for them."""
    return list(Study.objects.select_related("requested_by")[:limit])


def study_get(*, pk: int) -> Study | None:
    """Study ``pk`` with who asked for it and the what-if it came from (``None``: none)."""
    return Study.objects.filter(pk=pk).select_related("requested_by", "whatif").first()


def study_runs(*, study_id: int) -> list[StudyRun]:
    """The runs of study ``study_id`` (arm x seed), in the order they were recorded."""
    return list(StudyRun.objects.filter(study_id=study_id))


def whatif_get(*, pk: int) -> WhatIf | None:
    """What-if ``pk`` (``None``: none)."""
    return WhatIf.objects.filter(pk=pk).first()
