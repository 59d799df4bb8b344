"""Search by name across the inventory and the live twin: nodes, GPUs, switches, links, racks,
jobs and tenants.

Names match anywhere, whatever the case (``n000100`` finds ``tiny-n000100``), each kind bounded
to :data:`LIMIT` rows; how many more match is counted up to :data:`COUNT_CAP` only, so a
one-letter query on a 100,000-GPU inventory never counts 100,000 rows.  Jobs and tenants are
names in the live engine's last placement and frame (a few hundred at most), matched in memory.

Ids find what the pages and the event log number: ``71`` is node 71, GPU 71, switch 71, rack 71
and switch link 71 (each listed first in its kind); ``host 100``, ``leaf 10`` or ``gpu 2318``
(the log's words, :mod:`twin.inventory.names`) the one thing they name.

A GPU is found by its serial (its UUID in the inventory) or as ``hostname:index``; a switch
link by either switch's name, a NIC link as ``hostname:port``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote

from django.db.models import Q

from scheduler.frame_schema import StoredFrame
from scheduler.placement_schema import LivePlacement
from twin.inventory.adapter import EngineIds
from twin.inventory.models import Accelerator, Cluster, Link, Node, Rack, Switch
from twin.inventory.names import Names, rack_url

LIMIT = 20
"""Hits shown per kind."""
COUNT_CAP = 1000
"""Beyond this many matches of one kind the answer says "more than"."""
QUERY_MAX = 100
"""Longest query accepted (hostnames and serials are at most 64 characters)."""
ALLOWED = re.compile(r"[A-Za-z0-9._:/@+ -]*")
KINDS = (("node", "Nodes"), ("gpu", "GPUs"), ("switch", "Switches"), ("link", "Links"),
         ("rack", "Racks"), ("job", "Jobs"), ("tenant", "Tenants"))


class SearchError(ValueError):
    """A query the search refuses, with the one line to show."""


@dataclass
class Group:
    """One kind's hits: at most :data:`LIMIT`, ``more`` matches not shown (``capped``: at least
    that many)."""

    kind: str
    label: str
    hits: list[dict] = field(default_factory=list)
    more: int = 0
    capped: bool = False


def query_clean(raw: str) -> str:
    """The query stripped; :class:`SearchError` when it is empty, too long or holds characters
    no name in the twin has."""
    q = (raw or "").strip()
    if not q:
        raise SearchError("type a name to search for (a hostname, GPU, switch, rack, job or "
                          "tenant)")
    if len(q) > QUERY_MAX:
        raise SearchError(f"the query is {len(q)} characters long; names are at most "
                          f"{QUERY_MAX}")
    if not ALLOWED.fullmatch(q):
        raise SearchError("names hold only letters, digits and . _ : / @ + - (and spaces); "
                          f"{q[:40]!r} has others")
    return q


def _matching(column: str, q: str) -> Q:
    """Names holding ``q`` anywhere, whatever the case (a scan of ``column``, stopped by
    :func:`_bounded` after :data:`COUNT_CAP` + 1 rows)."""
    return Q(**{f"{column}__icontains": q})


def _bounded(group: Group, rows, keep, limit: int) -> list:
    """The first ``limit`` of ``rows`` (a query ordered by an indexed name) whose first column
    ``keep`` accepts; the group learns how many more there are, up to the cap.

    One query of at most :data:`COUNT_CAP` + 1 rows: cluster membership is checked here, on
    the engine's id arrays, not by joins through rack, hall and site, which lead SQLite's
    planner (without ``ANALYZE``) to walk a whole cluster instead of the name's index."""
    fetched = list(rows[:COUNT_CAP + 1])
    kept = [row for row in fetched if keep(row[0])]
    group.more = max(0, len(kept) - limit)
    group.capped = len(fetched) > COUNT_CAP
    if group.capped:
        group.more = max(0, COUNT_CAP - limit)
    return kept[:limit]


def _in_memory(group: Group, names: list, limit: int) -> list:
    group.more = max(0, len(names) - limit)
    return names[:limit]


def search(*, cluster: Cluster | None, placement: LivePlacement | None,
           frame: StoredFrame | None, q: str,
           limit: int = LIMIT) -> list[Group]:
    """Every kind's hits for a clean query ``q`` (see :func:`query_clean`), in :data:`KINDS`
    order.  ``placement`` and ``frame`` are the live engine's last (``None`` before one)."""
    groups = {kind: Group(kind, label) for kind, label in KINDS}
    if cluster is not None:
        _inventory(groups, cluster, q, limit)
        _by_id(groups, Names(cluster), q, limit)
    _live(groups, placement or None, frame or None, q, limit)
    return list(groups.values())


GROUP_OF = {"node": "node", "gpu": "gpu", "nic": "gpu", "switch": "switch", "link": "link",
            "rack": "rack"}
"""The group a :class:`~twin.inventory.names.Named` of each kind is listed in."""


def _by_id(groups: dict[str, Group], names: Names, q: str, limit: int) -> None:
    """What ``q`` names as an id or in the log's words, first in its kind's group."""
    if not (q.isdigit() or names.component(q) is not None):
        return
    for x in names.resolve(q):
        group = groups.get(GROUP_OF.get(x.kind, ""))
        if group is None:
            continue
        found = [h for h in group.hits if h["url"] == x.url]
        group.hits = [h for h in group.hits if h["url"] != x.url]
        group.hits.insert(0, found[0] if found else
                          {"name": x.name, "detail": f"{x.kind} id {x.id}", "url": x.url})
        if len(group.hits) > limit:
            group.hits.pop()
            group.more += 1


