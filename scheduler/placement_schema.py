"""The typed placement: what the live engine keeps in the database beside its frame (never
broadcast), read by the API, the admin and the zoomable heatmaps, and the zoom cut out of
it (:func:`scheduler.frames.heat_zoom`).  Part of the contract of
:mod:`scheduler.frame_schema`, whose conventions it follows (``NotRequired``, ``X | None``,
units in each docstring).  Imports only the standard library and the frame's types."""

from typing import NotRequired, TypedDict

from scheduler.frame_schema import Scale


class PackedArray(TypedDict):
    """A numpy array: zlib-compressed bytes, base64 (``scheduler.frames``)."""

    dtype: str
    shape: list[int]
    data: str


class LinkDetail(TypedDict):
    """One switch-link tier at full resolution: lower switches' ids and pods (int32) and
    utilisation by uplink slot (uint16, units of 1e-4; 65535: the link is out)."""

    ids: PackedArray
    pods: PackedArray
    util: PackedArray


class RackDetail(TypedDict):
    """Every rack's hall, row and position (int32) and its values (uint16, quantised:
    status and power_share 1e-4, power_kw 0.1 kW, outlet_c 0.01 °C)."""

    hall: PackedArray
    row: PackedArray
    col: PackedArray
    status: PackedArray
    power_kw: NotRequired[PackedArray]
    power_share: NotRequired[PackedArray]
    outlet_c: NotRequired[PackedArray]


class NoDetail(TypedDict):
    """Nothing (an engine without the physics model)."""


class HeatDetail(TypedDict):
    """The heatmaps at full resolution, by link tier, and the racks'."""

    links: dict[str, LinkDetail]
    racks: RackDetail | NoDetail


class PlacedJob(TypedDict):
    """A gang holding GPUs: its node runs and GPU runs (``[first, last]``, engine ids).

    ``tenant`` and ``gpu_runs`` are null in a placement an engine from before issue 16 wrote
    (:func:`twin.live.stored.placement_upgrade`): it did not report them.  The engine always
    reports both."""

    state: str
    gpus: int
    tenant: str | None
    model: str
    nodes: list[list[int]]
    gpu_runs: list[list[int]] | None


class HeldJob(TypedDict):
    """A job an operator held: ``wait_h`` (h since it queued), ``reason`` (``JobHeldUser``)."""

    name: str
    tenant: str
    gpus: int
    priority: int
    reason: str
    wait_h: float


QueueRow = tuple[int, str, str, int, int, float, float | None, str]
"""A queue row (a JSON array) of ``scheduler.live.QUEUE_COLUMNS``: position, name, tenant,
gpus, priority, wait_h, reserved_start_h, reason."""


class LivePlacement(TypedDict):
    """Where every gang is and every node's status at ``t`` (s), by engine ids; runs are
    ``[first, last]`` lists.  ``storage``: each tier's share of its bandwidth left (0-1);
    ``queue`` the first 20,000 rows, ``queue_total`` the queue's length; ``serving`` each
    inference service's GPU runs.

    The engine reports every key.  Null says "not reported": a placement an older engine
    wrote, as :func:`twin.live.stored.placement_upgrade` reads it (``gpus_down``,
    ``switches_down``, ``links_down`` and ``storage`` came with the live status columns;
    ``heat``, ``queue``/``queue_total`` and ``serving`` with issue 16)."""

    t: float
    jobs: dict[str, PlacedJob]
    down: list[list[int]]
    drained: list[list[int]]
    spare: list[list[int]]
    gpus_down: list[list[int]] | None
    switches_down: list[list[int]] | None
    links_down: list[list[int]] | None
    storage: dict[str, float] | None
    heat: HeatDetail | None
    held: list[HeldJob]
    queue: list[QueueRow] | None
    queue_total: int | None
    serving: dict[str, list[list[int]]] | None


class LinkZoom(TypedDict):
    """A cut of a link tier, un-merged: switch ids of the rows, utilisation (0-1), ``down``
    (1: the link is out) and their count."""

    tier: str
    title: str
    x: str
    y: str
    ids: list[int]
    z: list[list[float]]
    down: list[list[int]]
    links_down: int
    scale: Scale


class RackZoom(TypedDict):
    """One hall of a rack map, un-merged: rack id of each cell (-1: none), values in the
    scale's unit (null: no rack); ``kw`` beside ``power_share`` (kW)."""

    tier: str
    title: str
    x: str
    y: str
    ids: list[list[int]]
    z: list[list[float | None]]
    scale: Scale
    kw: NotRequired[list[list[float | None]]]


HeatZoom = LinkZoom | RackZoom
