"""Named random streams from one seed: every random process draws from its own child stream.

All streams of a run descend from one :class:`numpy.random.SeedSequence` of the scenario's seed,
each at its own spawn key, so adding a stream (or a failure mode) does not shift the draws of
another.  Generators are handed out once per name and kept: :meth:`Streams.reseed` rewinds every
one of them in place to the stream of a new seed, so a forked engine's components, which hold
their generators, draw a different future without being rebuilt.
"""

from __future__ import annotations

import zlib

import numpy as np

KEYS: dict[str, tuple[int, ...]] = {
    "placement": (0,),
    "drills": (2,),
    "failures": (7,),
    "workload": (8,),
}
"""Spawn keys of the named streams (a name not listed here gets a CRC-32 of itself).

``placement``, ``drills`` and ``failures`` (``k`` for the k-th failure mode) keep the spawn keys
the engine used before the streams had names, so the engine's draws did not move with that
change; ``workload`` (the preset workload's arrivals and sizes) used to have a root of its own."""


def spawn_key(name: str, *sub: int) -> tuple[int, ...]:
    """The spawn key of stream ``name`` (and sub-stream ``sub``).

    >>> spawn_key("failures", 3)
    (7, 3)
    >>> spawn_key("my-process") == spawn_key("my-process")
    True
    """
    base = KEYS.get(name)
    if base is None:
        base = (zlib.crc32(name.encode()),)
    return base + tuple(int(s) for s in sub)


class Streams:
    """The named child generators of one seed.

    Examples
    --------
    >>> a, b = Streams(1), Streams(1)
    >>> float(a.rng("failures", 0).random()) == float(b.rng("failures", 0).random())
    True
    >>> a.rng("placement") is a.rng("placement")
    True
    """

    def __init__(self, seed: int):
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, not {seed!r}")
        self.seed = int(seed)
        self._gens: dict[tuple[int, ...], np.random.Generator] = {}

    def rng(self, name: str, *sub: int) -> np.random.Generator:
        """The generator of stream ``name`` (``sub`` selects a numbered child of it)."""
        key = spawn_key(name, *sub)
        gen = self._gens.get(key)
        if gen is None:
            gen = self._gens[key] = np.random.default_rng(
                np.random.SeedSequence(self.seed, spawn_key=key))
        return gen

    def reseed(self, seed: int) -> None:
        """Point every stream handed out so far (and all later ones) at ``seed``'s streams."""
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, not {seed!r}")
        self.seed = int(seed)
        for key, gen in self._gens.items():
            fresh = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=key))
            gen.bit_generator.state = fresh.bit_generator.state
