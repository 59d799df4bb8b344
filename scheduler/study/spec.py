"""A study spec: a base scenario, arms that change it, seeds per arm, figures to compare.

A spec is YAML (or JSON, which YAML reads) and is documented in ``docs/studies.md``::

    name: oversubscription
    base: {preset: llama3-16k, days: 54}
    seeds: 8                 # seeds 0..7 (or a list of seeds; first_seed moves the start)
    baseline: one-to-one     # default: the first arm
    arms:
      - name: one-to-one
        set: {oversubscription: 1}
      - name: one-to-seven
        set: {oversubscription: 7}
    figures: [mfu, ettr, goodput, wait_mean_h]   # default: every figure

:func:`load_spec` checks everything before any run starts: unknown fields, values outside a
scenario field's bounds, an arm that changes nothing (or runs the same scenario as another),
and a cluster an arm cannot build (its fabric at its size) are one :class:`SpecError` whose
message names the file and line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from scheduler.limits import checks
from scheduler.simulate import Scenario, ScenarioError
from scheduler.study.figures import figure_names

SCENARIO_FIELDS = tuple(f.name for f in dataclasses.fields(Scenario) if f.name != "seed")
"""What ``base`` and an arm's ``set`` may name: every :class:`~scheduler.simulate.Scenario`
field except ``seed`` (a study's seeds come from ``seeds``)."""
TOP_FIELDS = ("name", "description", "base", "seeds", "first_seed", "baseline", "arms",
              "figures", "energy_price_usd_per_mwh")
ARM_FIELDS = ("name", "set", "description")
MAX_SEEDS = 1000
MAX_RUNS = 20_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:+=-]{0,63}$")


class SpecError(ValueError):
    """A study spec that cannot run: one line naming the file and line where it can."""


@dataclass(frozen=True)
class Arm:
    """One arm: its name, the fields it sets over the base, and the scenario options."""

    name: str
    changes: dict
    options: dict
    """The whole :class:`~scheduler.simulate.Scenario` (base + changes), ``seed`` left out."""

    def scenario(self, seed: int) -> Scenario:
        return Scenario(**self.options, seed=seed)

    def key(self, seed: int) -> str:
        """A short digest of the options and seed: a stored run is reused only for the same
        scenario."""
        text = json.dumps({**self.options, "seed": seed}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name)


@dataclass(frozen=True)
class StudySpec:
    """A checked study: arms (the baseline first), seeds, figures."""

    name: str
    arms: tuple[Arm, ...]
    seeds: tuple[int, ...]
    figures: tuple[str, ...]
    description: str = ""
    energy_price_usd_per_mwh: float | None = None
    source: dict = field(default_factory=dict, compare=False)
    """The spec as written (JSON-safe), kept with the results."""

    @property
    def baseline(self) -> Arm:
        return self.arms[0]

    def runs(self) -> list[tuple[Arm, int]]:
        """Every (arm, seed), arm by arm."""
        return [(arm, seed) for arm in self.arms for seed in self.seeds]


# ------------------------------------------------------------------ YAML with lines
def _plain(node, path: tuple, lines: dict):
    """A composed YAML node as plain Python, recording each value's line under its path."""
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in node.value:
            key = yaml.safe_load(yaml.serialize(key_node))
            if not isinstance(key, str):
                raise SpecError(f"line {key_node.start_mark.line + 1}: field names are text, "
                                f"not {key!r}")
            if key in out:
                raise SpecError(f"line {key_node.start_mark.line + 1}: {key!r} given twice")
            lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = _plain(value_node, path + (key,), lines)
            lines[path + (key,)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_plain(v, path + (i,), lines) for i, v in enumerate(node.value)]
    return yaml.safe_load(yaml.serialize(node))


