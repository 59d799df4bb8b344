"""The live engine's persisted state: drills and their outcome, snapshots, the durable command
log, the latest frame and health, the event log, history samples."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class DrillStatus(models.TextChoices):
    PENDING = "pending", "pending"
    APPLIED = "applied", "applied"
    REFUSED = "refused", "refused"


class Drill(models.Model):
    """An audited failure drill; the failure-engine and dashboard issues fill in its effect."""

    kind = models.CharField(max_length=32)
    target = models.CharField(max_length=128, default="random")
    params = models.JSONField(default=dict, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                     null=True, blank=True)
    requested_at = models.DateTimeField(auto_now_add=True)
    outcome = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=8, choices=DrillStatus.choices,
                              default=DrillStatus.PENDING, db_index=True)
    applied_at_sim = models.FloatField("applied at (simulated s)", null=True, blank=True)

    class Meta:
        permissions = [("run_drill", "Can run failure drills")]

    def __str__(self) -> str:
        return f"{self.kind} on {self.target}"


class EngineSnapshot(models.Model):
    """The live engine in the versioned snapshot format (:mod:`scheduler.snapshot`: a readable
    header, then the engine), so a restart resumes where it stopped.

    Only the engine's own process writes and reads these; the newest few are kept.
    """

    created_at = models.DateTimeField(auto_now_add=True)
    t_sim = models.FloatField("simulated time s")
    preset = models.CharField(max_length=64)
    seed = models.PositiveIntegerField()
    inventory = models.CharField(max_length=32, blank=True,
                                 help_text="Fingerprint of the inventory the engine ran")
    log_seq = models.BigIntegerField(
        default=0, help_text="Id of the last EngineCommand applied before this snapshot: "
                             "after a crash, the ones after it are replayed")
    data = models.BinaryField()

    class Meta:
        ordering = ["-id"]
        get_latest_by = "id"

    def __str__(self) -> str:
        return f"{self.preset} at t={self.t_sim:.0f} s"


class EngineCommand(models.Model):
    """The durable log of what changed the live engine's state: every inventory command and
    drill, written before it is applied, with the simulated time it was applied at.  After a
    crash the engine restores its last snapshot and replays the applied ones after it."""

    class Status(models.TextChoices):
        APPLYING = "applying", "applying"
        APPLIED = "applied", "applied"
        REFUSED = "refused", "refused"

    run = models.CharField(max_length=96, db_index=True,
                           help_text="The engine run (lineage) it was applied in")
    name = models.CharField(max_length=32)
    params = models.JSONField(default=dict, blank=True)
    drill = models.ForeignKey(Drill, on_delete=models.SET_NULL, null=True, blank=True)
    t_sim = models.FloatField("applied at (simulated s)")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.APPLYING)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name} at t={self.t_sim:.0f} s ({self.status})"


class EngineHealth(models.TextChoices):
    STARTING = "starting", "starting"
    OK = "ok", "ok"
    ERROR = "error", "error"
    STOPPED = "stopped", "stopped"


class LiveState(models.Model):
    """The live engine's latest frame and status: a single row (pk=1), updated every frame.

    A WebSocket client that connects (or resyncs) is sent this frame as its snapshot.
    """

    SINGLETON_PK = 1

    seq = models.BigIntegerField(default=0)
    t_sim = models.FloatField("simulated time s", default=0.0)
    frame = models.JSONField(default=dict, blank=True)
    health = models.CharField(max_length=8, choices=EngineHealth.choices,
                              default=EngineHealth.STARTING)
    last_error = models.TextField(blank=True)
    speed = models.FloatField("speed-up (simulated s per wall s)", default=60.0)
    paused = models.BooleanField(default=False)
    inventory = models.CharField(max_length=32, blank=True,
                                 help_text="Fingerprint of the inventory the engine runs")
    placement = models.JSONField(default=dict, blank=True,
                                 help_text="Jobs' nodes and nodes' live status (engine ids)")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"live state #{self.seq} ({self.health})"


class EngineEvent(models.Model):
    """One line of the live engine's event log, kept (the frame carries only the last few).

    ``seq`` is the line's position in the engine's log; ``component`` names the part it is
    about (``switch 12``, ``node 40``, ``gpu node 7``); ``jobs`` is ``,a,b,`` for filtering.
    """

    inventory = models.CharField(max_length=32, db_index=True)
    seq = models.PositiveIntegerField()
    t_sim = models.FloatField("simulated time s")
    kind = models.CharField(max_length=32, db_index=True)
    component = models.CharField(max_length=64, blank=True, db_index=True)
    jobs = models.TextField(blank=True)
    text = models.TextField()

    class Meta:
        ordering = ["seq"]
        unique_together = [("inventory", "seq")]

    def __str__(self) -> str:
        return f"{self.t_sim:.0f} s {self.kind}: {self.text}"


class HistorySample(models.Model):
    """The live engine's fleet, tenant and power figures at one simulated time
    (``twin.live.history``:
    one row every ``HISTORY_STEP_S`` simulated seconds, per run)."""

    run = models.CharField(max_length=120, help_text="The run's key (as the event log's)")
    t_sim = models.FloatField("simulated time s")
    recorded_at = models.DateTimeField(auto_now_add=True)
    values = models.JSONField(default=dict)

    class Meta:
        ordering = ["run", "t_sim"]
        indexes = [models.Index(fields=["run", "t_sim"], name="history_run_t")]

    def __str__(self) -> str:
        return f"history of {self.run} at t={self.t_sim:.0f} s"


class EntitySample(models.Model):
    """One kind's per-entity figures (``scheduler.physics.entity_figures``) at one simulated
    time, packed as arrays (``twin.live.entity_history``): the newest samples, folded into
    :class:`EntityChunk` rows once enough have gathered."""

    run = models.CharField(max_length=120, help_text="The run's key (as the event log's)")
    kind = models.CharField(max_length=8)
    t_sim = models.FloatField("simulated time s")
    recorded_at = models.DateTimeField(auto_now_add=True)
    metrics = models.CharField(max_length=200, help_text="The figures packed, comma-separated")
    ids = models.BinaryField(blank=True, default=b"", help_text="Jobs: their names, packed")
    data = models.BinaryField(help_text="Each figure's values, one per entity, packed")

    class Meta:
        ordering = ["run", "kind", "t_sim"]
        indexes = [models.Index(fields=["run", "kind", "t_sim"], name="entity_sample_run_t")]

    def __str__(self) -> str:
        return f"{self.kind} figures of {self.run} at t={self.t_sim:.0f} s"


class EntityChunk(models.Model):
    """One figure of a block of entities over consecutive samples (``twin.live.entity_history``):
    what reading one entity's month touches is a few dozen of these, not every sample."""

    run = models.CharField(max_length=120)
    kind = models.CharField(max_length=8)
    metric = models.CharField(max_length=24)
    block = models.IntegerField(help_text="Entity ids block // size; jobs: a hash of the name")
    t_first = models.FloatField("first sample, simulated s")
    t_last = models.FloatField("last sample, simulated s")
    times = models.BinaryField(help_text="Each sample's simulated and wall time, packed")
    ids = models.BinaryField(blank=True, default=b"", help_text="Jobs: their names, packed")
    data = models.BinaryField(help_text="Samples x entities, packed")

    class Meta:
        ordering = ["run", "kind", "metric", "block", "t_first"]
        indexes = [models.Index(fields=["run", "kind", "metric", "block", "t_first"],
                                name="entity_chunk_run_block_t"),
                   models.Index(fields=["run", "t_last"], name="entity_chunk_run_last")]

    def __str__(self) -> str:
        return (f"{self.kind} {self.metric} block {self.block} of {self.run}, "
                f"t={self.t_first:.0f}-{self.t_last:.0f} s")


