"""Whether this serving process is stopping: one flag, set when a stop begins (SIGTERM or
SIGINT reached ``manage.py serve``), read by whatever takes commands: the HTTP middleware
(:class:`twin.config.stopping.RefuseWhileStopping`, ``503``) and the WebSocket consumer (staff
speed and pause), so that nothing accepted can land after the engine's final snapshot.
"""

from __future__ import annotations

import threading

RETRY_AFTER_S = 15
"""What ``Retry-After`` says, seconds: a restart's time to a live frame at noc-4k, the
bound docs/operations.md holds it to."""

_stopping = threading.Event()


def stopping_begin() -> None:
    """This process is stopping: from now on, commands are refused."""
    _stopping.set()


def stopping() -> bool:
    """Whether this process is stopping."""
    return _stopping.is_set()


def stopping_end() -> None:
    """Accept commands again (an in-process test that stopped a server)."""
    _stopping.clear()
