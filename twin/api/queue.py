"""``GET /api/queue``: the live queue, sorted by any column and paged (issue 16).

The frame every dashboard receives carries only the queue's head; the driver also writes the
whole queue (up to :data:`scheduler.live.QUEUE_ROWS_MAX` rows, with each gang's pending
reason) into the live state's placement, and this view sorts and pages that.  Login is
required (the middleware); operators may read it.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from scheduler.limits import checks
from scheduler.live import QUEUE_COLUMNS
from twin.live import selectors

PER_PAGE_DEFAULT = 50
PER_PAGE_MAX = 500
ORDERS = ("asc", "desc")


class QueueQueryError(ValueError):
    """A bad ``/api/queue`` parameter (the message says which and what is allowed)."""


def _int(params, name: str, default: int, lo: int, hi: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return checks.integer_from_text(name, raw, at_least=lo, at_most=hi,
                                        expect=f"between {lo:,} and {hi:,}",
                                        unparsable="an integer")
    except ValueError as exc:
        raise QueueQueryError(str(exc)) from None


def queue_query_parse(params) -> dict:
    """``sort``, ``order``, ``page`` and ``per_page`` from a query dict, validated."""
    unknown = sorted(set(params) - {"sort", "order", "page", "per_page"})
    if unknown:
        raise QueueQueryError(f"unknown parameter(s): {', '.join(unknown)}")
    sort = params.get("sort") or "position"
    if sort not in QUEUE_COLUMNS:
        raise QueueQueryError(f"sort must be one of: {', '.join(QUEUE_COLUMNS)}")
    order = params.get("order") or "asc"
    if order not in ORDERS:
        raise QueueQueryError("order must be asc or desc")
    return {"sort": sort, "order": order,
            "page": _int(params, "page", 1, 1, 10**6),
            "per_page": _int(params, "per_page", PER_PAGE_DEFAULT, 1, PER_PAGE_MAX)}


@require_GET
def api_queue(request):
    try:
        query = queue_query_parse(request.GET)
    except QueueQueryError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    page = selectors.live_queue_page(**query)
    if page is None:
        return JsonResponse({"error": "the live engine has not published a queue yet"},
                            status=503)
    return JsonResponse({**query, **page})
