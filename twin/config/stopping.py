"""A serving process that is stopping refuses commands: ``503`` with ``Retry-After``.

From the moment a stop begins (SIGTERM or SIGINT reached ``manage.py serve``: a Twisted
"before shutdown" trigger, :func:`stopping_on_shutdown`) until the process is gone, its engine
takes its final snapshot and stops listening; a command accepted then (``202``) could land
after that snapshot and be lost. So every request that could change something (any method
but ``GET``, ``HEAD``, ``OPTIONS``, ``TRACE``: drills, job and node actions, speed, what-if
launches, admin edits) is answered by :class:`RefuseWhileStopping` with ``503``, a
``Retry-After`` header and the API's one-line JSON error; reads are served to the end.
"""

from __future__ import annotations

from django.http import JsonResponse

from twin.api.bodies import json_error
from twin.live.stopping import (  # noqa: F401 (the flag lives with the engine's lifecycle)
    RETRY_AFTER_S,
    stopping,
    stopping_begin,
    stopping_end,
)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def stopping_on_shutdown() -> None:
    """Under a Twisted reactor about to run (daphne): refuse commands as soon as it begins
    to shut down, before the engine's own "before shutdown" trigger runs."""
    from twisted.internet import reactor

    reactor.addSystemEventTrigger("before", "shutdown", stopping_begin)


def refusal() -> JsonResponse:
    """The answer to a command while stopping."""
    response = json_error("the twin is stopping; nothing was changed, try again in "
                          f"{RETRY_AFTER_S} s", 503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


class RefuseWhileStopping:
    """Middleware: while this process stops, every request but a read is refused
    (:func:`refusal`) before any view sees it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method not in SAFE_METHODS and stopping():
            return refusal()
        return self.get_response(request)
