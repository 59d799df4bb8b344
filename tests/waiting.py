"""Waiting for a condition with a deadline, never for a fixed time.

A test that sleeps a fixed time and then looks is a race: on a loaded machine the thing has not
happened yet, on an idle one the test waits for nothing. These helpers look again and again
until the condition holds, and fail after a generous deadline (a guard against a hang, never a
speed check) with an ``AssertionError`` that names what was waited for.

``wait_until`` polls from plain code (threads, subprocesses, Playwright's sync API);
``until`` is its twin for coroutines, and takes predicates that are themselves coroutine
functions (a database read through ``database_sync_to_async``). A guard
(``tests/core/test_no_fixed_sleeps.py``) keeps fixed sleeps from coming back.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable

TIMEOUT_S = 60.0
"""The default deadline: far above what any condition needs on an idle machine."""

EVERY_S = 0.02
"""The first pause between two looks; it doubles up to ``MAX_EVERY_S``."""

MAX_EVERY_S = 0.25


def _described(what) -> str:
    return what() if callable(what) else str(what)


def _timed_out(what, timeout: float, last: BaseException | None) -> AssertionError:
    error = f" (last error: {last!r})" if last is not None else ""
    return AssertionError(f"timed out after {timeout:g} s waiting for {_described(what)}{error}")


def wait_until(predicate: Callable[[], object], *, timeout: float = TIMEOUT_S,
               what: str | Callable[[], str] = "a condition", ignoring: tuple = (),
               sleep: Callable[[float], object] = time.sleep):
    """``predicate()``'s first truthy value, looked for until ``timeout`` seconds have passed.

    Parameters
    ----------
    predicate : callable
        Called with no argument; a truthy result ends the wait and is returned.
    timeout : float
        Seconds (wall clock) before giving up: a guard against a hang, so make it generous.
    what : str or callable
        What is waited for, for the failure's message (a callable is asked at the time).
    ignoring : tuple of exception types
        Raised by ``predicate`` while the thing is not ready yet (a database being written):
        counted as "not yet"; the last one is named if the wait times out.
    sleep : callable
        How to pause (seconds); Playwright's sync API passes
        ``lambda s: page.wait_for_timeout(s * 1000)`` so that its event handlers run.

    Raises
    ------
    AssertionError
        When ``predicate`` never held within ``timeout``.

    Examples
    --------
    >>> wait_until(lambda: 42, what="the answer")
    42
    >>> wait_until(lambda: False, timeout=0.05, what="never")
    Traceback (most recent call last):
    AssertionError: timed out after 0.05 s waiting for never
    """
    deadline = time.monotonic() + timeout
    every, last = EVERY_S, None
    while True:
        try:
            value = predicate()
        except ignoring as exc:
            value, last = None, exc
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(what, timeout, last)
        sleep(min(every, left))
        every = min(2 * every, MAX_EVERY_S)


async def until(predicate: Callable[[], object], *, timeout: float = TIMEOUT_S,
                what: str | Callable[[], str] = "a condition", ignoring: tuple = ()):
    """The coroutine twin of :func:`wait_until`: ``await until(lambda: ..., what=...)``.

    ``predicate`` may return an awaitable (a coroutine function, or ``database_sync_to_async``
    of a read); it is awaited. Between two looks the event loop runs the other tasks.

    Examples
    --------
    >>> asyncio.run(until(lambda: "done", what="done"))
    'done'
    """
    deadline = time.monotonic() + timeout
    every, last = EVERY_S, None
    while True:
        try:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
        except ignoring as exc:
            value, last = None, exc
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(what, timeout, last)
        await asyncio.sleep(min(every, left))
        every = min(2 * every, MAX_EVERY_S)
