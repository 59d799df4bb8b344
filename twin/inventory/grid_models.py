"""The grid in the inventory (issue 30): a federation of inventory clusters plus cloud regions
and the WAN between them.

Each owned site of a grid is an inventory :class:`~twin.inventory.models.Cluster` (its own
fabric, storage, power and cooling; ``Cluster.grid`` names its grid, and its grid attributes
``jurisdiction``, ``power_price_per_kwh`` and ``stacks`` sit on the cluster, its ``region`` and
``pue`` on its :class:`~twin.inventory.models.Site`).  A grid adds :class:`GridCloudRegion`
rows (a public cloud's GPU pool, a place of the grid) and :class:`WanLink` rows joining two
places.  Places are named as :class:`scheduler.hardware.grid_spec.GridSpec` names them: a
member cluster by its name, a cloud region by ``provider/region``.

A grid cloud region is a model of its own rather than a :class:`CloudPool` with a grid: a
cloud pool is a cluster's burst capacity (its plan carries it, its engine bursts into it),
while a grid's cloud region is a place beside the clusters, with its own jurisdiction, spot
offer and stacks, and no cluster.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

non_negative = [MinValueValidator(0, message="cannot be negative")]
positive = [MinValueValidator(0.000001, message="must be positive")]
NAME = RegexValidator(r"^[-a-zA-Z0-9_.]+$", message="letters, digits, '-', '_' and '.' only "
                      "(a cloud region's place is provider/region)")
"""A provider or region name: no ``/`` (it joins them into the place's name)."""


def stacks_check(value) -> list[str]:
    """A list of distinct, non-empty software stack names (``[]``: runs any)."""
    if not isinstance(value, list) or not all(isinstance(s, str) and s.strip() for s in value):
        raise ValidationError("a list of software stack names, like [\"cuda12\", \"rocm6\"]")
    names = [s.strip() for s in value]
    if len(set(names)) != len(names):
        raise ValidationError("a software stack is named twice")
    return names


class Grid(models.Model):
    """Several clusters and cloud regions run as one logical pool."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    weight_cost = models.FloatField(
        "placement weight: cost", default=1.0, validators=non_negative,
        help_text="How much a place's price counts when the grid places a job")
    weight_start = models.FloatField(
        "placement weight: expected start", default=1.0, validators=non_negative,
        help_text="How much the expected wait at a place (its queue) counts")
    weight_gravity = models.FloatField(
        "placement weight: data gravity", default=1.0, validators=non_negative,
        help_text="How much moving the dataset and latest checkpoint over the WAN counts")
    checkpoint_replication_s = models.PositiveIntegerField(
        "checkpoint replication interval (s)", default=3600,
        help_text="How often a job's latest checkpoint is copied off-site, seconds "
                  "(0: never; a region loss then restarts its jobs from scratch)")

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        weights = (self.weight_cost, self.weight_start, self.weight_gravity)
        if all(w is not None and w >= 0 for w in weights) and not any(weights):
            raise ValidationError("at least one placement weight must be positive")

    def places(self) -> list[str]:
        """The grid's place names as saved: member clusters, then cloud regions."""
        return ([c.name for c in self.clusters.order_by("id")]
                + [r.place for r in self.cloud_regions.order_by("id")])


class GridCloudRegion(models.Model):
    """A public-cloud region's GPU pool, a place of a grid."""

    grid = models.ForeignKey(Grid, on_delete=models.CASCADE, related_name="cloud_regions")
    provider = models.CharField(max_length=32, validators=[NAME])
    region = models.CharField(max_length=32, validators=[NAME])
    jurisdiction = models.CharField(max_length=32, help_text="\"EU\", \"US\" ...: what a "
                                    "job's allowed regions (sovereignty) name")
    accelerator_model = models.ForeignKey("twin.AcceleratorModel", on_delete=models.PROTECT,
                                          related_name="grid_cloud_regions")
    quota_gpus = models.PositiveIntegerField(
        "quota (GPUs)", validators=[MinValueValidator(1, message="quota must be positive")])
    on_demand_per_gpu_hour = models.FloatField("on-demand price per GPU-hour",
                                               validators=non_negative)
    spot_per_gpu_hour = models.FloatField("spot price per GPU-hour", null=True, blank=True,
                                          validators=non_negative,
                                          help_text="Empty: the region offers no spot")
    spot_interruptions_per_hour = models.FloatField(
        "spot interruptions per instance-hour", default=0.0, validators=non_negative)
    startup_s = models.PositiveIntegerField("start-up delay (s)", default=600)
    stacks = models.JSONField(default=list, blank=True,
                              help_text="Software stacks it runs, as a JSON list (empty: any)")

    class Meta:
        unique_together = [("grid", "provider", "region")]

    def __str__(self) -> str:
        return self.place

    @property
    def place(self) -> str:
        return f"{self.provider}/{self.region}"

    def clean(self) -> None:
        try:
            self.stacks = stacks_check(self.stacks)
        except ValidationError as exc:
            raise ValidationError({"stacks": exc.messages}) from None
        if self.pk is None:
            return
        # a rename would strand the WAN links that name the old place
        old = GridCloudRegion.objects.filter(pk=self.pk).first()
        if old is not None and (old.place != self.place or old.grid_id != self.grid_id):
            named = links_naming(old.grid_id, old.place)
            if named:
                raise ValidationError(f"WAN links name {old.place} ({', '.join(named)}): "
                                      "remove them before renaming or moving the region")


class WanLink(models.Model):
    """A WAN link between two places of a grid, both directions."""

    grid = models.ForeignKey(Grid, on_delete=models.CASCADE, related_name="wan_links")
    a = models.CharField("end a", max_length=80,
                         help_text="A member cluster's name or a cloud region's provider/region")
    b = models.CharField("end b", max_length=80,
                         help_text="A member cluster's name or a cloud region's provider/region")
    gbps = models.FloatField("Gb/s", validators=positive)
    latency_ms = models.FloatField("latency (ms)", validators=non_negative)
    egress_per_gb = models.FloatField("egress price per GB (a to b)", default=0.0,
                                      validators=non_negative)
    egress_back_per_gb = models.FloatField(
        "egress price per GB (b to a)", null=True, blank=True, validators=non_negative,
        help_text="Empty: the same as a to b")

    def __str__(self) -> str:
        return f"{self.a} - {self.b}"

    pending_places: tuple[str, ...] | None = None
    """The places to check the ends against instead of the saved ones (the admin sets it when
    cloud regions are added in the same form)."""

    def clean(self) -> None:
        if not self.a or not self.b:
            return  # the field's own "required" error
        if self.a == self.b:
            raise ValidationError(f"a WAN link joins two places, not {self.a} to itself")
        places = self.pending_places
        if places is None and self.grid_id is not None:
            places = self.grid.places()
        for end in (self.a, self.b):
            if places is not None and end not in places:
                raise ValidationError({"a" if end == self.a else "b": (
                    f"{end!r} is no place of the grid: a member cluster or a cloud region "
                    f"({', '.join(places) or 'it has none yet'})")})
        if self.grid_id is None:
            return
        twin = (WanLink.objects.filter(grid_id=self.grid_id)
                .filter(models.Q(a=self.a, b=self.b) | models.Q(a=self.b, b=self.a))
                .exclude(pk=self.pk))
        if twin.exists():
            raise ValidationError(f"grid {self.grid.name} already has a WAN link between "
                                  f"{self.a} and {self.b}")


def links_naming(grid_id: int | None, place: str) -> list[str]:
    """The WAN links of a grid that name ``place`` (``a - b`` each)."""
    if grid_id is None:
        return []
    return [str(w) for w in WanLink.objects.filter(grid_id=grid_id)
            .filter(models.Q(a=place) | models.Q(b=place)).order_by("id")]



ENV_NAME = RegexValidator(
    r"^[A-Z_][A-Z0-9_]*$",
    message="the NAME of an environment variable that holds the token (like SLURM_JWT_SITE_A), "
            "never the token itself")


class SiteMirror(models.Model):
    """Where a grid's site (a member cluster) has its Slurm, for ``mirror_grid`` (issue 30).

    ``kind`` ``cli``: ``sinfo/squeue --json`` with ``SLURM_CONF=slurm_conf`` (empty: the
    environment's ``SLURM_CONF`` or Slurm's default); ``rest``: slurmrestd at ``rest_url``,
    its JWT read from the environment variable ``token_env`` when polled (never stored here).
    Each site is polled every ``poll_s`` seconds, each poll given ``timeout_s``.
    """

    KINDS = (("cli", "Slurm commands (sinfo/squeue)"), ("rest", "slurmrestd"))

    cluster = models.OneToOneField("twin.Cluster", on_delete=models.CASCADE,
                                   related_name="mirror")
    kind = models.CharField(max_length=4, choices=KINDS, default="cli")
    slurm_conf = models.CharField(
        "slurm.conf path", max_length=255, blank=True,
        help_text="cli: an absolute path (empty: the environment's SLURM_CONF)")
    rest_url = models.CharField(
        "slurmrestd URL", max_length=255, blank=True, help_text="rest: http(s)://host:6820")
    rest_user = models.CharField("slurmrestd user", max_length=64, blank=True)
    token_env = models.CharField(
        "token environment variable", max_length=64, blank=True, validators=[ENV_NAME],
        help_text="rest: the environment variable holding the JWT (the token is never stored)")
    poll_s = models.FloatField(
        "poll interval (s)", default=30.0,
        validators=[MinValueValidator(1.0, message="poll at most once a second")])
    timeout_s = models.FloatField("timeout per poll (s)", default=10.0, validators=positive)

    def __str__(self) -> str:
        return f"{self.cluster} ({self.kind})"

    def clean(self) -> None:
        if self.kind == "cli":
            if self.rest_url or self.token_env:
                raise ValidationError("a cli mirror reads Slurm's commands: leave the "
                                      "slurmrestd URL and token variable empty")
            if self.slurm_conf and not self.slurm_conf.startswith("/"):
                raise ValidationError({"slurm_conf": "an absolute path to slurm.conf"})
        elif self.kind == "rest":
            if self.slurm_conf:
                raise ValidationError("a rest mirror reads slurmrestd: leave slurm.conf empty")
            if not re.match(r"^https?://[^/\s:]+(:\d+)?/?$", self.rest_url or ""):
                raise ValidationError({"rest_url": "slurmrestd's URL, like "
                                                   "http://ctl.example:6820"})
        if (self.timeout_s is not None and self.poll_s is not None
                and self.timeout_s > self.poll_s):
            raise ValidationError({"timeout_s": "the timeout must not exceed the poll "
                                                "interval"})
