"""The admin's "live (engine)" column: what the running engine last reported about each row,
shown beside the operator-set status (the inventory's ``status`` field).

Each changelist page reads the engine's placement once (:func:`twin.selectors.live_view`) and
asks it about all of the page's rows at once; the page's subtitle says as of when.
"""

from __future__ import annotations

from django.contrib import admin

from twin import selectors

_ATTR = "_twin_live_status"


class LiveColumn:
    """Mixin for a ``ModelAdmin``: list ``live_engine`` (and ``operator_status``) in
    ``list_display`` or ``readonly_fields`` and name the :class:`~twin.selectors.LiveView`
    question in :meth:`live_statuses`."""

    def live_statuses(self, view: selectors.LiveView, objs: list) -> dict:
        """``{pk: LiveStatus}`` for ``objs`` (plain values go to the view, not instances)."""
        raise NotImplementedError

    def changelist_view(self, request, extra_context=None):
        view = request.twin_live_view = selectors.live_view()
        return super().changelist_view(request, {"subtitle": view.caption(),
                                                 **(extra_context or {})})

    def get_changelist_instance(self, request):
        cl = super().get_changelist_instance(request)
        view = getattr(request, "twin_live_view", None) or selectors.live_view()
        rows = list(cl.result_list)  # the page's rows, evaluated once: the template reuses them
        found = self.live_statuses(view, rows)
        for obj in rows:
            setattr(obj, _ATTR, found[obj.pk])
        return cl

    @admin.display(description="live (engine)")
    def live_engine(self, obj) -> str:
        if obj is None or obj.pk is None:
            return "-"
        live = getattr(obj, _ATTR, None)
        if live is None:  # a change form: this row alone
            view = selectors.live_view()
            live = self.live_statuses(view, [obj])[obj.pk]
            return str(live) if view.when == selectors.NO_ENGINE else f"{live} (at {view.when})"
        return str(live)

    @admin.display(description="status (operator)", ordering="status")
    def operator_status(self, obj) -> str:
        return obj.get_status_display()
