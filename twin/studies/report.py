"""A study's results as files: JSON, CSV and a self-contained HTML report.

``results.json`` holds the spec, every run's figures and the summary
(:func:`scheduler.study.summary.summarise`); it is the same for the same spec and seeds
whichever machine ran them (wall times and workers are in ``timing.json``).  ``arms.csv``,
``paired.csv`` and ``runs.csv`` are for spreadsheets; ``report.html`` opens offline: Plotly
is written into it from the installed ``plotly`` package, never fetched from a CDN.
"""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

from scheduler.study.spec import StudySpec
from scheduler.study.summary import summarise
from twin.studies.runner import StudyOutcome


def results(spec: StudySpec, outcome: StudyOutcome) -> dict:
    return {"study": spec.name, "description": spec.description, "spec": spec.source,
            "seeds": list(spec.seeds), "arms": [{"name": a.name, "changes": a.changes,
                                                 "options": a.options} for a in spec.arms],
            "runs": [{"arm": r.arm, "seed": r.seed, "status": "failed" if r.status == "failed"
                      else "done", "figures": r.figures, "error": r.error}
                     for r in outcome.records],
            "summary": summarise(spec, outcome.values())}


def write_all(spec: StudySpec, outcome: StudyOutcome, out: str | Path) -> dict:
    """Write results.json, timing.json, arms.csv, paired.csv, runs.csv and report.html."""
    out = Path(out)
    res = results(spec, outcome)
    (out / "results.json").write_text(json.dumps(res, indent=1, sort_keys=True))
    (out / "timing.json").write_text(json.dumps(
        {"where": outcome.where, "ran": outcome.ran, "kept": outcome.kept,
         "failed": outcome.failed,
         "runs": [{"arm": r.arm, "seed": r.seed, "wall_s": r.wall_s, "worker": r.worker}
                  for r in outcome.records]}, indent=1))
    summary = res["summary"]
    with open(out / "arms.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arm", "figure", "unit", "n", "mean", "ci95_low", "ci95_high", "sd"])
        units = {f["name"]: f["unit"] for f in summary["figures"]}
        for arm in summary["arms"]:
            for name, i in arm["figures"].items():
                w.writerow([arm["name"], name, units[name], i["n"], i["mean"], i["low"],
                            i["high"], i["sd"]])
    with open(out / "paired.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arm", "baseline", "figure", "n_common_seeds", "mean_difference",
                    "ci95_low", "ci95_high", "relative", "verdict"])
        for row in summary["paired"]:
            for name, d in row["figures"].items():
                w.writerow([row["arm"], summary["baseline"], name, d["n"], d["mean"], d["low"],
                            d["high"], d["relative"], d["verdict"]])
    with open(out / "runs.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arm", "seed", "status", *spec.figures, "error"])
        for r in res["runs"]:
            w.writerow([r["arm"], r["seed"], r["status"],
                        *[r["figures"].get(f) for f in spec.figures], r["error"]])
    (out / "report.html").write_text(report_html(res), encoding="utf-8")
    return res


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "–"
    if unit == "fraction":
        return f"{100 * v:.2f} %"
    a = abs(v)
    return f"{v:,.0f}" if a >= 1000 else f"{v:,.2f}" if a >= 1 else f"{v:.4g}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def report_html(res: dict) -> str:
    """The report page: tables of intervals and verdicts, one chart per figure."""
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs

    s = res["summary"]
    figs = s["figures"]
    arm_rows = []
    for arm in s["arms"]:
        for f in figs:
            i = arm["figures"][f["name"]]
            ci = "" if i["low"] is None else \
                f"[{_fmt(i['low'], f['unit'])}, {_fmt(i['high'], f['unit'])}]"
            arm_rows.append([html.escape(arm["name"]), html.escape(f["label"]),
                             html.escape(f["unit"]), str(i["n"]), _fmt(i["mean"], f["unit"]), ci])
    paired_rows = []
    for row in s["paired"]:
        for f in figs:
            d = row["figures"][f["name"]]
            ci = "" if d["low"] is None else \
                f"[{_fmt(d['low'], f['unit'])}, {_fmt(d['high'], f['unit'])}]"
            rel = "" if d["relative"] is None else f"{100 * d['relative']:+.2f} %"
            paired_rows.append([html.escape(row["arm"]), html.escape(f["label"]), str(d["n"]),
                                _fmt(d["mean"], f["unit"]), ci, rel,
                                f'<span class="v-{d["verdict"].replace(" ", "-")}">'
                                f'{html.escape(d["verdict"])}</span>'])
    charts = []
    for f in figs:
        names = [a["name"] for a in s["arms"]]
        means = [a["figures"][f["name"]]["mean"] for a in s["arms"]]
        if all(m is None for m in means):
            continue
        up = [None if a["figures"][f["name"]]["high"] is None else
              a["figures"][f["name"]]["high"] - a["figures"][f["name"]]["mean"]
              for a in s["arms"]]
        fig = go.Figure(go.Scatter(x=names, y=means, mode="markers",
                                   error_y={"type": "data", "array": up, "visible": True}))
        fig.update_layout(title=f"{f['label']} ({f['unit']}): mean and 95 % CI per arm",
                          height=320, margin={"l": 60, "r": 20, "t": 50, "b": 40},
                          template="plotly_white")
        charts.append(fig.to_html(full_html=False, include_plotlyjs=False))
    failed = [r for r in res["runs"] if r["status"] == "failed"]
    failed_html = "" if not failed else "<h2>Failed runs</h2>" + _table(
        ["arm", "seed", "error"],
        [[html.escape(r["arm"]), str(r["seed"]), html.escape(r["error"])] for r in failed])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Study {html.escape(res['study'])}</title>
<style>body{{font:14px system-ui,sans-serif;margin:2em;max-width:1200px}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;
text-align:right}}td:first-child,td:nth-child(2){{text-align:left}}
.v-better{{color:#137333;font-weight:600}}.v-worse{{color:#b3261e;font-weight:600}}</style>
<script>{get_plotlyjs()}</script></head><body>
<h1>Study {html.escape(res['study'])}</h1><p>{html.escape(res['description'])}</p>
<p>{len(res['arms'])} arms × {len(res['seeds'])} seeds; baseline
<b>{html.escape(s['baseline'])}</b>; intervals are {int(100 * s['level'])} % Student t;
differences are paired on common seeds (each seed meets the same jobs in every arm).</p>
<h2>Against the baseline</h2>{_table(['arm', 'figure', 'seeds', 'difference', '95 % CI',
                                      'relative', 'verdict'], paired_rows)}
<h2>Per arm</h2>{_table(['arm', 'figure', 'unit', 'seeds', 'mean', '95 % CI'], arm_rows)}
{failed_html}<h2>Charts</h2>{''.join(charts)}
</body></html>"""
