"""How the Events page lays out a page of events: a preemption wave (preemptions at one
simulated instant, next to each other in the log) is one row; the kind choices are listed
with their counts, most serious first; components and jobs are shown by name, linked to
their pages."""

from __future__ import annotations

import re

from twin.api.events import SEVERITIES, kind_info
from twin.inventory.names import COMPONENT_KINDS, Names, job_url

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


# ----------------------------------------------------------------- names and links
_UNIT = re.compile(r"(?<![\w-])(" + "|".join(sorted(COMPONENT_KINDS, key=len, reverse=True))
                   + r") (\d+)(?![\w.])")
"""A component named by its engine id inside an event's text (``host 100``, ``rack 3``)."""


def _job_pattern(names: list[str]) -> re.Pattern | None:
    names = [n for n in names if n]
    if not names:
        return None
    return re.compile(r"(?<![\w-])(" + "|".join(re.escape(n) for n in
                                                sorted(names, key=len, reverse=True))
                      + r")(?![\w-])")


def linked_text(text: str, *, names: Names, jobs: list[str]) -> list[tuple[str, str]]:
    """``text`` as ``(text, url)`` pieces: each component named by its id (``host 100``)
    replaced by its name and linked to its page, each of ``jobs`` linked to its page
    (``url`` ``""``: plain text)."""
    spans: list[tuple[int, int, str, str]] = []
    for m in _UNIT.finditer(text):
        named = names.of(COMPONENT_KINDS[m.group(1)], int(m.group(2)))
        if named is not None:
            spans.append((m.start(), m.end(), named.name, named.url))
    pattern = _job_pattern(jobs)
    if pattern is not None:
        spans += [(m.start(), m.end(), m.group(1), job_url(m.group(1)))
                  for m in pattern.finditer(text)]
    spans.sort()
    pieces: list[tuple[str, str]] = []
    at = 0
    for start, end, label, url in spans:
        if start < at:  # overlapping matches: the first wins
            continue
        if start > at:
            pieces.append((text[at:start], ""))
        pieces.append((label, url))
        at = end
    if at < len(text):
        pieces.append((text[at:], ""))
    return pieces


def named(events: list[dict], *, names: Names, page_of: str = "") -> list[dict]:
    """``events`` (rows of the stored log) with their component by name (``component_named``:
    a :class:`~twin.inventory.names.Named` or ``None``, the text as logged then), their
    ``job_links`` and their text as linked ``parts`` (:func:`linked_text`; the job whose
    page this is, ``page_of``, is not linked to itself); wave rows' ``members`` too."""
    out = []
    for e in events:
        jobs = [j for j in e["jobs"] if j != page_of]
        row = {**e, "component_named": names.component(e["component"]),
               "job_links": [(j, job_url(j)) for j in e["jobs"]],
               "parts": linked_text(e["text"], names=names, jobs=jobs)}
        if "members" in e:
            row["members"] = named(e["members"], names=names, page_of=page_of)
        out.append(row)
    return out
