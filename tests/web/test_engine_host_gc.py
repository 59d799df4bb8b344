"""The engine a live process runs is kept off Python's cyclic garbage collector.

A full collection walked the engine's millions of objects with the serving loop stopped (at
noc-4k 0.6-0.9 s about once a minute: every dashboard's frame late by as much); the host
freezes what is alive once an engine is set, and frees a replaced engine's cycles first.
"""

import gc
import weakref

import pytest

from twin.live.engine_host import EngineHost


class Engine:
    """Stands for an engine: objects that refer to one another, as an engine's do."""

    def __init__(self):
        self.parts = [{"engine": self} for _ in range(3)]


@pytest.fixture
def host():
    host = EngineHost(preset="dev-small", seed=1)
    yield host
    host.shutdown()
    gc.unfreeze()


def walked(obj) -> bool:
    """Whether the cyclic collector would walk ``obj`` (frozen objects are not listed)."""
    return any(o is obj for o in gc.get_objects())


def test_the_collector_no_longer_walks_an_engine_once_it_runs(host):
    engine = Engine()
    assert walked(engine)
    host.engine = engine
    assert host.engine is engine
    assert not walked(engine) and not walked(engine.parts[0])


def test_a_replaced_engine_is_freed_not_frozen_for_good(host):
    first = Engine()
    gone = weakref.ref(first)
    host.engine = first
    del first
    host.engine = Engine()
    assert gone() is None
