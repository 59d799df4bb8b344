"""The typed contract between the core and the web: the live frame and the placement.

:func:`scheduler.live.live_frame` builds a :class:`LiveFrame` every tick (the dashboard's view,
broadcast to every WebSocket); :func:`scheduler.live.live_placement` a :class:`LivePlacement`
(kept in the database for the API, the admin and the zoomable heatmaps, never broadcast);
:func:`scheduler.frames.heat_zoom` cuts a :class:`LinkZoom` or :class:`RackZoom` out of the
placement's full-resolution heatmaps (``/api/heatmap``).  The driver keeps a frame as a
:class:`StoredFrame` (the engine's frame plus its own status and the alert count) and sends
it as a :class:`PublishedFrame` (plus the broadcast head); a client that connects gets a
:class:`Snapshot`, or a :class:`PendingSnapshot` before the first frame.  An engine that failed
and could not be restored leaves a :class:`LostFrame` (published as a
:class:`PublishedLostFrame`): no live state, only the driver's status.

A key is required unless marked ``NotRequired``; ``X | None`` is a key that is always there and
may be null.  Units are given in each type's docstring (s: simulated seconds; h: simulated
hours; fractions are 0-1 unless said otherwise).

The placement's and the zoom's types are in :mod:`scheduler.placement_schema`;
``python -m scheduler.schema_json > docs/frame.schema.json`` writes the JSON Schema (draft
2020-12) of both (:mod:`scheduler.schema_json`); a test compares the checked-in file with it
and validates real frames against it.  This module imports only the standard library.

>>> sorted(LiveFrame.__required_keys__)[:4]
['ettr', 'events', 'failures', 'goodput']
"""

from typing import Literal, NotRequired, TypedDict

from scheduler.incident_schema import Incidents
from scheduler.mirror_schema import MirrorSummary


# ----------------------------------------------------------------- the live frame's parts
class VendorUse(TypedDict):
    """GPUs of one vendor (GPUs), and how many of them are allocated (GPUs)."""

    gpus: int
    allocated: int


class Utilisation(TypedDict):
    """GPUs now, GPUs: ``allocated + idle + spare + down == gpus``."""

    gpus: int
    allocated: int
    idle: int
    spare: int
    down: int
    by_vendor: dict[str, VendorUse]


class LedgerHours(TypedDict):
    """GPU-hours of the run so far booked to each ledger category (GPU-h); they sum to the
    period (``scheduler.model.ledger.CATEGORIES``)."""

    productive: float
    idle: float
    fragmented: float
    preempted: float
    lost_work: float
    recovery: float
    checkpoint_stall: float
    exposed_communication: float
    data_stall: float
    throttled: float
    down_for_repair: float
    hot_spare: float
    inference: float


class MfuLoss(TypedDict, total=False):
    """MFU lost to each training category, percentage points of peak, plus
    ``kernel_efficiency``.  Every key is present once the run has training GPU-time; none
    before (an empty object)."""

    idle: float
    fragmented: float
    preempted: float
    lost_work: float
    recovery: float
    checkpoint_stall: float
    exposed_communication: float
    data_stall: float
    throttled: float
    down_for_repair: float
    hot_spare: float
    kernel_efficiency: float


class JobCounts(TypedDict):
    """Training jobs by state (jobs); ``preemptions`` counts preemptions so far."""

    queued: int
    running: int
    recovering: int
    in_cloud: int
    done: int
    preemptions: int


class QueuedJob(TypedDict):
    """A queued gang in the policy's order: its 1-based ``position``, ``gpus`` (GPUs),
    ``wait_h`` (h queued), ``reserved_start_h`` (h, the backfill reservation while it lies
    ahead, else null) and ``reason`` (why it waits, in Slurm's words; may be empty)."""

    position: int
    name: str
    tenant: str
    gpus: int
    priority: int
    wait_h: float
    reserved_start_h: float | None
    reason: str


class Span(TypedDict):
    """How many pods and leaves a gang's nodes cover."""

    pods: int
    leaves: int


class RunningJob(TypedDict):
    """A gang holding GPUs: ``state`` (``running``, ``draining``, ``detecting`` ...),
    ``model`` (accelerator model name), ``mfu`` (fraction of the gang's peak; 0 unless
    running) and ``running_h`` (h since its segment started)."""

    name: str
    tenant: str
    gpus: int
    state: str
    model: str
    span: Span
    mfu: float
    running_h: float


class TenantUse(TypedDict):
    """GPUs a tenant holds now (training and inference) and its quota (GPUs)."""

    tenant: str
    used_gpus: int
    quota_gpus: int


class Inference(TypedDict):
    """GPUs serving inference now, and the share of demand served so far (null: no demand
    yet)."""

    serving_gpus: int
    slo_attainment: float | None


