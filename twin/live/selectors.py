"""Reads of the live engine's state: the latest frame, its health and heartbeat, snapshots, the
stored event log, the live view of placement and queue."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from django.utils import timezone

from scheduler.control.storage_status import DOWN_LEFT
from scheduler.frame_schema import LivePlacement
from scheduler.live import QUEUE_COLUMNS
from twin import app_setting
from twin.inventory.adapter import EngineIds
from twin.inventory.models import Cluster, Node
from twin.live.models import EngineEvent, EngineSnapshot, LiveState
from twin.live.stored import frame_upgrade, placement_upgrade


def cluster_current() -> Cluster | None:
    """The cluster the twin shows and runs, chosen explicitly, never switched silently:
    ``CLUSTERTWIN_CLUSTER`` if set (``None`` if no cluster has that name); else the only
    cluster; else, among several, the one the live engine runs (its run is filed under
    ``<inventory>:<cluster id>``); else ``None`` (see :func:`cluster_choice_problem`)."""
    name = app_setting("CLUSTER")
    if name:
        return Cluster.objects.filter(name=name).first()
    first_two = list(Cluster.objects.order_by("id")[:2])
    if len(first_two) <= 1:
        return first_two[0] if first_two else None
    run = (LiveState.objects.filter(pk=LiveState.SINGLETON_PK)
           .values_list("inventory", flat=True).first() or "")
    tail = run.rpartition(":")[2]
    return Cluster.objects.filter(pk=int(tail)).first() if tail.isdigit() else None


def cluster_choice_problem() -> str | None:
    """Why no cluster is selected although some exist (``None`` when one is, or none exist)."""
    name = app_setting("CLUSTER")
    if name and not Cluster.objects.filter(name=name).exists():
        return f"CLUSTERTWIN_CLUSTER={name!r} names no cluster in the inventory"
    if not name and cluster_current() is None and Cluster.objects.exists():
        names = ", ".join(Cluster.objects.order_by("name").values_list("name", flat=True)[:10])
        return (f"the inventory holds several clusters ({names}): set CLUSTERTWIN_CLUSTER to "
                "the one the twin runs")
    return None


def live_state_get() -> LiveState | None:
    """The live engine's latest frame and status (None before the engine first ran).

    A running engine writes this row every frame: its health is a heartbeat.  When the row
    says the engine runs but is older than ``HEARTBEAT_S``, the engine is dead (killed, hung):
    the row read here says ``down`` (frame included), whatever it last claimed.

    ``frame`` and ``placement`` come upgraded (:mod:`twin.live.stored`): a
    :class:`~scheduler.frame_schema.StoredFrame` or ``None`` (no frame yet, or the engine's
    state was lost), a :class:`~scheduler.frame_schema.LivePlacement` or ``None``.
    """
    live = LiveState.objects.filter(pk=LiveState.SINGLETON_PK).first()
    if live is None:
        return None
    live.frame = frame_upgrade(live.frame)
    live.placement = placement_upgrade(live.placement)
    if live_heartbeat_lost(live.health, live.updated_at):
        age = (timezone.now() - live.updated_at).total_seconds()
        live.health = "down"
        live.last_error = f"no heartbeat from the live engine for {age:.0f} s"
        if live.frame is not None:
            live.frame = {**live.frame, "health": "down"}
    return live


def live_heartbeat_lost(health: str, updated_at) -> bool:
    """Whether a live state that says ``health`` is too old to be believed."""
    return (health in ("starting", "ok", "error") and updated_at is not None
            and (timezone.now() - updated_at).total_seconds() > app_setting("HEARTBEAT_S"))


def live_state_version() -> tuple | None:
    """``(seq, health, updated_at)`` of the live state, without reading its frame."""
    return (LiveState.objects.filter(pk=LiveState.SINGLETON_PK)
            .values_list("seq", "health", "updated_at").first())


def engine_snapshot_latest(*, preset: str, seed: int) -> EngineSnapshot | None:
    """The newest stored engine of this preset and seed (its ``inventory`` says which
    inventory it ran)."""
    return EngineSnapshot.objects.filter(preset=preset, seed=seed).order_by("-id").first()

EVENTS_PER_PAGE_MAX = 500


def engine_events_page(*, inventory: str, kind: str = "", component: str = "", job: str = "",
                       page: int = 1, per_page: int = 100) -> dict:
    """Stored engine events, newest first, filtered by kind, component (exact) and job; a page
    of them with the totals."""
    rows = EngineEvent.objects.filter(inventory=inventory)
    if kind:
        rows = rows.filter(kind=kind)
    if component:
        rows = rows.filter(component=component)
    if job:
        rows = rows.filter(jobs__contains=f",{job},")
    total = rows.count()
    pages = max(1, -(-total // per_page))
    start = (page - 1) * per_page
    events = [{"seq": e.seq, "t": e.t_sim, "kind": e.kind, "component": e.component,
               "jobs": [j for j in e.jobs.split(",") if j], "text": e.text}
              for e in rows.order_by("-seq")[start:start + per_page]]
    return {"events": events, "page": page, "pages": pages, "per_page": per_page,
            "total": total}


# ----------------------------------------------------------------- the engine's live status
NO_ENGINE = "no live engine"

NOT_IN_ENGINE = "not in the live engine"

NOT_REPORTED = "not reported by the live engine"


@dataclass(frozen=True)
class LiveStatus:
    """A row's status as the live engine last reported it (beside the operator-set one)."""

    status: str
    detail: str = ""
    jobs: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = self.status + (f", {self.detail}" if self.detail else "")
        if self.jobs:
            more = f" +{len(self.jobs) - 3}" if len(self.jobs) > 3 else ""
            text += f"; jobs: {', '.join(self.jobs[:3])}{more}"
        return text