def parse_text(text: str) -> tuple[dict, dict]:
    """The spec's text as a dict and the line of every field (``{path: line}``)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{where}not valid YAML or JSON ({problem})") from None
    if node is None:
        raise SpecError("the spec is empty")
    lines: dict = {}
    data = _plain(node, (), lines)
    if not isinstance(data, dict):
        raise SpecError("line 1: a spec is a mapping with name, base, seeds and arms")
    return data, lines


# ------------------------------------------------------------------ checking
class _Checker:
    def __init__(self, lines: dict, base_dir: Path | None):
        self.lines = lines
        self.base_dir = base_dir

    def fail(self, path: tuple, message: str):
        while path and path not in self.lines:
            path = path[:-1]
        line = self.lines.get(path)
        raise SpecError(f"line {line}: {message}" if line else message)

    def check(self, path: tuple, parse, *args, **kwargs):
        """``parse(*args, **kwargs)`` (:mod:`scheduler.limits.checks`); its refusal fails at
        ``path``'s line."""
        try:
            return parse(*args, **kwargs)
        except ValueError as exc:
            self.fail(path, str(exc))

    def fields(self, path: tuple, value, allowed, what: str) -> dict:
        if not isinstance(value, dict):
            self.fail(path, f"{what} must be a mapping of fields")
        for key in value:
            if key not in allowed:
                self.fail(path + (key,), f"unknown field {key!r} in {what}; allowed: "
                                         f"{', '.join(allowed)}")
        return value

    def scenario_fields(self, path: tuple, value, what: str) -> dict:
        if value is None:
            return {}
        if isinstance(value, dict) and "seed" in value:
            self.fail(path + ("seed",), f"seed cannot be set in {what}: a study's seeds come "
                                        "from 'seeds'")
        out = dict(self.fields(path, value, SCENARIO_FIELDS, what))
        for name in ("trace", "slurm_conf"):  # files: relative to the spec's folder
            given = out.get(name)
            if isinstance(given, str) and self.base_dir is not None \
                    and not os.path.isabs(given):
                out[name] = str((self.base_dir / given).resolve())
        return out

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
                self.fail(("first_seed",), "first_seed goes with a number of seeds, not a list")
            for i, s in enumerate(seeds):
                if not checks.is_integer(s) or s < 0:
                    self.fail(("seeds", i), f"a seed is an integer >= 0, not {s!r}")
            if len(set(seeds)) != len(seeds):
                self.fail(("seeds",), "seeds are listed twice")
            if not 2 <= len(seeds) <= MAX_SEEDS:
                self.fail(("seeds",), f"list between 2 and {MAX_SEEDS} seeds (a confidence "
                                      "interval needs at least 2)")
            return tuple(seeds)
        self.fail(("seeds",), f"seeds must be a number of seeds or a list of seeds, not "
                              f"{seeds!r}")

    def scenario(self, path: tuple, options: dict, seed: int, what: str) -> Scenario:
        try:
            scenario = Scenario(**options, seed=seed)
            scenario.plan()
        except ScenarioError as exc:
            self.fail(path, f"{what}: {exc}")
        return scenario


