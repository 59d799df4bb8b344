"""Inventory of a cluster: the physical layer, the interconnect, storage and cloud pools.

Rows here are what the admin edits. The core never sees them: ``twin.inventory`` turns them
into the core's arrays.  Validation lives in ``clean()`` so the admin shows clear messages.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from scheduler.control.params import fraction
from scheduler.reliability.profiles import DEFAULT as DEFAULT_PROFILE
from scheduler.reliability.profiles import PROFILES

positive = [MinValueValidator(0.000001, message="must be positive")]
non_negative = [MinValueValidator(0, message="cannot be negative")]


class Cluster(models.Model):
    """One twin: the unit that ``build_cluster`` creates and ``--replace`` replaces."""

    name = models.SlugField(max_length=64, unique=True)
    preset = models.CharField(max_length=64, blank=True)
    fabric_kind = models.CharField(max_length=32)
    fabric_params = models.JSONField(default=dict, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revision = models.PositiveBigIntegerField(
        default=0, editable=False,
        help_text="Bumped by every structural edit (racks, nodes, GPUs, switches, cables, "
                  "storage): the live engine re-plans when it moves")
    failure_profile = models.CharField(
        max_length=64, default=DEFAULT_PROFILE, choices=[(p, p) for p in PROFILES],
        help_text="Failure rates the live engine draws (scheduler/reliability/profiles, "
                  "docs/failures.md); a fresh engine takes a change")

    def __str__(self) -> str:
        return self.name


class Site(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="sites")
    name = models.CharField(max_length=64)
    region = models.CharField(max_length=64, blank=True)
    pue = models.FloatField(default=1.2, validators=positive,
                            help_text="Power usage effectiveness (1.1 hyperscale to 1.6 average)")

    class Meta:
        unique_together = [("cluster", "name")]

    def __str__(self) -> str:
        return self.name


class DataHall(models.Model):
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="halls")
    name = models.CharField(max_length=64)

    class Meta:
        unique_together = [("site", "name")]

    def __str__(self) -> str:
        return f"{self.site.name}/{self.name}"


class PowerFeed(models.Model):
    """A PDU pair feeding one rack (or a larger feed); a rack power loss drill targets it."""

    hall = models.ForeignKey(DataHall, on_delete=models.CASCADE, related_name="power_feeds")
    name = models.CharField(max_length=64)
    capacity_kw = models.FloatField(validators=positive)
    status = models.CharField(max_length=8, default="up",
                              choices=[("up", "up"), ("down", "down")])

    class Meta:
        unique_together = [("hall", "name")]

    def __str__(self) -> str:
        return self.name


class CoolingLoop(models.Model):
    class Kind(models.TextChoices):
        AIR = "air", "air"
        LIQUID = "liquid", "direct liquid"

    hall = models.ForeignKey(DataHall, on_delete=models.CASCADE, related_name="cooling_loops")
    name = models.CharField(max_length=64)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.AIR)
    capacity_kw = models.FloatField(validators=positive)
    status = models.CharField(max_length=8, default="up",
                              choices=[("up", "up"), ("down", "down")])

    class Meta:
        unique_together = [("hall", "name")]

    def __str__(self) -> str:
        return self.name


class Rack(models.Model):
    hall = models.ForeignKey(DataHall, on_delete=models.CASCADE, related_name="racks")
    name = models.CharField(max_length=64, db_index=True)
    row = models.PositiveIntegerField(help_text="Floor grid row")
    column = models.PositiveIntegerField(help_text="Floor grid column")
    power_capacity_kw = models.FloatField(validators=positive)
    cooling_capacity_kw = models.FloatField(validators=positive)
    power_feed = models.ForeignKey(PowerFeed, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="racks")
    cooling_loop = models.ForeignKey(CoolingLoop, on_delete=models.PROTECT, null=True,
                                     blank=True, related_name="racks")

    class Meta:
        unique_together = [("hall", "row", "column")]

    def __str__(self) -> str:
        return self.name


class AcceleratorModel(models.Model):
    """A catalog entry (``scheduler.hardware.catalog``), editable for what-if figures."""

    name = models.CharField(max_length=32, unique=True)
    vendor = models.CharField(max_length=32)
    bf16_tflops = models.FloatField("dense BF16 TFLOPS", validators=positive)
    hbm_gb = models.FloatField("HBM GB", validators=positive)
    hbm_tb_s = models.FloatField("HBM TB/s", null=True, blank=True, validators=positive)
    scaleup_gb_s = models.FloatField("scale-up GB/s", validators=positive)
    scaleup_domain = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    tdp_w = models.FloatField("TDP W", null=True, blank=True, validators=positive)
    per_node = models.PositiveIntegerField("max per node", validators=[MinValueValidator(1)])
    unconfirmed = models.CharField(max_length=200, blank=True,
                                   help_text="Fields whose figure the vendor does not publish")
    source = models.CharField(max_length=300, blank=True)

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        # Node.clean() holds every node to per_node: lowering it below what nodes hold would
        # make each later edit of those nodes (and of their racks) fail.
        if self.pk is None or not self.per_node:
            return
        over = self.nodes.filter(accelerator_count__gt=self.per_node).count()
        if over:
            raise ValidationError({"per_node": (
                f"{over} {self.name} node{'s' if over != 1 else ''} hold more than "
                f"{self.per_node} accelerators: lower their accelerator count first")})


class NodeStatus(models.TextChoices):
    READY = "ready", "ready"
    DRAINED = "drained", "drained"
    FAILED = "failed", "failed"


class Node(models.Model):
    rack = models.ForeignKey(Rack, on_delete=models.CASCADE, related_name="nodes")
    slot = models.PositiveIntegerField()
    hostname = models.CharField(max_length=64, unique=True)
    accelerator_model = models.ForeignKey(AcceleratorModel, on_delete=models.PROTECT,
                                          related_name="nodes")
    accelerator_count = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    cpu_cores = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    ram_gb = models.FloatField(validators=positive)
    nic_count = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    nic_gbps = models.FloatField("NIC Gb/s", validators=positive)
    nvme_tb = models.FloatField("local NVMe TB", validators=non_negative)
    nvlink_domain = models.PositiveIntegerField(default=0)
    is_spare = models.BooleanField(default=False, help_text="Hot spare, kept out of the pool")
    status = models.CharField(max_length=8, choices=NodeStatus.choices,
                              default=NodeStatus.READY, db_index=True)
    status_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        unique_together = [("rack", "slot")]

    def __str__(self) -> str:
        return self.hostname

    def clean(self) -> None:
        model = getattr(self, "accelerator_model", None)
        if model is not None and self.accelerator_count and (
            self.accelerator_count > model.per_node
        ):
            raise ValidationError({"accelerator_count": (
                f"a {model.name} node holds at most {model.per_node} accelerators, "
                f"not {self.accelerator_count}")})


class AcceleratorStatus(models.TextChoices):
    OK = "ok", "ok"
    FAILED = "failed", "failed"


class Accelerator(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="accelerators")
    index = models.PositiveIntegerField()
    serial = models.CharField(max_length=64, unique=True)
    status = models.CharField(max_length=8, choices=AcceleratorStatus.choices,
                              default=AcceleratorStatus.OK, db_index=True)

    class Meta:
        unique_together = [("node", "index")]

    def __str__(self) -> str:
        return self.serial

    def clean(self) -> None:
        node = getattr(self, "node", None)
        if node is None or self.index is None:
            return
        if self.index >= node.accelerator_count:
            raise ValidationError({"index": (
                f"{node.hostname} holds {node.accelerator_count} accelerators "
                f"(indices 0-{node.accelerator_count - 1}); index {self.index} is out of range")})


class SwitchTier(models.TextChoices):
    LEAF = "leaf", "leaf"
    SPINE = "spine", "spine"
    CORE = "core", "core"


class LinkStatus(models.TextChoices):
    UP = "up", "up"
    DOWN = "down", "down"


class Switch(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="switches")
    name = models.CharField(max_length=64)
    index = models.PositiveIntegerField(help_text="Switch id in the core's fabric arrays")
    tier = models.CharField(max_length=8, choices=SwitchTier.choices, db_index=True)
    radix = models.PositiveIntegerField(validators=[MinValueValidator(2)])
    port_gbps = models.FloatField("port Gb/s", validators=positive)
    rail = models.IntegerField(null=True, blank=True)
    pod = models.IntegerField("group/pod", null=True, blank=True)
    status = models.CharField(max_length=8, choices=LinkStatus.choices, default=LinkStatus.UP)

    class Meta:
        unique_together = [("cluster", "name"), ("cluster", "index")]
        verbose_name_plural = "switches"

    def __str__(self) -> str:
        return self.name


class Link(models.Model):
    """A cable: switch to switch, or a node's NIC port to its leaf switch."""

    class Medium(models.TextChoices):
        COPPER = "copper", "copper (DAC)"
        OPTICAL = "optical", "optical"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="links")
    switch = models.ForeignKey(Switch, on_delete=models.CASCADE, related_name="links")
    peer_switch = models.ForeignKey(Switch, on_delete=models.CASCADE, null=True, blank=True,
                                    related_name="peer_links")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, null=True, blank=True,
                             related_name="links")
    node_port = models.PositiveIntegerField(null=True, blank=True)
    speed_gbps = models.FloatField("speed Gb/s", validators=positive)
    medium = models.CharField(max_length=8, choices=Medium.choices, default=Medium.OPTICAL)
    transceiver_model = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=8, choices=LinkStatus.choices, default=LinkStatus.UP,
                              db_index=True)

    def __str__(self) -> str:
        far = self.node_id and f"{self.node}:{self.node_port}" or str(self.peer_switch)
        return f"{self.switch} - {far}"

    def clean(self) -> None:
        has_peer = self.peer_switch_id is not None
        has_node = self.node_id is not None
        if has_peer == has_node:
            raise ValidationError("a link joins its switch to exactly one other end: "
                                  "a peer switch or a node port")
        if has_peer and self.peer_switch_id == self.switch_id:
            raise ValidationError({"peer_switch": "a link cannot join a switch to itself"})
        if has_node and self.node_port is None:
            raise ValidationError({"node_port": "a node link needs the node's NIC port"})
        # every end must belong to the link's cluster (the engine runs one cluster's fabric)
        ends = [("switch", self.switch_id and self.switch.cluster_id)]
        if has_peer:
            ends.append(("peer_switch", self.peer_switch.cluster_id))
        if has_node:
            ends.append(("node", self.node.rack.hall.site.cluster_id))
        for field_name, cluster_id in ends:
            if self.cluster_id and cluster_id and cluster_id != self.cluster_id:
                raise ValidationError({field_name: (
                    f"this end belongs to another cluster than the link "
                    f"({self.cluster.name})")})


