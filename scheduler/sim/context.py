"""The narrow view of the kernel a component receives: time, events, hooks, log and streams."""

from __future__ import annotations

from collections.abc import Callable

from scheduler.sim.kernel import Handle, Kernel, Kind


class Context:
    """What a component may use of the :class:`~scheduler.sim.kernel.Kernel`.

    Components get one of these (plus the state and ledger objects they own or read) and never
    the engine: they cannot reach another component's fields through it.
    """

    __slots__ = ("_kernel",)

    def __init__(self, kernel: Kernel):
        self._kernel = kernel

    @property
    def now(self) -> float:
        """Simulated time, s."""
        return self._kernel.now

    def schedule(self, t: float, kind: Kind, payload=None) -> Handle:
        return self._kernel.schedule(t, kind, payload)

    def on(self, kind: Kind, handler: Callable) -> None:
        self._kernel.on(kind, handler)

    def on_advance(self, hook: Callable[[float, float], None]) -> None:
        self._kernel.on_advance(hook)

    def after_instant(self, hook: Callable[[], None]) -> None:
        self._kernel.after_instant(hook)

    def log(self, kind: str, text: str, **extra) -> None:
        self._kernel.log(kind, text, **extra)

    def rng(self, name: str, *sub: int):
        return self._kernel.rng(name, *sub)

    def pending(self, kind: Kind) -> list[Handle]:
        return self._kernel.pending(kind)