def check_spec(data: dict, lines: dict | None = None, *,
               base_dir: str | os.PathLike | None = None) -> StudySpec:
    """``data`` (a parsed spec) checked into a :class:`StudySpec`; :class:`SpecError` else.

    Every arm's scenario is built and its cluster planned here, so a fabric the cluster's
    size cannot build fails before any run starts.

    Examples
    --------
    >>> check_spec({"name": "x", "base": {"preset": "dev-small", "days": 1}, "seeds": 2,
    ...             "arms": [{"name": "a"}, {"name": "b", "set": {"policy": "default"}}]})
    Traceback (most recent call last):
    ...
    scheduler.study.spec.SpecError: arm 'b' changes nothing from the baseline 'a'
    """
    c = _Checker(lines or {}, None if base_dir is None else Path(base_dir))
    c.fields((), data, TOP_FIELDS, "the spec")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        c.fail(("name",), "name must be 1-64 letters, digits, spaces or ._:+=- (starting with "
                          f"a letter or digit), not {name!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        c.fail(("description",), "description must be text")
    if "base" not in data:
        c.fail((), "base is missing: the scenario every arm starts from (preset, days …)")
    base = c.scenario_fields(("base",), data["base"], "base")
    seeds = c.seeds(data)
    arms_in = data.get("arms")
    if not isinstance(arms_in, list) or len(arms_in) < 2:
        c.fail(("arms",), "arms must be a list of at least 2 arms, each with a name and the "
                          "fields it sets")
    if len(arms_in) * len(seeds) > MAX_RUNS:
        c.fail(("arms",), f"{len(arms_in)} arms x {len(seeds)} seeds is more than "
                          f"{MAX_RUNS:,} runs")
    arms: list[Arm] = []
    for i, raw in enumerate(arms_in):
        path = ("arms", i)
        c.fields(path, raw, ARM_FIELDS, f"arm {i + 1}")
        arm_name = raw.get("name")
        if not isinstance(arm_name, str) or not _NAME.match(arm_name):
            c.fail(path + ("name",), f"arm {i + 1}: name must be 1-64 letters, digits, spaces "
                                     f"or ._:+=-, not {arm_name!r}")
        if any(a.name == arm_name for a in arms):
            c.fail(path + ("name",), f"arm name {arm_name!r} is used twice")
        changes = c.scenario_fields(path + ("set",), raw.get("set"), f"arm {arm_name!r}")
        options = {**base, **changes}
        scenario = c.scenario(path, options, seeds[0], f"arm {arm_name!r}")
        resolved = scenario.options()
        resolved.pop("seed")
        arms.append(Arm(name=arm_name, changes=changes, options=resolved))
    baseline = data.get("baseline", arms[0].name)
    names = [a.name for a in arms]
    if baseline not in names:
        c.fail(("baseline",), f"baseline {baseline!r} is not an arm ({', '.join(names)})")
    b = names.index(baseline)
    arms.insert(0, arms.pop(b))
    for i, arm in enumerate(arms[1:], 1):
        if arm.options == arms[0].options:
            c.fail(("arms", _raw_index(arms_in, arm.name)),
                   f"arm {arm.name!r} changes nothing from the baseline {arms[0].name!r}")
        for other in arms[1:i]:
            if arm.options == other.options:
                c.fail(("arms", _raw_index(arms_in, arm.name)),
                       f"arms {other.name!r} and {arm.name!r} run the same scenario")
    known = figure_names()
    figures = data.get("figures")
    if figures is None:  # every figure the spec can give (costs of energy need its price)
        figures = [f for f in known if data.get("energy_price_usd_per_mwh") is not None
                   or f not in ("energy_cost_usd", "cost_usd")]
    if not isinstance(figures, list) or not figures:
        c.fail(("figures",), "figures must be a list of figure names (docs/studies.md)")
    for i, f in enumerate(figures):
        if f not in known and not _tenant_figure(f):
            c.fail(("figures", i), f"unknown figure {f!r}; choose among: {', '.join(known)} "
                                   "(or wait_mean_h:TENANT, jct_mean_h:TENANT)")
    price = c.check(("energy_price_usd_per_mwh",), checks.optional, checks.number,
                    "energy_price_usd_per_mwh", data.get("energy_price_usd_per_mwh"),
                    at_least=0, at_most=10_000, expect="a number in [0, 10000]")
    if price is None and ("energy_cost_usd" in figures or "cost_usd" in figures):
        c.fail(("figures",), "energy_cost_usd and cost_usd need energy_price_usd_per_mwh "
                             "(USD per MWh)")
    return StudySpec(name=name, arms=tuple(arms), seeds=seeds, figures=tuple(figures),
                     description=description,
                     energy_price_usd_per_mwh=None if price is None else float(price),
                     source=json.loads(json.dumps(data, default=str)))


def _raw_index(arms_in: list, name: str) -> int:
    return next(i for i, a in enumerate(arms_in) if a.get("name") == name)


def _tenant_figure(name) -> bool:
    return isinstance(name, str) and bool(re.match(r"^(wait_mean_h|jct_mean_h):.+$", name))


def load_spec_text(text: str, *, base_dir: str | os.PathLike | None = None,
                   origin: str = "spec") -> StudySpec:
    """A spec from its text; errors read ``ORIGIN: line N: ...``."""
    try:
        data, lines = parse_text(text)
        return check_spec(data, lines, base_dir=base_dir)
    except SpecError as exc:
        raise SpecError(f"{origin}: {exc}") from None


def load_spec(path: str | os.PathLike) -> StudySpec:
    """A spec file (YAML or JSON); a ``trace`` in it is read relative to the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: cannot be read ({exc.__class__.__name__})") from None
    return load_spec_text(text, base_dir=p.resolve().parent, origin=str(p))
