"""How the Events page lays out a page of events: a preemption wave (preemptions at one
simulated instant, next to each other in the log) is one row; the kind choices are listed
with their counts, most serious first."""

from __future__ import annotations

from twin.api.events import SEVERITIES, kind_info

WAVE_KINDS = frozenset({"preempt"})
"""Kinds whose lines at one instant make one row."""


def waves(events: list[dict]) -> list[dict]:
    """Rows of the table: single events as they are (``count`` 1), runs of wave kinds at one
    time as one row with ``count``, their jobs together and their ``members``."""
    rows: list[dict] = []
    for e in events:
        last = rows[-1] if rows else None
        if (last is not None and e["kind"] in WAVE_KINDS and last["kind"] == e["kind"]
                and last["t"] == e["t"]):
            last["count"] += 1
            last["last_seq"] = e["seq"]
            last["members"].append(e)
            last["jobs"] = list(dict.fromkeys(last["jobs"] + e["jobs"]))
            continue
        rows.append({**e, "count": 1, "members": [e], "last_seq": e["seq"]})
    return rows


def kind_choices(counts: dict[str, int], *, chosen: str = "") -> list[dict]:
    """The kinds this log holds (and the chosen one), most serious first, then the commonest."""
    kinds = dict(counts)
    if chosen:
        kinds.setdefault(chosen, 0)
    rank = {s: k for k, s in enumerate(SEVERITIES)}
    out = [{"kind": k, "count": n, "severity": kind_info(k).severity,
            "routine": kind_info(k).routine} for k, n in kinds.items()]
    out.sort(key=lambda c: (-rank[c["severity"]], c["routine"], -c["count"], c["kind"]))
    return out
