"""Alert rules and the alerts they raise."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


class AlertRule(models.Model):
    """A rule on one live figure (``twin.alerts.rules``): it fires when ``figure`` compares true
    against ``threshold`` for ``for_s`` seconds in a row, and resolves when it no longer does.

    ``for_s`` counts simulated seconds, except for figures on the wall clock (mirror source
    lag, ``twin.alerts.rules.WALL_FIGURES``), where it counts wall seconds."""

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
        from twin.alerts.rules import rule_errors  # the figures live with the evaluator

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