class StorageStatus(models.TextChoices):
    UP = "up", "up"
    DEGRADED = "degraded", "degraded"
    DOWN = "down", "down"


class StorageSystem(models.Model):
    class Tier(models.TextChoices):
        CENTRAL = "central", "central parallel file system"
        LOCAL_NVME = "nvme", "node-local NVMe cache"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="storage")
    name = models.CharField(max_length=64)
    tier = models.CharField(max_length=8, choices=Tier.choices)
    capacity_tb = models.FloatField(validators=positive)
    read_gb_s = models.FloatField("read GB/s", validators=positive)
    write_gb_s = models.FloatField("write GB/s", validators=positive)
    gpudirect = models.BooleanField("GPUDirect Storage", default=False)
    status = models.CharField(max_length=8, choices=StorageStatus.choices,
                              default=StorageStatus.UP)
    degraded_factor = models.FloatField(
        "bandwidth left when degraded", default=0.5,
        help_text="Share of its read and write bandwidth the system keeps while marked "
                  "degraded, between 0 and 1 (exclusive)")

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            fraction("bandwidth left when degraded", self.degraded_factor)
        except ValueError as exc:
            raise ValidationError({"degraded_factor": str(exc)}) from None


class CloudPool(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="cloud_pools")
    provider = models.CharField(max_length=32)
    region = models.CharField(max_length=32)
    accelerator_model = models.ForeignKey(AcceleratorModel, on_delete=models.PROTECT)
    max_gpus = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    price_per_gpu_hour = models.DecimalField(max_digits=8, decimal_places=3,
                                             validators=[MinValueValidator(0)])
    provisioning_delay_s = models.PositiveIntegerField(default=600)

    def __str__(self) -> str:
        return f"{self.provider}/{self.region}"


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
    """The live engine, pickled and zlib-compressed, so a restart resumes where it stopped.

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


class AuditEntry(models.Model):
    """Who changed what in the inventory, and when (every status edit that reaches the engine)."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="+")
    username = models.CharField(max_length=150, blank=True,
                                help_text="Kept when the account is deleted")
    action = models.CharField(max_length=32, db_index=True)
    target = models.CharField(max_length=200)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        who = self.username or "-"
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {who} {self.action} {self.target}"


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


