"""Checking a study spec: every mistake it holds, each at the line of the field it is about.

:func:`scheduler.study.spec.check_spec` walks a parsed spec with a :class:`SpecChecker`: the
parts of a spec (top fields, name, base, seeds, each arm, figures, price) are checked apart,
and a mistake ends only the part that depends on it, so one pass reports them all.  A bad value
of a scenario field is found by :class:`~scheduler.simulate.Scenario` itself; the field at
fault is the one whose removal makes the refusal go away (:meth:`SpecChecker.scenario`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scheduler.limits import checks
from scheduler.presets import PRESETS
from scheduler.reliability.profiles import PROFILES
from scheduler.simulate import Scenario, ScenarioError
from scheduler.study.figures import figure_names

SCENARIO_FIELDS = tuple(f.name for f in dataclasses.fields(Scenario) if f.name != "seed")
"""What ``base`` and an arm's ``set`` may name: every :class:`~scheduler.simulate.Scenario`
field except ``seed`` (a study's seeds come from ``seeds``)."""
TOP_FIELDS = ("name", "description", "base", "seeds", "first_seed", "baseline", "arms",
              "figures", "energy_price_usd_per_mwh", "checkpoint_intervals")
ARM_FIELDS = ("name", "set", "description")
MAX_SEEDS = 1000
MAX_RUNS = 20_000
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:+=-]{0,63}$")


@dataclass(frozen=True)
class SpecProblem:
    """One mistake of a spec: its line (``None`` where none is known: a spec sent as data)
    and what is wrong."""

    line: int | None
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class SpecError(ValueError):
    """A study spec that cannot run: every mistake found, each naming its line where it can,
    in one line (``ORIGIN: 3 errors: line 4: ...; line 9: ...; line 12: ...``)."""

    def __init__(self, message: str = "", *, problems: Sequence[SpecProblem] = (),
                 origin: str = ""):
        self.problems = tuple(problems) or (SpecProblem(None, message),)
        self.origin = origin
        head = f"{origin}: " if origin else ""
        if len(self.problems) > 1:
            head += f"{len(self.problems)} errors: "
        super().__init__(head + "; ".join(str(p) for p in self.problems))

    def messages(self) -> list[str]:
        """One message per mistake (``line N: ...``)."""
        return [str(p) for p in self.problems]

    def at(self, origin: str) -> SpecError:
        """The same mistakes, read as coming from ``origin`` (a file's path)."""
        return SpecError(problems=self.problems, origin=origin)


STAND_IN = {"preset": next(iter(PRESETS)), "days": 1.0}
"""What a bad ``preset`` or ``days`` is replaced by while the other fields are checked."""


class _Stop(Exception):
    """Ends one part of a check after a mistake the rest of that part depends on."""


