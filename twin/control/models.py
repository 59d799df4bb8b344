"""Drills staff asked for, and what they did."""

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
