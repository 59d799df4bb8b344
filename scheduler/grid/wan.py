"""The WAN between a grid's places: transfers sharing link bandwidth max-min, with latency and
egress price.

Each WAN link is two directed units of its bandwidth (a transfer from ``a`` to ``b`` loads
only the ``a -> b`` unit).  A transfer follows the lowest-latency path of links that are up;
the transfers moving at once share every unit max-min fair (progressive filling, the same
:func:`scheduler.fabric.maxmin.max_min_rates` the compute fabric uses), each at most its
path's bottleneck.  Bytes drain at the shared rate; the transfer lands one path latency after
its last byte left.  A transfer is charged, when it lands (or for its moved part when it is
cancelled), the egress price of every hop it crossed, to the place it left.  A cut link stops
the transfers on it: they take another path if there is one, and stall until the link is back
otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np

from scheduler.fabric.maxmin import max_min_rates
from scheduler.hardware.grid_spec import WanLinkSpec

_DRAINED_GB = 1e-9
"""Bytes left below which a transfer has drained (floating-point crumbs of the rates)."""


@dataclass
class Transfer:
    """One move of ``gb`` GB from ``src`` to ``dst`` (``tag`` says what for)."""

    tid: int
    src: str
    dst: str
    gb: float
    tag: str
    started_s: float
    price_per_gb: float
    remaining_gb: float
    units: tuple[int, ...] | None = None   # directed link units of its path; None: stalled
    latency_s: float = 0.0
    rate_gbps: float = 0.0
    lands_s: float | None = None           # set once its last byte left
    done_s: float | None = None


class Wan:
    """Transfers over ``links`` between ``places``, advanced on the grid's clock."""

    def __init__(self, links: tuple[WanLinkSpec, ...], places: tuple[str, ...]):
        self.links = links
        self.places = places
        self.up = np.ones(len(links), dtype=bool)
        n = len(links)
        self.capacity = np.repeat([float(lk.gbps) for lk in links], 2) if n else np.zeros(0)
        self.egress = np.array([p for lk in links for p in (
            lk.egress_per_gb,
            lk.egress_per_gb if lk.egress_back_per_gb is None else lk.egress_back_per_gb)])
        self.now = 0.0
        self.transfers: dict[int, Transfer] = {}
        self.done: list[Transfer] = []
        self.bytes_out = dict.fromkeys(places, 0.0)   # GB that left each place
        self.bytes_in = dict.fromkeys(places, 0.0)
        self.egress_cost = dict.fromkeys(places, 0.0)  # charged to the place data left
        self.bytes_by_kind: dict[str, float] = {}   # GB by what they moved for (tag's head)
        self.streams: dict[int, Transfer] = {}   # standing flows (cross-site gradients)
        self._next_tid = 0

    # ----------------------------------------------------------------- paths
    def _graph(self) -> nx.Graph:
        g = nx.Graph()
        g.add_nodes_from(self.places)
        for i, lk in enumerate(self.links):
            if self.up[i]:
                g.add_edge(lk.a, lk.b, latency=lk.latency_ms, link=i)
        return g

    def path(self, src: str, dst: str) -> tuple[tuple[int, ...], float] | None:
        """The directed units and latency (s) of the lowest-latency path that is up, or
        ``None`` when the places are cut off from each other."""
        g = self._graph()
        try:
            hops = nx.shortest_path(g, src, dst, weight="latency")
        except nx.NetworkXNoPath:
            return None
        units, latency = [], 0.0
        for a, b in zip(hops, hops[1:], strict=False):
            i = g.edges[a, b]["link"]
            units.append(2 * i + (0 if self.links[i].a == a else 1))
            latency += self.links[i].latency_ms / 1000.0
        return tuple(units), latency

    def estimate(self, src: str, dst: str, gb: float) -> tuple[float, float] | None:
        """Seconds and price to move ``gb`` GB now, sharing the bottleneck with the transfers
        already on it (``None``: no path).  What the placement policies weigh."""
        if src == dst or gb <= 0:
            return 0.0, 0.0
        found = self.path(src, dst)
        if found is None:
            return None
        units, latency = found
        sharing = [sum(1 for t in (*self.transfers.values(), *self.streams.values())
                       if t.units is not None and t.lands_s is None and u in t.units)
                   for u in units]
        gbps = min(self.capacity[u] / (s + 1) for u, s in zip(units, sharing, strict=True))
        return gb * 8.0 / gbps + latency, gb * float(sum(self.egress[u] for u in units))

    # ----------------------------------------------------------------- transfers
    def start(self, src: str, dst: str, gb: float, tag: str = "") -> Transfer:
        """Begin moving ``gb`` GB from ``src`` to ``dst`` now (stalled if cut off)."""
        if src not in self.bytes_out or dst not in self.bytes_out or src == dst:
            raise ValueError(f"a WAN transfer joins two different places, not {src}->{dst}")
        if not (gb > 0 and math.isfinite(gb)):
            raise ValueError(f"a WAN transfer moves a positive number of GB, not {gb!r}")
        found = self.path(src, dst)
        price = 0.0 if found is None else float(sum(self.egress[u] for u in found[0]))
        t = Transfer(self._next_tid, src, dst, float(gb), tag, self.now, price, float(gb))
        if found is not None:
            t.units, t.latency_s = found
        self._next_tid += 1
        self.transfers[t.tid] = t
        self._rerate()
        return t

    def stream(self, src: str, dst: str, tag: str = "") -> Transfer:
        """A standing flow from ``src`` to ``dst`` (a cross-site job's gradient exchange):
        it takes its max-min share of every unit on its path like a transfer but never
        drains; its bytes are booked by :meth:`book_stream` as they cross."""
        if src not in self.bytes_out or dst not in self.bytes_out or src == dst:
            raise ValueError(f"a WAN stream joins two different places, not {src}->{dst}")
        found = self.path(src, dst)
        price = 0.0 if found is None else float(sum(self.egress[u] for u in found[0]))
        t = Transfer(self._next_tid, src, dst, 0.0, tag, self.now, price, 0.0)
        if found is not None:
            t.units, t.latency_s = found
        self._next_tid += 1
        self.streams[t.tid] = t
        self._rerate()
        return t

    def book_stream(self, tid: int, gb: float) -> None:
        """``gb`` GB crossed on stream ``tid`` (bytes in and out, egress, by kind)."""
        t = self.streams[tid]
        t.gb += gb
        self._book(t, gb)

    def end_stream(self, tid: int) -> None:
        if self.streams.pop(tid, None) is not None:
            self._rerate()

    def cancel(self, tid: int) -> Transfer:
        """Stop a transfer now; its moved part is booked."""
        t = self.transfers.pop(tid)
        self._book(t, t.gb - t.remaining_gb)
        self._rerate()
        return t

    def _book(self, t: Transfer, gb: float) -> None:
        self.bytes_out[t.src] += gb
        self.bytes_in[t.dst] += gb
        self.egress_cost[t.src] += gb * t.price_per_gb
        kind = t.tag.split(" of ")[0]
        self.bytes_by_kind[kind] = self.bytes_by_kind.get(kind, 0.0) + gb

    def _rerate(self) -> None:
        moving = [t for t in (*self.transfers.values(), *self.streams.values())
                  if t.units is not None and t.lands_s is None]
        for t in (*self.transfers.values(), *self.streams.values()):
            t.rate_gbps = 0.0
        if not moving:
            return
        job = np.array([k for k, t in enumerate(moving) for _ in t.units], dtype=np.int64)
        unit = np.array([u for t in moving for u in t.units], dtype=np.int64)
        demand = np.array([min(self.capacity[u] for u in t.units) for t in moving])
        rates = max_min_rates(job, unit, demand[job], self.capacity, demand)
        for t, r in zip(moving, rates, strict=True):
            t.rate_gbps = float(r)

    def next_event(self) -> float | None:
        """When the next transfer drains or lands, or ``None``."""
        times = []
        for t in self.transfers.values():
            if t.lands_s is not None:
                times.append(t.lands_s)
            elif t.rate_gbps > 0:
                times.append(self.now + t.remaining_gb * 8.0 / t.rate_gbps)
        return min(times) if times else None

    def advance(self, t_to: float) -> list[Transfer]:
        """Move the clock to ``t_to`` (no later than :meth:`next_event`); the transfers that
        landed, in start order."""
        dt = t_to - self.now
        drained = False
        if dt > 0:
            for t in self.transfers.values():
                if t.lands_s is None and t.rate_gbps > 0:
                    t.remaining_gb = max(0.0, t.remaining_gb - t.rate_gbps * dt / 8.0)
        self.now = max(self.now, t_to)
        for t in self.transfers.values():
            if t.lands_s is None and t.units is not None and (
                    t.remaining_gb <= _DRAINED_GB * max(1.0, t.gb)):
                t.remaining_gb = 0.0
                t.lands_s = self.now + t.latency_s
                drained = True
        if drained:
            self._rerate()
        landed = [t for t in self.transfers.values()
                  if t.lands_s is not None and t.lands_s <= self.now]
        for t in landed:
            del self.transfers[t.tid]
            t.done_s = self.now
            self._book(t, t.gb)
            self.done.append(t)
        return landed

    # ----------------------------------------------------------------- cuts
    def _link(self, a: str, b: str) -> int:
        for i, lk in enumerate(self.links):
            if {lk.a, lk.b} == {a, b}:
                return i
        raise ValueError(f"no WAN link joins {a} and {b}")

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Cut (``up=False``) or restore the link between ``a`` and ``b``; the transfers that
        are still moving take the best path there is now (or stall)."""
        self.up[self._link(a, b)] = up
        for t in (*self.transfers.values(), *self.streams.values()):
            if t.lands_s is None:
                found = self.path(t.src, t.dst)
                t.units, t.latency_s = (None, 0.0) if found is None else found
        self._rerate()

    def in_flight_gb(self) -> float:
        return float(sum(t.remaining_gb for t in self.transfers.values()))
