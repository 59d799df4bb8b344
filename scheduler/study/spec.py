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
    checkpoint_intervals: equal   # or optimum: how arms that differ in recovery compare

:func:`load_spec` checks everything before any run starts: unknown fields, values outside a
scenario field's bounds, an arm that changes nothing (or runs the same scenario as another),
and a cluster an arm cannot build (its fabric at its size).  Every mistake found is reported
at once, in one :class:`SpecError` that names the file and each mistake's line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from scheduler.limits import checks
from scheduler.limits.documents import DocumentError, text_read, yaml_compose, yaml_value
from scheduler.simulate import Scenario
from scheduler.study.grid import GridResolver, check_grid
from scheduler.study.spec_checks import (
    ARM_FIELDS,
    MAX_RUNS,
    MAX_SEEDS,
    SCENARIO_FIELDS,
    STAND_IN,
    TOP_FIELDS,
    SpecChecker,
    SpecError,
    SpecProblem,
    checkpoint_basis,
    figures_checked,
)

__all__ = ["ARM_FIELDS", "MAX_RUNS", "MAX_SEEDS", "SCENARIO_FIELDS", "TOP_FIELDS", "Arm",
           "SpecError", "SpecProblem", "StudySpec", "check_spec", "load_spec",
           "load_spec_text", "parse_text"]

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
    checkpoint_basis: str | None = None
    """How the arms' checkpoint intervals compare, in words (``intervals: equal (60.0 min)``,
    ``intervals: each mode's optimum (Daly)``); None where the arms do not differ in recovery
    and the spec asks nothing (``checkpoint_intervals``)."""
    source: dict = field(default_factory=dict, compare=False)
    """The spec as written (JSON-safe), kept with the results."""
    grid: tuple | None = field(default=None, compare=False, repr=False)
    """A study on a grid of the inventory: its ``(GridSpec, plans)``, read when the spec was
    checked and handed to every run (:mod:`scheduler.study.grid`); None otherwise."""

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
            key = yaml_value(key_node)
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
    return yaml_value(node)


SPEC_MAX_BYTES = 256_000
"""A spec's size at most: a shipped spec is under 2 kB, and reading YAML costs about 1.6 CPU s
a MB here (an 0.85 MB spec took 1.4 s), so every spec accepted is read within 1 CPU s."""


def parse_text(text: str) -> tuple[dict, dict]:
    """The spec's text as a dict and the line of every field (``{path: line}``).

    Read with the bounds of :mod:`scheduler.limits.documents` but at most
    :data:`SPEC_MAX_BYTES`: nested at most 64 deep, no anchors or aliases (a 9-line alias
    bomb is refused at its first anchor)."""
    try:
        node = yaml_compose(text, what="the spec", max_bytes=SPEC_MAX_BYTES)
        if node is None:
            raise SpecError("the spec is empty")
        lines: dict = {}
        data = _plain(node, (), lines)
    except DocumentError as exc:
        raise SpecError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{where}not valid YAML or JSON ({problem})") from None
    if not isinstance(data, dict):
        raise SpecError("line 1: a spec is a mapping with name, base, seeds and arms")
    return data, lines


