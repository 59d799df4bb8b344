"""Alert figures kept per node, switch, link and GPU from the stored event log.

The frame carries only the last 50 events, so XID storms, link flaps, repeated node failures and
throttled racks are read from ``EngineEvent`` rows (the live package hands the evaluator a
:class:`EventLog`: it reads only rows newer than the last one seen).  :func:`classify` turns one
row into *signals* on engine units (a pure function of kind, component and text, as the core
writes them); :class:`LogWindows` keeps, per entity, the times of its recent events (up to the
longest window a rule asks for) and the start of each throttle still on.  A new process, a run
with another log key, or an engine that went back in time rebuilds them from the log.

Signals:

* ``xid``: an XID on one GPU (the mirror's ``xid`` lines, ``node N`` + ``GPU i``, or a
  ``gpu G`` component);
* ``flap``: a link, NIC link or switch went down or came back (operators' ``link``/``switch``
  lines and NIC-link edits, failures and drills of links and switches, drills ended early,
  ``repair`` lines);
* ``failure``: a node's hardware failed (failure lines on a host, GPU, NIC or its link; an
  operator's "marked failed"; a mirrored cluster's ``node_down``);
* ``throttle_on`` / ``throttle_off``: a cooling loop (its rack row) or a rack's power cap;
  ``throttle_failed``: a cooling loop's failure line (a fault drawn or drilled), whose repair
  the log may not name.

A cooling fault the failure processes draw ends with its repair, which the log names only if it
writes a ``repair`` line; a frame that lists every open incident (``incidents``, when the
engine reports them) closes any throttle it no longer holds.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from twin.alerts.figures import COUNTED, LOG_FIGURES, Values

Row = tuple[int, float, str, str, str]
"""An event log row: (seq, t_sim, kind, component, text)."""
Unit = tuple[str, int] | tuple[str, int, int]
"""An engine unit: ``(kind, id)``, ``("node_gpu", node, index)`` for a GPU by its node, or
``("gpu_node", gpu)`` for the node of engine GPU ``gpu``."""

REBUILD_LOOKBACK_S = 7 * 86400.0
"""A rebuild reads at least this much simulated time back, for throttles still on."""
ROWS_PER_READ = 5000
"""Rows read per frame (a rebuild or a burst catches up over the following frames)."""

_UNIT = re.compile(r"^([a-z_]+) (\d+)$")
_GPU_OF_NODE = re.compile(r"\bGPU (\d+)\b")
_LINK = re.compile(r"^link (\d+) (?:marked down|back up)")
_SWITCH = re.compile(r"\bswitch (\d+) (?:marked failed|back in service)")
_NIC_EDIT = re.compile(r"^NIC link of GPU (\d+) .*(?:marked down|back in service)")
_NODE_FAILED = re.compile(r"^node (\d+) marked failed")
_GPU_FAILED = re.compile(r"^GPU (\d+) \(node (\d+)\) marked failed")
_COOLING = re.compile(r"^cooling loop (\d+) (marked failed|back)")
FLAP_WORDS = {"link": "link", "fabric_link": "link", "optical_link": "link",
              "endpoint_link": "nic", "nic_link": "nic", "leaf": "leaf", "leaf_switch": "leaf",
              "spine": "spine", "spine_switch": "spine", "switch": "switch"}
NODE_WORDS = {"host": "node", "node": "node", "gpu": "gpu_node", "accelerator": "gpu_node",
              "nic": "gpu_node", "endpoint_link": "gpu_node"}
"""Failure components on one node (a GPU's, a NIC's and its link's: the GPU's node)."""
NOT_FAILURES = ("planned_maintenance", "software_bug", "nccl_watchdog", "dependency")


def _unit(component: str) -> tuple[str, int] | None:
    m = _UNIT.match(component or "")
    return (m.group(1), int(m.group(2))) if m else None


def classify(kind: str, component: str, text: str) -> list[tuple[str, Unit]]:
    """The signals one log row gives: ``[(signal, unit), ...]`` (see the module's list)."""
    unit = _unit(component)
    word = unit[0] if unit else ""
    out: list[tuple[str, Unit]] = []
    if kind == "xid":
        if word == "gpu":
            out.append(("xid", ("gpu", unit[1])))
        elif word == "node" and (m := _GPU_OF_NODE.search(text)):
            out.append(("xid", ("node_gpu", unit[1], int(m.group(1)))))
    elif kind == "failure" and unit:
        if word in FLAP_WORDS:
            out.append(("flap", (FLAP_WORDS[word], unit[1])))
        if word in NODE_WORDS and not text.startswith(NOT_FAILURES):
            out.append(("failure", (NODE_WORDS[word], unit[1])))
        if word == "cooling":  # drawn by the failure processes: its repair is not logged
            out.append(("throttle_failed", ("cooling", unit[1])))
    elif kind == "link" and (m := _LINK.match(text)):
        out.append(("flap", ("link", int(m.group(1)))))
    elif kind == "switch" and (m := _SWITCH.search(text)):
        out.append(("flap", ("switch", int(m.group(1)))))
    elif kind == "inventory":
        if m := _NIC_EDIT.match(text):
            out.append(("flap", ("nic", int(m.group(1)))))
        elif m := _NODE_FAILED.match(text):
            out.append(("failure", ("node", int(m.group(1)))))
        elif m := _GPU_FAILED.match(text):
            out.append(("failure", ("node", int(m.group(2)))))
    elif kind == "node_down" and word == "node":
        out.append(("failure", ("node", unit[1])))
    elif kind == "cooling" and (m := _COOLING.match(text)):
        on = m.group(2) == "marked failed"
        out.append(("throttle_on" if on else "throttle_off", ("cooling", int(m.group(1)))))
    elif kind in ("drill", "repair") and unit:
        ended = kind == "repair" or "ended early" in text
        if word in FLAP_WORDS and ended:  # a drill's start is its failure line, counted there
            out.append(("flap", (FLAP_WORDS[word], unit[1])))
        if word == "cooling" and ended:
            out.append(("throttle_off", ("cooling", unit[1])))
        if word == "power_cap":
            out.append(("throttle_off" if ended else "throttle_on", ("rack", unit[1])))
    return out


SIGNAL_FIGURE = {"xid": "gpu.xid_events", "flap": "link.flaps", "failure": "node.failures"}


@dataclass
class EventLog:
    """What the live package hands the evaluator: the run's log ``key``, ``read(after, t_from,
    limit)`` -> rows with ``seq > after`` (and ``t_sim >= t_from`` unless ``None``) in order,
    and ``cluster()`` -> the inventory cluster the run names its parts by (or ``None``)."""

    key: str
    read: Callable[[int, float | None, int], list[Row]]
    cluster: Callable[[], object] | None = None


class LogWindows:
    """Per-entity event times and throttles of one run's log, advanced frame by frame."""

    def __init__(self):
        self.key: str | None = None
        self.last_seq = -1
        self.t_last = 0.0
        self.times: dict[str, dict[tuple, list[float]]] = defaultdict(dict)
        self.labels: dict[tuple, dict[str, str]] = {}
        self.throttled: dict[tuple, float] = {}  # label key -> simulated s it began
        self.unlogged_end: set[tuple] = set()   # throttles begun by a failure line

    def _reset(self, key: str) -> None:
        self.__init__()
        self.key = key

    def advance(self, log: EventLog, *, t_sim: float, horizon_s: float,
                labels: Callable[[Unit], dict[str, str]]) -> None:
        """Read the rows past the last one seen (rebuilding when needed); forget event times
        older than ``horizon_s`` (the longest window).  ``labels`` names an engine unit's
        labels (asked once per unit)."""
        first = False
        if log.key != self.key or t_sim < self.t_last:
            self._reset(log.key)
            first = True
        t_from = t_sim - max(horizon_s, REBUILD_LOOKBACK_S) if first else None
        rows = log.read(self.last_seq, t_from, ROWS_PER_READ)
        for seq, t, kind, component, text in rows:
            for signal, unit in classify(kind, component, text):
                self._apply(signal, unit, t, labels)
            self.last_seq = max(self.last_seq, seq)
        self.t_last = t_sim
        cut = t_sim - horizon_s
        for per in self.times.values():
            for key in [k for k, ts in per.items() if not ts or ts[-1] < cut]:
                del per[key]
            for ts in per.values():
                del ts[:bisect.bisect_left(ts, cut)]

    def _apply(self, signal: str, unit: Unit, t: float, labels_of) -> None:
        if unit not in self.labels:
            self.labels[unit] = labels_of(unit)
        labels = self.labels[unit]
        key = tuple(sorted(labels.items()))
        if signal in SIGNAL_FIGURE:
            bisect.insort(self.times[SIGNAL_FIGURE[signal]].setdefault(key, []), t)
        elif signal in ("throttle_on", "throttle_failed"):
            self.throttled.setdefault(key, t)
            if signal == "throttle_failed":
                self.unlogged_end.add(key)
        else:
            self.throttled.pop(key, None)
            self.unlogged_end.discard(key)

    def close_throttles(self, open_keys: set[tuple] | None) -> None:
        """Forget throttles begun by a failure line that the frame's complete list of open
        incidents no longer holds (an operator's mark and a power cap end in the log)."""
        if open_keys is None:
            return
        for key in self.unlogged_end - open_keys:
            self.throttled.pop(key, None)
        self.unlogged_end &= open_keys

    def values(self, figure: str, *, t_sim: float, window_s: float) -> Values:
        """``figure``'s value per entity now (entities with none are left out)."""
        if figure in COUNTED:
            cut = t_sim - window_s
            out = []
            for key, ts in self.times.get(figure, {}).items():
                n = len(ts) - bisect.bisect_left(ts, cut)
                if n:
                    out.append((dict(key), float(n)))
            return out
        if figure == "racks.throttled_s":
            return [(dict(key), max(0.0, t_sim - since)) for key, since in self.throttled.items()]
        assert figure not in LOG_FIGURES, figure
        return []


def throttle_incidents(frame) -> set[tuple] | None:
    """Label keys of the throttles the frame's open incidents hold, or ``None`` when the frame
    has no complete list (no ``incidents``, or more open than listed)."""
    incidents = frame.get("incidents") if isinstance(frame, dict) else None
    if not isinstance(incidents, dict):
        return None
    listed = incidents.get("open") or []
    if incidents.get("counts", {}).get("open", len(listed)) > len(listed):
        return None
    return {(("cooling", str(inc.get("unit"))),) for inc in listed
            if inc.get("component") == "cooling"}
