"""Reads of the live engine's state: the latest frame, its health and heartbeat, snapshots, the
stored event log, the live view of placement and queue, and what the job, node, switch and tenant
pages show of the live engine."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from django.utils import timezone

from scheduler.control.storage_status import DOWN_LEFT
from scheduler.live import QUEUE_COLUMNS, in_ranges
from scheduler.placement_schema import LivePlacement
from twin import app_setting
from twin.inventory.adapter import EngineIds
from twin.inventory.models import Cluster, Node
from twin.live import history
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
    state was lost), a :class:`~scheduler.placement_schema.LivePlacement` or ``None``.
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

    def links(self, rows: list[tuple]) -> dict[int, LiveStatus]:
        """``rows``: ``(pk, node pk, node port)`` or ``(pk, node pk, node port, switch
        index)``; a switch link is out by itself or through a failed switch, a NIC link when
        its GPU or NIC is out or (given its switch) its leaf failed."""
        pks = [pk for pk, *_ in rows]
        if self._ids is None:
            return self._all(pks, NO_ENGINE)
        out = {}
        for pk, node, port, *switch in rows:
            i = self._ids.link(pk) if node is None else self._ids.gpu(node, port)
            if i is None:
                out[pk] = LiveStatus(NOT_IN_ENGINE)
                continue
            if node is not None:
                live = _node_link_live(self.placement, engine_gpu=i, named="its switch",
                                       switch=switch[0] if switch else None)
                out[pk] = (LiveStatus(NOT_REPORTED) if live["live"] == "not reported" else
                           LiveStatus(live["live"], live["live_why"]))
                continue
            runs = self.placement["links_down"]
            if runs is None:  # an engine from before links were reported
                out[pk] = LiveStatus(NOT_REPORTED)
                continue
            out[pk] = LiveStatus("down" if _member(np.array([i]), runs)[0] else "up")
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


# ----------------------------------------------------------------- a job, node, switch, tenant
JOB_GONE = "not running (done or evicted)"


def placement_status(*, placement: LivePlacement | None, runs: list[list[int]] | None,
                     engine_id: int, otherwise: str) -> str:
    """A node's GPU or port, a switch or a link as the placement has it: ``unknown`` before
    any placement, ``not reported`` where the engine did not report ``runs`` (an older
    engine's placement), ``down`` when ``engine_id`` lies in them, else ``otherwise``."""
    if placement is None:
        return "unknown"
    if runs is None:
        return "not reported"
    return "down" if in_ranges(engine_id, runs) else otherwise


def _placement_t(placement: LivePlacement | None) -> float | None:
    return placement["t"] if placement is not None else None


def _named(rows, name: str):
    return next((r for r in rows if r["name"] == name), None)


def _job_rows(name: str, placement: LivePlacement | None, frame) -> dict:
    return {"placed": placement["jobs"].get(name) if placement is not None else None,
            "running": _named(frame["running_jobs"], name) if frame is not None else None,
            "queued": _named(frame["queue"], name) if frame is not None else None,
            "held": _named(placement["held"], name) if placement is not None else None}


def _job_state(placed, running, queued, held) -> str:
    if placed is not None:
        return placed["state"]
    if running is not None:
        return running["state"]
    return "queued" if queued else "held" if held else JOB_GONE


def job_live_get(*, name: str, events_shown: int) -> dict | None:
    """Job ``name`` as the live twin last published it: its rows in the placement (``placed``,
    ``held``) and the frame (``running``, ``queued``), each ``None`` where it is not; its newest
    ``events_shown`` events (``timeline``, :func:`engine_events_page`); its ``tenant``,
    ``state`` and the placement's ``t``.  ``None`` when the twin knows no such job, now or in
    its event log."""
    live = live_state_get()
    placement = live.placement if live is not None else None
    rows = _job_rows(name, placement, live.frame if live is not None else None)
    timeline = (engine_events_page(inventory=live.inventory, job=name, per_page=events_shown)
                if live is not None else {"events": [], "total": 0})
    if all(row is None for row in rows.values()) and not timeline["total"]:
        return None
    tenant = next((row["tenant"] for row in rows.values() if row is not None and row["tenant"]),
                  None)
    return {**rows, "timeline": timeline, "tenant": tenant, "state": _job_state(**rows),
            "t": _placement_t(placement)}


def node_live_get(*, placement: LivePlacement | None, index: int, first_gpu: int,
                  accelerators: list[dict], links: list[dict], now: list) -> dict:
    """Engine node ``index`` as the placement has it (``first_gpu``, ``accelerators`` and
    ``links`` from :func:`twin.inventory.selectors.node_detail_get`; ``now``: each GPU's holder
    and telemetry by index): ``live_status`` (unknown, down, drained, spare or up), the
    ``jobs`` on it, its ``gpus`` (with ``engine_id``, ``live`` and ``now``) and ``links``
    (with ``live`` and ``live_why``: :func:`_node_link_live`), and the placement's ``t``."""
    status = "unknown" if placement is None else next(
        (k for k in ("down", "drained", "spare") if in_ranges(index, placement[k])), "up")
    jobs = [] if placement is None else [
        {"name": n, "state": j["state"], "gpus": j["gpus"], "tenant": j["tenant"]}
        for n, j in sorted(placement["jobs"].items()) if in_ranges(index, j["nodes"])]
    down = placement["gpus_down"] if placement is not None else None
    gpus = [{**gpu, "engine_id": first_gpu + gpu["index"],
             "live": placement_status(placement=placement, runs=down,
                                      engine_id=first_gpu + gpu["index"], otherwise=status),
             "now": now[gpu["index"]] if 0 <= gpu["index"] < len(now) else None}
            for gpu in accelerators]
    ports = [{**link, **_node_link_live(placement, engine_gpu=first_gpu + link["port"],
                                        switch=link["switch_index"],
                                        named=f"switch {link['switch']}")}
             for link in links]
    return {"live_status": status, "jobs": jobs, "gpus": gpus, "links": ports,
            "t": _placement_t(placement)}


def _node_link_live(placement: LivePlacement | None, *, engine_gpu: int | None,
                    switch: int | None, named: str) -> dict:
    """A NIC link's ``live`` status and ``live_why``: down when its GPU or NIC is out
    (``gpus_down``) or its leaf switch (engine id ``switch``, ``named`` so) failed
    (``switches_down``), else up."""
    if engine_gpu is None:
        return {"live": "unknown", "live_why": ""}
    gpu = placement_status(placement=placement, engine_id=engine_gpu, otherwise="up",
                           runs=placement["gpus_down"] if placement is not None else None)
    if gpu == "down":
        return {"live": "down", "live_why": "its GPU is out"}
    leaf = ("up" if switch is None else placement_status(
        placement=placement, engine_id=switch, otherwise="up",
        runs=placement["switches_down"] if placement is not None else None))
    if leaf == "down":
        return {"live": "down", "live_why": f"{named} failed"}
    return {"live": gpu, "live_why": ""}


def _switch_link_live(placement: LivePlacement | None, link: dict, *, index: int,
                      switch_down: bool) -> dict:
    """A link of switch ``index`` (``switch_down``: failed) with its ``live`` status
    and ``live_why``: a node link's is :func:`_node_link_live`'s, a switch link is out by
    itself or through a failed switch at either end (``links_down``)."""
    shown = {k: v for k, v in link.items() if k not in ("engine_link", "engine_gpu")}
    if "node" in link:
        return {**shown, **_node_link_live(placement, engine_gpu=link["engine_gpu"],
                                           switch=index, named="this switch")}
    if link["engine_link"] is None:
        return {**shown, "live": "unknown", "live_why": ""}
    live = placement_status(placement=placement, engine_id=link["engine_link"], otherwise="up",
                            runs=placement["links_down"] if placement is not None else None)
    far_down = placement is not None and placement["switches_down"] is not None and in_ranges(
        link["switch_index"], placement["switches_down"])
    why = ("" if live != "down" else "this switch failed" if switch_down else
           f"switch {link['far']} failed" if far_down else "the link failed")
    return {**shown, "live": live, "live_why": why}


def switch_live_get(*, placement: LivePlacement | None, index: int, links: list[dict]) -> dict:
    """Switch ``index`` and its ``links`` (:func:`twin.inventory.selectors.switch_detail_get`)
    as the placement has them: ``live_status``, each link's ``live`` and ``live_why`` (down:
    a failed GPU or NIC, this switch failed, the far switch failed, or the link itself),
    whether it ``is_leaf`` (nodes are cabled to it) and the jobs ``crossing`` a leaf (those
    on its nodes: above the leaves the placement does not say which spine or core ECMP
    hashes a flow onto), and ``t``."""
    nodes = {link["node"] for link in links if "node" in link}
    crossing = [] if placement is None else sorted(
        name for name, job in placement["jobs"].items()
        if any(in_ranges(n, job["nodes"]) for n in nodes))
    status = placement_status(placement=placement, engine_id=index, otherwise="up",
                              runs=placement["switches_down"] if placement is not None else None)
    return {"live_status": status,
            "links": [_switch_link_live(placement, link, index=index,
                                        switch_down=status == "down") for link in links],
            "crossing": crossing, "is_leaf": bool(nodes), "t": _placement_t(placement)}


def tenant_live_get(*, name: str) -> dict | None:
    """Tenant ``name`` as the live twin last published it: its frame ``row`` (quota, use),
    the history ``metric`` of its GPUs, its ``running`` jobs (name, placed job) and
    ``queued`` rows, its ``share`` of quota and ``t``; ``None`` when the twin knows no such
    tenant (not in the frame, no history)."""
    live = live_state_get()
    placement = live.placement if live is not None else None
    frame = live.frame if live is not None else None
    row = (next((t for t in frame["tenants"] if t["tenant"] == name), None)
           if frame is not None else None)
    metric = f"{history.TENANT_PREFIX}{name}.gpus"
    if row is None and (live is None or metric not in history.known(live.inventory)):
        return None
    return {"row": row, "metric": metric, **_tenant_jobs(name, placement, frame),
            "share": (row["used_gpus"] / row["quota_gpus"] if row and row["quota_gpus"]
                      else None),
            "t": _placement_t(placement)}


def _tenant_jobs(name: str, placement: LivePlacement | None, frame) -> dict:
    return {"running": [] if placement is None else sorted(
                (n, j) for n, j in placement["jobs"].items() if j["tenant"] == name),
            "queued": [] if frame is None else [q for q in frame["queue"]
                                                if q["tenant"] == name]}