class GridStateSource(models.TextChoices):
    SIMULATED = "simulated", "simulated"
    MIRRORED = "mirrored", "mirrored"


class GridState(models.Model):
    """A grid's latest overview (issue 30), one row per grid and source, replaced in place.

    ``doc`` is a :class:`scheduler.grid.overview.Overview` (checked with
    :func:`scheduler.grid.overview.check_overview` before it is written): what the grid page
    shows.  ``simulated``: a grid run forward from the inventory; ``mirrored``: several real
    Slurm clusters, one per site, polled each on its own.
    """

    grid = models.ForeignKey("twin.Grid", on_delete=models.CASCADE, related_name="states")
    source = models.CharField(max_length=10, choices=GridStateSource.choices)
    doc = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        unique_together = [("grid", "source")]

    def __str__(self) -> str:
        return f"{self.grid} ({self.source})"


class GridWhatIfStatus(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class GridWhatIf(models.Model):
    """A staff what-if on a grid (issue 30, docs/grid_whatif.md): ``params`` (source,
    horizon, seeds, change) checked when asked; ``result`` the JSON of
    :func:`scheduler.grid.whatif.what_if` (or ``{"error": ...}`` when it failed)."""

    grid = models.ForeignKey("twin.Grid", on_delete=models.CASCADE, related_name="whatifs")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True,
                                     on_delete=models.SET_NULL, related_name="grid_whatifs")
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=8, choices=GridWhatIfStatus.choices,
                              default=GridWhatIfStatus.PENDING)
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return f"grid what-if #{self.pk} on {self.grid_id} ({self.status})"