class SpecChecker:
    """Every mistake of a spec, each at the line of the field it is about.

    The parts of a spec are checked apart (top fields, name, base, seeds, each arm, figures,
    price); a mistake ends only the part that depends on it (:meth:`fail`), or none
    (:meth:`note`)."""

    def __init__(self, lines: dict, base_dir: Path | None, read_files: bool):
        self.lines = lines
        self.base_dir = base_dir
        self.read_files = read_files
        self.problems: list[SpecProblem] = []

    def note(self, path: tuple, message: str) -> None:
        while path and path not in self.lines:
            path = path[:-1]
        problem = SpecProblem(self.lines.get(path), message)
        if problem not in self.problems:
            self.problems.append(problem)

    def fail(self, path: tuple, message: str):
        self.note(path, message)
        raise _Stop

    @contextmanager
    def part(self):
        try:
            yield
        except _Stop:
            pass

    def check(self, path: tuple, parse, *args, **kwargs):
        """``parse(*args, **kwargs)`` (:mod:`scheduler.limits.checks`); its refusal fails at
        ``path``'s line."""
        try:
            return parse(*args, **kwargs)
        except ValueError as exc:
            self.fail(path, str(exc))

    def fields(self, path: tuple, value, allowed, what: str, *, also=()) -> dict:
        """The fields of ``value`` in ``allowed``; each other one is noted (``also``: noted
        elsewhere)."""
        if not isinstance(value, dict):
            self.fail(path, f"{what} must be a mapping of fields")
        for key in value:
            if key not in allowed and key not in also:
                self.note(path + (key,), f"unknown field {key!r} in {what}; allowed: "
                                         f"{', '.join(allowed)}")
        return {k: v for k, v in value.items() if k in allowed}

    def scenario_fields(self, path: tuple, value, what: str) -> dict:
        """A base's or arm's scenario fields; files are read relative to the spec, or refused
        where files of this machine are not to be read (the web)."""
        if value is None:
            return {}
        if isinstance(value, dict) and "seed" in value:
            self.note(path + ("seed",), f"seed cannot be set in {what}: a study's seeds come "
                                        "from 'seeds'")
        out = self.fields(path, value, SCENARIO_FIELDS, what, also=("seed",))
        for name, label in (("trace", "a trace file"), ("slurm_conf", "a slurm.conf")):
            given = out.get(name)
            if given is None:
                continue
            if not self.read_files:
                self.note(path + (name,), f"{what}: {label} is read by the command line "
                                          "(manage.py study run), not from the web")
                del out[name]
            elif isinstance(given, str) and self.base_dir is not None \
                    and not os.path.isabs(given):
                out[name] = str((self.base_dir / given).resolve())
        profile = out.get("failure_profile")
        if not self.read_files and profile is not None and profile not in PROFILES:
            self.note(path + ("failure_profile",),
                      f"{what}: a failure profile file is read by the command line; on the web "
                      f"choose one of {', '.join(PROFILES)}")
            del out["failure_profile"]
        return out

    def identity(self, data: dict) -> tuple[object, object, tuple[int, ...]]:
        """A spec's name, description and seeds, each mistake noted (seeds ``()`` then)."""
        name = data.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            self.note(("name",), "name must be 1-64 letters, digits, spaces or ._:+=- "
                                 f"(starting with a letter or digit), not {name!r}")
        description = data.get("description", "")
        if not isinstance(description, str):
            self.note(("description",), "description must be text")
        seeds: tuple[int, ...] = ()
        with self.part():
            seeds = self.seeds(data)
        return name, description, seeds

    def seeds(self, data: dict) -> tuple[int, ...]:
        seeds = data.get("seeds", None)
        if seeds is None:
            self.fail((), "seeds is missing: how many seeds each arm runs (at least 2)")
        first = self.check(("first_seed",), checks.integer, "first_seed",
                           data.get("first_seed", 0), at_least=0)
        if checks.is_integer(seeds):
            seeds = self.check(("seeds",), checks.integer, "seeds", seeds, at_least=2,
                               at_most=MAX_SEEDS, expect=f"between 2 and {MAX_SEEDS} (a "
                                                         "confidence interval needs at least 2)")
            return tuple(range(first, first + seeds))
        if isinstance(seeds, list):
            if "first_seed" in data:
                self.note(("first_seed",), "first_seed goes with a number of seeds, not a list")
            bad = [i for i, s in enumerate(seeds) if not checks.is_integer(s) or s < 0]
            for i in bad:
                self.note(("seeds", i), f"a seed is an integer >= 0, not {seeds[i]!r}")
            if bad or "first_seed" in data:
                raise _Stop
            if len(set(seeds)) != len(seeds):
                self.fail(("seeds",), "seeds are listed twice")
            if not 2 <= len(seeds) <= MAX_SEEDS:
                self.fail(("seeds",), f"list between 2 and {MAX_SEEDS} seeds (a confidence "
                                      "interval needs at least 2)")
            return tuple(seeds)
        self.fail(("seeds",), f"seeds must be a number of seeds or a list of seeds, not "
                              f"{seeds!r}")

    def scenario(self, path: tuple, options: dict, given: dict, fallback: dict, seed: int,
                 what: str) -> Scenario:
        """``Scenario(**options, seed=seed)``, every bad field noted at its own line.

        ``given`` maps each field to where it was written.  A field whose removal (back to
        ``fallback``'s value, or the default) makes the scenario's refusal go away is the one
        at fault: it is noted and set aside, and the scenario tried again for the next
        mistake.  A refusal no single field answers for is noted at ``path``."""
        missing = [n for n in STAND_IN if n not in options]
        if missing:
            self.fail(path, f"{what}: {' and '.join(missing)} missing (set in base or in "
                            "every arm)")
        opts, given, bad = dict(options), dict(given), False
        while True:
            message = _refusal(opts, seed)
            if message is None:
                break
            at_fault = [n for n in given
                        if _refusal(_set_aside(opts, n, fallback), seed) != message]
            if len(at_fault) != 1:
                self.fail(path, f"{what}: {message}")
            name = at_fault[0]
            self.note(given.pop(name), f"{what}: {message}")
            opts, bad = _set_aside(opts, name, fallback), True
        if bad:
            raise _Stop
        return Scenario(**opts, seed=seed)

    def arm(self, i: int, raw, base: dict, seed: int, names: list, *, values: bool,
            plan: bool) -> tuple[str, dict, dict] | None:
        """Arm ``i`` checked (its scenario's fields when ``values``, its cluster too when
        ``plan``): its name, changes and whole scenario options (``seed`` left out), for
        comparing with the others even when its name is used twice; ``None`` when its name
        or scenario has a mistake or was not checked.  Its valid name is added to
        ``names``."""
        path = ("arms", i)
        try:
            fields = self.fields(path, raw, ARM_FIELDS, f"arm {i + 1}")
            name, what = fields.get("name"), f"arm {i + 1}"
            named = isinstance(name, str) and bool(NAME.match(name))
            if not named:
                self.note(path + ("name",), f"arm {i + 1}: name must be 1-64 letters, digits, "
                                            f"spaces or ._:+=-, not {name!r}")
            elif name in names:
                self.note(path + ("name",), f"arm name {name!r} is used twice")
            else:
                what = f"arm {name!r}"
                names.append(name)
            mark = len(self.problems)
            changes = self.scenario_fields(path + ("set",), fields.get("set"), what)
            if not values or not named:
                return None
            given = {**{n: ("base", n) for n in base},
                     **{n: path + ("set", n) for n in changes}}
            scenario = self.scenario(path, {**base, **changes}, given, base, seed, what)
            if len(self.problems) > mark:  # a field left out: comparing would mislead
                return None
            if plan:
                try:
                    scenario.plan()
                except ScenarioError as exc:
                    self.fail(path, f"{what}: {exc}")
        except _Stop:
            return None
        resolved = scenario.options()
        resolved.pop("seed")
        return name, changes, resolved

    def same_scenarios(self, arms: Sequence[tuple[int, object]], *, baseline: bool) -> None:
        """Arms (``(index in the spec, arm)``) that run one scenario twice, or (``baseline``:
        the first is the baseline) change nothing from the baseline."""
        for k, (i, arm) in enumerate(arms):
            if baseline and k and arm.options == arms[0][1].options:
                self.note(("arms", i), f"arm {arm.name!r} changes nothing from the baseline "
                                       f"{arms[0][1].name!r}")
                continue
            for _, other in arms[1 if baseline else 0:k]:
                if arm.options == other.options:
                    self.note(("arms", i), f"arms {other.name!r} and {arm.name!r} run the "
                                           "same scenario")
                    break


