"""The incidents an entity page lists (``_entity_incidents.html``): the open ones and the
recently resolved ones of the live frame (:func:`twin.pages.incident_rows.incidents_get`) that
involve a node, rack, switch, job or tenant.

An incident involves what failed (its component: a node, one of its GPUs or NICs, a switch, a
link at either end, a rack's power, a cooling loop) and what it hit: the nodes it took down and
the jobs it interrupted.  The frame lists an incident's first 16 nodes and 8 jobs (most GPUs
first), so a wide incident may involve a node or a small job it does not name; the card says
so.
"""

from __future__ import annotations

from dataclasses import dataclass

from twin.pages import incident_rows

SHOWN = 10
"""Open and resolved incidents listed on a page, each."""
LINK_SEPARATOR = " – "
"""How a switch-to-switch link's name joins its ends (``twin.inventory.names``)."""


@dataclass(frozen=True)
class Involves:
    """What an entity is, as incidents name things: engine node ids, a GPU id range
    ``[first, end)``, rack engine ids, switch inventory indexes and names, cooling loop names,
    job names."""

    nodes: frozenset[int] = frozenset()
    gpus: tuple[int, int] | None = None
    racks: frozenset[int] = frozenset()
    switches: frozenset[int] = frozenset()
    switch_names: frozenset[str] = frozenset()
    cooling: frozenset[str] = frozenset()
    jobs: frozenset[str] = frozenset()

    def __call__(self, row: dict) -> bool:
        """Whether incident ``row`` (as :mod:`twin.pages.incident_rows` shows it) involves
        this entity."""
        part = row["component"]
        kind, pid = part["kind"], part["id"]
        if (kind == "node" and pid in self.nodes or kind == "rack" and pid in self.racks
                or kind == "switch" and pid in self.switches
                or kind == "cooling" and part["name"] in self.cooling):
            return True
        if kind in ("gpu", "nic") and self.gpus is not None:
            if self.gpus[0] <= pid < self.gpus[1]:
                return True
        if kind == "link" and self.switch_names:
            if set(part["name"].split(LINK_SEPARATOR)) & self.switch_names:
                return True
        if any(n["id"] in self.nodes for n in row["nodes"]):
            return True
        return any(j["name"] in self.jobs for j in row["jobs"])


def entity_incidents(involves: Involves) -> dict:
    """The card: ``open`` and ``resolved`` incidents involving it (the first :data:`SHOWN`
    of each, worst and newest first as the frame orders them), how many of each there are
    (``open_total``, ``resolved_total``) and whether there is a live frame (``live``)."""
    shown = incident_rows.incidents_get()
    rows = [r for r in shown["incidents"] if involves(r)]
    opened = [r for r in rows if r["state"] == "open"]
    resolved = [r for r in rows if r["state"] == "resolved"]
    return {"live": shown["live"], "open": opened[:SHOWN], "resolved": resolved[:SHOWN],
            "open_total": len(opened), "resolved_total": len(resolved)}
