"""The audit trail."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
