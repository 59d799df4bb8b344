"""The inventory: clusters, sites, halls, feeds, cooling, racks, nodes, accelerators, switches,
links, storage, cloud pools; grids of clusters (:mod:`twin.inventory.grid_models`)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from scheduler.limits.checks import fraction
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
    gres_map = models.JSONField(
        default=dict, blank=True,
        help_text="Slurm GRES type -> catalog model, for a cluster imported from Slurm whose "
                  "GRES types are not catalog names: {\"a100\": \"A100-SXM4-80GB\"}; \"gpu\" "
                  "for untyped gpu:N; MODEL/K for a MIG type of K slices per GPU "
                  "(docs/mirror.md)")
    # a site of a grid (issue 30): its region and PUE are its Site's
    grid = models.ForeignKey("twin.Grid", on_delete=models.SET_NULL, null=True, blank=True,
                             related_name="clusters",
                             help_text="The grid this cluster is a site of, if any")
    jurisdiction = models.CharField(
        max_length=32, blank=True,
        help_text="\"EU\", \"US\" ...: what a job's allowed regions (sovereignty) name; "
                  "required in a grid")
    power_price_per_kwh = models.FloatField("energy price per kWh", default=0.08,
                                            validators=non_negative)
    stacks = models.JSONField(default=list, blank=True,
                              help_text="Software stacks it runs, as a JSON list (empty: any)")

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """The GRES map names catalog models (an admin's edit is checked as the import's);
        a grid's site has a jurisdiction and keeps the name its WAN links use."""
        from twin.inventory.gres import gres_map_parse
        from twin.inventory.grid_models import links_naming, stacks_check
        if not isinstance(self.gres_map, dict):
            raise ValidationError({"gres_map": "a mapping of GRES type to catalog model"})
        try:
            self.gres_map = gres_map_parse(self.gres_map)
        except ValueError as exc:
            raise ValidationError({"gres_map": str(exc)}) from None
        try:
            self.stacks = stacks_check(self.stacks)
        except ValidationError as exc:
            raise ValidationError({"stacks": exc.messages}) from None
        if self.grid_id is not None and not self.jurisdiction.strip():
            raise ValidationError({"jurisdiction": "a site of a grid needs a jurisdiction"})
        old = Cluster.objects.filter(pk=self.pk).values_list("name", "grid_id").first() \
            if self.pk is not None else None
        if old is not None and old[1] is not None and (old[0], old[1]) != (self.name,
                                                                           self.grid_id):
            named = links_naming(old[1], old[0])
            if named:
                raise ValidationError(f"WAN links name {old[0]} ({', '.join(named)}): remove "
                                      "them before renaming the cluster or leaving its grid")


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


from twin.inventory.grid_models import Grid, GridCloudRegion, WanLink  # noqa: E402, F401
