"""No test sleeps a fixed time waiting for something to happen (issue 28: a suite that holds
under load). It waits for the condition itself, with a deadline: ``tests/waiting.py``.

A sleep for a positive constant time (``time.sleep(0.2)``, ``await asyncio.sleep(0.05)``,
Playwright's ``page.wait_for_timeout(1000)``) is allowed only

- inside the body of a ``while`` or ``for`` loop (a polling loop, which has its deadline), or
- on a line that says why the sleep is the point: ``# sleep-ok: <reason>`` (a fake engine that
  runs until cancelled, a random crash point).

Sleeps of a computed time (``time.sleep(delay)``) and ``asyncio.sleep(0)`` (one turn of the
event loop) are not fixed waits and pass.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent

MARK = re.compile(r"#\s*sleep-ok:\s*\S")
"""The comment that says why a fixed sleep is the point (a reason is required)."""

SLEEPS = {("time", "sleep"), ("asyncio", "sleep")}
"""``module.function`` calls that sleep; any ``<object>.wait_for_timeout(...)`` (Playwright)
and a bare ``sleep(...)`` (``from time import sleep``) count too."""

NOT_YET = {
}
"""Files with fixed sleeps still to be replaced (being edited elsewhere when the guard came):
how many each may keep. A new one fails the guard; so does an allowance left above the count,
which must then be lowered (at 0, removed)."""

_BOUNDARIES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.While, ast.For, ast.AsyncFor)


def _is_sleep(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute):
        if f.attr == "wait_for_timeout":
            return True
        return isinstance(f.value, ast.Name) and (f.value.id, f.attr) in SLEEPS
    return isinstance(f, ast.Name) and f.id == "sleep"


def _constant_seconds(call: ast.Call) -> float | None:
    """The time asked for when it is a constant expression (``0.5``, ``2 * 0.1``), else None."""
    arg = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg in ("timeout", "delay", "seconds", "secs")),
        None)
    if arg is None or not all(isinstance(n, ast.Constant | ast.BinOp | ast.UnaryOp
                                         | ast.operator | ast.unaryop)
                              for n in ast.walk(arg)):
        return None
    value = eval(compile(ast.Expression(arg), "<sleep>", "eval"), {"__builtins__": {}})
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _in_loop(node: ast.AST, parents: dict) -> bool:
    """Inside a loop of the same function (a function defined in a loop is not in it)."""
    node = parents.get(node)
    while node is not None and not isinstance(node, _BOUNDARIES):
        if isinstance(node, _LOOPS):
            return True
        node = parents.get(node)
    return False


def fixed_sleeps(source: str) -> list[int]:
    """Line numbers of the fixed sleeps in ``source`` that the rules above do not allow."""
    tree = ast.parse(source)
    lines = source.splitlines()
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_sleep(node)):
            continue
        seconds = _constant_seconds(node)
        if seconds is None or seconds <= 0 or _in_loop(node, parents):
            continue
        if any(MARK.search(line) for line in lines[node.lineno - 1:node.end_lineno]):
            continue
        found.append(node.lineno)
    return sorted(found)


# ----------------------------------------------------------------- the guard on samples
@pytest.mark.parametrize(("source", "line"), [
    ("import time\n\ndef test_x():\n    start()\n    time.sleep(0.5)\n    check()\n", 5),
    ("async def test_x():\n    await send()\n    await asyncio.sleep(0.05)\n", 3),
    ("def test_x(page):\n    page.wait_for_timeout(1000)\n", 2),
    ("from time import sleep\nsleep(2 * 0.1)\n", 2),
    ("time.sleep(0.2)  # sleep-ok:\n", 1),
    ("for x in xs:\n    def later():\n        time.sleep(1)\n", 3),
    ("while busy():\n    pass\ntime.sleep(0.3)\n", 3),
], ids=["time.sleep", "asyncio.sleep", "wait_for_timeout", "a constant expression",
        "a mark without a reason", "a function defined in a loop", "after a loop"])
def test_a_fixed_sleep_outside_a_polling_loop_is_found(source, line):
    assert fixed_sleeps(source) == [line]


@pytest.mark.parametrize("source", [
    "while not done():\n    time.sleep(0.1)\n",
    "for _ in range(50):\n    if ready():\n        break\n    page.wait_for_timeout(100)\n",
    "async def f():\n    async for m in ms:\n        await asyncio.sleep(0.01)\n",
    "async def f():\n    await asyncio.sleep(3600)  # sleep-ok: runs until cancelled\n",
    "time.sleep(rng.uniform(0.0, 2.5))\n",
    "async def f():\n    await asyncio.sleep(0)\n",
    "time.sleep(delay)\n",
    "wait_until(ready, what='ready')\n",
], ids=["while", "for", "async for", "marked", "computed", "one turn", "a variable",
        "a wait for the condition"])
def test_polling_loops_marked_sleeps_and_computed_times_pass(source):
    assert fixed_sleeps(source) == []


# ----------------------------------------------------------------- the guard on the suite
@functools.cache
def _suite() -> dict[str, list[int]]:
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        lines = fixed_sleeps(path.read_text(encoding="utf-8"))
        if lines:
            found[path.relative_to(ROOT).as_posix()] = lines
    return found


def test_no_test_waits_a_fixed_time_for_something_to_happen():
    found = {name: lines for name, lines in _suite().items()
             if len(lines) > NOT_YET.get(name, 0)}
    assert not found, (
        "fixed sleeps waiting for something (file: lines); wait for the condition with a "
        "deadline (tests/waiting.py: wait_until, until), or say why the sleep is the point "
        f"with '# sleep-ok: <reason>': {found}")


def test_the_allowances_for_files_still_to_be_fixed_are_not_above_their_counts():
    found = _suite()
    stale = {name: (allowed, len(found.get(name, [])))
             for name, allowed in NOT_YET.items() if len(found.get(name, [])) < allowed}
    assert not stale, f"lower these NOT_YET allowances (allowed, left): {stale}"
