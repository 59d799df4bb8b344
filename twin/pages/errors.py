"""The error handlers for 400, 403 and 500 (``handler404`` and the CSRF failure view are in
:mod:`twin.pages.views`): JSON in the API's one error shape under ``/api/``, the app's themed
pages (``templates/400.html``, ``403.html``, ``500.html``) elsewhere.

The 400 and 500 pages render with no context, as Django's own handlers do: no database, no
session and no user is needed to show them, so they still render when those are what failed.
"""

from __future__ import annotations

from django.views import defaults

from twin.api.bodies import json_error


def _api(request) -> bool:
    return request.path.startswith("/api/")


def bad_request(request, exception=None):
    """``handler400``; the reason is not repeated (it may name a forged header)."""
    if _api(request):
        return json_error("bad request", 400)
    return defaults.bad_request(request, exception)


def permission_denied(request, exception=None):
    """``handler403``: the refusal's message, as the services word it."""
    if _api(request):
        return json_error(str(exception or "") or "permission denied", 403)
    return defaults.permission_denied(request, exception)


def server_error(request):
    """``handler500``: says nothing of the failure (the log has it)."""
    if _api(request):
        return json_error("internal server error", 500)
    return defaults.server_error(request)