def _member(ids: np.ndarray, runs: list) -> np.ndarray:
    """Which of ``ids`` lie in the sorted, disjoint ``[first, last]`` runs."""
    if not runs or ids.size == 0:
        return np.zeros(ids.size, dtype=bool)
    first, last = np.asarray(runs, dtype=np.int64).reshape(-1, 2).T
    k = np.searchsorted(first, ids, side="right") - 1
    return (k >= 0) & (ids <= last[np.maximum(k, 0)])


class LiveView:
    """The live engine's last placement (:func:`scheduler.live.live_placement`), read once,
    answering for inventory rows: one changelist page asks once for all its rows.

    Rows of another cluster than the live one have no engine id (:data:`NOT_IN_ENGINE`);
    before any engine wrote a placement every answer is :data:`NO_ENGINE`.
    """

    def __init__(self, placement: LivePlacement | None, cluster: Cluster | None):
        self.placement = placement
        self.t = placement["t"] if placement is not None else None
        self._ids = EngineIds(cluster) if cluster is not None and placement is not None else None

    @property
    def when(self) -> str:
        """As of when the engine reported (``t``, simulated hours)."""
        if self._ids is None:
            return NO_ENGINE
        return "an unknown time" if self.t is None else f"t = {self.t / 3600:.2f} h (simulated)"

    def caption(self) -> str:
        """What the page's live column shows, and as of when."""
        if self._ids is None:
            return "live (engine): no live engine has reported yet"
        return f"live (engine): the running engine at {self.when}; status (operator): the inventory"

    def _all(self, keys, status: str) -> dict:
        return {k: LiveStatus(status) for k in keys}

    def _node_statuses(self, ids: np.ndarray) -> tuple[np.ndarray, dict[int, list[str]]]:
        """Each engine node's live status, and the jobs on each (ids sorted)."""
        p = self.placement
        status = np.full(ids.size, "in service", dtype=object)
        for key in ("spare", "drained", "down"):  # the last one set wins
            status[_member(ids, p[key])] = key
        jobs: dict[int, list[str]] = {}
        for name, job in sorted(p["jobs"].items()):
            for a, b in job["nodes"]:
                for n in ids[np.searchsorted(ids, a):np.searchsorted(ids, b, side="right")]:
                    jobs.setdefault(int(n), []).append(name)
        return status, jobs

    def nodes(self, pks: list[int]) -> dict[int, LiveStatus]:
        """Down, drained, spare or in service, with the jobs on the node."""
        if self._ids is None:
            return self._all(pks, NO_ENGINE)
        engine = {pk: self._ids.node(pk) for pk in pks}
        ids = np.array(sorted({i for i in engine.values() if i is not None}), dtype=np.int64)
        status, jobs = self._node_statuses(ids)
        return {pk: LiveStatus(NOT_IN_ENGINE) if i is None else
                LiveStatus(str(status[np.searchsorted(ids, i)]), jobs=tuple(jobs.get(i, ())))
                for pk, i in engine.items()}

    def racks(self, pks: list[int]) -> dict[int, LiveStatus]:
        """How many of each rack's nodes are in service, the others by status, its jobs."""
        if self._ids is None:
            return self._all(pks, NO_ENGINE)
        members: dict[int, list[int]] = {pk: [] for pk in pks}
        for node, rack in Node.objects.filter(rack_id__in=pks).values_list("id", "rack_id"):
            i = self._ids.node(node)
            if i is not None:
                members[rack].append(i)
        ids = np.array(sorted({i for nodes in members.values() for i in nodes}), dtype=np.int64)
        status, jobs = self._node_statuses(ids)
        out = {}
        for pk, nodes in members.items():
            if not nodes:
                out[pk] = LiveStatus(NOT_IN_ENGINE)
                continue
            mine = Counter(status[np.searchsorted(ids, nodes)].tolist())
            out[pk] = LiveStatus(
                f"{mine.pop('in service', 0)} of {len(nodes)} in service",
                ", ".join(f"{n} {s}" for s, n in sorted(mine.items())),
                tuple(sorted({j for n in nodes for j in jobs.get(n, ())})))
        return out

    def switches(self, rows: list[tuple[int, int, int]]) -> dict[int, LiveStatus]:
        """``rows``: ``(pk, index, cluster pk)``; failed (down) or up."""
        if self._ids is None:
            return self._all([pk for pk, *_ in rows], NO_ENGINE)
        failed = self.placement["switches_down"]
        if failed is None:  # an engine from before switches were reported
            return self._all([pk for pk, *_ in rows], NOT_REPORTED)
        live = self._ids.cluster.pk
        down = _member(np.array([index for _, index, _ in rows], dtype=np.int64), failed)
        return {pk: LiveStatus(NOT_IN_ENGINE) if cluster != live else
                LiveStatus("down" if out else "up")
                for (pk, _, cluster), out in zip(rows, down.tolist(), strict=True)}

    def links(self, rows: list[tuple[int, int | None, int | None]]) -> dict[int, LiveStatus]:
        """``rows``: ``(pk, node pk, node port)``; a switch link is out by itself or through a
        failed switch, a NIC link when its GPU is out."""
        pks = [pk for pk, *_ in rows]
        if self._ids is None:
            return self._all(pks, NO_ENGINE)
        out = {}
        for pk, node, port in rows:
            i = self._ids.link(pk) if node is None else self._ids.gpu(node, port)
            if i is None:
                out[pk] = LiveStatus(NOT_IN_ENGINE)
                continue
            runs = self.placement["links_down" if node is None else "gpus_down"]
            if runs is None:  # an engine from before links were reported
                out[pk] = LiveStatus(NOT_REPORTED)
                continue
            down = bool(_member(np.array([i]), runs)[0])
            out[pk] = LiveStatus("down" if down else "up",
                                 "its GPU is out" if down and node is not None else "")
        return out

    def storage(self, pks: list[int]) -> dict[int, LiveStatus]:
        """Up, degraded (with the share of bandwidth left) or down; drills and failures count."""
        if self._ids is None:
            return self._all(pks, NO_ENGINE)
        left = self.placement["storage"]
        if left is None:  # an engine from before storage was reported
            return self._all(pks, NOT_REPORTED)
        out = {}
        for pk in pks:
            tier = self._ids.storage_tier(pk)
            if tier is None or tier not in left:
                out[pk] = LiveStatus(NOT_IN_ENGINE)
            elif left[tier] >= 1.0:
                out[pk] = LiveStatus("up")
            elif left[tier] <= DOWN_LEFT[tier]:
                out[pk] = LiveStatus("down")
            else:
                out[pk] = LiveStatus("degraded", f"{left[tier]:.0%} of its bandwidth left")
        return out