class Interruptions(TypedDict):
    """Job interruptions so far: unplanned, planned, and all of them by cause."""

    unplanned: int
    planned: int
    by_cause: dict[str, int]


class MttfBucket(TypedDict):
    """One job-size bucket (``gpus``: ``"8-63"``, ``">=4096"``): jobs that started on
    premises, their interruptions, the MTTF measured (h; null: none interrupted) and the one
    the failure model predicts for the bucket's mean job (h; null: no job)."""

    gpus: str
    jobs: int
    interruptions: int
    mttf_hours: float | None
    predicted_mttf_hours: float | None


class Failures(TypedDict):
    """Component failures so far, free hot spares (GPUs), repairs pending, lemon node ids
    (engine ids) and MTTF by job size."""

    total: int
    spares_free: int
    repairs_pending: int
    lemon_nodes: list[int]
    mttf_by_size: list[MttfBucket]


class Power(TypedDict):
    """Power now: IT and facility draw (MW), the hottest rack (kW), GPUs throttled."""

    it_mw: float
    facility_mw: float
    rack_peak_kw: float
    throttled_gpus: int


class Event(TypedDict):
    """One line of the engine's event log at ``t`` (s).  The optional keys name what it is
    about: ``job`` and ``jobs`` (names; a cloud-region-loss drill lists run indices),
    ``cause`` (failure cause), ``component`` (``"node 12"``, ``"rack 3"`` ...), ``drill``
    (drill kind), ``xid`` (XID code), and engine ids of a ``switch``, ``link``, ``gpu``,
    ``node``."""

    t: float
    kind: str
    text: str
    job: NotRequired[str]
    jobs: NotRequired[list[str | int]]
    cause: NotRequired[str]
    component: NotRequired[str]
    drill: NotRequired[str]
    xid: NotRequired[int]
    switch: NotRequired[int]
    link: NotRequired[int]
    gpu: NotRequired[int]
    node: NotRequired[int]


class Scale(TypedDict):
    """A heatmap's fixed colour scale, from the model: bounds ``zmin``/``zmax`` in ``unit``
    (``design``: the outlet of a rack at its provisioned power, °C, outlet maps only)."""

    zmin: float
    zmax: float
    unit: str
    title: str
    design: NotRequired[float]


class Heatmap(TypedDict):
    """A downsampled matrix (at most ``MAX_CELLS`` cells): each cell the maximum of the
    ``rows_per_cell`` x ``cols_per_cell`` block it merges; ``shape`` is the full matrix's,
    ``rows`` the ``[first, last]`` ids each cell row covers."""

    title: str
    x: str
    y: str
    rows_per_cell: int
    cols_per_cell: int
    shape: list[int]
    z: list[list[float]]
    rows: list[list[int]]
    scale: Scale


class LinkHeatmap(Heatmap):
    """One link tier, lower switch by uplink slot (utilisation 0-1); ``tier`` is absent on
    the Dragonfly+ group-by-group map of global links.  ``down``: share of each cell's links
    out (same cells as ``z``); ``links_down``: their count."""

    tier: NotRequired[str]
    down: list[list[float]]
    links_down: int


class RackHeatmap(Heatmap):
    """Racks as on the floor (halls stacked; ``rows`` are floor rows); ``empty`` (-1) marks a
    cell with no rack."""

    rows_per_hall: int
    empty: int


class RackHeatmaps(TypedDict):
    """Rack maps: share of nodes out (always), and with the power model, draw (kW), draw over
    budget (fraction) and outlet temperature (°C)."""

    status: RackHeatmap
    power_kw: NotRequired[RackHeatmap]
    power_share: NotRequired[RackHeatmap]
    outlet_c: NotRequired[RackHeatmap]


class HallSummary(TypedDict):
    """One data hall of the rack floor (:func:`scheduler.hall_summary.hall_summary`): racks,
    racks with any node out, nodes out and the worst rack's share out; with the power model
    the hall's draw (kW), its peak rack draw over budget (fraction) and hottest outlet (°C)."""

    hall: int
    racks: int
    racks_out: int
    nodes_out: int
    worst: float
    power_kw: NotRequired[float]
    power_share_max: NotRequired[float]
    outlet_c_max: NotRequired[float]


class StorageTier(TypedDict):
    """A storage tier's demand, supply and capacity (GB/s)."""

    tier: str
    demand_gb_s: float
    supply_gb_s: float
    capacity_gb_s: float


class Heatmaps(TypedDict):
    """The topology page's maps; ``halls`` one summary per data hall of the rack floor,
    ``links`` once the fabric has routed a load, ``storage`` with the physics model."""

    racks: RackHeatmaps
    halls: NotRequired[list[HallSummary]]
    links: NotRequired[list[LinkHeatmap]]
    storage: NotRequired[list[StorageTier]]


