"""Alert rules, the alerts they raise and the silences that mute their notifications."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


class AlertRule(models.Model):
    """A rule on one live figure (``twin.alerts.rules``): it fires when ``figure`` compares true
    against ``threshold`` for ``for_s`` seconds in a row, and resolves when it no longer does.

    ``for_s`` counts simulated seconds, except for figures on the wall clock (mirror source
    lag, ``twin.alerts.figures.WALL_FIGURES``), where it counts wall seconds.  A firing alert
    resolves only once the figure has been clear (no longer beyond ``resolve_threshold``,
    else ``threshold``) for ``resolve_for_s`` (else ``for_s``): hysteresis, so no alert fires
    and resolves within its own duration.  Figures counted from the event log
    (``twin.alerts.log_windows``) count events within the last ``window_s``."""

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
    description = models.TextField(blank=True, help_text="What the alert means for the "
                                   "cluster, in a sentence or two")
    runbook_url = models.CharField("runbook URL", max_length=300, blank=True,
                                   help_text="What to do: /alerts/runbooks/#<rule> for the "
                                   "shipped rules (docs/runbooks.md), or your own page")
    window_s = models.FloatField("window (s)", null=True, blank=True,
                                 help_text="Event-log figures (gpu.xid_events, link.flaps, "
                                 "node.failures): count the events of the last this many "
                                 "simulated s")
    resolve_threshold = models.FloatField(null=True, blank=True, help_text="A firing alert "
                                          "holds while the figure is beyond this (empty: the "
                                          "threshold)")
    resolve_for_s = models.FloatField("resolve after (s)", null=True, blank=True,
                                      help_text="How long the figure must be clear before a "
                                      "firing alert resolves (empty: as for_s)")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def clean(self) -> None:
        from twin.alerts.figures import rule_errors  # the figures' table

        errors = rule_errors(figure=self.figure, threshold=self.threshold, for_s=self.for_s,
                             comparison=self.comparison, window_s=self.window_s,
                             resolve_threshold=self.resolve_threshold,
                             resolve_for_s=self.resolve_for_s)
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
    entities = models.JSONField(default=list, blank=True, help_text="Each label as the UI "
                                "names and links it when the alert fired: [{key, value, "
                                "name, url}]")
    notified = models.BooleanField(default=False, help_text="Its firing was notified (sent to "
                                   "the webhook, when one is set); false while a silence holds "
                                   "it")
    silence = models.ForeignKey("Silence", on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="alerts", help_text="The silence that held its "
                                "notification when it fired (until the silence ended)")

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"alert #{self.pk} {self.rule.name} ({self.state})"


class Silence(models.Model):
    """Mutes the notifications of alerts whose labels match every matcher (``alertname``,
    ``severity`` and the rule's labels; a value may use ``*`` and ``?`` wildcards) from
    ``starts_at`` until ``ends_at``.  Silenced alerts are still recorded and shown."""

    matchers = models.JSONField(help_text='Labels to match, e.g. {"alertname": '
                                '"tenant-over-quota", "tenant": "research"}')
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_by_name = models.CharField(max_length=150, help_text="Who (kept if the account "
                                       "goes)")
    comment = models.TextField(help_text="Why")

    class Meta:
        ordering = ["-ends_at"]

    def clean(self) -> None:
        from twin.alerts.silences import silence_errors

        errors = silence_errors(matchers=self.matchers, starts_at=self.starts_at,
                                ends_at=self.ends_at, comment=self.comment)
        if errors:
            raise ValidationError(errors)

    def __str__(self) -> str:
        pairs = ", ".join(f"{k}={v}" for k, v in (self.matchers or {}).items())
        return f"silence #{self.pk} {pairs} until {self.ends_at:%Y-%m-%d %H:%M}"