def _inventory(groups: dict[str, Group], cluster: Cluster, q: str, limit: int) -> None:
    ids = EngineIds(cluster)

    def of_node(pk):
        return ids.node(pk) is not None

    for pk, host, gpus in _bounded(groups["node"], Node.objects.filter(
            _matching("hostname", q)).order_by("hostname")
            .values_list("id", "hostname", "accelerator_count"), of_node, limit):
        groups["node"].hits.append({"name": host, "detail": f"{gpus} GPUs",
                                    "url": f"/nodes/{ids.node(pk)}/"})

    host, sep, index = q.rpartition(":")
    by_port = sep and (index.isdigit() or not index)  # hostname:index, hostname:
    if by_port:
        node_pks = list(Node.objects.filter(hostname=host).values_list("id", flat=True))
        gpus = Accelerator.objects.filter(node_id__in=node_pks).order_by("index")
        gpus = gpus.filter(index=int(index)) if index else gpus
    else:
        gpus = Accelerator.objects.filter(_matching("serial", q)).order_by("serial")
    rows = _bounded(groups["gpu"], gpus.values_list("node_id", "index", "serial"), of_node,
                    limit)
    hosts = dict(Node.objects.filter(id__in={r[0] for r in rows})
                 .values_list("id", "hostname"))
    for node_pk, i, serial in rows:
        groups["gpu"].hits.append({"name": f"{hosts[node_pk]}:{i}", "detail": serial,
                                   "url": f"/nodes/{ids.node(node_pk)}/#gpu-{i}"})

    switches = Switch.objects.filter(cluster=cluster)
    for name, sw_index, tier in _bounded(groups["switch"], switches.filter(_matching("name", q))
                                         .order_by("name").values_list("name", "index", "tier"),
                                         lambda _: True, limit):
        groups["switch"].hits.append({"name": name, "detail": tier,
                                      "url": f"/switches/{sw_index}/"})

    if by_port:  # a NIC link
        links = Link.objects.filter(node_id__in=node_pks)
        links = links.filter(node_port=int(index)) if index else links
    else:  # a switch link, by either end's name
        named = list(switches.filter(_matching("name", q)).order_by("name")
                     .values_list("id", flat=True)[:COUNT_CAP])
        links = (Link.objects.filter(switch_id__in=named, peer_switch__isnull=False)
                 | Link.objects.filter(peer_switch_id__in=named))
    rows = _bounded(groups["link"], links.order_by("id").values_list(
        "id", "switch_id", "peer_switch_id", "node_id", "node_port", "speed_gbps"),
        lambda _: True, limit)
    ends = dict((pk, (name, i)) for pk, name, i in Switch.objects.filter(
        id__in={r[1] for r in rows} | {r[2] for r in rows}).values_list("id", "name", "index"))
    hosts = dict(Node.objects.filter(id__in={r[3] for r in rows})
                 .values_list("id", "hostname"))
    for pk, near, peer, node, port, speed in rows:
        far = ends[peer][0] if peer is not None else f"{hosts[node]}:{port}"
        groups["link"].hits.append({"name": f"{ends[near][0]} – {far}",
                                    "detail": f"{speed:g} Gb/s",
                                    "url": f"/switches/{ends[near][1]}/#link-{pk}"})

    for pk, name in _bounded(groups["rack"], Rack.objects.filter(_matching("name", q))
                             .order_by("name").values_list("id", "name"),
                             lambda pk: ids.rack(pk) is not None, limit):
        groups["rack"].hits.append({"name": name, "detail": "",
                                    "url": rack_url(ids.rack(pk))})


def _live(groups: dict[str, Group], placement: LivePlacement | None,
          frame: StoredFrame | None, q: str, limit: int) -> None:
    states = ({} if placement is None else
              {name: job["state"] for name, job in placement["jobs"].items()})
    for row in frame["running_jobs"] if frame is not None else ():
        states.setdefault(row["name"], row["state"])
    for row in frame["queue"] if frame is not None else ():
        states.setdefault(row["name"], "queued")
    # a mirror's jobs by the scheduler's own words: id, job name, user, account
    slurm = (frame.get("mirror") or {}).get("jobs", {}) if frame is not None else {}
    low = q.lower()
    said = {run: job for run, job in slurm.items()
            if any(low in str(job.get(k, "")).lower() for k in ("key", "name", "user", "account"))}
    names = sorted(n for n in states if low in n.lower() or n in said)
    for name in _in_memory(groups["job"], names, limit):
        job = slurm.get(name)
        detail = states[name] if job is None else (
            f"{states[name]}: Slurm job {job['key']} {job['name']!r} of {job['user']}"
            + (f" ({job['account']})" if job.get("account") else ""))
        groups["job"].hits.append({"name": name, "detail": detail,
                                   "url": f"/jobs/{quote(name, safe='')}/"})
    tenants = {t["tenant"]: t for t in frame["tenants"]} if frame is not None else {}
    for name in _in_memory(groups["tenant"], sorted(t for t in tenants if low in t.lower()),
                           limit):
        t = tenants[name]
        groups["tenant"].hits.append({"name": name,
                                      "detail": f"{t['used_gpus']:,} of {t['quota_gpus']:,} GPUs",
                                      "url": f"/tenants/{quote(name, safe='')}/"})


def as_json(groups: list[Group]) -> dict:
    """The API's answer: each kind's hits and how many more (``more_capped``: at least)."""
    return {"results": {g.kind: {"hits": g.hits, "more": g.more, "more_capped": g.capped}
                        for g in groups},
            "total_shown": sum(len(g.hits) for g in groups)}