class LiveFrame(TypedDict):
    """The dashboard's view of the engine at ``t`` (s), built once per tick.

    ``mfu`` (fraction of peak) and ``loss_pp`` since the start of the run; ``mfu_window`` the
    MFU of the last window (null while it holds no training GPU-time), ``mfu_window_s`` the
    seconds it covers; ``goodput`` and ``ettr`` fractions (``ettr`` null before a training
    run started); ``queue``, ``running_jobs`` and ``events`` the first 50 (``top``);
    ``power`` null without the power model; ``mirror`` null unless the engine mirrors a real
    cluster; ``incidents`` what is broken now (:class:`Incidents`).
    """

    t: float
    util: Utilisation
    mfu: float
    loss_pp: MfuLoss
    goodput: float
    mfu_window: float | None
    mfu_window_s: float
    ettr: float | None
    ledger_gpu_hours: LedgerHours
    jobs: JobCounts
    queue: list[QueuedJob]
    running_jobs: list[RunningJob]
    tenants: list[TenantUse]
    inference: Inference
    interruptions: Interruptions
    failures: Failures
    power: Power | None
    events: list[Event]
    heatmaps: Heatmaps
    mirror: MirrorSummary | None
    incidents: Incidents


# ----------------------------------------------------------------- as the web receives it
class SourceProblem(TypedDict):
    """Records of one kind a mirror source could not use: how many, and the first names."""

    count: int
    names: list[str]


class SourceStatus(TypedDict):
    """A mirror source (``slurm``, ``prometheus``): ``state`` (``waiting``, ``ok``,
    ``stale``, ``error``), last good and last tried read (epoch s), age of the good one (s),
    the last error, how long the read took (s), and problems by kind."""

    state: str
    last_ok: float | None
    last_try: float | None
    age_s: float | None
    error: str
    read_s: float | None
    problems: dict[str, SourceProblem]


class DriverStatus(TypedDict):
    """What the engine driver adds to each frame: ``speed`` (simulated s per wall s),
    ``health`` (``starting``, ``ok``, ``error``, ``stopped``), ``lag_ticks``, the ``source``
    (``simulate`` or ``mirror``) and each mirror source's status (null when simulating)."""

    speed: float
    paused: bool
    health: str
    lag_ticks: int
    source: Literal["simulate", "mirror"]
    sources: dict[str, SourceStatus] | None


class AlertCount(TypedDict):
    """Alerts firing after this frame's evaluation."""

    firing: int


class StoredFrame(LiveFrame, DriverStatus):
    """A frame as the driver keeps it (``LiveState.frame``) and publishes it; ``alerts``
    unless the alert evaluation failed."""

    alerts: NotRequired[AlertCount]


class PublishedFrame(StoredFrame):
    """A frame on the WebSocket: ``type`` and ``seq`` (the publisher's count) first, ``t``
    (s) and ``sent_at`` (the publisher's epoch s); ``dropped`` (frames this client missed)
    when the consumer had to coalesce."""

    type: Literal["frame"]
    seq: int
    sent_at: float
    dropped: NotRequired[int]


class Snapshot(StoredFrame):
    """The full state a client gets on connect or resync: the stored frame, its ``seq`` and
    the driver's freshest status (``last_error``: empty unless the engine failed)."""

    type: Literal["snapshot"]
    seq: int
    last_error: str


class LostFrame(DriverStatus):
    """What the driver keeps and publishes when a step failed and restoring the last snapshot
    failed too: no live state at all, only ``t`` (s, as far as the engine had got), ``lost``
    (always true: what tells it from a :class:`StoredFrame`) and the driver's status
    (``health`` ``error``; the reason is the live state's ``last_error``).  Readers show it as
    "no live state" (:func:`twin.live.stored.frame_upgrade` answers None), never as a frame."""

    t: float
    lost: Literal[True]
    alerts: NotRequired[AlertCount]


class PublishedLostFrame(LostFrame):
    """A :class:`LostFrame` on the WebSocket, with the head of a :class:`PublishedFrame`."""

    type: Literal["frame"]
    seq: int
    sent_at: float
    dropped: NotRequired[int]


class PendingSnapshot(TypedDict):
    """The snapshot while there is no frame to show: before the engine's first frame, or
    after it lost its state (a :class:`LostFrame`).  The driver's freshest status rides
    along once the live state has a row."""

    type: Literal["snapshot"]
    seq: int
    pending: Literal[True]
    health: NotRequired[str]
    speed: NotRequired[float]
    paused: NotRequired[bool]
    last_error: NotRequired[str]