def live_view() -> LiveView:
    """The live engine's last placement, for the admin's live columns: one query (two more
    when there is one: the live cluster and its node ids)."""
    placement = placement_upgrade(LiveState.objects.filter(pk=LiveState.SINGLETON_PK)
                                  .values_list("placement", flat=True).first())
    return LiveView(placement, cluster_current() if placement is not None else None)


def live_queue_page(*, sort: str, order: str, page: int, per_page: int) -> dict | None:
    """One page of the live queue (:func:`scheduler.live.queue_rows` in the placement) sorted
    by column ``sort`` (``order`` ``asc``/``desc``; ties keep the policy's order), as dicts;
    ``None`` before the engine wrote a queue.  ``total`` counts the whole queue, ``listed``
    the rows kept to page through."""
    placement = placement_upgrade(LiveState.objects.filter(pk=LiveState.SINGLETON_PK)
                                  .values_list("placement", flat=True).first())
    if placement is None or placement["queue"] is None:  # none yet, or not reported
        return None
    rows = placement["queue"]
    k = QUEUE_COLUMNS.index(sort)
    # None (no reservation) sorts after every value, whichever the direction
    present = sorted((r for r in rows if r[k] is not None), key=lambda r: r[k],
                     reverse=order == "desc")
    rows = present + [r for r in rows if r[k] is None]
    start = (page - 1) * per_page
    return {"t": placement["t"], "total": placement["queue_total"],
            "listed": len(rows), "pages": max(1, -(-len(rows) // per_page)),
            "rows": [dict(zip(QUEUE_COLUMNS, r, strict=True))
                     for r in rows[start:start + per_page]]}