def _refusal(options: dict, seed: int) -> str | None:
    """Why ``Scenario(**options, seed=seed)`` is refused (``None``: it is not)."""
    try:
        Scenario(**options, seed=seed)
    except (ScenarioError, TypeError) as exc:
        return str(exc)
    return None


def _set_aside(options: dict, name: str, fallback: dict) -> dict:
    out = dict(options)
    if name in fallback:
        out[name] = fallback[name]
    elif name in STAND_IN:
        out[name] = STAND_IN[name]
    else:
        del out[name]
    return out


def _tenant_figure(name) -> bool:
    return isinstance(name, str) and bool(re.match(r"^(wait_mean_h|jct_mean_h):.+$", name))


def figures_checked(c: SpecChecker, data: dict) -> list:
    """The figures asked for (default: every figure the spec can give), each unknown one
    noted."""
    known = figure_names()
    figures = data.get("figures")
    if figures is None:  # costs of energy need its price
        return [f for f in known if data.get("energy_price_usd_per_mwh") is not None
                or f not in ("energy_cost_usd", "cost_usd")]
    if not isinstance(figures, list) or not figures:
        c.note(("figures",), "figures must be a list of figure names (docs/studies.md)")
        return []
    for i, f in enumerate(figures):
        if f not in known and not _tenant_figure(f):
            c.note(("figures", i), f"unknown figure {f!r}; choose among: {', '.join(known)} "
                                   "(or wait_mean_h:TENANT, jct_mean_h:TENANT)")
    return figures


