"""Studies in the database: a study (its spec, status and summary) and its runs.

A study launched from the Studies page, saved from a what-if or run by ``manage.py study run
--save`` is kept here; its runs' files (reports, results.json, report.html) are in
``out_dir`` (``CLUSTERTWIN_STUDY_DIR``/ID for the app's own).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Study(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        DONE = "done", "done"
        PARTIAL = "partial", "done, some runs failed"
        ERROR = "error", "error"
        INTERRUPTED = "interrupted", "interrupted"

    class Origin(models.TextChoices):
        FORM = "form", "form"
        SPEC = "spec", "spec"
        CLI = "cli", "command line"
        WHATIF = "whatif", "what-if"

    name = models.CharField(max_length=64)
    description = models.TextField(blank=True)
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.SPEC)
    spec = models.JSONField(default=dict, blank=True, help_text="The spec as written")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                     null=True, blank=True, related_name="+")
    requested_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING,
                              db_index=True)
    total_runs = models.PositiveIntegerField(default=0)
    done_runs = models.PositiveIntegerField(default=0)
    failed_runs = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    out_dir = models.CharField(max_length=500, blank=True)
    where = models.CharField(max_length=200, blank=True, help_text="Where the runs ran")
    owner = models.CharField(max_length=128, blank=True,
                             help_text="host:pid:token of the web process running it")
    whatif = models.ForeignKey("twin.WhatIf", on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="studies")

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return f"study #{self.pk} {self.name} ({self.status})"


class StudyRun(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        DONE = "done", "done"
        KEPT = "kept", "kept from an earlier run"
        FAILED = "failed", "failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="runs")
    arm = models.CharField(max_length=64)
    seed = models.BigIntegerField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    figures = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    wall_s = models.FloatField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["study", "id"]
        constraints = [models.UniqueConstraint(fields=["study", "arm", "seed"],
                                               name="one_run_per_arm_and_seed")]

    def __str__(self) -> str:
        return f"{self.study_id}: {self.arm} seed {self.seed} ({self.status})"


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
