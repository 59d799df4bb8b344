"""``/metrics``: the live twin in Prometheus' text exposition format (version 0.0.4).

Written by ``prometheus_client``: :class:`TwinCollector` yields metric families into a fresh
``CollectorRegistry`` per request, so nothing is kept between scrapes and every web process
answers alike. Values come from the latest frame (the ``LiveState`` row, so any web process can
answer) and from this process's WebSocket counters. Families with nothing to report (no frame
yet, no power model) are left out rather than reported as zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from scheduler.frame_schema import StoredFrame

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

GPU_STATES = ("allocated", "idle", "spare", "down")
JOB_STATES = ("queued", "running", "recovering", "in_cloud", "done")
HEALTH_STATES = ("starting", "ok", "error", "stopped", "down")

_KINDS = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily}


def _frame_families(frame: StoredFrame) -> Iterator[Metric | None]:
    util, jobs, interruptions, power = (frame["util"], frame["jobs"], frame["interruptions"],
                                        frame["power"])
    yield family("gauge", "clustertwin_gpus", "GPUs of the cluster by state.",
                 [({"state": s}, util[s]) for s in GPU_STATES])
    yield family("gauge", "clustertwin_mfu",
                 "Model FLOPs utilisation of the whole fleet so far (0-1).", [({}, frame["mfu"])])
    yield family("gauge", "clustertwin_goodput",
                 "Share of GPU time that advanced training so far (0-1).",
                 [({}, frame["goodput"])])
    yield family("counter", "clustertwin_interruptions_total", "Training job interruptions.",
                 [({"kind": k}, interruptions[k]) for k in ("unplanned", "planned")])
    yield family("gauge", "clustertwin_power_it_megawatts", "IT power draw, MW.",
                 [({}, power["it_mw"] if power is not None else None)])  # None: no power model
    yield family("gauge", "clustertwin_jobs", "Training jobs by state.",
                 [({"state": s}, jobs[s]) for s in JOB_STATES])
    yield family("counter", "clustertwin_preemptions_total",
                 "Jobs preempted by the scheduler.", [({}, jobs["preemptions"])])


def family(kind: str, name: str, help_text: str,
           samples: Iterable[tuple[dict, object]]) -> Metric | None:
    """One metric family from ``(labels, value)`` pairs, None values skipped; None when no
    sample is left (the family is then left out)."""
    kept = [(labels, value) for labels, value in samples if value is not None]
    if not kept:
        return None
    names = list(kept[0][0])
    out = _KINDS[kind](name, help_text, labels=names)
    for labels, value in kept:
        out.add_metric([str(labels[k]) for k in names], float(value))
    return out


class TwinCollector(Collector):
    """The twin's own figures for ``live`` (a ``LiveState`` or None) and ``stream`` (this
    process's WebSocket counters)."""

    def __init__(self, *, live, stream: dict):
        self.live = live
        self.stream = stream

    def _families(self) -> Iterator[Metric | None]:
        live, stream = self.live, self.stream
        frame = live.frame if live is not None else None  # None: no frame to show
        if frame is not None:
            yield from _frame_families(frame)
        health = live.health if live is not None else None
        yield family("gauge", "clustertwin_engine_health",
                     "1 for the live engine's current health state, 0 for the others.",
                     [({"state": s}, int(s == health)) for s in HEALTH_STATES])
        if live is not None:
            yield family("gauge", "clustertwin_frame_seq",
                         "Sequence number of the latest frame.", [({}, live.seq)])
            yield family("gauge", "clustertwin_simulated_seconds",
                         "Simulated time of the twin, s.", [({}, live.t_sim)])
            yield family("gauge", "clustertwin_engine_speed",
                         "Speed-up: simulated seconds per wall second.", [({}, live.speed)])
            yield family("gauge", "clustertwin_engine_paused",
                         "1 while the live engine is paused.", [({}, live.paused)])
        yield family("gauge", "clustertwin_websocket_connections",
                     "Open dashboard WebSockets in this process.",
                     [({}, stream.get("connections"))])
        yield family("counter", "clustertwin_websocket_frames_sent_total",
                     "Frames sent to dashboards by this process.",
                     [({}, stream.get("frames_sent"))])
        yield family("counter", "clustertwin_websocket_drops_total",
                     "Frames skipped for slow dashboards by this process (coalesced, not "
                     "queued).", [({}, stream.get("frames_dropped"))])

    def collect(self) -> Iterator[Metric]:
        return (f for f in self._families() if f is not None)


def exposition(collector: Collector) -> bytes:
    """Prometheus text (0.0.4) of one collector, in a registry of its own."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)


def metrics_text(*, live, stream: dict) -> str:
    """The exposition for ``live`` (a ``LiveState`` or None) and ``stream`` (WebSocket counters).

    >>> print(metrics_text(live=None, stream={"frames_dropped": 2}).splitlines()[-1])
    clustertwin_websocket_drops_total 2.0
    """
    return exposition(TwinCollector(live=live, stream=stream)).decode()
