"""Each inventory row's id in the live engine, beside the admin's own id, linked to the
dashboard page that shows the row.

The admin numbers rows by primary key; the engine and the dashboard's URLs number them by
position in the live cluster (:class:`twin.inventory.adapter.EngineIds`), so admin node 101 can
be engine node 100 at ``/nodes/100/``.  Rows of another cluster than the live one have no live
page.
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from twin.inventory.adapter import EngineIds
from twin.live import selectors as live_selectors

_ATTR = "_twin_live_page"
NOT_LIVE = "- (not in the live cluster)"


def live_ids() -> EngineIds | None:
    """The live cluster's engine ids (``None``: no cluster is live)."""
    cluster = live_selectors.cluster_current()
    return None if cluster is None else EngineIds(cluster)


class LivePage:
    """Mixin for a ``ModelAdmin``: list ``engine_id`` in ``list_display`` and
    ``readonly_fields``, and say in :meth:`live_pages` where each row lives; the change form's
    "View on site" opens the row's live page."""

    def live_pages(self, ids: EngineIds, objs: list) -> dict[int, tuple[int, str] | None]:
        """``{pk: (engine id, live page URL)}`` for ``objs`` (``None``: not in the engine)."""
        raise NotImplementedError

    def _live_page(self, obj) -> tuple[int, str] | None:
        if hasattr(obj, _ATTR):
            return getattr(obj, _ATTR)
        ids = live_ids()
        return None if ids is None else self.live_pages(ids, [obj])[obj.pk]

    def get_changelist_instance(self, request):
        cl = super().get_changelist_instance(request)
        rows = list(cl.result_list)  # the page's rows, evaluated once: the template reuses them
        ids = live_ids()
        found = self.live_pages(ids, rows) if ids is not None else {}
        for obj in rows:
            setattr(obj, _ATTR, found.get(obj.pk))
        return cl

    @admin.display(description="engine id")
    def engine_id(self, obj) -> str:
        if obj is None or obj.pk is None:
            return "-"
        page = self._live_page(obj)
        if page is None:
            return NOT_LIVE
        return format_html('<a href="{}" class="live-page" title="its live page">{}</a>', page[1],
                           page[0])

    def view_on_site(self, obj) -> str | None:
        page = self._live_page(obj)
        return None if page is None else page[1]


def node_url(engine_id: int) -> str:
    return reverse("node", args=[engine_id])


def rack_url(engine_id: int) -> str:
    return reverse("rack", args=[engine_id])


def switch_url(engine_id: int) -> str:
    return reverse("switch", args=[engine_id])


def page_of(engine_id: int | None, url) -> tuple[int, str] | None:
    """``(engine_id, url(engine_id))``, or ``None`` for a row the engine does not run."""
    return None if engine_id is None else (engine_id, url(engine_id))
