"""Checked parsers: numbers, integers, ranges, choices, flags, ids and parameter names.

Every parser takes the parameter's name first and either returns the value as a plain Python
``float``, ``int``, ``bool`` or name, or raises one ``ValueError`` with a one-line message
that names the parameter, says what it must be and shows what it was given::

    days must be a number > 0 and <= 366, not 0

The core, the trace readers, the study specs, the management commands and the API views all
parse through here, so one kind of mistake gets one kind of message.  A caller keeps its own
wording where people (and tests) know it with ``expect`` (what the value must be: ``"a
fraction in [0, 1)"``) and ``given`` (the word before the refused value: ``"not"``, or
``"got"`` in the trace readers).  The documented bounds themselves (a cluster's GPUs, a
drill's duration, ...) are :mod:`scheduler.limits.bounds`; ``bound=`` applies one after the
basic check.

Rules every parser keeps: a bool is never a number (``True`` is not 1 GPU); nan and infinity
are never in range; a string is never a number unless read with a ``*_from_text`` parser, whose
message shows the text as typed; ``None`` is refused unless the parser is wrapped in
:func:`optional`.

>>> number("load", 2)
2.0
>>> integer("gpus", 2.0, at_least=1)
Traceback (most recent call last):
...
ValueError: gpus must be a positive integer, not 2.0
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping

import numpy as np

from scheduler.limits.bounds import STORAGE_DEGRADED, Bound

__all__ = ["choice", "flag", "fraction", "integer", "integer_from_text", "is_finite",
           "is_integer", "is_number", "keys", "number", "number_from_text", "one_of",
           "optional", "unit_id", "within"]


SHOWN_CHARS = 40
"""The most characters of refused text a message shows (it stays one short line)."""


# ----------------------------------------------------------------- predicates
def is_number(value) -> bool:
    """Whether ``value`` is a real number: a Python or numpy int or float, not a bool.

    >>> is_number(3), is_number(np.float32(0.5)), is_number(True), is_number("3")
    (True, True, False, False)
    """
    return not isinstance(value, bool) and isinstance(
        value, int | float | np.integer | np.floating)


def is_finite(value) -> bool:
    """Whether ``value`` is a real number (:func:`is_number`) other than nan or +-infinity.

    >>> is_finite(1e308), is_finite(float("inf")), is_finite(float("nan"))
    (True, False, False)
    """
    return is_number(value) and math.isfinite(value)


def is_integer(value) -> bool:
    """Whether ``value`` is a Python or numpy integer, not a bool (``2.0`` is a float).

    >>> is_integer(np.int64(2)), is_integer(2.0), is_integer(False)
    (True, False, False)
    """
    return not isinstance(value, bool) and isinstance(value, int | np.integer)


# ----------------------------------------------------------------- messages
def _refuse(name: str, expect: str, shown, given: str) -> ValueError:
    return ValueError(f"{name} must be {expect}, {given} {shown!r}")


def _typed(text):
    """Text as the message shows it: a query string or a CSV cell can be long."""
    return text[:SHOWN_CHARS] if isinstance(text, str) else text


def _shown(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _range_text(above, at_least, at_most, below) -> str:
    """``"> 0 and <= 366"``: the limits given, lower first."""
    parts = [f"{op} {_shown(x)}" for op, x in ((">", above), (">=", at_least),
                                                ("<=", at_most), ("<", below)) if x is not None]
    return " and ".join(parts)


def _inside(value, above, at_least, at_most, below) -> bool:
    return ((above is None or value > above) and (at_least is None or value >= at_least)
            and (at_most is None or value <= at_most) and (below is None or value < below))


# ----------------------------------------------------------------- numbers
def number(name: str, value, *, above: float | None = None, at_least: float | None = None,
           at_most: float | None = None, below: float | None = None,
           bound: Bound | None = None, expect: str | None = None,
           given: str = "not") -> float:
    """``value`` as a finite float within the limits given, then within ``bound``.

    Parameters
    ----------
    name : str
        The parameter, as the message names it (``"days"``, ``"--load"``).
    value : int or float
        A Python or numpy number; a bool, a string, nan or infinity is refused.
    above, at_least, at_most, below : float, optional
        Limits, in the parameter's own unit (s, GB, Gb/s ...): ``value > above``,
        ``value >= at_least``, ``value <= at_most``, ``value < below``.
    bound : Bound, optional
        A documented bound of :mod:`scheduler.limits.bounds`, checked after the limits (its
        own message names the bound).
    expect : str, optional
        What the message says the value must be; by default built from the limits
        (``"a number > 0 and <= 366"``, ``"a positive number"``, ``"a finite number"``).
    given : str
        The word before the refused value in the message.

    Returns
    -------
    float
        The value (an int for an integer ``bound``).

    Examples
    --------
    >>> number("days", 0, above=0, at_most=366)
    Traceback (most recent call last):
    ...
    ValueError: days must be a number > 0 and <= 366, not 0
    >>> number("load", float("nan"), above=0)
    Traceback (most recent call last):
    ...
    ValueError: load must be a positive number, not nan
    >>> number("spares", 1, at_least=0, below=1, expect="a fraction in [0, 1)")
    Traceback (most recent call last):
    ...
    ValueError: spares must be a fraction in [0, 1), not 1
    """
    if not is_finite(value) or not _inside(value, above, at_least, at_most, below):
        raise _refuse(name, expect or _number_kind(above, at_least, at_most, below), value,
                      given)
    return float(value) if bound is None else bound.check(name, value)


def _number_kind(above, at_least, at_most, below) -> str:
    if above == 0 and at_least is None and at_most is None and below is None:
        return "a positive number"
    limits = _range_text(above, at_least, at_most, below)
    return f"a number {limits}" if limits else "a finite number"


def number_from_text(name: str, text, *, above: float | None = None,
                     at_least: float | None = None, at_most: float | None = None,
                     below: float | None = None, bound: Bound | None = None,
                     expect: str | None = None, unparsable: str | None = None,
                     given: str = "not") -> float:
    """A number typed as text (a command-line flag, a CSV cell, a query parameter).

    Takes :func:`number`'s keywords, and ``unparsable``: what the message says when the text
    is no number at all (default: the same as out of range).  The message shows the text as
    typed (its first :data:`SHOWN_CHARS` characters); ``bound``'s shows the number read.

    >>> number_from_text("--days", "2.5", above=0, at_most=366)
    2.5
    >>> number_from_text("--days", "soon", above=0, at_most=366)
    Traceback (most recent call last):
    ...
    ValueError: --days must be a number > 0 and <= 366, not 'soon'
    >>> number_from_text("--load", "inf", above=0, unparsable="a number")
    Traceback (most recent call last):
    ...
    ValueError: --load must be a positive number, not 'inf'
    """
    expect = expect or _number_kind(above, at_least, at_most, below)
    try:
        value = float(text)
    except (TypeError, ValueError):  # None, or no number: the same one line
        raise _refuse(name, unparsable or expect, _typed(text), given) from None
    if not math.isfinite(value) or not _inside(value, above, at_least, at_most, below):
        raise _refuse(name, expect, _typed(text), given)
    return value if bound is None else bound.check(name, value)


# ----------------------------------------------------------------- integers
def integer(name: str, value, *, at_least: int | None = None, at_most: int | None = None,
            bound: Bound | None = None, expect: str | None = None,
            given: str = "not") -> int:
    """``value`` as an int within the limits given, then within ``bound``.

    A bool, a float (even ``2.0``) and a string are refused: read text with
    :func:`integer_from_text`.

    Parameters
    ----------
    name : str
        The parameter, as the message names it.
    value : int
        A Python or numpy integer.
    at_least, at_most : int, optional
        Inclusive limits, in the parameter's unit (GPUs, seeds, ports ...).
    bound : Bound, optional
        A documented bound of :mod:`scheduler.limits.bounds`, checked after the limits.
    expect : str, optional
        What the message says the value must be; by default ``"a positive integer"`` for
        ``at_least=1``, else ``"an integer >= 0"`` and the like.
    given : str
        The word before the refused value in the message.

    Examples
    --------
    >>> integer("seed", np.int64(7), at_least=0)
    7
    >>> integer("seed", -1, at_least=0)
    Traceback (most recent call last):
    ...
    ValueError: seed must be an integer >= 0, not -1
    >>> integer("gpus", True, at_least=1)
    Traceback (most recent call last):
    ...
    ValueError: gpus must be a positive integer, not True
    """
    if not is_integer(value) or not _inside(value, None, at_least, at_most, None):
        raise _refuse(name, expect or _integer_kind(at_least, at_most), value, given)
    return int(value) if bound is None else bound.check(name, value)


def _integer_kind(at_least, at_most) -> str:
    if at_least == 1 and at_most is None:
        return "a positive integer"
    limits = _range_text(None, at_least, at_most, None)
    return f"an integer {limits}" if limits else "an integer"


def integer_from_text(name: str, text, *, at_least: int | None = None,
                      at_most: int | None = None, bound: Bound | None = None,
                      expect: str | None = None, unparsable: str | None = None,
                      given: str = "not") -> int:
    """An integer typed as text: what ``int(text)`` reads (``"12"``, ``" +3 "``), not
    ``"2.5"`` nor ``"1e3"``.  Takes :func:`integer`'s keywords and ``unparsable`` (what the
    message says when the text is no integer at all; default: the same as out of range).  The
    message shows the text as typed (its first :data:`SHOWN_CHARS` characters).

    >>> integer_from_text("--gpus", "12.5", at_least=1)
    Traceback (most recent call last):
    ...
    ValueError: --gpus must be a positive integer, not '12.5'
    >>> integer_from_text("page", "two", at_least=1, unparsable="an integer")
    Traceback (most recent call last):
    ...
    ValueError: page must be an integer, not 'two'
    """
    expect = expect or _integer_kind(at_least, at_most)
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise _refuse(name, unparsable or expect, _typed(text), given) from None
    if not _inside(value, None, at_least, at_most, None):
        raise _refuse(name, expect, _typed(text), given)
    return value if bound is None else bound.check(name, value)


# ----------------------------------------------------------------- ranges, choices, flags
def within(name: str, value, bound: Bound) -> float | int:
    """``value`` inside a documented bound of :mod:`scheduler.limits.bounds` (its message).

    >>> from scheduler.limits.bounds import POWER_CAP
    >>> within("power cap", 0.05, POWER_CAP)
    Traceback (most recent call last):
    ...
    ValueError: power cap must be at least 0.1, not 0.05
    """
    return bound.check(name, value)


def optional(check: Callable, name: str, value, *args, **kwargs):
    """``None`` as it is (the parameter was not given), anything else through ``check``.

    >>> optional(integer, "gpus", None, at_least=1) is None
    True
    >>> optional(integer, "gpus", 0, at_least=1)
    Traceback (most recent call last):
    ...
    ValueError: gpus must be a positive integer, not 0
    """
    return None if value is None else check(name, value, *args, **kwargs)


def _known(value, names: Collection) -> bool:
    try:
        return value in names
    except TypeError:  # an unhashable list or dict is no name of a mapping
        return False


def choice(name: str, value, known: Collection[str]):
    """``value`` if it is one of the names ``known`` (a tuple, or a mapping's keys).

    >>> choice("recovery", "disk", ("disk", "async", "memory"))
    'disk'
    >>> choice("policy", "fastest", {"default": 0, "fifo": 1})
    Traceback (most recent call last):
    ...
    ValueError: unknown policy 'fastest'; choose one of: default, fifo
    """
    if not _known(value, known):
        raise ValueError(f"unknown {name} {value!r}; choose one of: {', '.join(known)}")
    return value


def one_of(name: str, value, known: Collection[str], *, given: str = "not"):
    """``value`` if it is one of ``known``; the message lists them after ``must be``.

    >>> one_of("drain unit", "row", ("rack", "spine"))
    Traceback (most recent call last):
    ...
    ValueError: drain unit must be one of rack, spine, not 'row'
    """
    if not _known(value, known):
        raise _refuse(name, f"one of {', '.join(known)}", value, given)
    return value


def flag(name: str, value, *, expect: str = "true or false", numpy_bool: bool = True) -> bool:
    """``value`` as a bool: ``True`` or ``False`` (and numpy's unless ``numpy_bool`` is off);
    never 0, 1 or ``"yes"``.

    >>> flag("nic", np.True_)
    True
    >>> flag("physics", "on", expect="on or off")
    Traceback (most recent call last):
    ...
    ValueError: physics must be on or off, not 'on'
    """
    kinds = (bool, np.bool_) if numpy_bool else bool
    if not isinstance(value, kinds):
        raise _refuse(name, expect, value, "not")
    return bool(value)


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
    number(name, value, above=0, below=1, expect="a number between 0 and 1 (exclusive)")
    return STORAGE_DEGRADED.check(name, value)


def unit_id(what: str, value, count: int | None = None, *, from_text: bool = False) -> int:
    """``value`` as the integer id of one of ``count`` units named ``what`` (ids ``0 ..
    count - 1``; any integer without ``count``).  ``from_text``: digits typed as text
    (``"3"``) are an id too.

    >>> unit_id("node", 3, 4)
    3
    >>> unit_id("target", " 2 ", from_text=True)
    2
    >>> unit_id("node", 4, 4)
    Traceback (most recent call last):
    ...
    ValueError: node 4 does not exist (ids 0 .. 3)
    >>> unit_id("node", 1.0, 4)
    Traceback (most recent call last):
    ...
    ValueError: node must be an integer id, not 1.0
    """
    if from_text and isinstance(value, str) and value.strip().isdecimal():
        value = int(value)
    if not is_integer(value):
        raise _refuse(what, "an integer id", value, "not")
    if count is not None and not 0 <= value < count:
        raise ValueError(f"{what} {value} does not exist (ids 0 .. {count - 1})")
    return int(value)


# ----------------------------------------------------------------- parameter names
def keys(what: str, given: Mapping | Iterable[str], allowed: Iterable[str], *,
         required: Iterable[str] = (), more: bool = False) -> None:
    """Refuse names ``what`` does not take (unless ``more``: it takes others too) and
    ``required`` names missing from ``given``, in one line; unknown names first.

    >>> keys("drain_node", {"node": 3}, ("node",), required=("node",))
    >>> keys("drain_node", {"nodes": 3}, ("node",), required=("node",))
    Traceback (most recent call last):
    ...
    ValueError: drain_node takes node; not nodes
    >>> keys("gpu_down", {"nic": True}, ("gpu", "nic"), required=("gpu",))
    Traceback (most recent call last):
    ...
    ValueError: gpu_down needs gpu
    """
    allowed = tuple(allowed)
    unknown = [] if more else sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"{what} takes {', '.join(allowed) or 'nothing'}; "
                         f"not {', '.join(unknown)}")
    missing = [k for k in required if k not in given]
    if missing:
        raise ValueError(f"{what} needs {', '.join(missing)}")
