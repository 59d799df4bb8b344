"""Checks of command and drill parameters: one clear ``ValueError`` before anything changes."""

from __future__ import annotations

import math

import numpy as np


def positive(name: str, value, upper: float | None = None) -> float:
    """``value`` as a finite float > 0 (and <= ``upper``).

    >>> positive("factor", 2)
    2.0
    >>> positive("factor", 0)
    Traceback (most recent call last):
    ...
    ValueError: factor must be a positive number, not 0
    """
    if (isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating)
            or not math.isfinite(value) or not value > 0):
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    if upper is not None and value > upper:
        raise ValueError(f"{name} must be at most {upper:g}, not {value!r}")
    return float(value)


def fraction(name: str, value) -> float:
    """``value`` as a float strictly between 0 and 1 (a share of something that is left).

    >>> fraction("factor", 0.25)
    0.25
    >>> fraction("factor", 1)
    Traceback (most recent call last):
    ...
    ValueError: factor must be a number between 0 and 1 (exclusive), not 1
    """
    if (isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating)
            or not math.isfinite(value) or not 0 < value < 1):
        raise ValueError(f"{name} must be a number between 0 and 1 (exclusive), not {value!r}")
    return float(value)


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