CHECKPOINT_BASES = ("equal", "optimum")
"""``checkpoint_intervals``: every arm at one interval in seconds, or each at its own
(``auto``: Daly's optimum for its checkpoint stall, never below the time its checkpoint takes
to become usable)."""


def checkpoint_basis(c: SpecChecker, data: dict, arms: Sequence) -> str | None:
    """The line that says how the arms' checkpoint intervals compare (``intervals: equal (60.0
    min)``, ``intervals: each mode's optimum (Daly)``), checked against ``checkpoint_intervals``
    when the spec asks for one basis; None when the arms neither ask nor differ in recovery."""
    asked = data.get("checkpoint_intervals")
    if asked is not None and asked not in CHECKPOINT_BASES:
        c.note(("checkpoint_intervals",), f"checkpoint_intervals must be equal or optimum, "
                                          f"not {asked!r}")
        return None
    if not arms:
        return None
    given = {a.name: a.options.get("checkpoint_interval", "auto") for a in arms}
    given = {n: "auto" if v is None else v for n, v in given.items()}
    seconds = {v for v in given.values() if not isinstance(v, str)}
    if asked == "equal":
        words = [n for n, v in given.items() if isinstance(v, str)]
        if words:
            c.note(("checkpoint_intervals",), "checkpoint_intervals: equal needs one "
                   "checkpoint_interval in seconds for every arm (set it in base); arm "
                   f"{words[0]!r} has {given[words[0]]!r}")
            return None
        if len(seconds) > 1:
            c.note(("checkpoint_intervals",), "checkpoint_intervals: equal needs the same "
                   "checkpoint_interval in every arm, not "
                   f"{', '.join(f'{v:g}' for v in sorted(seconds))} s")
            return None
    if asked == "optimum":
        other = [n for n, v in given.items() if v != "auto"]
        if other:
            c.note(("checkpoint_intervals",), "checkpoint_intervals: optimum runs each arm at "
                   f"its own (auto) interval; arm {other[0]!r} sets checkpoint_interval "
                   f"{given[other[0]]!r}")
            return None
    if asked is None and len({a.options.get("recovery") for a in arms}) < 2:
        return None
    values = set(given.values())
    if values == {"auto"}:
        return "intervals: each mode's optimum (Daly)"
    if len(values) == 1 and seconds:
        return f"intervals: equal ({next(iter(seconds)) / 60:,.1f} min)"
    if values == {"job"}:
        return "intervals: each job's own (the same in every arm)"
    return "intervals: differ between arms (" + ", ".join(
        f"{n} {v if isinstance(v, str) else f'{v:g} s'}" for n, v in given.items()) + ")"
