"""The JSON API's one way to read a request body (a JSON object, or the response refusing
it) and its one error shape.

A body is bounded before it is parsed (:mod:`scheduler.limits.documents`): over 1 MB is a 413,
nested deeper than 64 levels or not JSON a 400, each one line of JSON."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse

from scheduler.limits.documents import MAX_BYTES, DocumentError, DocumentTooLarge, json_loads


def json_error(message: str, status: int, **extra) -> JsonResponse:
    """The API's one error shape: ``{"error": message, ...}`` with ``status``."""
    return JsonResponse({"error": message, **extra}, status=status)


def too_large(length: int | None = None) -> JsonResponse:
    """The 413 for a body over :data:`~scheduler.limits.documents.MAX_BYTES`."""
    size = "" if length is None else f" ({length:,} bytes)"
    return json_error(f"the request body is too large{size}; at most {MAX_BYTES:,} bytes", 413)


def declared_length(request) -> int | None:
    """The body's ``Content-Length`` in bytes; None when absent or not a number."""
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None


def json_body(request):
    """The body parsed as JSON (None when empty) within its bounds; else the 413 or 400
    response refusing it."""
    length = declared_length(request)
    if length is not None and length > MAX_BYTES:
        return too_large(length)
    try:
        raw = request.body
    except RequestDataTooBig:
        return too_large()
    if not raw:
        return None
    try:
        return json_loads(raw, what="the request body")
    except DocumentTooLarge:
        return too_large(len(raw))
    except DocumentError as exc:
        return json_error(str(exc), 400)


def json_object(request, *, what: str = "", shape: str) -> dict | JsonResponse:
    """The body as a dict; else a 415 (not ``application/json``), 413 (too large) or 400 (not
    JSON, too deep, or not an object: ``shape`` says what to send) response.  ``what`` names
    the thing sent ("the study") in the 415's message."""
    if request.content_type != "application/json":
        sent = request.content_type or "no Content-Type"
        return JsonResponse({"error": f"send {what + ' as ' if what else ''}application/json, "
                                      f"not {sent}"}, status=415)
    body = json_body(request)
    if isinstance(body, JsonResponse):
        return body
    if not isinstance(body, dict):
        return JsonResponse({"error": shape}, status=400)
    return body
