"""Several Slurm clusters mirrored as one grid (issue 30, ``manage.py mirror_grid``).

Each member cluster of a grid with a :class:`~twin.inventory.grid_models.SiteMirror` is a
site: :class:`GridMirror` polls each in a thread of its own, every ``poll_s`` seconds, each poll
bounded by the site's ``timeout_s`` (:func:`twin.mirror.grid_sites.read_site`), so a slow or
dead controller never delays another site.  :meth:`GridMirror.overview` turns the sites' last
readings into one :class:`scheduler.grid.overview.Overview` (source ``mirrored``): a place row
per member cluster with its health, and the grid's WAN links between member clusters (load 0:
nothing measures the WAN).  :func:`grid_state_write` checks it and writes the grid's
``GridState`` row.

Cloud regions have no Slurm to mirror: they and the links that name them are left out of the
mirrored document.  A member cluster without a mirror row is a ``down`` place that says so.
Each ``down`` site is also an open ``source_down`` incident, since its first failed poll in a
row (the overview's time when it has not been polled yet); nothing measures the jobs it hits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from django.db.models import Sum

from scheduler.grid.overview import Overview, check_overview
from twin.inventory.grid_models import Grid, SiteMirror
from twin.inventory.models import Node
from twin.live.models import GridState, GridStateSource
from twin.mirror.errors import SourceError
from twin.mirror.grid_sites import SiteReading, SiteSource, SiteState, place_row, read_site

ONCE_SLACK_S = 5.0
"""Seconds a single round waits beyond the longest site timeout before it gives up on a site."""


class GridMirrorError(Exception):
    """The grid cannot be mirrored (no such grid, no member clusters)."""


class GridMirror:
    """The sites of one grid, each polled on its own (``read``: one poll of a site)."""

    def __init__(self, grid: str, sites: list[SiteSource], links: list[dict], *,
                 read: Callable[[SiteSource], SiteReading] | None = None,
                 clock: Callable[[], float] = time.time):
        self.grid, self.links, self.clock = grid, links, clock
        self.read = read or read_or_refuse
        self.states = [SiteState(site) for site in sites]
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.version = 0            # bumped by every finished poll
        self.down_since: dict[str, float] = {}  # place -> Unix time of its first failed poll

    def _poll(self, state: SiteState) -> None:
        try:
            reading, error = self.read(state.source), ""
        except SourceError as exc:
            reading, error = None, str(exc)
        except Exception as exc:  # noqa: BLE001 - a site's failure is its own, said in its row
            reading, error = None, f"{type(exc).__name__}: {exc}"
        with self._lock:
            state.record(reading, error)
            self._mark(state)
            self.version += 1

    def _mark(self, state: SiteState) -> None:
        if state.error:
            self.down_since.setdefault(state.source.place, self.clock())
        else:
            self.down_since.pop(state.source.place, None)

    def _loop(self, state: SiteState) -> None:
        while not self.stopping.is_set():
            began = time.monotonic()
            self._poll(state)
            self.stopping.wait(max(0.0, state.source.poll_s - (time.monotonic() - began)))

    def start(self) -> None:
        """Poll every site in a thread of its own until :meth:`stop`."""
        for state in self.states:
            thread = threading.Thread(target=self._loop, args=(state,), daemon=True,
                                      name=f"mirror-{state.source.place}")
            thread.start()
            self._threads.append(thread)

    def stop(self, wait_s: float = 1.0) -> None:
        """Stop polling; a poll under way is left to end by its own timeout."""
        self.stopping.set()
        deadline = time.monotonic() + wait_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def poll_once(self, slack_s: float = ONCE_SLACK_S) -> None:
        """Poll every site once, all at once; a site still unanswered after its timeout plus
        ``slack_s`` seconds is recorded as not answering."""
        threads = {id(s): threading.Thread(target=self._poll, args=(s,), daemon=True)
                   for s in self.states}
        for thread in threads.values():
            thread.start()
        began = time.monotonic()
        for state in self.states:
            left = began + state.source.timeout_s + slack_s - time.monotonic()
            threads[id(state)].join(max(0.0, left))
        with self._lock:
            for state in self.states:
                if threads[id(state)].is_alive():
                    state.record(None, f"no answer within {state.source.timeout_s:g} s")
                    self._mark(state)

    def overview(self) -> Overview:
        """The grid as its sites were last read, checked."""
        now = self.clock()
        with self._lock:
            places = [place_row(state, now) for state in self.states]
            since = dict(self.down_since)
        incidents = [{"kind": "source_down", "target": r["place"],
                      "since_s": float(min(since.get(r["place"], now), now)), "until_s": None,
                      "jobs_hit": 0, "moved_gb": 0.0, "lost_gpu_hours": None, "note": r["note"]}
                     for r in places if r["health"] == "down"]
        return check_overview({"grid": self.grid, "source": "mirrored", "t_s": float(now),
                               "places": places, "links": list(self.links), "moves": [],
                               "incidents": incidents})


def _gpus(cluster) -> int:
    return int(Node.objects.filter(rack__hall__site__cluster=cluster)
               .aggregate(n=Sum("accelerator_count"))["n"] or 0)


def grid_sources(*, name: str) -> tuple[Grid, list[SiteSource], list[dict]]:
    """A grid's sites (member clusters, with where their Slurm is) and its links between
    them; :class:`GridMirrorError` when there is no such grid or it has no member."""
    grid = Grid.objects.filter(name=name).first()
    if grid is None:
        known = ", ".join(Grid.objects.order_by("name").values_list("name", flat=True))
        raise GridMirrorError(f"no grid named {name!r} (grids: {known or 'none'})")
    members = list(grid.clusters.order_by("id"))
    if not members:
        raise GridMirrorError(f"grid {name} has no member clusters to mirror: set the grid "
                              "of each site's cluster")
    mirrors = {m.cluster_id: m for m in SiteMirror.objects.filter(cluster__in=members)}
    sites = []
    for cluster in members:
        mirror = mirrors.get(cluster.id)
        common = {"place": cluster.name, "jurisdiction": cluster.jurisdiction,
                  "inventory_gpus": _gpus(cluster)}
        if mirror is None:
            sites.append(SiteSource(**common, kind="none"))
            continue
        sites.append(SiteSource(**common, kind=mirror.kind,
                                conf=Path(mirror.slurm_conf) if mirror.slurm_conf else None,
                                rest_url=mirror.rest_url, rest_user=mirror.rest_user,
                                token_env=mirror.token_env, poll_s=mirror.poll_s,
                                timeout_s=mirror.timeout_s))
    names = {c.name for c in members}
    links = [{"a": w.a, "b": w.b, "gbps": float(w.gbps), "load_gbps": 0.0, "up": True}
             for w in grid.wan_links.order_by("id") if w.a in names and w.b in names]
    return grid, sites, links


def read_or_refuse(site: SiteSource) -> SiteReading:
    """:func:`read_site`, or the reason a site cannot be read at all (no mirror row)."""
    if site.kind == "none":
        raise SourceError(site.place, "no mirror source: add a SiteMirror for this cluster")
    return read_site(site)


def grid_state_write(*, grid: Grid, doc: Overview) -> GridState:
    """Check ``doc`` and make it the grid's mirrored state (one row, replaced in place)."""
    check_overview(doc)
    row, _ = GridState.objects.update_or_create(
        grid=grid, source=GridStateSource.MIRRORED, defaults={"doc": doc})
    return row
