"""The simulation kernel (clock, heap, event kinds, handles, named streams) and its context."""

from scheduler.sim.context import Context
from scheduler.sim.kernel import Handle, Kernel, Kind
from scheduler.sim.streams import Streams

__all__ = ["Context", "Handle", "Kernel", "Kind", "Streams"]
