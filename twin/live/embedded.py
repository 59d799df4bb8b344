"""The embedded live engine (``CLUSTERTWIN_ENGINE=embedded``): a task of the serving process.

It starts because the serving process asks for it, never on import: ``manage.py serve`` (``make
run``) calls :func:`embedded_start` with daphne's event loop just before daphne runs it, so
counters, ``/metrics`` and history are live before anyone opens a page. Served any other way
(plain ``daphne twin.config.asgi:application``, another ASGI server, the tests' communicator),
the first dashboard socket starts it (:func:`driver_ensure_started`, from the consumer).
Either way it runs once per process, and under a Twisted reactor it stops with a snapshot
before the reactor shuts down (SIGTERM, SIGINT).

The serving process also says how the driver is made (``make_driver``: ``manage.py serve``
passes :func:`twin.mirror.poller.live_driver`, which plugs in a mirror's poller where the twin
follows a real cluster); a start by the first dashboard makes it the same way, else as a plain
:class:`~twin.live.driver.EngineDriver` (which refuses to start a mirror).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging

from twin import app_setting
from twin.live.driver import EngineDriver

logger = logging.getLogger("twin.live.driver")

_embedded: dict = {"task": None, "driver": None, "make_driver": EngineDriver}


def embedded_start(loop: asyncio.AbstractEventLoop, *, make_driver=EngineDriver) -> bool:
    """Start the embedded engine on ``loop`` (running or about to run; call it from the
    loop's thread) when ``ENGINE_MODE`` is ``embedded``; True if it was asked to start.
    ``make_driver()`` makes the driver (this process's later starts too)."""
    if app_setting("ENGINE_MODE") != "embedded":
        return False
    _embedded["make_driver"] = make_driver
    loop.call_soon(_start_on, loop)
    return True


def driver_ensure_started() -> bool:
    """From a coroutine of the serving loop (the dashboard consumer): start the embedded
    engine if nothing started it yet; True if it runs. Elsewhere (no running loop, another
    engine mode) it starts nothing."""
    if app_setting("ENGINE_MODE") != "embedded":
        return False
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    _start_on(loop)
    return True


def embedded_driver() -> EngineDriver | None:
    """The embedded driver of this process, if one runs."""
    task = _embedded["task"]
    return _embedded["driver"] if task is not None and not task.done() else None


def _start_on(loop) -> None:
    task = _embedded["task"]
    if task is not None and not task.done() and task.get_loop() is loop:
        return
    driver = _embedded["make_driver"]()
    _embedded["driver"] = driver
    # a fresh context: the driver outlives the connection that happened to start it
    _embedded["task"] = loop.create_task(_embedded_run(driver), name="twin-engine",
                                         context=contextvars.Context())


async def _embedded_run(driver: EngineDriver) -> None:
    try:
        await driver.start()
    except Exception:
        logger.exception("live engine (embedded) could not start; the next dashboard "
                         "connection tries again")
        return
    _shutdown_hook_install(driver, asyncio.current_task())
    await driver.run()


def _shutdown_hook_install(driver: EngineDriver, task: asyncio.Task) -> None:
    """Under a running Twisted reactor (daphne), stop with a snapshot before it shuts down."""
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    if not reactor.running:
        return

    def on_shutdown():
        driver.request_stop()
        return Deferred.fromFuture(asyncio.ensure_future(asyncio.wait([task])))

    reactor.addSystemEventTrigger("before", "shutdown", on_shutdown)
