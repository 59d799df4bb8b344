"""The live state's stored frame and placement as readers get them: one upgrade, at load.

``LiveState.frame`` and ``LiveState.placement`` are JSON the driver wrote, possibly by an older
engine (the row outlives a deploy until the engine publishes again).  :func:`frame_upgrade`
and :func:`placement_upgrade` turn a row's raw values into the types of
:mod:`scheduler.frame_schema` once, where the row is loaded (``twin.live.selectors``), so
no reader downstream guesses which engine wrote them: a key the schema requires is there, and
a key an older engine did not report is ``None`` ("not reported"), never a made-up value.
"""

from __future__ import annotations

from scheduler.frame_schema import StoredFrame
from scheduler.placement_schema import LivePlacement, PlacedJob


def frame_lost(raw) -> bool:
    """Whether ``raw`` is a :class:`~scheduler.frame_schema.LostFrame`: the driver lost the
    engine's state (a failed step whose restore failed too)."""
    return isinstance(raw, dict) and raw.get("lost") is True


def frame_upgrade(raw) -> StoredFrame | None:
    """The stored frame, or ``None`` when there is none to show: before the engine's first
    frame (``{}``), or a :class:`~scheduler.frame_schema.LostFrame`.  Frames are rewritten
    every tick by the engine that runs, so there is no older layout to convert."""
    if not raw or not isinstance(raw, dict) or frame_lost(raw):
        return None
    return raw  # type: ignore[return-value]


def _job_upgrade(raw: dict) -> PlacedJob:
    return {"state": raw["state"], "gpus": raw["gpus"],
            "tenant": raw.get("tenant"),  # None: not reported (engines before issue 16)
            "model": raw["model"], "nodes": raw["nodes"],
            "gpu_runs": raw.get("gpu_runs")}  # None: which GPUs, not reported


def placement_upgrade(raw) -> LivePlacement | None:
    """The stored placement as a :class:`~scheduler.placement_schema.LivePlacement`, ``None``
    before the engine wrote one.

    What an older engine did not report reads ``None``: ``gpus_down``, ``switches_down``,
    ``links_down`` and ``storage`` (placements from before the live status columns),
    ``heat``, ``queue`` and ``queue_total`` (together), ``serving`` and each job's ``tenant``
    and ``gpu_runs`` (before issue 16).  ``held`` is ``[]`` there: nothing could be held
    before issue 16 brought holds.
    """
    if not raw or not isinstance(raw, dict):
        return None
    queued = "queue" in raw and "queue_total" in raw
    return {"t": raw["t"],
            "jobs": {name: _job_upgrade(job) for name, job in raw["jobs"].items()},
            "down": raw["down"], "drained": raw["drained"], "spare": raw["spare"],
            "gpus_down": raw.get("gpus_down"), "switches_down": raw.get("switches_down"),
            "links_down": raw.get("links_down"), "storage": raw.get("storage"),
            "heat": raw.get("heat"), "held": raw.get("held", []),
            "queue": raw["queue"] if queued else None,
            "queue_total": raw["queue_total"] if queued else None,
            "serving": raw.get("serving")}
