"""The JSON API's one way to read a request body (a JSON object, or the response refusing
it) and its one error shape."""

from __future__ import annotations

import json

from django.http import JsonResponse


def json_error(message: str, status: int, **extra) -> JsonResponse:
    """The API's one error shape: ``{"error": message, ...}`` with ``status``."""
    return JsonResponse({"error": message, **extra}, status=status)


def json_object(request, *, what: str = "", shape: str) -> dict | JsonResponse:
    """The body as a dict; else a 415 (not ``application/json``) or 400 (not JSON, or not an
    object: ``shape`` says what to send) response.  ``what`` names the thing sent
    ("the study") in the 415's message."""
    if request.content_type != "application/json":
        sent = request.content_type or "no Content-Type"
        return JsonResponse({"error": f"send {what + ' as ' if what else ''}application/json, "
                                      f"not {sent}"}, status=415)
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        return JsonResponse({"error": f"the request body is not valid JSON: {exc}"}, status=400)
    if not isinstance(body, dict):
        return JsonResponse({"error": shape}, status=400)
    return body
