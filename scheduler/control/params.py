"""Checks of command parameters: one clear ``ValueError`` before anything changes.

Numbers are checked against their documented bounds, :mod:`scheduler.limits.bounds`.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.limits.bounds import STORAGE_DEGRADED


def fraction(name: str, value) -> float:
    """``value`` as the share of a storage tier's bandwidth left when degraded: a float
    strictly between 0 and 1, at least :data:`~scheduler.limits.bounds.STORAGE_LEFT_MIN`.

    >>> fraction("factor", 0.25)
    0.25
    >>> fraction("factor", 1)
    Traceback (most recent call last):
    ...
    ValueError: factor must be a number between 0 and 1 (exclusive), not 1
    >>> fraction("factor", 1e-9)
    Traceback (most recent call last):
    ...
    ValueError: factor must be at least 0.0001, not 1e-09
    """
    if (isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating)
            or not math.isfinite(value) or not 0 < value < 1):
        raise ValueError(f"{name} must be a number between 0 and 1 (exclusive), not {value!r}")
    return STORAGE_DEGRADED.check(name, value)


def unit_id(what: str, value, count: int) -> int:
    """``value`` as an integer id in ``0 .. count - 1`` of the units named ``what``.

    >>> unit_id("node", 3, 4)
    3
    >>> unit_id("node", 4, 4)
    Traceback (most recent call last):
    ...
    ValueError: node 4 does not exist (ids 0 .. 3)
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{what} must be an integer id, not {value!r}")
    if not 0 <= value < count:
        raise ValueError(f"{what} {value} does not exist (ids 0 .. {count - 1})")
    return int(value)