class WhatIf(models.Model):
    """A what-if forked from the live engine's newest snapshot ("now"), run in a worker
    process (``twin/whatif.py``); ``result`` is :func:`scheduler.control.whatif.whatif`'s
    report.  ``t_sim`` is the snapshot's simulated time, ``seq`` the live frame shown when it
    was asked for; ``owner`` names the web process that runs it, so a row it left running when
    it died can be marked failed."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        DONE = "done", "done"
        ERROR = "error", "error"

    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                     null=True, blank=True, related_name="+")
    requested_at = models.DateTimeField(auto_now_add=True, db_index=True)
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING,
                              db_index=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    t_sim = models.FloatField("forked at (simulated s)", null=True, blank=True)
    seq = models.BigIntegerField("live frame seq when asked", null=True, blank=True)
    owner = models.CharField(max_length=128, blank=True,
                             help_text="host:pid:token of the web process running it")

    class Meta:
        ordering = ["-id"]
        verbose_name = "what-if"

    def __str__(self) -> str:
        return f"what-if #{self.pk} ({self.status})"


class HistorySample(models.Model):
    """The live engine's fleet, tenant and power figures at one simulated time (``twin.history``:
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


class AlertRule(models.Model):
    """A rule on one live figure (``twin.alerts``): it fires when ``figure`` compares true
    against ``threshold`` for ``for_s`` seconds in a row, and resolves when it no longer does.

    ``for_s`` counts simulated seconds, except for figures on the wall clock (mirror source
    lag, ``twin.alerts.WALL_FIGURES``), where it counts wall seconds."""

    class Severity(models.TextChoices):
        INFO = "info", "info"
        WARNING = "warning", "warning"
        CRITICAL = "critical", "critical"

    COMPARISONS = [(">", ">"), (">=", ">="), ("<", "<"), ("<=", "<=")]

    name = models.SlugField(max_length=64, unique=True)
    figure = models.CharField(max_length=120, help_text="A path in the live frame "
                              "(util.down, mirror.telemetry.temp_max_c) or a derived figure "
                              "(tenants.quota_ratio, links.util_max …)")
    comparison = models.CharField(max_length=2, choices=COMPARISONS, default=">")
    threshold = models.FloatField()
    for_s = models.FloatField("for (s)", default=0.0, help_text="How long the comparison must "
                              "hold before the alert fires (simulated s; wall s for wall "
                              "figures)")
    severity = models.CharField(max_length=8, choices=Severity.choices,
                                default=Severity.WARNING)
    enabled = models.BooleanField(default=True)
    description = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def clean(self) -> None:
        from twin.alerts import rule_errors  # the figures live with the evaluator

        errors = rule_errors(figure=self.figure, threshold=self.threshold, for_s=self.for_s)
        if errors:
            raise ValidationError(errors)

    def __str__(self) -> str:
        return f"{self.name}: {self.figure} {self.comparison} {self.threshold:g}"


class Alert(models.Model):
    """One firing of a rule for one set of labels (e.g. one tenant): firing until resolved;
    acknowledged by a member of staff at any time."""

    class State(models.TextChoices):
        FIRING = "firing", "firing"
        RESOLVED = "resolved", "resolved"

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    state = models.CharField(max_length=8, choices=State.choices, default=State.FIRING,
                             db_index=True)
    labels = models.JSONField(default=dict, blank=True)
    value = models.FloatField(help_text="The figure when the alert fired")
    started_at = models.DateTimeField(db_index=True)
    t_sim = models.FloatField("fired at (simulated s)")
    resolved_at = models.DateTimeField(null=True, blank=True)
    t_sim_resolved = models.FloatField("resolved at (simulated s)", null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                        null=True, blank=True, related_name="+")
    acknowledged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"alert #{self.pk} {self.rule.name} ({self.state})"


from twin.models_study import Study, StudyRun  # noqa: E402,F401  (registered with the app)