# ------------------------------------------------------------------ checking
def check_spec(data: dict, lines: dict | None = None, *,
               base_dir: str | os.PathLike | None = None,
               read_files: bool = True, grids: GridResolver | None = None) -> StudySpec:
    """``data`` (a parsed spec) checked into a :class:`StudySpec`; :class:`SpecError` else,
    with every mistake found, each at its line (``lines``, from :func:`parse_text`).

    Every arm's scenario is built and its cluster planned here, so a fabric the cluster's
    size cannot build fails before any run starts.  ``read_files=False`` (the web) refuses
    the fields that name files of this machine (``trace``, ``slurm_conf``, a failure
    profile's ``.toml``) before anything looks at them.  A spec naming a ``grid`` is a grid
    study (:mod:`scheduler.study.grid`): a grid preset, or a grid of the inventory read by
    ``grids`` (``name -> (GridSpec, plans, stored settings)``; without it only presets).

    Examples
    --------
    >>> check_spec({"name": "x", "base": {"preset": "dev-small", "days": 1}, "seeds": 2,
    ...             "arms": [{"name": "a"}, {"name": "b", "set": {"policy": "default"}}]})
    Traceback (most recent call last):
    ...
    scheduler.study.spec_checks.SpecError: arm 'b' changes nothing from the baseline 'a'
    >>> try:
    ...     check_spec({"name": "x", "base": {"preset": "dev-small", "days": 1}, "seeds": 1,
    ...                 "arms": [{"name": "a"}, {"name": "b", "set": {"policy": "nope"}}]})
    ... except SpecError as exc:
    ...     [p.message[:23] for p in exc.problems]
    ['seeds must be between 2', "arm 'b': unknown policy"]
    """
    c = SpecChecker(lines or {}, None if base_dir is None else Path(base_dir), read_files)
    if not isinstance(data, dict):
        raise SpecError("the spec must be a mapping of fields (name, base, seeds, arms)")
    if "grid" in data:
        return _grid_spec(c, data, grids)
    c.fields((), data, TOP_FIELDS, "the spec")
    name, description, seeds = c.identity(data)
    seed = seeds[0] if seeds else 0
    # the base: its fields, then (when it names preset and days) its values on their own
    mark, base, values = len(c.problems), {}, False
    with c.part():
        if "base" not in data:
            c.fail((), "base is missing: the scenario every arm starts from (preset, days …)")
        base = c.scenario_fields(("base",), data["base"], "base")
        if all(n in base for n in STAND_IN):
            c.scenario(("base",), base, {n: ("base", n) for n in base}, {}, seed, "base")
        values = True
    clean = values and len(c.problems) == mark
    # the arms: each on its own, their clusters built once base is right (a misspelt base
    # field would make an arm's cluster wrong), their scenarios compared
    arms_in, resolved, names = data.get("arms"), [], []
    if not isinstance(arms_in, list) or len(arms_in) < 2:
        c.note(("arms",), "arms must be a list of at least 2 arms, each with a name and the "
                          "fields it sets")
        arms_in = arms_in if isinstance(arms_in, list) else []
    elif seeds and len(arms_in) * len(seeds) > MAX_RUNS:
        c.note(("arms",), f"{len(arms_in)} arms x {len(seeds)} seeds is more than "
                          f"{MAX_RUNS:,} runs")
    for i, raw in enumerate(arms_in):
        checked = c.arm(i, raw, base, seed, names, values=values, plan=clean)
        if checked is not None:
            resolved.append((i, Arm(*checked)))
    baseline = data.get("baseline", names[0] if names else None)
    if "baseline" in data and baseline not in names:
        c.note(("baseline",), f"baseline {baseline!r} is not an arm ({', '.join(names)})")
    first = next((k for k, (_, a) in enumerate(resolved) if a.name == baseline), None)
    if first is not None:
        resolved.insert(0, resolved.pop(first))
    c.same_scenarios(resolved, baseline=first is not None)
    arms = [a for _, a in resolved]
    figures = figures_checked(c, data)
    price = None
    with c.part():
        price = c.check(("energy_price_usd_per_mwh",), checks.optional, checks.number,
                        "energy_price_usd_per_mwh", data.get("energy_price_usd_per_mwh"),
                        at_least=0, at_most=10_000, expect="a number in [0, 10000]")
        if price is None and ("energy_cost_usd" in figures or "cost_usd" in figures):
            c.note(("figures",), "energy_cost_usd and cost_usd need energy_price_usd_per_mwh "
                                 "(USD per MWh)")
    basis = checkpoint_basis(c, data, arms)
    if c.problems:
        raise SpecError(problems=sorted(c.problems, key=lambda p: p.line or 0))
    return StudySpec(name=name, arms=tuple(arms), seeds=seeds, figures=tuple(figures),
                     description=description,
                     energy_price_usd_per_mwh=None if price is None else float(price),
                     checkpoint_basis=basis, source=json.loads(json.dumps(data, default=str)))


def _grid_spec(c: SpecChecker, data: dict, grids: GridResolver | None) -> StudySpec:
    """A grid study (:func:`scheduler.study.grid.check_grid`), or every mistake at once."""
    out = check_grid(c, data, grids)
    if c.problems:
        raise SpecError(problems=sorted(c.problems, key=lambda p: p.line or 0))
    return StudySpec(name=out["name"], arms=tuple(Arm(*a) for a in out["arms"]),
                     seeds=out["seeds"], figures=tuple(out["figures"]),
                     description=out["description"],
                     source=json.loads(json.dumps(data, default=str)), grid=out["grid"])


def load_spec_text(text: str, *, base_dir: str | os.PathLike | None = None,
                   origin: str = "spec", read_files: bool = True,
                   grids: GridResolver | None = None) -> StudySpec:
    """A spec from its text; errors read ``ORIGIN: line N: ...`` (:func:`check_spec`)."""
    try:
        data, lines = parse_text(text)
        return check_spec(data, lines, base_dir=base_dir, read_files=read_files, grids=grids)
    except SpecError as exc:
        raise exc.at(origin) from None


def load_spec(path: str | os.PathLike, *, grids: GridResolver | None = None) -> StudySpec:
    """A spec file (YAML or JSON); a ``trace`` in it is read relative to the file; ``grids``
    reads a grid of the inventory a grid study names (:func:`check_spec`)."""
    p = Path(path)
    try:
        text = text_read(p, what="the spec", max_bytes=SPEC_MAX_BYTES)
    except DocumentError as exc:
        raise SpecError(f"{p}: {exc}") from None
    except FileNotFoundError:
        raise SpecError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: cannot be read ({exc.__class__.__name__})") from None
    return load_spec_text(text, base_dir=p.resolve().parent, origin=str(p), grids=grids)
