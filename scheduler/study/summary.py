"""A study's runs reduced to per-arm intervals, paired differences and verdicts."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.stats import LEVEL, mean_ci, paired, verdict
from scheduler.study.figures import Figure, figure
from scheduler.study.spec import StudySpec


def summarise(spec: StudySpec, values: dict[tuple[str, int], dict[str, float | None]]) -> dict:
    """:func:`summarise_values` of a spec's arms, seeds and figures, with the line that says
    how their checkpoint intervals compare (``checkpoint_intervals``) where the spec has one."""
    out = summarise_values([(a.name, a.changes) for a in spec.arms], spec.seeds,
                           [figure(n) for n in spec.figures], values)
    if spec.checkpoint_basis is not None:
        out["checkpoint_intervals"] = spec.checkpoint_basis
    return out


def summarise_values(arms: Sequence[tuple[str, dict]], seeds: Sequence[int],
                     figs: Sequence[Figure],
                     values: dict[tuple[str, int], dict[str, float | None]]) -> dict:
    """Per arm and figure: mean and interval; against the baseline: the paired difference.

    Parameters
    ----------
    arms : sequence of (name, changes)
        The arms, the baseline first.
    seeds : sequence of int
        The seeds each arm was asked to run.
    figs : sequence of Figure
        What to compare (name, unit, which way is better).
    values : dict
        ``{(arm name, seed): {figure: value}}`` of the runs that finished (a failed run is
        simply absent: its arm has fewer seeds, the pairs fewer common seeds).

    Returns
    -------
    dict
        JSON-safe: ``{"level", "baseline", "figures": [{name, label, unit, better}],
        "arms": [{"name", "changes", "runs", "figures": {name: interval}}],
        "paired": [{"arm", "figures": {name: {**interval, "verdict", "relative"}}}]}``.
    """
    per_arm: dict[str, dict[str, dict[int, float | None]]] = {}
    for name, _ in arms:
        per_arm[name] = {f.name: {s: values[(name, s)].get(f.name)
                                  for s in seeds if (name, s) in values} for f in figs}
    base = arms[0][0]
    arms_out, paired_out = [], []
    for name, changes in arms:
        runs = sum(1 for s in seeds if (name, s) in values)
        arms_out.append({"name": name, "changes": changes, "runs": runs,
                         "figures": {f.name: mean_ci(per_arm[name][f.name].values()).as_dict()
                                     for f in figs}})
        if name == base:
            continue
        row = {}
        for f in figs:
            d = paired(per_arm[name][f.name], per_arm[base][f.name])
            base_mean = mean_ci(per_arm[base][f.name].values()).mean
            row[f.name] = {**d.as_dict(), "verdict": verdict(d, f.better),
                           "relative": (d.mean / abs(base_mean)
                                        if d.mean is not None and base_mean else None)}
        paired_out.append({"arm": name, "figures": row})
    return {"level": LEVEL, "baseline": base,
            "figures": [{"name": f.name, "label": f.label, "unit": f.unit, "better": f.better}
                        for f in figs],
            "arms": arms_out, "paired": paired_out}
