"""``/metrics``: the live twin in Prometheus' text exposition format (version 0.0.4).

Values come from the latest frame (the ``LiveState`` row, so any web process can answer)
and from this process's WebSocket counters. Families with nothing to report (no frame yet,
no power model) are left out rather than reported as zero.
"""

from __future__ import annotations

import math

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

GPU_STATES = ("allocated", "idle", "spare", "down")
JOB_STATES = ("queued", "running", "recovering", "in_cloud", "done")
HEALTH_STATES = ("starting", "ok", "error", "stopped", "down")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


class _Exposition:
    def __init__(self):
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples) -> None:
        """One metric family; ``samples`` are ``(labels, value)``, None values skipped."""
        samples = [(labels, value) for labels, value in samples if value is not None]
        if not samples:
            return
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for labels, value in samples:
            label_text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
            self.lines.append(f"{name}{{{label_text}}} {_number(value)}" if label_text
                              else f"{name} {_number(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def metrics_text(*, live, stream: dict) -> str:
    """The exposition for ``live`` (a ``LiveState`` or None) and ``stream`` (WebSocket counters).

    >>> print(metrics_text(live=None, stream={"frames_dropped": 2}).splitlines()[-1])
    clustertwin_websocket_drops_total 2
    """
    frame = live.frame if live is not None else {}
    util = frame.get("util") or {}
    jobs = frame.get("jobs") or {}
    interruptions = frame.get("interruptions") or {}
    power = frame.get("power") or {}
    out = _Exposition()
    out.family("clustertwin_gpus", "gauge", "GPUs of the cluster by state.",
               [({"state": s}, util.get(s)) for s in GPU_STATES])
    out.family("clustertwin_mfu", "gauge",
               "Model FLOPs utilisation of the whole fleet so far (0-1).",
               [({}, frame.get("mfu"))])
    out.family("clustertwin_goodput", "gauge",
               "Share of GPU time that advanced training so far (0-1).",
               [({}, frame.get("goodput"))])
    out.family("clustertwin_interruptions_total", "counter", "Training job interruptions.",
               [({"kind": k}, interruptions.get(k)) for k in ("unplanned", "planned")])
    out.family("clustertwin_power_it_megawatts", "gauge", "IT power draw, MW.",
               [({}, power.get("it_mw"))])
    out.family("clustertwin_jobs", "gauge", "Training jobs by state.",
               [({"state": s}, jobs.get(s)) for s in JOB_STATES])
    out.family("clustertwin_preemptions_total", "counter", "Jobs preempted by the scheduler.",
               [({}, jobs.get("preemptions"))])
    health = live.health if live is not None else None
    out.family("clustertwin_engine_health", "gauge",
               "1 for the live engine's current health state, 0 for the others.",
               [({"state": s}, int(s == health)) for s in HEALTH_STATES])
    if live is not None:
        out.family("clustertwin_frame_seq", "gauge", "Sequence number of the latest frame.",
                   [({}, live.seq)])
        out.family("clustertwin_simulated_seconds", "gauge", "Simulated time of the twin, s.",
                   [({}, live.t_sim)])
        out.family("clustertwin_engine_speed", "gauge",
                   "Speed-up: simulated seconds per wall second.", [({}, live.speed)])
        out.family("clustertwin_engine_paused", "gauge", "1 while the live engine is paused.",
                   [({}, live.paused)])
    out.family("clustertwin_websocket_connections", "gauge",
               "Open dashboard WebSockets in this process.", [({}, stream.get("connections"))])
    out.family("clustertwin_websocket_frames_sent_total", "counter",
               "Frames sent to dashboards by this process.", [({}, stream.get("frames_sent"))])
    out.family("clustertwin_websocket_drops_total", "counter",
               "Frames skipped for slow dashboards by this process (coalesced, not queued).",
               [({}, stream.get("frames_dropped"))])
    return out.text()
